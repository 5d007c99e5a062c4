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
from .module import Unit

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


def unrelated_guards(unit: Unit, node: Node) -> list[Guard]:
    """The ``if`` statements ``node`` is nested in (innermost first) whose test, on the side
    the node is on, is about something other than weights and their gradients."""
    return [
        Guard(stmt, side) for stmt, side in node.enclosing_ifs if not _related(unit, stmt, side)
    ]


def _related(unit: Unit, stmt: cst.If, side: str) -> bool:
    operands = and_operands(stmt.test)
    if side == "body":
        # ``if feature and fuse:`` runs the body only when ``feature`` holds as well.
        return all(_operand_related(unit, stmt, op) for op in operands)
    return any(_operand_related(unit, stmt, op) for op in operands)


def _operand_related(unit: Unit, stmt: cst.If, expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        expr = expr.expression
    if _is_presence_check(expr) or _names_related(unit, expr):
        return True
    # A local's name is the writer's choice (``f = ctx.fuse_wgrad_accumulation``): what it
    # was bound to says what it is about. Any binding that reaches the test will do (the
    # rule errs towards silence); a parameter or an import has only its name.
    if isinstance(expr, cst.Name):
        node = unit.node_for(stmt)
        if node is not None:
            for definition in unit.reaching.reaching(expr.value, node):
                if definition.value is not None and _names_related(unit, definition.value):
                    return True
    return False


def _names_related(unit: Unit, expr: cst.CSTNode) -> bool:
    text = unit.context.code(expr).lower()
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
