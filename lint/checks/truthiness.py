"""GMLP004: the truth value of a main_grad tensor where ``is None`` was meant.

``if p.main_grad:`` raises for a multi-element tensor, and for a one-element buffer it tests
the value (0.0 is falsy) instead of whether Megatron-FSDP has exposed the buffer yet.
Flagged wherever a main_grad value is tested for truth: ``if``/``while``/``assert`` tests,
``not``, ``bool()``, the operands of ``and``/``or`` and conditional-expression tests.

Fixes: in a pure truth test ``X`` becomes ``X is not None`` and ``not X`` becomes
``X is None`` (safe); ``X or Y`` used as a value becomes ``X if X is not None else Y``
(unsafe: X is evaluated twice).
"""

from __future__ import annotations

import libcst as cst

from ..analysis import patterns
from ..analysis.cfg import Node
from ..analysis.module import ModuleContext, Unit
from ..model import SAFE, UNSAFE, Fix
from .base import Collector

CODE = "GMLP004"
MESSAGE = (
    "truth value of a main_grad tensor: `{text}` raises for a multi-element tensor and tests "
    "values, not presence; compare with `is None` / `is not None`"
)
# Parents around which a spliced comparison needs parentheses.
TIGHTER_THAN_COMPARISON = (cst.BinaryOperation, cst.Attribute, cst.Subscript, cst.Comparison)


def check(context: ModuleContext, out: Collector) -> None:
    for unit in context.units:
        if unit.survey.spells_main_grad:
            _Unit(unit, out).run()


class _Unit:
    def __init__(self, unit: Unit, out: Collector) -> None:
        self.unit = unit
        self.out = out

    def run(self) -> None:
        for stmt, _ in self.unit.statements():
            node = self.unit.node_for(stmt)
            if node is None:
                continue
            if isinstance(stmt, (cst.If, cst.While)):
                self.visit(stmt.test, [stmt], node, truth=True, value_used=False)
            elif isinstance(stmt, cst.Assert):
                self.visit(stmt.test, [stmt], node, truth=True, value_used=False)
                if stmt.msg is not None:
                    self.visit(stmt.msg, [stmt], node, truth=False, value_used=True)
            elif isinstance(stmt, cst.For):
                self.visit(stmt.iter, [stmt], node, truth=False, value_used=True)
            elif isinstance(stmt, cst.With):
                for item in stmt.items:
                    self.visit(item.item, [stmt], node, truth=False, value_used=True)
            elif not isinstance(stmt, cst.BaseCompoundStatement):
                self.visit(stmt, [], node, truth=False, value_used=True)

    def visit(self, expr, parents: list, node: Node, *, truth: bool, value_used: bool) -> None:
        if truth and self.is_main_grad_value(expr, node):
            self.report(expr, parents, value_used)
            return
        if isinstance(expr, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        inner = [*parents, expr]
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            self.visit(expr.expression, inner, node, truth=True, value_used=False)
        elif isinstance(expr, cst.BooleanOperation):
            self.visit(expr.left, inner, node, truth=True, value_used=value_used)
            self.visit(expr.right, inner, node, truth=truth, value_used=value_used)
        elif isinstance(expr, cst.IfExp):
            self.visit(expr.test, inner, node, truth=True, value_used=False)
            self.visit(expr.body, inner, node, truth=truth, value_used=value_used)
            self.visit(expr.orelse, inner, node, truth=truth, value_used=value_used)
        elif isinstance(expr, cst.Call) and _is_bool_call(expr):
            self.visit(expr.args[0].value, inner, node, truth=True, value_used=False)
        elif isinstance(expr, cst.CompIf):
            self.visit(expr.test, inner, node, truth=True, value_used=False)
        else:
            for child in patterns.children(expr):
                self.visit(child, inner, node, truth=False, value_used=True)

    def is_main_grad_value(self, expr: cst.CSTNode, node: Node) -> bool:
        if patterns.is_main_grad_direct(expr):
            return True
        if not isinstance(expr, cst.Name):
            return False
        defs = self.unit.reaching.reaching(expr.value, node)
        values = [d.value for d in defs]
        if not values or any(v is None for v in values):
            return False
        if not all(patterns.is_main_grad_direct(v) or patterns.is_false_literal(v) for v in values):
            return False
        return any(patterns.is_main_grad_direct(v) for v in values)

    # -- report and fix -----------------------------------------------------------------
    def report(self, expr: cst.CSTNode, parents: list, value_used: bool) -> None:
        out = self.out
        text = out.text(expr)
        parent = parents[-1] if parents else None
        grandparent = parents[-2] if len(parents) > 1 else None
        fix = None
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            fix = Fix(
                f"Replace with `{text} is None`", (out.replace(parent, f"{text} is None"),), SAFE
            )
        elif isinstance(parent, cst.Call) and _is_bool_call(parent):
            replacement = _parenthesize(f"{text} is not None", grandparent)
            fix = Fix(
                f"Replace with `{text} is not None`", (out.replace(parent, replacement),), SAFE
            )
        elif not value_used:
            fix = Fix(
                f"Replace with `{text} is not None`",
                (out.replace(expr, f"{text} is not None"),),
                SAFE,
            )
        elif (
            isinstance(parent, cst.BooleanOperation)
            and isinstance(parent.operator, cst.Or)
            and parent.left is expr
        ):
            other = out.text(parent.right)
            replacement = _parenthesize(
                f"{text} if {text} is not None else {other}",
                grandparent,
                also=(cst.BooleanOperation, cst.UnaryOperation, cst.IfExp, cst.Await),
            )
            fix = Fix(
                f"Replace with `{text} if {text} is not None else ...`",
                (out.replace(parent, replacement),),
                UNSAFE,
            )
        out.report(CODE, expr, MESSAGE.format(text=text), fix)


def _is_bool_call(call: cst.Call) -> bool:
    return (
        isinstance(call.func, cst.Name)
        and call.func.value == "bool"
        and len(call.args) == 1
        and call.args[0].keyword is None
        and not call.args[0].star
    )


def _parenthesize(text: str, parent, also: tuple = ()) -> str:
    if isinstance(parent, TIGHTER_THAN_COMPARISON + also) or (
        isinstance(parent, cst.UnaryOperation) and not isinstance(parent.operator, cst.Not)
    ):
        return f"({text})"
    return text
