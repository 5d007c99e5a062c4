"""Which sequence a loop variable is an element of: per-expert code keeps one weight, one
main_grad and one gradient per expert in lists and walks them with ``zip`` and
``enumerate``, so what holds for a list's elements holds for the variable bound to each
(``for w, g in zip(weights, wgrads)``: ``g`` is an element of ``wgrads``)."""

from __future__ import annotations

import libcst as cst

from . import patterns


def element_sequences(loop: cst.For | cst.CompFor) -> list[tuple[cst.Name, cst.BaseExpression]]:
    """(name, sequence) for each name the loop (a ``for`` statement or a comprehension's
    ``for``) binds to the elements of a sequence it walks plainly: ``L`` for ``for g in
    L``, ``for i, g in enumerate(L)`` and ``for w, g in zip(W, L)``, nested the same way
    (``for i, (w, g) in enumerate(zip(W, L))``). Names bound any other way (an index, a
    starred target, a call of anything else) are left out."""
    found: list[tuple[cst.Name, cst.BaseExpression]] = []
    _pair(loop.target, loop.iter, found)
    return found


def element_source(loop: cst.CSTNode, name: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The sequence whose elements ``loop`` binds to the name node ``name``, or None."""
    if name is None or not isinstance(loop, cst.For):
        return None
    return next((seq for bound, seq in element_sequences(loop) if bound is name), None)


def _pair(target, sequence, found: list) -> None:
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


def _keywords(call: cst.Call) -> int:
    """How many of ``zip``'s arguments are its ``strict`` option."""
    return sum(1 for arg in call.args if arg.keyword is not None and arg.keyword.value == "strict")
