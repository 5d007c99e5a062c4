"""What the ``if``s around a node imply about another test, through boolean locals
(issue #19, classes 3 and 7).

``decided_tests`` knows a test the same code decided before. A backward often names its
choices first and tests the names: ``wgrad_now = accum and not use_zbv``, then ``if
wgrad_now: gemm(...)`` and ``return ..., None if use_zbv or accum else x.t() @ dy``. Under
``if wgrad_now:`` both ``accum`` and ``not use_zbv`` hold, so the returned choice takes
``None``. This module carries that: the enclosing tests' values are pushed down through
``and`` / ``or`` / ``not`` and through locals bound once in the function to a boolean
expression, and the other test is evaluated over what is known, three-valued (None: not
decided). Only tests that read the same value twice count (``decided_tests.plain_test``).
"""

from __future__ import annotations

import libcst as cst

from . import decided_tests
from .module import Unit

# How many locals deep a test is expanded (``a = b and c``; ``b = d or e``; ...).
MAX_DEPTH = 4


def decides(unit: Unit, enclosing_ifs, test: cst.BaseExpression) -> bool | None:
    """The value ``test`` must have at a node under ``enclosing_ifs`` (``Node.
    enclosing_ifs``), or None when the tests around it do not decide it."""
    known: dict[str, bool] = {}
    for stmt, side in enclosing_ifs:
        _assume(unit, stmt.test, side == "body", known, MAX_DEPTH)
    if not known:
        return None
    return _evaluate(unit, test, known, MAX_DEPTH)


def _key(expr: cst.BaseExpression) -> str | None:
    code, negated = decided_tests.plain_test(expr)
    return None if code is None or negated else code


def _single_binding(unit: Unit, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The value of a local bound exactly once in the function, by a plain assignment."""
    return unit.single_value(expr.value) if type(expr) is cst.Name else None


def _assume(unit: Unit, expr, value: bool, known: dict[str, bool], depth: int) -> None:
    """Record that ``expr`` holds ``value``, and what that says of its parts."""
    kind = type(expr)
    if kind is cst.UnaryOperation and type(expr.operator) is cst.Not:
        _assume(unit, expr.expression, not value, known, depth)
        return
    if kind is cst.BooleanOperation:
        both = value if type(expr.operator) is cst.And else not value
        if both:  # ``a and b`` held (``a or b`` did not): each part did the same
            _assume(unit, expr.left, value, known, depth)
            _assume(unit, expr.right, value, known, depth)
        return
    key = _key(expr)
    if key is None:
        return
    known[key] = value
    bound = _single_binding(unit, expr)
    if bound is not None and depth > 0:
        _assume(unit, bound, value, known, depth - 1)


def _evaluate(unit: Unit, expr, known: dict[str, bool], depth: int) -> bool | None:
    kind = type(expr)
    if kind is cst.UnaryOperation and type(expr.operator) is cst.Not:
        inner = _evaluate(unit, expr.expression, known, depth)
        return None if inner is None else not inner
    if kind is cst.BooleanOperation:
        left = _evaluate(unit, expr.left, known, depth)
        right = _evaluate(unit, expr.right, known, depth)
        if type(expr.operator) is cst.And:
            if left is False or right is False:
                return False
            return True if left is True and right is True else None
        if left is True or right is True:
            return True
        return False if left is False and right is False else None
    key = _key(expr)
    if key is not None and key in known:
        return known[key]
    bound = _single_binding(unit, expr)
    if bound is not None and depth > 0:
        return _evaluate(unit, bound, known, depth - 1)
    return None
