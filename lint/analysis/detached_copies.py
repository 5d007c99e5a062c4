"""Detached copies of a weight kept on ``ctx`` (issue #19, class 1; GMLP030 / GMLP037).

``w.detach()`` and ``w.clone()`` make a new tensor object, storage shared or not: the
Parameter's Python attributes (main_grad, its flags) stay behind, so what a backward reads
back from ``ctx.w = w.detach()`` is a stand-in (blind corpus 25, FSMoE's
``ctx.expert_weights = tuple(w.detach() for w in expert_weights)``). Only ``ctx``
attributes are read this way (module_provenance.py): a local ``w = w.detach()`` is
GMLP015's (a rebinding), and a weight detached for CPU offload and saved is swapped back
for the Parameter before use (Transformer Engine keeps ``ctx.weight_object``).
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from . import patterns
from .provenance import DETACHED

# ``X.main_grad = ...`` (not ``==``): main_grad put on some object by hand.
REATTACH = re.compile(r"\.main_grad\s*=(?!=)")
# Calls that make a new tensor object of the one they are called on.
DETACHING = frozenset({"detach", "clone"})
# Wrappers that hand back their one iterable's items as they are.
SEQUENCE_WRAPPERS = frozenset({"tuple", "list"})


def detached_value(value: cst.CSTNode, source: str) -> str | None:
    """DETACHED for a value stored on ``ctx`` that is a detached copy of a weight, or a
    sequence of them; None for anything else, and in a file (``source``) that binds
    ``X.main_grad = ...`` or keeps the Parameter on ctx (``weight_object``): Transformer
    Engine's CPU-offload restore puts main_grad back on the restored copy, or swaps the
    Parameter back in (review 28)."""
    if _detached(value) is None or _reattaches(source):
        return None
    return DETACHED


def _detached(value: cst.CSTNode) -> str | None:
    kind = type(value)
    if kind is cst.Call:
        name = patterns.callee_name(value) or ""
        if name in DETACHING and _detaches_a_weight(value):
            return DETACHED
        if name in SEQUENCE_WRAPPERS and len(value.args) == 1:
            return _detached(value.args[0].value)
        return None
    if kind is cst.GeneratorExp or kind is cst.ListComp:
        return _detached(value.elt)
    if kind is cst.List or kind is cst.Tuple:
        kinds = {_detached(e.value) for e in value.elements}
        return kinds.pop() if len(kinds) == 1 else None
    return None


@functools.lru_cache(maxsize=8)
def _reattaches(source: str) -> bool:
    """Asked once per ``ctx`` attribute: remembered per file."""
    return REATTACH.search(source) is not None or "weight_object" in source


def _detaches_a_weight(call: cst.Call) -> bool:
    """``w.detach()`` / ``w.clone()`` of a name or attribute that is no gradient buffer
    (``w.main_grad.detach()`` is main_grad, not a stand-in for the weight)."""
    func = call.func
    if type(func) is not cst.Attribute or call.args:
        return False
    receiver = func.value
    if type(receiver) not in (cst.Name, cst.Attribute):
        return False
    return not any(
        type(sub) is cst.Name and "grad" in sub.value.lower() for sub in patterns.walk(receiver)
    )
