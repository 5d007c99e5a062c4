"""Branches on a flag that ``overwrite_main_grad`` can switch off, and what each side does
with main_grad: what GMLP001 and GMLP002 judge.

A branch (``if`` statement, conditional expression, ``flag and A or B``, or a choice by
indexing: ``analysis/choices.py``) is suspect
when its test depends on ``overwrite_main_grad`` (directly or through a local whose
reaching definitions do). Each side's effects are recorded:

* destination: it makes main_grad (or a name holding it) the weight-gradient output;
* scratch: it rebinds a name that surely holds main_grad to a fresh buffer;
* bookkeeping: ``grad_added_to_main_grad = True``, a dummy wgrad, or None gradients in what
  the function returns.

So ``if overwrite: main_grad.copy_(w) else: main_grad.add_(w)`` has equal sides (both write
main_grad), and a downgraded flag passed only as the GEMM's ``accumulate=``/``beta=`` makes
no branch at all. The branches of a file are found once, however many rules ask.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from . import accumulator_inputs, choices, first_microbatch, match_arms, patterns
from .cfg import Node
from .module import ModuleContext, Unit, iter_statements, suite_body

GRAD_ADDED = "grad_added_to_main_grad = True"
DUMMY = "a dummy wgrad"
NONE_GRADS = "None or no gradients returned"


@dataclass
class Effects:
    """What one side of a branch does with main_grad."""

    destination: bool = False  # makes main_grad (or a name holding it) the output
    scratch: bool = False  # rebinds a name holding main_grad to a fresh buffer
    bookkeeping: set[str] = field(default_factory=set)


@dataclass
class Branch:
    unit: Unit
    test: cst.BaseExpression
    node: Node  # the graph node where the test is evaluated
    body: Effects
    orelse: Effects
    # For a test on a comprehension's variable: the sequence it is an element of.
    via: cst.BaseExpression | None = None
    # An ``elif`` after an arm of the same chain that made main_grad the destination under
    # an overwrite-dependent test: that arm took the overwrite case (``if fuse and not
    # accumulate: main_grad.copy_(...)`` / ``elif accumulate: gemm(out=main_grad)``), so this
    # arm's "other side" is no path on which main_grad goes unwritten for overwriting.
    after_destination: bool = False

    @property
    def moves_destination(self) -> bool:
        """One side makes main_grad the destination (or swaps it for scratch), the other not."""
        return not self.after_destination and _moves(self.body, self.orelse)

    @property
    def uneven_bookkeeping(self) -> list[str]:
        """The bookkeeping one side does and the other does not, sorted."""
        return sorted(self.body.bookkeeping ^ self.orelse.bookkeeping)


def suspect_branches(context: ModuleContext) -> list[Branch]:
    """Every branch of the file whose test depends on ``overwrite_main_grad``; use it as
    ``context.shared(suspect_branches)``."""
    # Every overwrite-dependent value starts at a spelling of it or at a helper call.
    source = context.source
    if (
        "overwrite" not in source
        and first_microbatch.FIRST_MICROBATCH not in source
        and not any(h in source for h in context.overwrite_helpers)
    ):
        return []
    found: list[Branch] = []
    for unit in context.units_touching_overwrite():
        found.extend(_Finder(unit).branches())
    return found


class _Finder:
    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.found: list[Branch] = []
        # The module's own functions that mark grad_added_to_main_grad or make the dummy:
        # calling one is bookkeeping, whatever its name.
        self.helpers = unit.context.bookkeeping_helpers
        self.after_destination: set[int] = set()  # ids of such ``elif`` statements

    def branches(self) -> list[Branch]:
        for stmt, suite in self.unit.statements():
            if isinstance(stmt, cst.If):
                self.check_if(stmt, suite)
            elif isinstance(stmt, cst.Match):
                self.check_match(stmt, suite)
        for root, node in self.unit.expression_roots():
            elements = choices.element_tests(root)
            for sub in patterns.walk(root):
                if isinstance(sub, cst.IfExp):
                    self.check_ifexp(sub, node, root, elements.get(id(sub)))
                elif (choice := _and_or_choice(sub) or choices.indexed_choice(sub)) is not None:
                    self.check_ifexp(choice, node, root)
        return self.found

    # -- the two kinds of branch --------------------------------------------------------
    def check_if(self, stmt: cst.If, suite: Sequence[cst.CSTNode]) -> None:
        node = self.unit.node_for(stmt)
        if node is None or not self.unit.overwrite.expr(stmt.test, node):
            return
        body_statements = suite_body(stmt.body)
        if _ends_in(body_statements, cst.Raise):
            return  # a guard that refuses a configuration: no path goes on past it
        body = self.effects(iter_statements(body_statements))
        if isinstance(stmt.orelse, cst.If):
            orelse = self.effects(iter_statements([stmt.orelse]))
        elif isinstance(stmt.orelse, cst.Else):
            orelse = self.effects(iter_statements(suite_body(stmt.orelse.body)))
        elif ends_in_jump(body_statements):
            # ``if overwrite: return scratch`` - what follows is the other side.
            orelse = self.effects(iter_statements(after(stmt, suite)))
        else:
            orelse = Effects()
        covered = id(stmt) in self.after_destination
        if isinstance(stmt.orelse, cst.If) and (covered or body.destination):
            self.after_destination.add(id(stmt.orelse))
        self.found.append(Branch(self.unit, stmt.test, node, body, orelse, None, covered))

    def check_match(self, stmt: cst.Match, suite: Sequence[cst.CSTNode]) -> None:
        """A ``match`` whose subject (or a guard) reads the flag: a branch between the first
        two arms that ask different things of the flag and do different things with
        main_grad (``analysis/match_arms.py``)."""
        node = self.unit.node_for(stmt)
        if node is None:
            return
        taint = self.unit.overwrite

        def guard_tainted(case: cst.MatchCase) -> bool:
            case_node = self.unit.node_for(case)
            return case_node is not None and taint.expr(case.guard, case_node)

        found = match_arms.flag_match(
            stmt, lambda e: taint.expr(e, node), guard_tainted, self.unit.context.text
        )
        if found is None:
            return
        bodies = [() if case is None else suite_body(case.body) for _, case in found.arms]
        if any(_ends_in(b, cst.Raise) for b in bodies):
            return  # an arm that refuses a configuration is a guard, as for ``if``
        rest = after(stmt, suite) if any(map(ends_in_jump, bodies)) else ()
        sides = [
            self.effects(iter_statements(list(b) if ends_in_jump(b) else [*b, *rest]))
            for b in bodies
        ]
        pairs = [
            (sides[i], sides[j])
            for i in range(len(sides))
            for j in range(i + 1, len(sides))
            if found.arms[i][0] != found.arms[j][0]
        ]
        chosen = next((p for p in pairs if _moves(*p)), None) or next(
            (p for p in pairs if p[0].bookkeeping != p[1].bookkeeping), None
        )
        test_node = self.unit.node_for(found.test_owner)
        if chosen is not None and test_node is not None:
            self.found.append(Branch(self.unit, found.test, test_node, *chosen))

    def check_ifexp(self, expr: cst.IfExp, node: Node, root: cst.CSTNode, via=None) -> None:
        # A test on a comprehension's variable depends on the sequence it walks.
        if not self.unit.overwrite.expr(expr.test if via is None else via, node):
            return
        if accumulator_inputs.is_accumulator_input(root, expr, self.unit.context.code):
            return
        returned = self.assigns_returned(root) or isinstance(root, cst.Return)
        body = self.expression_effects(expr.body, node, returned)
        orelse = self.expression_effects(expr.orelse, node, returned)
        self.found.append(Branch(self.unit, expr.test, node, body, orelse, via))

    # -- what a branch does -------------------------------------------------------------
    def effects(self, statements: Iterable[tuple[cst.CSTNode, Sequence]]) -> Effects:
        found = Effects()
        for stmt, _ in statements:
            if isinstance(stmt, cst.BaseCompoundStatement):
                continue  # its statements come next in the walk
            node = self.unit.node_for(stmt)
            if node is None:
                continue
            found.destination = found.destination or self.writes_main_grad(stmt, node)
            found.scratch = found.scratch or self.swaps_in_scratch(stmt, node)
            found.bookkeeping |= self.bookkeeping(stmt, node)
        return found

    def expression_effects(self, expr, node: Node, returned: bool) -> Effects:
        found = Effects()
        found.destination = self.uses_main_grad(expr, node)
        found.bookkeeping = self.calls_bookkeeping(expr) | self.held_bookkeeping(expr, node)
        if returned and patterns.is_none_like(expr):
            found.bookkeeping.add(NONE_GRADS)
        return found

    def writes_main_grad(self, stmt: cst.CSTNode, node: Node) -> bool:
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = patterns.assignment_targets(stmt)
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
            for t in patterns.assignment_targets(stmt)
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
            # ``torch.Tensor.zero_(mg)`` is ``mg.zero_()``: the receiver is the first argument.
            method = patterns.method_call(expr)
            if method is not None and self.holds_main_grad(method[0], node):
                # A method of main_grad: an in-place write unless it only inspects or resets.
                name = method[1]
                return name not in patterns.METADATA_ATTRS and name not in patterns.RESET_METHODS
            if name in patterns.NON_ALIASING_CALLS or name in patterns.ALLOCATORS:
                return False
            return self.uses_main_grad(func, node) or any(
                self.uses_main_grad(arg.value, node) for arg in expr.args
            )
        if isinstance(expr, cst.Lambda):
            return False
        return any(self.uses_main_grad(child, node) for child in _expression_children(expr))

    def bookkeeping(self, stmt: cst.CSTNode, node: Node) -> set[str]:
        kinds = self.calls_bookkeeping(stmt)
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.Return)) and stmt.value is not None:
            kinds |= self.held_bookkeeping(stmt.value, node)
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and stmt.value is not None:
            targets = patterns.assignment_targets(stmt)
            if any(
                patterns.is_attr(t, patterns.GRAD_ADDED) for t in targets
            ) and not patterns.is_false_literal(stmt.value):
                kinds.add(GRAD_ADDED)
            if patterns.is_none_like(stmt.value) and any(map(self.unit.returns, targets)):
                kinds.add(NONE_GRADS)
        elif (
            isinstance(stmt, cst.Return)
            and stmt.value is not None
            and patterns.is_none_like(stmt.value)
        ):
            kinds.add(NONE_GRADS)
        return kinds

    def calls_bookkeeping(self, tree: cst.CSTNode) -> set[str]:
        kinds: set[str] = set()
        for sub in patterns.walk(tree):
            name = patterns.callee_name(sub)
            if name is None:
                continue
            if "dummy" in name or name in self.helpers:
                kinds.add(DUMMY)
            elif "grad_added" in name:
                kinds.add(GRAD_ADDED)
            elif name == "setattr":
                args = patterns.positional_args(sub)
                if len(args) >= 2 and patterns.string_is(args[1].value, patterns.GRAD_ADDED):
                    kinds.add(GRAD_ADDED)
        return kinds

    def held_bookkeeping(self, expr: cst.CSTNode, node: Node) -> set[str]:
        """A dummy handed on by name: ``dummy`` where every definition of it reaching
        ``node`` made a dummy wgrad (``dummy = get_dummy_wgrad(...)`` earlier in the
        function). The side of a branch that passes it on chooses the dummy as much as one
        that calls the maker there."""
        if type(expr) is not cst.Name:
            return set()
        defs = self.unit.reaching.reaching(expr.value, node)
        made = [
            d.kind == "assign" and d.value is not None and DUMMY in self.calls_bookkeeping(d.value)
            for d in defs
        ]
        return {DUMMY} if made and all(made) else set()

    def assigns_returned(self, root: cst.CSTNode) -> bool:
        if isinstance(root, (cst.Assign, cst.AnnAssign)):
            return any(map(self.unit.returns, patterns.assignment_targets(root)))
        return False


def _moves(a: Effects, b: Effects) -> bool:
    return a.destination != b.destination or a.scratch != b.scratch


def _and_or_choice(expr: cst.CSTNode) -> cst.IfExp | None:
    """``flag and A or B``, the conditional expression's older spelling, as ``A if flag else
    B`` (the test is the original node, so findings point into the file)."""
    if not (isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or)):
        return None
    left = expr.left
    if not (isinstance(left, cst.BooleanOperation) and isinstance(left.operator, cst.And)):
        return None
    return cst.IfExp(test=left.left, body=left.right, orelse=expr.right)


def ends_in_jump(statements: Sequence[cst.CSTNode]) -> bool:
    return _ends_in(statements, (cst.Return, cst.Raise, cst.Continue, cst.Break))


def _ends_in(statements: Sequence[cst.CSTNode], kinds) -> bool:
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, kinds)


def after(stmt: cst.CSTNode, suite: Sequence[cst.CSTNode]) -> Sequence[cst.CSTNode]:
    for i, other in enumerate(suite):
        if other is stmt:
            return suite[i + 1 :]
    return ()


def _names_main_grad(target: cst.CSTNode) -> bool:
    if patterns.is_attr(target, patterns.MAIN_GRAD):
        return True
    return isinstance(target, cst.Name) and patterns.MAIN_GRAD in target.value


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
