"""A fetch of Megatron-FSDP's main_grad over a listed few of the weights that a fused op is
then handed (issue #19, class 8; GMLP050).

A module that runs a fused op with accumulate-into-main-grad over several of its
parameters fetches each one's buffer first (``for p in (self.w1, self.v1, self.w2):
expose_main_grad(p)``) and hands the op the same parameters (``op(..., (self.w1, self.v1,
self.w2), fuse)``). A weight left out of the fetch's list (megablocks' GLU in blind corpus
19 fetched ``(self.w1, self.w2)`` and handed the op ``v1`` too) reaches the op with
``main_grad`` None: the op's write fails, or lands nowhere the optimizer reads.

Seen: in one function, a ``for`` over a literal tuple or list of attributes of one object
(``self.w1``) whose body binds ``P.main_grad`` from ``get_main_grad()`` (inline, or through a
function of the file that does: a *binder*); after it, a call handed a literal tuple or list
of attributes of the same object that shares at least one with the fetched list and holds
others besides, and a switch for fusing (an argument or keyword naming ``fuse``,
``accumulat*`` or main_grad: a norm or a log of the parameters is no fused op). Handed
parameters fetched one by one before the call (``expose(self.v1)``) and biases (their
gradients go through autograd: ``bias`` in the name, or ``b1``) are not missing. Not seen:
lists built elsewhere, parameters named by strings (``getattr(self, name)``), the op handed
the parameters one by one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .fused_module_fetches import body_fetches
from .module import ModuleContext


@dataclass(frozen=True)
class PartialFetch:
    listed: cst.BaseExpression  # the fetch loop's list
    missing: tuple[str, ...]  # the handed parameters it leaves out
    call: cst.Call  # the call handed them


def partial_fetches(context: ModuleContext, binders: frozenset[str]) -> Iterator[PartialFetch]:
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef:
            continue
        nodes = list(patterns.walk(unit.owner.body))
        loops = [
            (loop, fetched)
            for loop in nodes
            if type(loop) is cst.For
            and type(loop.target) is cst.Name
            and (fetched := _attributes(context, loop.iter))
            and body_fetches(loop.body, binders, loop.target.value)
        ]
        if not loops:
            continue
        # the fused calls, and the parameters fetched one at a time: each found once
        calls = [n for n in nodes if type(n) is cst.Call and _hands_fuse_switch(context, n)]
        singles = _fetched_singly(context, nodes, binders)
        for loop, fetched in loops:
            after = context.offsets(loop)[1]
            for call in calls:
                before = context.offsets(call)[0]
                if before < after:
                    continue
                singly = {code for code, at in singles if at < before}
                for arg in call.args:
                    handed = _attributes(context, arg.value)
                    if handed and fetched[0] == handed[0] and set(handed[1]) & set(fetched[1]):
                        missing = tuple(
                            a
                            for a in handed[1]
                            if a not in fetched[1] and a not in singly and not _is_bias(a)
                        )
                        if missing:
                            yield PartialFetch(loop.iter, missing, call)


def _attributes(context: ModuleContext, expr) -> tuple[str, tuple[str, ...]] | None:
    """(owner, attribute codes) for a literal tuple or list of ``owner.X`` of one owner."""
    if type(expr) not in (cst.Tuple, cst.List) or len(expr.elements) < 2:
        return None
    codes = []
    owners = set()
    for element in expr.elements:
        value = element.value
        if type(element) is not cst.Element or type(value) is not cst.Attribute:
            return None
        owners.add(context.code(value.value))
        codes.append(context.code(value))
    return (owners.pop(), tuple(codes)) if len(owners) == 1 else None


def _is_bias(code: str) -> bool:
    word = code.rsplit(".", 1)[-1].lower()
    return "bias" in word or re.fullmatch(r"b\d*", word) is not None


# Words of the switch a fused op is handed with its parameters (``fuse``,
# ``fuse_wgrad_accumulation``, ``accumulate_into_main_grad``).
FUSE_WORDS = ("fuse", "accumulat", "main_grad")


def _hands_fuse_switch(context: ModuleContext, call: cst.Call) -> bool:
    for arg in call.args:
        words = context.code(arg.value).lower()
        if arg.keyword is not None:
            words += " " + arg.keyword.value.lower()
        if any(word in words for word in FUSE_WORDS):
            return True
    return False


def _fetched_singly(context: ModuleContext, nodes, binders: frozenset[str]) -> list:
    """(parameter, offset) for each parameter handed to a binder on its own
    (``expose(self.v1)`` on the GLU branch)."""
    return [
        (context.code(arg.value), context.offsets(node)[0])
        for node in nodes
        if type(node) is cst.Call and patterns.callee_name(node) in binders
        for arg in node.args
        if type(arg.value) is cst.Attribute
    ]
