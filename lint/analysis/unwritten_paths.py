"""A ``grad_added_to_main_grad = True`` mark whose weight's main_grad nothing wrote on the
way to it (issue #19, class 3; GMLP032). Three shapes, judged in this order, the first found
only: a path from entry to the mark through no write of that main_grad, in a function that
writes it on other paths, where only loops, exceptions, ``hasattr`` / grad_added tests or a
test putting every write on the other side decide whether the mark runs (a test that skips
a write with nothing to write is not followed); a weight gradient computed here that
reaches the mark unused and never goes into main_grad (dropped_gradients.py); a function
whose only hand-off of main_grad puts the buffer back on the weight while its GEMM writes
elsewhere. Found here; the rule's module (lint/rules/grad_added_without_write.py) words and
reports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import deliveries, patterns, wgrad

if TYPE_CHECKING:
    from .deliveries import Deliveries
    from .module import Unit
    from .wgrad import Mark

# What is missing (``MissingWrite.kind``), in the order the shapes are judged:
NO_WRITE = "no write"  # a path to the mark where nothing wrote main_grad
DROPPED = "dropped"  # a gradient computed here goes nowhere on the way to the mark
NEVER_HANDED = "never handed"  # main_grad handed to nothing: the GEMM writes elsewhere


@dataclass(frozen=True)
class MissingWrite:
    kind: str
    gradient: object = None  # DROPPED: dropped_gradients' binding of the lost gradient
    gemm: cst.Call | None = None  # NEVER_HANDED: the function's first GEMM


def missing_write(unit: Unit, facts: Deliveries, gradients, mark: Mark) -> MissingWrite | None:
    """The write ``mark`` claims and no path to it made, if any (``gradients``: the
    function's dropped_gradients.Gradients, computed once for all its marks)."""
    writes = facts.handing(frozenset({wgrad.stem(mark.subject)} - {None}))
    # A mark in a ``finally`` also runs on the way out of a ``return``: each of its nodes
    # is a way to reach it (cfg.py).
    mark_nodes = unit.graph.nodes_for(mark.stmt)
    writes.difference_update(node.index for node in mark_nodes)
    if writes:
        # A captured graph's replay runs whatever wrote main_grad when it was captured.
        writes |= _replays(unit)
    if writes and any(
        _only_loops_and_guards(unit, node, writes)
        # A write skipped because there is nothing to write or it was already written
        # (``if wgrad is not None and not grad_added: main_grad.add_(wgrad)``) is no
        # missing write: paths through such tests are not followed.
        and deliveries.entry_to_exit_through(
            unit.graph, node, frozenset(writes | facts.skipping_tests)
        )
        for node in mark_nodes
    ):
        return MissingWrite(NO_WRITE)
    dropped = gradients.dropped_before(mark, frozenset(writes))
    if dropped is not None:
        return MissingWrite(DROPPED, gradient=dropped)
    gemm = _gemm_without_main_grad(unit, writes)
    if gemm is not None:
        return MissingWrite(NEVER_HANDED, gemm=gemm)
    return None


def _replays(unit: Unit) -> set[int]:
    """Nodes that replay a captured graph (``graph.replay()``)."""
    found = set()
    for root, node in unit.expression_roots():
        if isinstance(root, cst.BaseCompoundStatement):
            continue
        for sub in patterns.walk(root):
            func = getattr(sub, "func", None)
            if (
                type(sub) is cst.Call
                and type(func) is cst.Attribute
                and func.attr.value == "replay"
            ):
                found.add(node.index)
                break
    return found


def _gemm_without_main_grad(unit: Unit, writes: set[int]):
    """The first GEMM of a function that works with main_grad (fetches it, puts it back on
    the weight, tests or reads it) yet hands it to nothing: every node handing main_grad
    on is a put-back (``p.main_grad = p.get_main_grad()``), which makes the buffer
    reachable but writes no gradient into it. The GEMM then wrote its result elsewhere
    (TE #2622's PR branch: the fetched buffers never went into the GEMM's outputs)."""
    if not unit.survey.spells_main_grad:
        return None
    nodes = unit.graph.nodes
    if any(not _puts_back(nodes[i].owner) for i in writes):
        return None  # main_grad is handed on somewhere: the first two shapes judge it
    for root, _ in unit.expression_roots():
        if not isinstance(root, cst.BaseCompoundStatement):
            for sub in patterns.walk(root):
                if type(sub) is cst.Call and wgrad.looks_like_gemm(sub):
                    return sub
    return None


def _puts_back(root) -> bool:
    """``p.main_grad = <p's main_grad, fetched>``: the buffer made reachable, no gradient
    written into it."""
    return (
        isinstance(root, cst.Assign)
        and all(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in root.targets)
        and patterns.is_main_grad_direct(root.value)
    )


def _only_loops_and_guards(unit: Unit, node, writes: set[int]) -> bool:
    """Every branch deciding whether the mark (at ``node``) runs is a loop, a statement of a
    ``try`` that may raise into a handler, a ``hasattr`` / grad_added test, or the test
    that decides every write the other way: no condition that may be correlated with the
    write's."""
    for branch in unit.control.ancestors(node):
        if branch.kind in ("for", "while"):
            continue
        if branch.test is None and any(label == "exc" for _, label in branch.succ):
            continue  # an exception is no test on a flag
        test = branch.test
        if test is None:
            return False
        text = unit.context.code(test)
        if "hasattr" in text or "grad_added" in text:
            continue
        if not _decides_against(unit, branch, node, writes):
            return False
    return True


def _decides_against(unit: Unit, branch, node, writes: set[int]) -> bool:
    """The mark at ``node`` runs on one side of ``branch``'s test and every write on the
    other, and the mark's side hands back a product it computed (``if fused: <write,
    mark, return dummy>`` then a mark and ``return dy.t() @ x``): one evaluation of one
    test, so no correlation can put a write on the mark's path, and the gradient goes to
    ``.grad``, which the mark tells Megatron's hook to ignore. A side that hands back a
    dummy may be one whose write happened elsewhere (a fused kernel), and is left alone."""
    mark_sides = _sides(unit, branch, node.index)
    if len(mark_sides) != 1 or not _returns_product_after(unit, node):
        return False
    nodes = unit.graph.nodes
    for index in writes:
        sides = _sides(unit, branch, nodes[index].index)
        if len(sides) != 1 or sides == mark_sides:
            return False
    return True


def _returns_product_after(unit: Unit, node) -> bool:
    """A ``return`` reached from ``node`` hands back a product (``@``, a GEMM call)."""
    seen = {node.index}
    stack = [node]
    while stack:
        current = stack.pop()
        owner = current.owner
        if type(owner) is cst.Return and owner.value is not None and wgrad.has_product(owner.value):
            return True
        for succ, _ in current.succ:
            if succ.index not in seen:
                seen.add(succ.index)
                stack.append(succ)
    return False


def _sides(unit: Unit, branch, index: int) -> set[str]:
    """The labels of ``branch``'s edges that the node at ``index`` is control dependent on."""
    parents = unit.control.parents
    found: set[str] = set()
    seen = {index}
    stack = [index]
    while stack:
        for parent, label in parents[stack.pop()]:
            if parent is branch:
                found.add(label)
            elif parent.index not in seen:
                seen.add(parent.index)
                stack.append(parent.index)
    return found
