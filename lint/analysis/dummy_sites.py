"""Where a function hands back a dummy weight gradient that no test on ``zero_out_wgrad``
guards (issue #19, class 3; GMLP003): Transformer Engine's ``get_dummy_wgrad(...)`` where
the dummy leaves the function (returned, put in ``.grad``, or stored in what the function
returns), and an ``empty`` allocation handed back as the dummy (put in the ``.grad`` of a
weight whose main_grad the function touches, allocated next to ``grad_added_to_main_grad =
True``, or returned by a function named for dummies or marking the flag) and not zeroed
later. Found here; the rule's module (lint/rules/dummy_wgrad_not_zeroed.py) judges the
calls' ``zero=`` and words, fixes and reports them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from . import patterns, wgrad, writing_helpers

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .cfg import Node
    from .module import Unit

TE_DUMMY = "get_dummy_wgrad"
# What an unguarded dummy is made by (the first item of ``unguarded_dummies``' pairs):
TE_CALL = "get_dummy_wgrad"  # Transformer Engine's cached dummy
ALLOCATION = "empty"  # an ``empty`` allocation, not zeroed later


def unguarded_dummies(unit: Unit) -> Iterator[tuple[str, cst.Call]]:
    """(what makes it, the call) for each dummy ``unit`` hands back on a path no test on
    ``zero_out_wgrad`` guards, in the order of its statements."""
    return _Sites(unit).unguarded()


class _Sites:
    """One function's statements, with what is asked of them more than once kept."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.suites_with_grad_added: dict[int, bool] = {}
        self._function_marks: bool | None = None
        self._owners: set[str] | None = None

    def unguarded(self) -> Iterator[tuple[str, cst.Call]]:
        for stmt, suite in self.unit.statements():
            if isinstance(stmt, cst.BaseCompoundStatement):
                continue
            te_calls = [s for s in patterns.walk(stmt) if patterns.callee_name(s) == TE_DUMMY]
            if te_calls and not self.hands_back(stmt):
                te_calls = []  # e.g. a test fetching the cached dummy to compare pointers
            value = getattr(stmt, "value", None)
            dummy_context = value is not None and self.is_dummy_context(stmt, suite)
            if not te_calls and not dummy_context:
                continue
            node = self.unit.node_for(stmt)
            if node is None or self.guarded(node):
                continue
            chosen = self.zero_out_choices(stmt, node) if te_calls else set()
            for call in te_calls:
                if id(call) not in chosen:
                    yield TE_CALL, call
            if dummy_context:
                for call in wgrad.empty_allocations(value, node, self.unit.zero_out):
                    if not self.zeroed_later(stmt):
                        yield ALLOCATION, call

    def is_dummy_context(self, stmt: cst.CSTNode, suite: Sequence[cst.CSTNode]) -> bool:
        if isinstance(stmt, (cst.Assign, cst.AnnAssign)):
            targets = patterns.assignment_targets(stmt)
            grads = [t for t in targets if patterns.is_attr(t, "grad")]
            if grads:
                # The dummy of a weight whose gradient went into its main_grad; not the
                # optimizer allocating an fp32 master parameter's .grad to copy into.
                owners = self.main_grad_owners()
                return self.function_marks_grad_added() or any(
                    self.unit.context.code(t.value) in owners for t in grads
                )
            if self.marks_grad_added(suite):
                return True
            return "dummy" in self.unit.name and any(
                isinstance(t, cst.Name) and self.unit.returns(t) for t in targets
            )
        if isinstance(stmt, cst.Return):
            # Returned from a function that tells the hook main_grad already has the
            # gradient: what it returns for the weights is the dummy.
            return "dummy" in self.unit.name or self.function_marks_grad_added()
        return False

    def main_grad_owners(self) -> set[str]:
        """The text of X for every ``X.main_grad`` this function touches, itself or through
        a helper of the file that writes the main_grad of the X it is handed."""
        if self._owners is None:
            writers = self.unit.context.shared(writing_helpers.WritingHelpers)
            code = self.unit.context.code
            self._owners = set()
            for stmt, _ in self.unit.statements():
                if isinstance(stmt, cst.BaseCompoundStatement):
                    continue
                for sub in patterns.walk(stmt):
                    if (owner := patterns.main_grad_owner(sub)) is not None:
                        self._owners.add(code(owner))
                    elif type(sub) is cst.Call:
                        self._owners.update(
                            code(arg) for arg in writers.surely_written_arguments(sub)
                        )
        return self._owners

    def function_marks_grad_added(self) -> bool:
        if self._function_marks is None:
            self._function_marks = any(
                wgrad.marks_grad_added(stmt)
                for stmt, _ in self.unit.statements()
                if not isinstance(stmt, cst.BaseCompoundStatement)
            )
        return self._function_marks

    def hands_back(self, stmt: cst.CSTNode) -> bool:
        """The statement's value leaves as a gradient: returned, put in ``.grad``, or stored
        in (or appended to) something the function returns."""
        if isinstance(stmt, cst.Return):
            return True
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = patterns.assignment_targets(stmt)
            return any(patterns.is_attr(t, "grad") or self.unit.returns(t) for t in targets)
        if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
            func = stmt.value.func
            return (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("append", "extend", "insert")
                and self.unit.returns(func.value)
            )
        return False

    def marks_grad_added(self, suite: Sequence[cst.CSTNode]) -> bool:
        key = id(suite)
        cached = self.suites_with_grad_added.get(key)
        if cached is None:
            cached = any(wgrad.marks_grad_added(small) for small in wgrad.small_statements(suite))
            self.suites_with_grad_added[key] = cached
        return cached

    def zero_out_choices(self, stmt: cst.CSTNode, node: Node) -> set[int]:
        """The dummy calls in either arm of a conditional expression whose test asks
        zero_out_wgrad (``guarded``'s expression form: ``d(..., zero=True) if zero_out else
        d(...)``)."""
        found: set[int] = set()
        for sub in patterns.walk(stmt):
            if type(sub) is cst.IfExp and self.unit.zero_out.expr(sub.test, node):
                for arm in (sub.body, sub.orelse):
                    found.update(
                        id(c) for c in patterns.walk(arm) if patterns.callee_name(c) == TE_DUMMY
                    )
        return found

    def guarded(self, node: Node) -> bool:
        """The statement runs only under some test on zero_out_wgrad (either side of it:
        the other side is where the zero-filled dummy is made)."""
        zero_out = self.unit.zero_out
        return any(zero_out.branch(b) for b in self.unit.control.ancestors(node))

    def zeroed_later(self, stmt: cst.CSTNode) -> bool:
        """``d = torch.empty(...)`` followed by ``d.zero_()``/``d.fill_(0)`` somewhere."""
        if not isinstance(stmt, cst.Assign):
            return False
        names = {t.target.value for t in stmt.targets if isinstance(t.target, cst.Name)}
        for other, _ in self.unit.statements():
            for sub in patterns.walk(other):
                if (
                    isinstance(sub, cst.Call)
                    and isinstance(sub.func, cst.Attribute)
                    and sub.func.attr.value in ("zero_", "fill_")
                    and isinstance(sub.func.value, cst.Name)
                    and sub.func.value.value in names
                ):
                    return True
        return False
