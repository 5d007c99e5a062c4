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

from . import (
    consistent_paths,
    deliveries,
    overwrite_erasures,
    patterns,
    returned_weight_gradients,
    wgrad,
    writing_loops,
)
from .cfg import FALSE, TRUE
from .decided_tests import plain_test

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
    # NO_WRITE: the first statement of an explicit arm (``elif ...: pass``) that a sibling
    # arm's write is skipped by on the way to the mark, where there is one
    arm: cst.CSTNode | None = None


def missing_write(unit: Unit, facts: Deliveries, gradients, mark: Mark) -> MissingWrite | None:
    """The write ``mark`` claims and no path to it made, if any (``gradients``: the
    function's dropped_gradients.Gradients, computed once for all its marks)."""
    writes = facts.handing(frozenset({wgrad.stem(mark.subject)} - {None}))
    # A mark in a ``finally`` also runs on the way out of a ``return``: each of its nodes
    # is a way to reach it (cfg.py).
    mark_nodes = unit.graph.nodes_for(mark.stmt)
    writes.difference_update(node.index for node in mark_nodes)
    # Putting the buffer back on the weight, or a product the weight is an operand of (the
    # dgrad ``dy.matmul(weight)``), writes no gradient into main_grad.
    nodes = unit.graph.nodes
    # (a kernel returning the weight gradient writes nothing only beside a mark written out:
    # a marking helper handed the fusion switch may mark only where the kernel fused)
    direct = wgrad.marked_subject(mark.stmt) is not None
    handed = bool(writes)
    writes.difference_update(
        i for i in list(writes) if _writes_nothing(nodes[i].owner, returns_too=direct)
    )
    # Every hand-off of the weight was shown to write nothing (a dgrad product, a kernel
    # returning the weight's gradient) and a return after the mark hands a product back:
    # no path wrote main_grad, and the gradient the mark tells the hook to ignore is the
    # real one (review 26: blind corpus 23's MindSpeed kernel written with no fused branch).
    if (
        handed
        and not writes
        and direct
        and any(_returns_product_after(unit, node) for node in mark_nodes)
    ):
        return MissingWrite(NO_WRITE)
    if writes:
        # A captured graph's replay runs whatever wrote main_grad when it was captured.
        writes |= _replays(unit)
    if writes:
        # A write skipped because there is nothing to write or it was already written
        # (``if wgrad is not None and not grad_added: main_grad.add_(wgrad)``) is no
        # missing write: paths through such tests are not followed.
        # A loop writing on every iteration writes on the way through it (a run that
        # leaves it before the first had nothing to write: writing_loops.py).
        loops = writing_loops.writing_loops(unit, writes)
        # Likewise a test erasing main_grad only to overwrite it: in accumulate mode a zero
        # gradient adds nothing (overwrite_erasures.py).
        loops |= overwrite_erasures.erasure_tests(unit, writes)
        blocked = frozenset(writes | facts.skipping_tests | loops)
        for node in mark_nodes:
            if _only_loops_and_guards(
                unit, node, writes, shared=False
            ) and deliveries.entry_to_exit_through(unit.graph, node, blocked):
                return MissingWrite(NO_WRITE)
        # Under a test guarding the mark and every write alike (``if ctx.fuse:``), a path
        # that skips the writes by falling through an ``if`` may be one whose write was
        # deferred (Megatron's ``if wgrad_compute:``) or a loop that ran no times: only an
        # arm written out and left without the write is reported, there.
        for node in mark_nodes:
            if not _only_loops_and_guards(unit, node, writes, shared=True):
                continue
            around = frozenset(writes | _skipping(unit, facts, writes, node) | loops)
            if deliveries.entry_to_exit_through(unit.graph, node, around):
                arm = _empty_arm(unit, writes, node, around, wgrad.stem(mark.subject))
                if arm is not None:
                    return MissingWrite(NO_WRITE, arm=arm)
        # Every write chooses main_grad as its output on one side of one test
        # (``out=w.main_grad if ctx.fuse else None``) and a run that takes the test the
        # other way (``if not ctx.fuse: w.grad = wgrad``) goes on to the mark: that run
        # marks a main_grad nothing wrote.
        if any(
            _other_side_reaches(unit, writes, node, wgrad.stem(mark.subject)) for node in mark_nodes
        ):
            return MissingWrite(NO_WRITE)
    dropped = gradients.dropped_before(mark, frozenset(writes))
    if dropped is not None:
        return MissingWrite(DROPPED, gradient=dropped)
    gemm = _gemm_without_main_grad(unit, writes)
    if gemm is not None:
        return MissingWrite(NEVER_HANDED, gemm=gemm)
    return None


def _other_side_reaches(unit: Unit, writes: set[int], mark, word: str | None) -> bool:
    """Every write's output is ``X.main_grad if T else None`` (or the other way round) for
    one test T, and a run through an ``if`` on T, on the side where that output is None,
    reaches the mark (taking repeated tests the same way)."""
    nodes = unit.graph.nodes
    # the hand-offs that write this weight's main_grad (not its `.grad`, a dummy, a return)
    choices = {_output_choice(unit, nodes[i], word) for i in writes} - {NOT_MAIN_GRAD}
    if len(choices) != 1 or None in choices:
        return False
    ((test, wanted),) = choices
    for branch in nodes:
        if branch.kind != "if" or branch.test is None:
            continue
        base, negated = plain_test(branch.test)
        if base != test:
            continue
        for succ, label in branch.succ:
            if label in (TRUE, FALSE) and ((label == TRUE) != negated) != wanted:
                empty = frozenset()
                if consistent_paths.passes_in_order(unit.graph, (succ, mark), (empty, empty)):
                    return True
    return False


NOT_MAIN_GRAD = ("", False)  # a hand-off that names no main_grad of the weight


def _names_main_grad(stmt, word: str | None) -> bool:
    return any(
        (owner := patterns.main_grad_owner(n)) is not None and wgrad.stem(owner) == word
        for n in patterns.walk(stmt)
    )


def _output_choice(unit: Unit, node, word: str | None) -> tuple[str, bool] | None:
    """(T, truth) for a hand-off whose call's ``out=`` (also through a ``**`` dict) is
    ``X.main_grad if T else None`` (truth True) or ``None if T else X.main_grad`` (False),
    X the weight ``word`` names; NOT_MAIN_GRAD for one naming no main_grad of X; None for a
    write of it on every run."""
    stmt = node.owner
    for call in patterns.walk(stmt):
        if type(call) is not cst.Call:
            continue
        choice = wgrad.keyword_value(unit, call, node, "out")
        if type(choice) is not cst.IfExp:
            continue
        arms = (choice.body, choice.orelse)
        owners = [patterns.main_grad_owner(a) for a in arms]
        mains = [o is not None and wgrad.stem(o) == word for o in owners]
        if mains.count(True) != 1 or not patterns.is_none_like(arms[mains.index(False)]):
            return None
        base, negated = plain_test(choice.test)
        if base is None:
            return None
        return base, mains[0] != negated
    return None if _names_main_grad(stmt, word) else NOT_MAIN_GRAD


def _empty_arm(unit: Unit, writes: set[int], mark, blocked: frozenset[int], word: str | None):
    """The first statement of an ``elif`` arm of an ``if`` whose other side holds the
    writes, through which a path reaches the mark writing nothing (``elif main_grad.dtype
    in (fp16, bf16): pass``): where the write was left out. An ``else: pass`` may be the
    case with nothing to write (an expert given no tokens) and is left alone."""
    graph = unit.graph
    nodes = graph.nodes
    for branch in nodes:
        if branch.kind != "if" or branch.index in blocked:
            continue
        labels = set()
        for index in writes:
            labels |= _sides(unit, branch, nodes[index].index)
        if len(labels) != 1 or not deliveries.through(graph, graph.entry, branch, blocked):
            continue
        for succ, label in branch.succ:
            arm = succ if label not in labels else None
            elif_arm = False
            while arm is not None and arm.kind == "if" and _inside(arm, branch.owner):
                elif_arm = True
                # an ``elif`` chain: the arm of it that goes on to the mark
                arm = next(
                    (
                        s
                        for s, _ in arm.succ
                        if s.index not in blocked and _reaches(graph, s, mark, blocked)
                    ),
                    None,
                )
            if (
                arm is not None
                and elif_arm
                and arm.index not in blocked
                and _inside(arm, branch.owner)
                and _does_nothing(unit, arm, word)
                # a run can take it: ``else: <no write>`` then ``if fuse and ...: <mark>``
                # asks one test twice
                and consistent_paths.passes_in_order(
                    graph, (graph.entry, arm, mark, graph.exit), (blocked, blocked, blocked)
                )
            ):
                return arm.owner
    return None


# Calls an arm that left the write out may still make: it says something, nothing more.
SAYING = frozenset({"warn", "warning", "info", "debug", "print", "log", "warn_once"})


def _does_nothing(unit: Unit, arm, word: str | None) -> bool:
    """The arm's block (an ``elif``'s body) neither names the weight or main_grad outside
    what it prints (``w.main_grad[:] = g`` is a write the hand-off facts do not list), nor
    raises or asserts, nor calls anything but a warning or a log line (a helper of another
    file may write, one of this file may never return): only such an arm left the write
    out."""
    statement, side = arm.enclosing_ifs[0]
    block = statement.body if side == "body" else statement.orelse
    said: set[int] = set()
    for node in patterns.walk(block):
        kind = type(node)
        if kind in (cst.Raise, cst.Assert):
            return False
        if kind is cst.Call:
            if patterns.callee_name(node) not in SAYING:
                return False
            said.update(id(n) for n in patterns.walk(node))
    for node in patterns.walk(block):
        if id(node) in said:
            continue
        if type(node) is cst.Name and node.value == word:
            return False
        if type(node) is cst.Attribute and node.attr.value == patterns.MAIN_GRAD:
            return False
    return True


def _inside(node, statement) -> bool:
    return any(enclosing is statement for enclosing, _ in node.enclosing_ifs)


def _reaches(graph, start, goal, blocked: frozenset[int]) -> bool:
    return start is goal or deliveries.through(graph, start, goal, blocked)


def _skipping(unit: Unit, facts: Deliveries, writes: set[int], mark) -> set[int]:
    """The tests that skip a write for nothing to write or already written (deliveries'
    ``skipping_tests``), but for those the mark at ``mark`` sits under that decide no
    write: ``if hasattr(w, "grad_added_to_main_grad"):`` around the mark alone skips
    nothing."""
    nodes = unit.graph.nodes
    around = {branch.index for branch in unit.control.ancestors(mark)}
    return {
        test
        for test in facts.skipping_tests
        if test not in around or any(_sides(unit, nodes[test], nodes[w].index) for w in writes)
    }


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


PRODUCTS = frozenset({"matmul", "mm", "bmm"})


def _writes_nothing(root, returns_too: bool = False) -> bool:
    """A put-back, or ``g = a.matmul(w)`` / ``torch.mm(a, w)`` / ``a @ w`` with no ``out=``:
    a statement that hands main_grad (or the weight) on and can write no gradient into it."""
    if _puts_back(root) or _reattaches(root):
        return True
    value = getattr(root, "value", None)
    if not isinstance(root, (cst.Assign, cst.Expr)) or value is None:
        return False
    if type(value) is cst.BinaryOperation and type(value.operator) is cst.MatrixMultiply:
        return True
    if returns_too and returned_weight_gradients.returns_weight_gradient(root):
        return True
    return (
        type(value) is cst.Call
        and patterns.callee_name(value) in PRODUCTS
        and not any(a.keyword is not None and a.keyword.value == "out" for a in value.args)
    )


def _reattaches(root) -> bool:
    """``w.main_grad = ctx.weight_main_grad``: the buffer kept on ``ctx`` by the forward put
    back on the restored weight (a name or attribute, no arithmetic)."""
    return (
        isinstance(root, cst.Assign)
        and all(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in root.targets)
        and type(root.value) in (cst.Name, cst.Attribute)
    )


def _puts_back(root) -> bool:
    """``p.main_grad = <p's main_grad, fetched>``: the buffer made reachable, no gradient
    written into it."""
    if type(root) is cst.Expr:  # ``setattr(p, "main_grad", p.get_main_grad())``
        found = patterns.attribute_set(root, patterns.MAIN_GRAD)
        return found is not None and patterns.is_main_grad_direct(found[1])
    return (
        isinstance(root, cst.Assign)
        and all(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in root.targets)
        and patterns.is_main_grad_direct(root.value)
    )


def _only_loops_and_guards(unit: Unit, node, writes: set[int], shared: bool) -> bool:
    """Every branch deciding whether the mark (at ``node``) runs is a loop, a statement of a
    ``try`` that may raise into a handler, a ``hasattr`` / grad_added test, or the test
    that decides every write the other way: no condition that may be correlated with the
    write's. With ``shared``, also a test that guards the mark and every write alike."""
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
        if not (
            (shared and _guards_all(unit, branch, node, writes))
            or _decides_against(unit, branch, node, writes)
        ):
            return False
    return True


def _guards_all(unit: Unit, branch, node, writes: set[int]) -> bool:
    """The mark at ``node`` and every write sit on the same side of ``branch``'s test (``if
    ctx.gradient_accumulation_fusion:`` around the fused write and its mark): the test
    decides whether the bookkeeping runs at all, not which of write and mark runs, so it
    can correlate the two with nothing; a path under it that skips every write (an arm
    of a dtype dispatch left empty) still reaches the mark."""
    mark_sides = _sides(unit, branch, node.index)
    if len(mark_sides) != 1:
        return False
    nodes = unit.graph.nodes
    return all(_sides(unit, branch, nodes[index].index) == mark_sides for index in writes)


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
    """A ``return`` reached from ``node`` hands back a product (``@``, a GEMM call), or a
    local named for the weight gradient that a product was unpacked into (``dx, dw, db =
    npu_gmm_backward(...)`` then ``return dx[0], dw[0]``)."""
    products = returned_weight_gradients.weight_gradients_from_products(unit.owner)
    seen = {node.index}
    stack = [node]
    while stack:
        current = stack.pop()
        owner = current.owner
        if (
            type(owner) is cst.Return
            and owner.value is not None
            and (
                wgrad.has_product(owner.value)
                or returned_weight_gradients.hands_back(owner.value, products)
            )
        ):
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
