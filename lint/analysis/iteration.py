"""Per-expert lists: which sequence a loop variable is an element of, and what a list filled
one element at a time was given. Per-expert code keeps one weight, one main_grad and one
gradient per expert in lists, walks them with ``zip`` and ``enumerate`` and fills them with
``append``, so what holds for a list's elements holds for the variable bound to each (``for
w, g in zip(weights, wgrads)``: ``g`` is an element of ``wgrads``) and for what was appended
(``wgrads.append(g)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns

if TYPE_CHECKING:
    from .module import Unit


def element_sequences(loop: cst.For | cst.CompFor) -> list[tuple[cst.Name, cst.BaseExpression]]:
    """(name, sequence) for each name the loop (a ``for`` statement or a comprehension's
    ``for``) binds to the elements of a sequence it walks plainly: ``L`` for ``for g in
    L``, ``for i, g in enumerate(L)`` and ``for w, g in zip(W, L)``, nested the same way
    (``for i, (w, g) in enumerate(zip(W, L))``); a dict's values the same way (``for g in
    D.values()``, ``for k, g in D.items()``: D). Names bound any other way (an index, a
    starred target, a call of anything else) are left out."""
    found: list[tuple[cst.Name, cst.BaseExpression]] = []
    _pair(loop.target, loop.iter, found)
    return found


def element_source(loop: cst.CSTNode, name: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The sequence whose elements ``loop`` binds to the name node ``name``, or None."""
    if name is None or not isinstance(loop, cst.For):
        return None
    return next((seq for bound, seq in element_sequences(loop) if bound is name), None)


# A dict's views whose elements are its values (``for wq in casts.values()``) or pairs
# ending in one (``for e, wq in casts.items()``): per-expert copies kept by expert index.
VALUES, ITEMS = "values", "items"


def _pair(target, sequence, found: list) -> None:
    view = _dict_view(sequence)
    if view is not None and view[1] == VALUES:
        sequence = view[0]
    elif view is not None and isinstance(target, (cst.Tuple, cst.List)):
        parts = target.elements
        if len(parts) == 2 and not any(isinstance(p, cst.StarredElement) for p in parts):
            _pair(parts[1].value, view[0], found)
        return
    if isinstance(target, cst.Name):
        found.append((target, sequence))
        return
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(sequence, cst.Call):
        return
    if any(isinstance(element, cst.StarredElement) for element in target.elements):
        return
    parts = [element.value for element in target.elements]
    if any(arg.star for arg in sequence.args):
        return
    # the sequences, without the options that do not change the elements (``zip``'s
    # ``strict``, ``enumerate``'s start)
    args = [arg for arg in sequence.args if arg.keyword is None]
    callee = patterns.callee_name(sequence)
    if callee == "zip" and len(args) == len(parts) == len(sequence.args) - _keywords(sequence):
        for part, arg in zip(parts, args):
            _pair(part, arg.value, found)
    elif callee == "enumerate" and args and len(parts) == 2:
        _pair(parts[1], args[0].value, found)


def _dict_view(sequence):
    """(X, "values" | "items") for ``X.values()`` / ``X.items()``, else None."""
    if type(sequence) is not cst.Call or sequence.args or type(sequence.func) is not cst.Attribute:
        return None
    word = sequence.func.attr.value
    return (sequence.func.value, word) if word in (VALUES, ITEMS) else None


def _keywords(call: cst.Call) -> int:
    """How many of ``zip``'s arguments are its ``strict`` option."""
    return sum(1 for arg in call.args if arg.keyword is not None and arg.keyword.value == "strict")


def appends(unit: Unit) -> list[tuple[str, cst.BaseExpression, object]]:
    """(list name, value, graph node) for each ``L.append(value)`` statement of the unit: a
    list filled one element at a time (``L = []`` before a loop) holds what was appended.
    Found once per unit however many bindings and rules ask."""
    table = unit.context.shared(_appends_by_unit)
    found = table.get(id(unit))
    if found is None:  # (units live as long as their file's context: ids are not reused)
        found = table[id(unit)] = _appends_of(unit)
    return found


def _appends_by_unit(context) -> dict[int, list]:
    """(For ``context.shared``: one table per file, filled unit by unit as asked.)"""
    return {}


def _appends_of(unit: Unit) -> list[tuple[str, cst.BaseExpression, object]]:
    found = []
    for root, node in unit.expression_roots():
        if type(root) is not cst.Expr or type(root.value) is not cst.Call:
            continue
        call = root.value
        func = call.func
        if (
            type(func) is cst.Attribute
            and func.attr.value == "append"
            and type(func.value) is cst.Name
            and len(call.args) == 1
            and call.args[0].keyword is None
            and not call.args[0].star
        ):
            found.append((func.value.value, call.args[0].value, node))
    return found


def appended_to(unit: Unit, listed) -> list[tuple[cst.BaseExpression, object]]:
    """(value, graph node) for each ``L.append(value)`` that fills the binding ``listed`` of
    L (``L = []``): what that list holds, element by element."""
    return [
        (value, at)
        for name, value, at in appends(unit)
        if name == listed.name and listed in unit.reaching.reaching(name, at)
    ]


def lists_given(unit: Unit, bindings: dict[int, object]):
    """(binding, list binding) for each value of one of ``bindings`` (by id) appended to a
    list: ``wgrads.append(g)`` puts that binding of ``g`` among the elements of ``wgrads``."""
    for name, value, at in appends(unit):
        if type(value) is cst.Name:
            for d in unit.reaching.reaching(value.value, at):
                if id(d) in bindings:
                    for listed in unit.reaching.reaching(name, at):
                        yield d, listed
