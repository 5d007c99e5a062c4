"""GMLP004: truth value of a main_grad tensor where `is None` was meant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import SAFE, UNSAFE, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.cfg import Node
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
copyable = LazyModule("..analysis.copyable", __package__)

CODE = "GMLP004"
RULE = Rule(
    code=CODE,
    classes=(),
    name="main-grad-truthiness",
    summary=(
        "The truth value of a main_grad tensor is tested (`if p.main_grad:`, "
        "`not p.main_grad`, `p.main_grad or ...`) where `is None` was meant."
    ),
    flags=(
        "the truth value of a main_grad tensor (`if p.main_grad:`, `not p.main_grad`, "
        "`p.main_grad or ...`)"
    ),
    explanation="""
        Under Megatron-FSDP a parameter's `main_grad` is None until fetched with
        `get_main_grad()` (Megatron #5209), so code asks whether it is there yet. Asking with
        truthiness is wrong: for a multi-element tensor `bool()` raises, and for a
        one-element buffer it tests the value, so a buffer holding 0.0 is fetched again or
        treated as missing. Covers `if`/`while`/`assert` tests, `not`, `bool()`, the operands
        of `and`/`or`, conditional-expression tests, and locals that hold main_grad.

        Not seen: main_grad held anywhere but a plain local of the function (an attribute,
        `self.buf = p.main_grad; if self.buf:`; a parameter that a caller hands main_grad; a walrus,
        `if (g := p.main_grad):`); a local some of whose bindings are something else
        (`g = p.main_grad if c else p.grad`) or a view (`g = p.main_grad.view(-1)`); the attribute
        under another name (`p._main_grad`); and truth tests made by a callee
        (`any(p.main_grad for p in params)`, `filter(lambda p: p.main_grad, params)`). Tests of
        main_grad's contents (`p.main_grad.any()`, `bool(p.main_grad.numel())`) are left alone.
    """,
    fix="""
        In a pure truth test `X` becomes `X is not None` and `not X` becomes `X is None`
        (safe). `X or Y` used as a value becomes `X if X is not None else Y` (unsafe: `X` is
        evaluated twice).
    """,
    fix_summary=("`is None` / `is not None` (safe; the `or` form is unsafe)"),
    valid=(
        Example(
            """
            def fetch(param):
                if param.main_grad is None:
                    param.main_grad = param.get_main_grad()
                return param.main_grad
            """
        ),
        Example(
            """
            def needs_fetch(op, param):
                use_main_grad = op.accumulate_into_main_grad
                return use_main_grad and getattr(param, "main_grad", None) is None
            """
        ),
        Example(
            """
            def has_room(param):
                return bool(param.main_grad.numel())
            """
        ),
    ),
    invalid=(
        Example(
            """
            def fetch(param):
                if not param.main_grad:
                    param.main_grad = param.get_main_grad()
                return param.main_grad
            """,
            line=2,
            fixed="""
            def fetch(param):
                if param.main_grad is None:
                    param.main_grad = param.get_main_grad()
                return param.main_grad
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                buffer = getattr(param, "main_grad", None)
                if buffer:
                    return buffer
                return param.get_main_grad()
            """,
            line=3,
            fixed="""
            def fetch(param):
                buffer = getattr(param, "main_grad", None)
                if buffer is not None:
                    return buffer
                return param.get_main_grad()
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                return param.main_grad or param.get_main_grad()
            """,
            line=2,
            fixed="""
            def fetch(param):
                return param.main_grad if param.main_grad is not None else param.get_main_grad()
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def ready(param):
                return param.requires_grad and bool(param.main_grad)
            """,
            line=2,
            fixed="""
            def ready(param):
                return param.requires_grad and param.main_grad is not None
            """,
            applicability="safe",
        ),
        Example(
            """
            def accumulate(param, wgrad):
                if param.main_grad and param.requires_grad:
                    param.main_grad.add_(wgrad)
            """,
            line=2,
            fixed="""
            def accumulate(param, wgrad):
                if param.main_grad is not None and param.requires_grad:
                    param.main_grad.add_(wgrad)
            """,
            applicability="safe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "truth value of a main_grad tensor: `{text}` raises for a multi-element tensor and tests "
    "values, not presence; compare with `is None` / `is not None`"
)


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
        kind = type(expr)  # exact types: isinstance on libcst's ABC node classes is slow
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            return
        inner = [*parents, expr]
        if kind is cst.UnaryOperation and type(expr.operator) is cst.Not:
            self.visit(expr.expression, inner, node, truth=True, value_used=False)
        elif kind is cst.BooleanOperation:
            self.visit(expr.left, inner, node, truth=True, value_used=value_used)
            self.visit(expr.right, inner, node, truth=truth, value_used=value_used)
        elif kind is cst.IfExp:
            self.visit(expr.test, inner, node, truth=True, value_used=False)
            self.visit(expr.body, inner, node, truth=truth, value_used=value_used)
            self.visit(expr.orelse, inner, node, truth=truth, value_used=value_used)
        elif kind is cst.Call and _is_bool_call(expr):
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
            # `X if X is not None else Y` reads X twice: `next(ps).main_grad` would advance
            # the iterator between the test and the value.
            and (
                copyable.is_plain_path(expr)
                or copyable.is_plain_path(patterns.main_grad_owner(expr))
            )
        ):
            other = out.text(parent.right)
            if not patterns.is_atom(parent.right) or parent.right.lpar:
                # ``X or (1, 2)``: the text of a tuple, generator or any operation leaves out
                # its own parentheses, and ``else 1, 2`` would make the whole a tuple.
                other = f"({other})"
            replacement = _parenthesize(
                f"{text} if {text} is not None else {other}",
                None if parent.lpar else grandparent,  # its own parentheses stay
                # and where a bare conditional expression does not parse: a comprehension's
                # `for ... in` or `if`, a starred display element (`[*x or ()]`)
                also=(
                    cst.BooleanOperation,
                    cst.UnaryOperation,
                    cst.IfExp,
                    cst.Await,
                    cst.CompFor,
                    cst.CompIf,
                    cst.StarredElement,
                ),
            )
            fix = Fix(
                f"Replace with `{text} if {text} is not None else ...`",
                (out.replace(parent, replacement),),
                UNSAFE,
            )
        # A comment inside the text a fix rewrites (``not (  # why``): no fix drops it.
        source = out.context.source
        if fix is not None and any("#" in source[e.start : e.end] for e in fix.edits):
            fix = None
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
    # Parents around which a spliced comparison needs parentheses. A comparison's right-hand
    # operands sit in ComparisonTarget nodes: `flag == bool(p.main_grad)` spliced bare was
    # `flag == p.main_grad is not None`, a chain that means `flag == p.main_grad and ...`.
    tighter = (
        cst.BinaryOperation,
        cst.Attribute,
        cst.Subscript,
        cst.Comparison,
        cst.ComparisonTarget,
        *also,
    )
    if isinstance(parent, tighter) or (
        isinstance(parent, cst.UnaryOperation) and not isinstance(parent.operator, cst.Not)
    ):
        return f"({text})"
    return text
