"""Which weights a mark names, one by one (issue #19, class 3): ``for w in (w1, w2):
w.grad_added_to_main_grad = True`` marks ``w1`` and ``w2`` in turn, and a mark on a weight
whose main_grad this function never names, while it names other weights' main_grads,
claims a write that nothing made (GMLP032).

A weight counts as unwritten only when nothing here could write its main_grad: its
main_grad is not spelled (directly, or through a loop variable over a display holding it)
nor written by a helper of the file it is handed to (``writing_helpers``: such a write names
the weight's main_grad as surely as one spelled here),
it is used only as an operand of a GEMM with no ``out=`` (the product of a weight is the
input gradient, a fresh tensor), for its ``dtype`` / ``shape`` / ``device``, in ``getattr`` /
``hasattr`` / ``isinstance``, in a display walked by a loop, or marked; it is bound here
from another object's field (``w1 = ctx.fc1_weight``), and that object is handed to no call
and has no method called (a helper of the object may write the field's main_grad); every
main_grad the function names belongs to a plain local; and nothing replays a captured
graph or runs ``backward_dw``.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import local_aliases, patterns, wgrad, writing_helpers
from .module import Unit

READ_ATTRS = frozenset({"dtype", "shape", "device", "ndim", patterns.GRAD_ADDED})
INSPECTING = frozenset({"getattr", "hasattr", "isinstance"})
WRITING_PROTOCOL = frozenset({"replay", "backward_dw"})
# Attribute names that are the contract's own words (a weight's main_grad, its flags).
CONTRACT_ATTRS = frozenset({patterns.MAIN_GRAD, patterns.GRAD_ADDED, "overwrite_main_grad"})


def _other_main_grad(attr: str) -> bool:
    """An attribute naming some main_grad other than a weight's own (``fc2_main_grad``,
    ``main_grads``, ``get_main_grad``)."""
    return "main_grad" in attr and attr not in CONTRACT_ATTRS


def unwritten(unit: Unit, marks) -> Iterator[tuple[object, str]]:
    """(mark, weight name) for each weight a mark names that nothing here writes."""
    body = unit.owner.body
    nodes = list(patterns.walk(body))
    owners: set[str] = set()
    writers = unit.context.shared(writing_helpers.WritingHelpers)
    for sub in nodes:
        if type(sub) is cst.Call and (written := writers.written_arguments(sub)):
            # ``_accumulate(x, dy, w2)``: a helper of the file writes w2's main_grad
            if any(type(arg) is not cst.Name for arg in written):
                return
            owners.update(arg.value for arg in written)
        elif patterns.is_attr(sub, patterns.MAIN_GRAD):
            if type(sub.value) is not cst.Name:
                return  # ``ctx.weight.main_grad``: which local it is, is not followed
            owners.add(sub.value.value)
        elif patterns.is_main_grad_direct(sub) or (
            type(sub) is cst.Call and patterns.callee_name(sub) in WRITING_PROTOCOL
        ):
            return
        elif type(sub) is cst.Attribute and _other_main_grad(sub.attr.value):
            return  # ``ctx.fc2_main_grad``, ``ctx.main_grads[1]``: whose it is, is not known
    if not owners:
        return
    displays = {}  # loop variable -> the names of the display it walks
    loops: dict[str, int] = {}
    for sub in nodes:
        if type(sub) is cst.For and type(sub.target) is cst.Name:
            loops[sub.target.value] = loops.get(sub.target.value, 0) + 1
            names = _display_names(sub.iter)
            if names is not None:
                displays.setdefault(sub.target.value, []).extend(names)
    # A loop variable reused by several loops names different weights in each.
    displays = {var: names for var, names in displays.items() if loops[var] == 1}
    for var, names in displays.items():
        if var in owners:
            owners.update(names)
    aliases = local_aliases.Aliases(unit.owner)
    written = {aliases.resolved(owner) for owner in owners}
    for mark in marks:
        subject = mark.subject
        if type(subject) is not cst.Name:
            continue
        named = displays.get(subject.value, [subject.value])
        for name in named:
            if name in owners or aliases.resolved(name) in written:
                continue  # written under another name for the same object (``s = weight``)
            if _only_read(nodes, name) and _bound_from_idle(nodes, name):
                yield mark, name


def _display_names(expr) -> list[str] | None:
    if type(expr) not in (cst.Tuple, cst.List):
        return None
    names = [e.value for e in expr.elements]
    if not names or not all(type(n) is cst.Name for n in names):
        return None
    return [n.value for n in names]


def _only_read(nodes, name: str) -> bool:
    """Every use of ``name`` is one that cannot write its main_grad."""
    total = allowed = 0
    for sub in nodes:
        kind = type(sub)
        if kind is cst.Name and sub.value == name:
            total += 1
        elif kind is cst.Attribute:
            if sub.attr.value == name:
                allowed += 1  # ``ctx.w1``: a field's name, not the local
            if type(sub.value) is cst.Name and sub.value.value == name:
                allowed += sub.attr.value in READ_ATTRS
        elif kind is cst.For and type(sub.target) is cst.Name:
            allowed += (_display_names(sub.iter) or []).count(name)
        elif kind is cst.Assign:
            allowed += sum(name in _bound_names(t.target) for t in sub.targets)
        elif kind is cst.Call:
            allowed += _read_in_call(sub, name)
    return total > 0 and allowed >= total


def _read_in_call(call: cst.Call, name: str) -> int:
    """Uses of ``name`` as a bare argument a call only reads: a GEMM's operand with no
    ``out=`` (the weight's product is a fresh tensor), or an inspecting call's argument."""
    callee = patterns.callee_name(call)
    gemm = wgrad.looks_like_gemm(call) and patterns.keyword_arg(call, "out") is None
    if not (gemm or callee in INSPECTING):
        return 0
    return sum(
        type(a.value) is cst.Name and a.value.value == name and a.keyword is None for a in call.args
    )


def _bound_from_idle(nodes, name: str) -> bool:
    """``name`` is bound here from fields of objects no call is handed and no method of
    which is called."""
    roots: set[str] = set()
    for sub in nodes:
        if type(sub) is not cst.Assign:
            continue
        if any(name in _bound_names(t.target) for t in sub.targets):
            found = _field_roots(sub.value)
            if not found:
                return False
            roots |= found
    if not roots:
        return False
    for sub in nodes:
        if type(sub) is not cst.Call:
            continue
        func = sub.func
        if type(func) is cst.Attribute and _root(func.value) in roots:
            return False
        if any(type(a.value) is cst.Name and a.value.value in roots for a in sub.args):
            return False
    return True


def _bound_names(target) -> list[str]:
    """The names an assignment target binds (``w1`` and ``w2`` of ``w1, w2 = ...``)."""
    if type(target) in (cst.Tuple, cst.List):
        return [e.value.value for e in target.elements if type(e.value) is cst.Name]
    return [target.value] if type(target) is cst.Name else []


def _field_roots(value) -> set[str]:
    """The objects whose fields ``value`` reads (``ctx`` for ``ctx.fc1_weight`` or a tuple
    of such); empty when it is anything else."""
    if type(value) in (cst.Tuple, cst.List):
        parts = [element.value for element in value.elements]
    else:
        parts = [value]
    roots = set()
    for expr in parts:
        if type(expr) is not cst.Attribute or _root(expr) is None:
            return set()
        roots.add(_root(expr))
    return roots


def _root(expr) -> str | None:
    while type(expr) is cst.Attribute:
        expr = expr.value
    return expr.value if type(expr) is cst.Name else None
