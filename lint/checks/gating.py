"""GMLP001 and GMLP002: main_grad aliasing or bookkeeping gated on a downgraded flag.

A branch (``if`` statement or conditional expression) is suspect when its test depends on
``overwrite_main_grad`` (directly or through a local whose reaching definitions do). It is
reported only when its two sides differ in what they do with main_grad:

* GMLP001: one side makes main_grad (or a name holding it) the weight-gradient output or
  destination, the other does not;
* GMLP002: one side does bookkeeping the other does not: ``grad_added_to_main_grad = True``,
  a dummy wgrad, or None gradients in what the function returns.

So ``if overwrite: main_grad.copy_(w) else: main_grad.add_(w)`` is fine (both sides write
main_grad), and so is a downgraded flag passed only as the GEMM's ``accumulate=``/``beta=``
(no branch at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

from ..analysis import patterns
from ..analysis.cfg import Def, Node
from ..analysis.module import ModuleContext, Unit, iter_statements, suite_body
from ..model import UNSAFE, Fix
from .base import Collector

GRAD_ADDED = "grad_added_to_main_grad = True"
DUMMY = "a dummy wgrad"
NONE_GRADS = "None or no gradients returned"
# Words that make an enclosing test look like the op-level output-into-main-grad setting.
OP_LEVEL_HINTS = ("main_grad", "accumulat", "fuse_wgrad", "gradient_accumulation_fusion")


def check(context: ModuleContext, out: Collector) -> None:
    # Every overwrite-dependent value starts at a spelling of it or at a helper call.
    source = context.source
    if "overwrite" not in source and not any(h in source for h in context.overwrite_helpers):
        return
    for unit in context.units_touching_overwrite():
        _Unit(unit, out).run()


class _Unit:
    def __init__(self, unit: Unit, out: Collector) -> None:
        self.unit = unit
        self.out = out
        self.context = unit.context

    def run(self) -> None:
        for stmt, suite in self.unit.statements():
            if isinstance(stmt, cst.If):
                self.check_if(stmt, suite)
        for root, node in self.unit.expression_roots():
            for sub in patterns.walk(root):
                if isinstance(sub, cst.IfExp):
                    self.check_ifexp(sub, node, root)

    # -- the two kinds of branch --------------------------------------------------------
    def check_if(self, stmt: cst.If, suite: Sequence[cst.CSTNode]) -> None:
        node = self.unit.node_for(stmt)
        if node is None or not self.unit.overwrite.expr(stmt.test, node):
            return
        body_statements = suite_body(stmt.body)
        body = self.effects(iter_statements(body_statements))
        if isinstance(stmt.orelse, cst.If):
            orelse = self.effects(iter_statements([stmt.orelse]))
        elif isinstance(stmt.orelse, cst.Else):
            orelse = self.effects(iter_statements(suite_body(stmt.orelse.body)))
        elif _ends_in_jump(body_statements):
            # ``if overwrite: return scratch`` - what follows is the other side.
            orelse = self.effects(iter_statements(_after(stmt, suite)))
        else:
            orelse = _Effects()
        self.judge(stmt.test, node, body, orelse)

    def check_ifexp(self, expr: cst.IfExp, node: Node, root: cst.CSTNode) -> None:
        if not self.unit.overwrite.expr(expr.test, node):
            return
        returned = self.assigns_returned(root) or isinstance(root, cst.Return)
        body = self.expression_effects(expr.body, node, returned)
        orelse = self.expression_effects(expr.orelse, node, returned)
        self.judge(expr.test, node, body, orelse)

    def judge(self, test: cst.BaseExpression, node: Node, body, orelse) -> None:
        if body.destination != orelse.destination or body.scratch != orelse.scratch:
            code = "GMLP001"
        elif body.bookkeeping ^ orelse.bookkeeping:
            code = "GMLP002"
        else:
            return
        taint = self.unit.overwrite
        names = taint.tainted_names(test, node)
        direct = taint.direct(test)
        anchor: cst.CSTNode = names[0] if names and not direct else test
        replacement = None if direct else self.op_level_replacement(names, node)
        message = self.message(code, body, orelse, names[0] if names else None, node, direct)
        fix = None
        if replacement is not None:
            text, atomic = replacement
            edits = tuple(self.out.replace(name, text if atomic else f"({text})") for name in names)
            message += f"; gate on `{text}` instead"
            fix = Fix(f"Gate on `{text}`", edits, UNSAFE)
        self.out.report(code, anchor, message, fix)

    def message(self, code, body, orelse, name, node, direct) -> str:
        if direct:
            cause = "a test on `overwrite_main_grad`"
        else:
            origin = self.unit.overwrite.origin(name.value, node)
            site = origin and (origin.target or origin.node.owner)
            where = f" (line {self.context.line_of(site)})" if site is not None else ""
            cause = f"`{name.value}`, a local flag that `overwrite_main_grad` can switch off{where}"
        if code == "GMLP001":
            return (
                f"main_grad is chosen as the weight-gradient destination under {cause}: "
                "in overwrite mode the gradient goes to scratch memory and main_grad keeps "
                "stale values; only the GEMM's accumulate flag may follow overwrite_main_grad"
            )
        kinds = sorted(body.bookkeeping ^ orelse.bookkeeping)
        return (
            f"main_grad bookkeeping ({', '.join(kinds)}) is gated on {cause}: in overwrite "
            "mode the hook sees no grad_added_to_main_grad and adds the real gradient again"
        )

    # -- what a branch does -------------------------------------------------------------
    def effects(self, statements: Iterable[tuple[cst.CSTNode, Sequence]]) -> _Effects:
        found = _Effects()
        for stmt, _ in statements:
            if isinstance(stmt, cst.BaseCompoundStatement):
                continue  # its statements come next in the walk
            node = self.unit.node_for(stmt)
            if node is None:
                continue
            found.destination = found.destination or self.writes_main_grad(stmt, node)
            found.scratch = found.scratch or self.swaps_in_scratch(stmt, node)
            found.bookkeeping |= self.bookkeeping(stmt)
        return found

    def expression_effects(self, expr, node: Node, returned: bool) -> _Effects:
        found = _Effects()
        found.destination = self.uses_main_grad(expr, node)
        found.bookkeeping = self.calls_bookkeeping(expr)
        if returned and patterns.is_none_like(expr):
            found.bookkeeping.add(NONE_GRADS)
        return found

    def writes_main_grad(self, stmt: cst.CSTNode, node: Node) -> bool:
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = _targets(stmt)
            # Fetching or reshaping the buffer itself is preparation, not a destination.
            if any(_names_main_grad(t) for t in targets) or stmt.value is None:
                return False
            return self.uses_main_grad(stmt.value, node)
        if isinstance(stmt, cst.Expr):
            return self.uses_main_grad(stmt.value, node)
        if isinstance(stmt, cst.Return) and stmt.value is not None:
            return self.uses_main_grad(stmt.value, node)
        return False

    def swaps_in_scratch(self, stmt: cst.CSTNode, node: Node) -> bool:
        """``dest = torch.empty_like(dest)`` where ``dest`` held main_grad: the GEMM that
        follows writes a buffer nobody reads."""
        if not isinstance(stmt, (cst.Assign, cst.AnnAssign)) or stmt.value is None:
            return False
        if patterns.callee_name(stmt.value) not in patterns.ALLOCATORS:
            return False
        return any(
            isinstance(t, cst.Name) and self.unit.aliases.surely(t.value, node)
            for t in _targets(stmt)
        )

    def holds_main_grad(self, expr: cst.CSTNode, node: Node) -> bool:
        """``expr`` is main_grad storage itself (not something computed from it)."""
        if patterns.is_main_grad_direct(expr):
            return True
        aliases = self.unit.aliases
        if isinstance(expr, cst.Name):
            return aliases.name(expr.value, node)
        if isinstance(expr, cst.Subscript):
            return self.holds_main_grad(expr.value, node)
        if isinstance(expr, cst.Attribute) and expr.attr.value in patterns.VIEW_ATTRS:
            return self.holds_main_grad(expr.value, node)
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in patterns.VIEW_METHODS
        ):
            return self.holds_main_grad(expr.func.value, node)
        return False

    def uses_main_grad(self, expr: cst.CSTNode, node: Node) -> bool:
        """main_grad storage appears where its value is used: assigned, passed to a call,
        put in a list, written in place; not where it is only inspected."""
        if self.holds_main_grad(expr, node):
            return True
        if isinstance(expr, (cst.Comparison, cst.UnaryOperation, cst.FormattedString)):
            return False
        if isinstance(expr, cst.Attribute):
            return self.uses_main_grad(expr.value, node) and not self.holds_main_grad(
                expr.value, node
            )
        if isinstance(expr, cst.Call):
            name = patterns.callee_name(expr) or ""
            func = expr.func
            if isinstance(func, cst.Attribute) and self.holds_main_grad(func.value, node):
                # A method of main_grad: an in-place write unless it only inspects or resets.
                return name not in patterns.METADATA_ATTRS and name not in patterns.RESET_METHODS
            if name in patterns.NON_ALIASING_CALLS or name in patterns.ALLOCATORS:
                return False
            return self.uses_main_grad(func, node) or any(
                self.uses_main_grad(arg.value, node) for arg in expr.args
            )
        if isinstance(expr, cst.Lambda):
            return False
        return any(self.uses_main_grad(child, node) for child in _expression_children(expr))

    def bookkeeping(self, stmt: cst.CSTNode) -> set[str]:
        kinds = self.calls_bookkeeping(stmt)
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and stmt.value is not None:
            targets = _targets(stmt)
            if any(
                patterns.is_attr(t, patterns.GRAD_ADDED) for t in targets
            ) and not patterns.is_false_literal(stmt.value):
                kinds.add(GRAD_ADDED)
            if patterns.is_none_like(stmt.value) and any(map(self.is_returned, targets)):
                kinds.add(NONE_GRADS)
        elif (
            isinstance(stmt, cst.Return)
            and stmt.value is not None
            and patterns.is_none_like(stmt.value)
        ):
            kinds.add(NONE_GRADS)
        return kinds

    @staticmethod
    def calls_bookkeeping(tree: cst.CSTNode) -> set[str]:
        kinds: set[str] = set()
        for sub in patterns.walk(tree):
            name = patterns.callee_name(sub)
            if name is None:
                continue
            if "dummy" in name:
                kinds.add(DUMMY)
            elif "grad_added" in name:
                kinds.add(GRAD_ADDED)
            elif name == "setattr":
                args = patterns.positional_args(sub)
                if len(args) >= 2 and patterns.string_value(args[1].value) == patterns.GRAD_ADDED:
                    kinds.add(GRAD_ADDED)
        return kinds

    def is_returned(self, target: cst.CSTNode) -> bool:
        while isinstance(target, cst.Subscript):
            target = target.value
        return isinstance(target, cst.Name) and target.value in self.unit.returned_names

    def assigns_returned(self, root: cst.CSTNode) -> bool:
        if isinstance(root, (cst.Assign, cst.AnnAssign)):
            return any(map(self.is_returned, _targets(root)))
        return False

    # -- the fix: gate on the op-level expression ----------------------------------------
    def op_level_replacement(self, names: list[cst.Name], node: Node) -> tuple[str, bool] | None:
        """The one expression every tainted flag in the test was derived from, and whether
        it can be spliced without parentheses; None when there is no single answer."""
        if not names:
            return None
        found: dict[str, bool] = {}
        for name in names:
            sources = self.sources(name.value, node, set())
            if not sources:
                return None
            found.update(sources)
        if len(found) != 1:
            return None
        ((text, atomic),) = found.items()
        return text, atomic

    def sources(self, name: str, node: Node, seen: set[int]) -> dict[str, bool] | None:
        taint = self.unit.overwrite
        found: dict[str, bool] = {}
        for d in self.unit.reaching.reaching(name, node):
            if d.index in seen:
                continue
            seen.add(d.index)
            if d.kind in ("param", "import", "except", "match", "def", "for", "with"):
                return None
            if taint.value[d.index]:
                # A downgrade whose origin cannot be read (``flag = not overwrite`` at the
                # bottom of a loop) leaves the answer to the other definitions.
                found.update(self.downgrade_source(d, seen) or {})
                continue
            part = self.copy_source(d, seen)
            if part is None:
                return None
            found.update(part)
        return found

    def copy_source(self, d: Def, seen: set[int]) -> dict[str, bool] | None:
        value = d.value
        if value is None or _is_bool_literal(value):
            return {}
        if isinstance(value, cst.Name) and self.unit.reaching.defines(value.value):
            return self.sources(value.value, d.node, seen)
        return {self.context.text(value): patterns.is_atom(value)}

    def downgrade_source(self, d: Def, seen: set[int]) -> dict[str, bool] | None:
        taint = self.unit.overwrite
        if d.kind == "aug":
            return self.sources(d.name, d.node, seen)
        value = d.value
        operands = _and_operands(value) if value is not None else []
        if len(operands) > 1:
            kept = [op for op in operands if not taint.expr(op, d.node)]
            if kept:
                only = kept[0]
                if (
                    len(kept) == 1
                    and isinstance(only, cst.Name)
                    and self.unit.reaching.defines(only.value)
                ):
                    return self.sources(only.value, d.node, seen)
                text = " and ".join(_operand_text(self.context, op) for op in kept)
                return {text: len(kept) == 1 and patterns.is_atom(kept[0])}
        # ``flag = not getattr(w, "overwrite_main_grad", False)`` inside ``if op_flag:``:
        # the enclosing test is what the flag stood for.
        for stmt, branch in d.node.enclosing_ifs:
            if branch != "body":
                continue
            test_node = self.unit.node_for(stmt)
            if test_node is None or taint.direct(stmt.test):
                continue
            resolved = self.resolve_test(stmt.test, test_node, seen)
            if resolved is not None:
                return resolved
        return None

    def resolve_test(self, test, node: Node, seen: set[int]) -> dict[str, bool] | None:
        """An enclosing test rewritten in op-level terms: its ``and`` operands kept as they
        are, except local flags, which are replaced by what they were copied from. None
        when the test does not look like the output-into-main-grad setting."""
        operands = _and_operands(test)
        parts: list[tuple[str, bool]] = []
        looks_op_level = False
        for operand in operands:
            if isinstance(operand, cst.Name) and self.unit.reaching.defines(operand.value):
                found = self.sources(operand.value, node, seen)
                if not found or len(found) != 1:
                    return None
                ((text, atomic),) = found.items()
                parts.append((text, atomic))
                looks_op_level = True
            elif self.unit.overwrite.expr(operand, node):
                return None
            else:
                text = self.context.text(operand)
                looks_op_level = looks_op_level or any(h in text for h in OP_LEVEL_HINTS)
                parts.append((_operand_text(self.context, operand), patterns.is_atom(operand)))
        if not looks_op_level:
            return None
        if len(parts) == 1:
            return {parts[0][0]: parts[0][1]}
        return {" and ".join(t if a else f"({t})" for t, a in parts): False}


class _Effects:
    """What one side of a branch does: makes main_grad a destination, and which
    bookkeeping it performs."""

    def __init__(self) -> None:
        self.destination = False
        self.scratch = False  # a name holding main_grad is rebound to a fresh buffer
        self.bookkeeping: set[str] = set()


def _ends_in_jump(statements: Sequence[cst.CSTNode]) -> bool:
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break))


def _after(stmt: cst.CSTNode, suite: Sequence[cst.CSTNode]) -> Sequence[cst.CSTNode]:
    for i, other in enumerate(suite):
        if other is stmt:
            return suite[i + 1 :]
    return ()


def _targets(stmt: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(stmt, cst.Assign):
        return [t.target for t in stmt.targets]
    return [stmt.target]


def _names_main_grad(target: cst.CSTNode) -> bool:
    if patterns.is_attr(target, patterns.MAIN_GRAD):
        return True
    return isinstance(target, cst.Name) and patterns.MAIN_GRAD in target.value


def _is_bool_literal(expr: cst.CSTNode) -> bool:
    return isinstance(expr, cst.Name) and expr.value in ("True", "False", "None")


def _and_operands(expr: cst.CSTNode) -> list[cst.BaseExpression]:
    if (
        isinstance(expr, cst.BooleanOperation)
        and isinstance(expr.operator, cst.And)
        and not expr.lpar
    ):
        return _and_operands(expr.left) + _and_operands(expr.right)
    return [expr]


def _operand_text(context: ModuleContext, expr: cst.CSTNode) -> str:
    text = context.text(expr)
    if isinstance(expr, (cst.BooleanOperation, cst.IfExp, cst.Lambda)) and not expr.lpar:
        return f"({text})"
    return text


def _expression_children(expr: cst.CSTNode) -> Iterable[cst.CSTNode]:
    for child in patterns.children(expr):
        if isinstance(child, (cst.Arg, cst.Element, cst.StarredElement, cst.DictElement)):
            yield child.value
            if isinstance(child, cst.DictElement):
                yield child.key
        elif isinstance(child, cst.BaseExpression):
            yield child
        elif isinstance(child, (cst.CompFor, cst.SubscriptElement, cst.Index, cst.Slice)):
            yield from _expression_children(child)
