"""Choices between two values spelled without ``if``: what GMLP001 and GMLP002 read as a
branch besides ``if`` statements and conditional expressions (issue #19, class 7: the seed
shape in other syntax).

* indexing a two-way display with the flag: ``{True: dummy, False: wgrad}[flag]``,
  ``{...}.get(flag)`` and ``(wgrad, dummy)[flag]`` / ``[wgrad, dummy][flag]`` (a bool indexes
  as 0 or 1) choose as ``dummy if flag else wgrad`` does;
* a conditional expression inside a comprehension whose test names the comprehension's own
  variable (``_dummy(w) if a else g for w, a, g in zip(weights, flags, grads)``): the test
  is an element of ``flags``, and depends on whatever ``flags`` was computed from.

Each choice comes back as a ``cst.IfExp`` built from the original nodes, so findings point
into the file.
"""

from __future__ import annotations

import libcst as cst

from . import iteration, patterns

_COMPREHENSIONS = (cst.GeneratorExp, cst.ListComp, cst.SetComp)


def indexed_choice(expr: cst.CSTNode) -> cst.IfExp | None:
    """``{True: A, False: B}[flag]``, ``{True: A, False: B}.get(flag)``, ``(B, A)[flag]`` or
    ``[B, A][flag]`` as ``A if flag else B``; None for anything else."""
    if type(expr) is cst.Subscript:
        if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
            return None
        display, test = expr.value, expr.slice[0].slice.value
    elif type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        if expr.func.attr.value != "get" or len(expr.args) != 1 or expr.args[0].keyword:
            return None
        display, test = expr.func.value, expr.args[0].value
    else:
        return None
    if type(display) is cst.Dict:
        arms = _bool_keyed(display)
        if arms is None:
            return None
        chosen, other = arms
    elif type(display) in (cst.Tuple, cst.List) and type(expr) is cst.Subscript:
        elements = display.elements
        if len(elements) != 2 or any(type(e) is cst.StarredElement for e in elements):
            return None
        other, chosen = elements[0].value, elements[1].value
    else:
        return None
    return cst.IfExp(test=test, body=chosen, orelse=other)


def _bool_keyed(display: cst.Dict) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(the value under ``True``, the value under ``False``) of a dict display keyed by
    exactly those two literals (``1`` / ``0`` count as them)."""
    arms: dict[bool, cst.BaseExpression] = {}
    for element in display.elements:
        if type(element) is not cst.DictElement:
            return None
        key = element.key
        if type(key) is cst.Name and key.value in ("True", "False"):
            arms[key.value == "True"] = element.value
        elif type(key) is cst.Integer and key.value in ("0", "1"):
            arms[key.value == "1"] = element.value
        else:
            return None
    if len(arms) != 2 or len(display.elements) != 2:
        return None
    return arms[True], arms[False]


def element_tests(root: cst.CSTNode) -> dict[int, cst.BaseExpression]:
    """id(conditional expression) -> the sequence its test is an element of, for each
    conditional expression in a comprehension of ``root`` whose test reads a variable that
    comprehension binds plainly to a sequence's elements (``for w, a in zip(W, flags)``)."""
    found: dict[int, cst.BaseExpression] = {}
    for comprehension in patterns.walk(root):
        if type(comprehension) not in _COMPREHENSIONS:
            continue
        bound: dict[str, cst.BaseExpression] = {}
        loop = comprehension.for_in
        while loop is not None:
            for name, sequence in iteration.element_sequences(loop):
                bound[name.value] = sequence
            loop = loop.inner_for_in
        for sub in patterns.walk(comprehension.elt):
            if type(sub) is not cst.IfExp:
                continue
            read = [n.value for n in patterns.read_names(sub.test) if n.value in bound]
            if read:
                found[id(sub)] = bound[read[0]]
    return found
