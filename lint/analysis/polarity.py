"""Which way a test reads a switch: unnegated (the test holds only with it on) or negated,
through ``not``, ``is False`` / ``== False``, ``is True`` / ``== True``, ``bool(...)`` and
the operands of ``and`` / ``or``. Shared by the checks that ask whether a path requires a
switch (GMLP057's requires-grad guard, GMLP038's inverted delay predicate)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from . import patterns


def polarities(
    test: cst.CSTNode, is_switch: Callable[[cst.CSTNode], bool], negated: bool = False
) -> Iterator[bool]:
    """True for each switch read unnegated in ``test``, False for each one negated."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from polarities(test.expression, is_switch, not negated)
        return
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, (cst.Is, cst.Equal))
    ):
        against = test.comparisons[0].comparator
        if patterns.is_false_literal(against) or patterns.is_true_literal(against):
            # ``x is False`` reads x negated, ``x is True`` reads it as it is
            flip = patterns.is_false_literal(against)
            yield from polarities(test.left, is_switch, negated != flip)
            return
    if is_switch(test):
        yield not negated
        return
    if isinstance(test, cst.BooleanOperation):
        yield from polarities(test.left, is_switch, negated)
        yield from polarities(test.right, is_switch, negated)
    elif isinstance(test, cst.Call) and patterns.callee_name(test) == "bool" and test.args:
        yield from polarities(test.args[0].value, is_switch, negated)
