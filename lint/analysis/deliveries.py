"""Per-path facts about where a weight gradient goes: which graph nodes of a function hand
main_grad storage to something that may write it, which deliver a local gradient into
main_grad, which mark ``grad_added_to_main_grad``, and whether a path between two nodes
avoids a set of nodes (issue #19, class 3: flags without writes, and the converse).

"Hands main_grad on" is deliberately wide: a GEMM given it as ``out``, an in-place method
on it, a kernel or helper given it as an argument, a dict of GEMM arguments or a closure
holding it, a store on ``ctx`` or into a container (a local named for main_grad, or a call
named for it, ``ctx.main_grad_func()``, is taken to hold it, unless the name says it is a
switch: ``accumulate_into_main_grad``). Only reading its metadata (``.shape``,
``.dtype``), testing it (``is None``, ``hasattr``) and sizing an allocation from it
(``zeros_like(main_grad)``) are not. Wide means the rules built on it stay quiet whenever
the function might have written main_grad.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

import libcst as cst

from . import inspecting_helpers, patterns, wgrad
from .cfg import Node
from .module import Unit

# Calls that only inspect or size from their arguments, or make a dummy.
_INSPECTING = patterns.NON_ALIASING_CALLS | patterns.ALLOCATORS
_TESTS = (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)
# Methods that put their argument into a Python container: giving them a weight queues it
# for later (another function's write), it writes nothing here.
_QUEUEING = frozenset({"append", "appendleft", "extend", "insert"})


class Deliveries:
    """The main_grad facts of one unit, computed once per rule that asks."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.graph = unit.graph
        self._closures: dict[int, tuple[bool, frozenset[str]]] = {}

    @cached_property
    def holders(self) -> frozenset[int]:
        """Definitions whose value holds main_grad storage in any form: an alias, a view, a
        dict of GEMM arguments, a partial or list holding it."""
        found: set[int] = set()
        changed = True
        while changed:
            changed = False
            for d in self.graph.defs:
                if d.index in found:
                    continue
                if patterns.holds_main_grad_by_name(d.name):
                    holds = True  # ``main_grad = ctx.main_grad_func()``: named for what it holds
                elif d.kind == "def":
                    holds = self._closure_holds(d, found)
                else:
                    holds = d.value is not None and self._mentions(d.value, d.node, found)
                if holds:
                    found.add(d.index)
                    changed = True
        return frozenset(found)

    def _closure_holds(self, d, holders) -> bool:
        """A nested function (``def wgrad_gemm(x, dy): general_gemm(..., **kwargs)``) that
        uses main_grad, or a local of this function holding it: calling or storing the
        function hands main_grad on."""
        spells, reads = self._closure_facts(d)
        if spells:
            return True
        return any(self.graph.defs[i].name in reads for i in holders)

    def _closure_facts(self, d) -> tuple[bool, frozenset[str]]:
        cached = self._closures.get(d.index)
        if cached is None:
            function = d.node.owner
            spells = any(
                patterns.spells(sub, patterns.MAIN_GRAD) for sub in patterns.walk(function)
            )
            reads = frozenset(n.value for n in patterns.read_names(function.body))
            cached = self._closures[d.index] = (spells, reads)
        return cached

    def _mentions(self, expr: cst.CSTNode, node: Node, holders: Iterable[int]) -> bool:
        """``expr`` uses main_grad storage other than by inspecting it."""
        held = set(holders)
        stack = [expr]
        while stack:
            current = stack.pop()
            if type(current) is cst.Call and inspecting_helpers.only_looks(
                self.unit.context, current
            ):
                continue  # ``_check_main_grad(w)`` of the file, which only reads its dtype
            if patterns.is_main_grad_direct(current) or (
                type(current) is cst.Call
                and patterns.MAIN_GRAD in (patterns.callee_name(current) or "")
            ):
                return True
            if isinstance(current, cst.Name):
                defs = self.unit.reaching.reaching(current.value, node)
                if any(d.index in held for d in defs):
                    return True
                continue
            if isinstance(current, cst.Attribute) and current.attr.value in (
                patterns.METADATA_ATTRS
            ):
                continue
            if (
                isinstance(current, cst.Call)
                and patterns.callee_name(current) in _INSPECTING
                # ``torch.cat(parts, out=main_grad)`` writes into its ``out=``
                and patterns.keyword_arg(current, "out") is None
            ):
                continue
            if isinstance(current, cst.Comparison) and all(
                isinstance(c.operator, _TESTS) for c in current.comparisons
            ):
                continue
            if isinstance(current, (cst.Lambda, cst.FunctionDef)):
                if any(patterns.spells(sub, patterns.MAIN_GRAD) for sub in patterns.walk(current)):
                    return True
                continue
            stack.extend(patterns.children(current))
        return False

    @cached_property
    def touching(self) -> frozenset[int]:
        """Graph nodes that hand main_grad storage on (see the module docstring). Binding a
        local to it, a view of it or a dict of arguments holding it is not yet handing it on:
        the local's later uses are."""
        holders = self.holders
        found: set[int] = set()
        for root, node in self.unit.expression_roots():
            if _binds_locals_only(root) and _is_plain_holding(root.value):
                continue
            if self._mentions(root, node, holders):
                found.add(node.index)
        return frozenset(found)

    @cached_property
    def weights_handed(self) -> dict[int, frozenset[str]]:
        """For each node, the weights (by stem) a call there is given itself: a helper or
        kernel that may write their main_grad. Dummies and inspection do not count."""
        found: dict[int, frozenset[str]] = {}
        # Gradient helpers of the run provably write no main_grad (``project.Helpers``).
        pure = self.unit.context.gradient_helpers
        context = self.unit.context
        for root, node in self.unit.expression_roots():
            stems: set[str] = set()
            for sub in patterns.walk(root):
                if type(sub) is not cst.Call:
                    continue
                name = patterns.callee_name(sub) or ""
                if name in _INSPECTING or "dummy" in name or name in ("setattr", "size"):
                    continue
                if name in pure:
                    continue
                if name in _QUEUEING and type(sub.func) is cst.Attribute:
                    continue
                # a function of the file that only looks at what it is given (its shape,
                # its main_grad's dtype) writes none of it
                looked_at = {id(a) for a in inspecting_helpers.inspected_arguments(context, sub)}
                for arg in sub.args:
                    if id(arg.value) in looked_at:
                        continue
                    for value in wgrad.elements(arg.value):
                        if not _is_ctx(value):
                            stems.add(wgrad.stem(value))
            stems.discard(None)
            if stems:
                found[node.index] = found.get(node.index, frozenset()) | stems
        return found

    def handing(self, stems: frozenset[str]) -> set[int]:
        """Nodes that hand main_grad on or give a call one of the weights ``stems``."""
        found = set(self.touching)
        found.update(i for i, handed in self.weights_handed.items() if handed & stems)
        return found

    @cached_property
    def skipping_tests(self) -> frozenset[int]:
        """Branch nodes whose test skips a write for nothing to write or already written:
        a test of ``grad_added_to_main_grad`` or an ``is None`` / ``is not None``."""
        found: set[int] = set()
        for node in self.graph.nodes:
            if node.kind in ("if", "while") and node.test is not None:
                for sub in patterns.walk(node.test):
                    if patterns.spells(sub, patterns.GRAD_ADDED) or _none_test(sub):
                        found.add(node.index)
                        break
        return frozenset(found)

    @cached_property
    def mark_nodes(self) -> frozenset[int]:
        """Nodes that mark grad_added_to_main_grad (any weight) or call the module's
        bookkeeping helpers."""
        helpers = self.unit.context.bookkeeping_helpers
        found: set[int] = set()
        for root, node in self.unit.expression_roots():
            if wgrad.marked_subject(root) is not None or wgrad.marks_grad_added(root):
                found.add(node.index)
                continue
            for sub in patterns.walk(root):
                name = patterns.callee_name(sub)
                if name is not None and (name in helpers or "dummy" in name):
                    found.add(node.index)
                    break
        return frozenset(found)


def through(graph, start: Node, goal: Node, blocked: frozenset[int]) -> bool:
    """A path from ``start`` (after it) to ``goal`` passes no node of ``blocked``."""
    seen = {start.index}
    stack = [start]
    while stack:
        node = stack.pop()
        for succ, _ in node.succ:
            if succ.index == goal.index:
                return True
            if succ.index in seen or succ.index in blocked:
                continue
            seen.add(succ.index)
            stack.append(succ)
    return False


def entry_to_exit_through(graph, middle: Node, blocked: frozenset[int]) -> bool:
    """A path from the function's entry through ``middle`` to its normal exit passes no node
    of ``blocked`` (``middle`` itself excluded)."""
    if middle.index in blocked:
        return False
    if middle is not graph.entry and not through(graph, graph.entry, middle, blocked):
        return False
    return through(graph, middle, graph.exit, blocked)


def _binds_locals_only(root: cst.CSTNode) -> bool:
    return isinstance(root, cst.Assign) and all(
        isinstance(t.target, cst.Name) for t in root.targets
    )


def _is_plain_holding(value: cst.CSTNode) -> bool:
    """A value that only names storage: a name, attribute, subscript, dict or list display,
    or a view of one (``w.main_grad.view(-1)``)."""
    if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Dict, cst.List, cst.Tuple)):
        return True
    if patterns.main_grad_owner(value) is not None:
        return True  # ``getattr(w, "main_grad")``
    if patterns.MAIN_GRAD in (patterns.callee_name(value) or ""):
        return True  # a fetch of it: ``main_grad = ctx.main_grad_func()``
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        return value.func.attr.value in patterns.VIEW_METHODS and _is_plain_holding(
            value.func.value
        )
    return False


def _none_test(expr: cst.CSTNode) -> bool:
    return type(expr) is cst.Comparison and any(
        isinstance(c.operator, (cst.Is, cst.IsNot))
        and isinstance(c.comparator, cst.Name)
        and c.comparator.value == "None"
        for c in expr.comparisons
    )


def _is_ctx(expr: cst.CSTNode) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "ctx"
