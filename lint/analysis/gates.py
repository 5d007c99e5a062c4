"""Whether the guards around a statement are about the main_grad protocol or about something
else (GMLP006).

What the op puts into main_grad, and the bookkeeping that goes with it, may depend on the
op-level output-into-main-grad setting, on whether the weight needs a gradient, on the
parameter having the attribute, on delayed wgrad: all things about weights and their
gradients. A guard that names none of them (``if runner.gtp_remat:``,
``if ctx.cpu_offloading:``) is a feature switch, and main_grad bookkeeping nested under it
happens only when that unrelated feature is on.

The judgement is by words, on purpose coarse: a guard that mentions a gradient, a weight or
a parameter in any spelling counts as related, so the rule errs towards silence.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .cfg import Node
from .module import ModuleContext

# Words (lower case, substrings) that make a guard about weights and their gradients.
RELATED_WORDS = (
    "grad",
    "accumulat",
    "fuse",
    "fsdp",
    "delay",
    "overwrite",
    "weight",
    "param",
    "zero_out",
)
# Calls that only ask what something is.
NEUTRAL_CALLS = frozenset({"isinstance", "len", "callable", "type", "id"})


@dataclass(frozen=True)
class Guard:
    """An ``if`` that a statement is nested in, on the side it is nested in."""

    stmt: cst.If
    side: str  # "body" or "orelse"


def unrelated_guards(context: ModuleContext, node: Node) -> list[Guard]:
    """The ``if`` statements ``node`` is nested in (innermost first) whose test, on the side
    the node is on, is about something other than weights and their gradients."""
    return [
        Guard(stmt, side)
        for stmt, side in node.enclosing_ifs
        if not _related(context, stmt.test, side)
    ]


def _related(context: ModuleContext, test: cst.BaseExpression, side: str) -> bool:
    operands = and_operands(test)
    if side == "body":
        # ``if feature and fuse:`` runs the body only when ``feature`` holds as well.
        return all(_operand_related(context, op) for op in operands)
    return any(_operand_related(context, op) for op in operands)


def _operand_related(context: ModuleContext, expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        expr = expr.expression
    if _is_presence_check(expr):
        return True
    text = context.code(expr).lower()
    return any(word in text for word in RELATED_WORDS)


def _is_presence_check(expr: cst.BaseExpression) -> bool:
    """``x is None`` / ``x is not None`` / ``isinstance(x, T)``: what is there, not a switch."""
    if isinstance(expr, cst.Comparison):
        return all(
            isinstance(c.operator, (cst.Is, cst.IsNot))
            and isinstance(c.comparator, cst.Name)
            and c.comparator.value == "None"
            for c in expr.comparisons
        )
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        return expr.func.value in NEUTRAL_CALLS
    return False


def and_operands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an ``and`` chain (each must hold for the body to run)."""
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.And):
        return and_operands(expr.left) + and_operands(expr.right)
    return [expr]
