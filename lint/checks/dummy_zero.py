"""GMLP003: a dummy weight gradient that is not zero-filled where zero_out_wgrad may be set.

Megatron adds the dummy ``.grad`` into main_grad anyway for parameters with
``zero_out_wgrad`` (shared embeddings, MTP), so an uninitialised dummy adds garbage
(Megatron #6565). Two shapes are checked:

* Transformer Engine's ``get_dummy_wgrad(shape, dtype)`` called without ``zero=`` (or with a
  literal False): fixed, safely, by passing ``zero=getattr(param, "zero_out_wgrad", False)``;
* an ``empty`` allocation handed back as the dummy (assigned to ``.grad``, made next to
  ``grad_added_to_main_grad = True``, or returned by a function named for dummies) on a path
  that no test on ``zero_out_wgrad`` guards: fixed, unsafely, by allocating zeros (which
  costs a fill on every step).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from ..analysis import patterns
from ..analysis.cfg import Node
from ..analysis.module import ModuleContext, Unit
from ..model import SAFE, UNSAFE, Fix
from .base import Collector

CODE = "GMLP003"
TE_DUMMY = "get_dummy_wgrad"


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if TE_DUMMY not in source and "empty" not in source:
        return
    for unit in context.units:
        if TE_DUMMY in unit.survey.calls or unit.survey.empty_alloc:
            _Unit(unit, out).run()


class _Unit:
    def __init__(self, unit: Unit, out: Collector) -> None:
        self.unit = unit
        self.out = out
        self.suites_with_grad_added: dict[int, bool] = {}
        self._function_marks: bool | None = None

    def run(self) -> None:
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
            for call in te_calls:
                self.check_te_dummy(call)
            if dummy_context:
                for call in self.unguarded_allocations(value, node):
                    if not self.zeroed_later(stmt):
                        self.report_allocation(call)

    # -- TE's get_dummy_wgrad -----------------------------------------------------------
    def check_te_dummy(self, call: cst.Call) -> None:
        if any(arg.star for arg in call.args):
            return
        zero = patterns.keyword_arg(call, "zero")
        positional = patterns.positional_args(call)
        if zero is None and len(positional) >= 3:
            zero = positional[2]
        if zero is not None and not patterns.is_false_literal(zero.value):
            return
        param = self.param_of(positional)
        fix = None
        if param is not None:
            value = f'getattr({param}, "zero_out_wgrad", False)'
            if zero is None:
                last = call.args[-1].value if call.args else None
                edit = self.out.insert_after(last, f", zero={value}") if last else None
            else:
                edit = self.out.replace(zero.value, value)
            if edit is not None:
                fix = Fix(f"Pass zero={value}", (edit,), SAFE)
        self.out.report(
            CODE,
            call,
            "dummy wgrad from get_dummy_wgrad() is not zero-filled for parameters with "
            "zero_out_wgrad: the DDP hook adds it into main_grad anyway; pass "
            'zero=getattr(param, "zero_out_wgrad", False)',
            fix,
        )

    def param_of(self, positional: list[cst.Arg]) -> str | None:
        """The parameter whose dummy this is, read off ``p.size()``/``p.shape``/``p.dtype``."""
        found: set[str] = set()
        for arg in positional:
            for sub in patterns.walk(arg.value):
                if (
                    isinstance(sub, cst.Attribute)
                    and sub.attr.value in ("size", "shape", "dtype")
                    and isinstance(sub.value, (cst.Name, cst.Attribute))
                ):
                    found.add(self.out.text(sub.value))
        return found.pop() if len(found) == 1 else None

    # -- empty allocations handed back as the dummy ---------------------------------------
    def is_dummy_context(self, stmt: cst.CSTNode, suite: Sequence[cst.CSTNode]) -> bool:
        if isinstance(stmt, (cst.Assign, cst.AnnAssign)):
            targets = (
                [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
            )
            if any(patterns.is_attr(t, "grad") for t in targets):
                return True
            if self.marks_grad_added(suite):
                return True
            return "dummy" in self.unit.name and any(
                isinstance(t, cst.Name) and t.value in self.unit.returned_names for t in targets
            )
        if isinstance(stmt, cst.Return):
            # Returned from a function that tells the hook main_grad already has the
            # gradient: what it returns for the weights is the dummy.
            return "dummy" in self.unit.name or self.function_marks_grad_added()
        return False

    def function_marks_grad_added(self) -> bool:
        if self._function_marks is None:
            self._function_marks = any(
                _marks_grad_added(stmt)
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
            targets = (
                [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
            )
            return any(patterns.is_attr(t, "grad") or self.returned(t) for t in targets)
        if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
            func = stmt.value.func
            return (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("append", "extend", "insert")
                and self.returned(func.value)
            )
        return False

    def returned(self, target: cst.CSTNode) -> bool:
        while isinstance(target, cst.Subscript):
            target = target.value
        return isinstance(target, cst.Name) and target.value in self.unit.returned_names

    def marks_grad_added(self, suite: Sequence[cst.CSTNode]) -> bool:
        key = id(suite)
        cached = self.suites_with_grad_added.get(key)
        if cached is None:
            cached = any(_marks_grad_added(small) for small in _small_statements(suite))
            self.suites_with_grad_added[key] = cached
        return cached

    def guarded(self, node: Node) -> bool:
        """The statement runs only under some test on zero_out_wgrad (either side of it:
        the other side is where the zero-filled dummy is made)."""
        zero_out = self.unit.zero_out
        return any(zero_out.branch(b) for b in self.unit.control.ancestors(node))

    def unguarded_allocations(self, value: cst.CSTNode, node: Node) -> Iterator[cst.Call]:
        yield from _allocations(value, node, self.unit.zero_out)

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

    def report_allocation(self, call: cst.Call) -> None:
        name = patterns.callee_name(call)
        func = call.func
        target = func.attr if isinstance(func, cst.Attribute) else func
        fix = None
        if name in patterns.EMPTY_ALLOCATORS:
            replacement = patterns.EMPTY_ALLOCATORS[name]
            fix = Fix(
                f"Allocate with {replacement}", (self.out.replace(target, replacement),), UNSAFE
            )
        self.out.report(
            CODE,
            call,
            f"dummy wgrad allocated with {name}() is handed back without a zero_out_wgrad "
            "check: the DDP hook adds it into main_grad for zero_out_wgrad parameters; "
            'allocate zeros when getattr(param, "zero_out_wgrad", False)',
            fix,
        )


def _allocations(value: cst.CSTNode, node: Node, zero_out) -> Iterator[cst.Call]:
    """Empty allocations that are the value itself (or a side of a conditional expression
    whose test is not about zero_out_wgrad)."""
    if isinstance(value, cst.Call):
        name = patterns.callee_name(value)
        if name in patterns.EMPTY_ALLOCATORS or name == "empty_strided":
            yield value
    elif isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            yield from _allocations(element.value, node, zero_out)
    elif isinstance(value, cst.ListComp):
        yield from _allocations(value.elt, node, zero_out)
    elif isinstance(value, cst.IfExp) and not zero_out.expr(value.test, node):
        yield from _allocations(value.body, node, zero_out)
        yield from _allocations(value.orelse, node, zero_out)


def _small_statements(suite: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    for stmt in suite:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        elif not isinstance(stmt, cst.BaseCompoundStatement):
            yield stmt


def _marks_grad_added(small: cst.CSTNode) -> bool:
    if (
        isinstance(small, cst.Assign)
        and not patterns.is_false_literal(small.value)
        and any(patterns.is_attr(t.target, patterns.GRAD_ADDED) for t in small.targets)
    ):
        return True
    return any("grad_added" in (patterns.callee_name(s) or "") for s in patterns.walk(small))
