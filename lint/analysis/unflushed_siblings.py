"""A ``backward_dw`` that flushes one layer of a pair and not its sibling (issue #19, class 6).

A class that defers its layers' weight gradients flushes each of them in ``backward_dw``:
``self.linear_fc2.backward_dw()`` then ``self.linear_fc1.backward_dw()``. The layers are
often built by a base class of another package (Megatron-core's ``TEGroupedMLP``, ``MLP``),
so this file never sees them assigned; it sees them used: ``self.linear_fc1(x, ...)`` in a
forward. When ``backward_dw`` flushes ``linear_fc2`` and the class runs ``linear_fc1`` but
``backward_dw`` (and the ``self`` methods it calls) never mention it, fc1's deferred weight
gradient is never computed (blind corpus 22: a test subclass's ``backward_dw`` that kept
only fc2's flush).

Siblings are told by their names, the way such layers are named in practice: the same name
but for its digits (``linear_fc1`` / ``linear_fc2``, ``w1`` / ``w2``, ``expert_w1`` /
``expert_w2``). Left alone: a ``backward_dw`` that may reach more than it shows (a base's
version by ``super()`` or ``Base.backward_dw(self)``, a ``self`` helper the class does not
define, ``getattr(self, name)``) or that flushes no ``self`` layer by name; a layer run only
under ``torch.no_grad()`` (frozen: it defers nothing); a class whose layers this file builds
(GMLP014's own check judges those).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from . import patterns
from .dead_flush_helpers import flushed_attributes
from .layer_builds import calls_base_version, is_self_attr

PIECE = "backward_dw"
_DIGITS = re.compile(r"\d+")


def unflushed_siblings(
    cls: cst.ClassDef, reached: set[str]
) -> Iterator[tuple[str, str, cst.CSTNode]]:
    """(sibling left out, sibling flushed, the last statement of ``backward_dw``) for each
    layer the class runs that ``backward_dw`` never reaches while it flushes a sibling."""
    methods = [s for s in cls.body.body if type(s) is cst.FunctionDef]
    own = next((m for m in methods if m.name.value == PIECE), None)
    if own is None or not own.body.body or _may_reach_more(own, methods):
        return
    flushed = set(flushed_attributes(own))
    if not flushed:
        return
    names = {m.name.value for m in methods}  # ``self._forward(...)`` runs a method, no layer
    run = {attr for method in methods if method is not own for attr in _called_layers(method)}
    for attr in sorted(run - names - reached - flushed):
        sibling = next((f for f in sorted(flushed) if _siblings(f, attr)), None)
        if sibling is not None:
            yield attr, sibling, own.body.body[-1]


def _siblings(a: str, b: str) -> bool:
    """Equal but for their digits (``linear_fc1`` / ``linear_fc2``)."""
    if a == b or not (_DIGITS.search(a) and _DIGITS.search(b)):
        return False
    return _DIGITS.sub("", a) == _DIGITS.sub("", b)


def _called_layers(method: cst.FunctionDef) -> set[str]:
    """``A`` for each ``self.A(...)`` or ``self.A.forward(...)`` in the method outside a
    ``with`` block that switches gradients off (``torch.no_grad()``: a frozen layer defers
    nothing)."""
    frozen = {
        id(sub)
        for block in patterns.walk(method.body)
        if type(block) is cst.With and _without_grad(block)
        for sub in patterns.walk(block.body)
    }
    found = set()
    for sub in patterns.walk(method.body):
        if type(sub) is not cst.Call or id(sub) in frozen:
            continue
        func = sub.func
        if type(func) is cst.Attribute and func.attr.value == "forward":
            func = func.value  # ``self.linear_fc1.forward(x)`` runs the layer too
        if is_self_attr(func):
            found.add(func.attr.value)
    return found


def _without_grad(block: cst.With) -> bool:
    return any(
        (patterns.callee_name(item.item) or "") in ("no_grad", "inference_mode")
        for item in block.items
        if type(item.item) is cst.Call
    )


def _may_reach_more(own: cst.FunctionDef, methods) -> bool:
    """``backward_dw`` may flush layers this class does not show: it calls a base's version
    (``super()``, ``Base.backward_dw(self)``), a ``self`` method the class does not define
    (a base's helper: ``self._backward_fc1_dw()``) or reaches layers by name (``getattr(self,
    name)``)."""
    defined = {m.name.value for m in methods}
    for sub in patterns.walk(own.body):
        if type(sub) is not cst.Call:
            continue
        if patterns.callee_name(sub) == "getattr" or calls_base_version(sub):
            return True
        if is_self_attr(sub.func) and sub.func.attr.value not in defined:
            return True
    return False
