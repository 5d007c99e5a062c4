"""A weight marked as written into main_grad while the function hands back the real weight
gradient it was given (issue #19, class 3: a flag with no write).

A helper that finishes the bookkeeping for a fused backward is handed the weight gradient
and whether it was written into main_grad (``def _finish_wgrad(weight, grad_weight,
written)``): if not, the gradient is returned for autograd to put into ``.grad``; if so, the
weight is marked (``weight.grad_added_to_main_grad = True``) and a dummy goes back instead.
A mark on a path that then returns the gradient itself breaks both halves: Megatron's hook
trusts the mark and skips ``.grad``, so the gradient never reaches main_grad (or, where it was
written, autograd gets it a second time). fastmoe's ``MOELinear`` in blind corpus 19 moved the
mark above the early return.

Seen: a function (not a ``backward``) none of whose code names ``main_grad`` as an
attribute (the write, if any, is the caller's: GMLP032's other checks see functions that
write), with a parameter named for a weight gradient (``grad_weight``, ``wgrad``, ``dw``)
(not one named ``dummy``) that it never rebinds, another ``return`` of which hands back a
dummy the helper allocates itself (``torch.empty_like(w)``, ``zeros``, a ``*dummy*`` maker,
also inside a returned tuple or comprehension: a helper that returns only the parameter, or
it and None, may be handed the caller's dummy), and a path from a mark to a ``return`` of
that parameter (alone or as an element of a returned tuple) on which the ``if``s around the
two do not ask one condition with opposite outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ..wgrad_words import names_weight_gradient
from . import paths, patterns, wgrad
from .module import Unit


@dataclass(frozen=True)
class MarkedReturn:
    mark: wgrad.Mark
    name: str  # the parameter holding the real gradient
    returned: cst.Return


def marked_returns(unit: Unit) -> list[MarkedReturn]:
    function = unit.owner
    # autograd hands ``backward`` the outputs' gradients, never a weight gradient to finish
    if type(function) is not cst.FunctionDef or function.name.value == "backward":
        return []
    names = [
        p.name.value
        for p in (*function.params.params, *function.params.kwonly_params)
        if names_weight_gradient(p.name.value) and "dummy" not in p.name.value.lower()
    ]
    if not names or _names_main_grad(function):
        return []
    marks = wgrad.marks(unit)
    if not marks:
        return []
    rebound = {d.name for d in unit.graph.defs if d.kind != "param"}
    found = []
    for name in names:
        if name in rebound:
            continue
        all_returns = [n for n in unit.graph.nodes if type(n.owner) is cst.Return]
        returns = {n.index: n for n in all_returns if _returns_name(n.owner.value, name)}
        if not any(_allocates(n.owner.value) for n in all_returns):
            # a helper that makes no dummy of its own may be handed the caller's (``finish(w,
            # dummy)``, returning it or None); one choosing between the parameter and a
            # dummy it allocates shows that the parameter is the real gradient
            continue
        for mark in marks:
            reached = [
                n
                for i, n in returns.items()
                if paths.reaches(mark.node, (i,)) and not _contradict(unit, mark.node, n)
            ]
            if reached:
                found.append(MarkedReturn(mark, name, reached[0].owner))
    return found


def _names_main_grad(function: cst.FunctionDef) -> bool:
    return any(
        type(node) is cst.Attribute and node.attr.value == patterns.MAIN_GRAD
        for node in patterns.walk(function.body)
    )


def _returns_name(value: cst.BaseExpression | None, name: str) -> bool:
    if type(value) is cst.Name:
        return value.value == name
    if type(value) is cst.Tuple:
        return any(type(e.value) is cst.Name and e.value.value == name for e in value.elements)
    return False


def _allocates(value: cst.BaseExpression | None) -> bool:
    """A fresh tensor: an allocation (``torch.empty_like(w)``) or a dummy maker, also as an
    element of a returned tuple or list, or of a comprehension."""
    if type(value) in (cst.Tuple, cst.List):
        return any(_allocates(e.value) for e in value.elements)
    if type(value) in (cst.ListComp, cst.GeneratorExp):
        return _allocates(value.elt)
    name = patterns.callee_name(value) or ""
    return name in patterns.ALLOCATORS or name.endswith("_like") or "dummy" in name.lower()


def _contradict(unit: Unit, first, second) -> bool:
    """The ``if``s around the two nodes ask one condition with opposite outcomes (``if
    fused and ...: mark`` and ``if not fused: return g``): no run reaches both."""
    one, other = _known(unit, first), _known(unit, second)
    return any(other.get(text) is (not value) for text, value in one.items())


def _known(unit: Unit, node) -> dict[str, bool]:
    """What the ``if``s around a node say about plain conditions, by their code."""
    known: dict[str, bool] = {}
    for stmt, arm in node.enclosing_ifs:
        truth = arm == "body"
        test = stmt.test
        while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, truth = test.expression, not truth
        parts = [test]
        if truth and type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
            parts = [test.left, test.right]
        elif type(test) is cst.BooleanOperation:
            continue  # ``not (a and b)``: neither part is known
        for part in parts:
            value = truth
            while type(part) is cst.UnaryOperation and type(part.operator) is cst.Not:
                part, value = part.expression, not value
            known[unit.context.code(part)] = value
    return known
