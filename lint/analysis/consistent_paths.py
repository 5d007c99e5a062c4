"""Paths through a function's graph that take every ``if`` on a test already decided the way
it was decided (``decided_tests``' rule: tests that read the same value twice, until a name
of them is rebound).

Code that writes main_grad under ``if fuse:`` and computes a real weight gradient under a
later ``if not fuse:`` never does both on one run, though the graph has a path through
both; a question about what runs *together* has to follow only paths a run can take.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from .cfg import FALSE, TRUE, Graph, Node
from .decided_tests import Known, decide, plain_test, still_known


def passes_in_order(
    graph: Graph, waypoints: Sequence[Node], blocked: Sequence[frozenset[int]]
) -> bool:
    """Some run from the entry passes ``waypoints`` in order; after passing waypoint ``i``
    (and before the next) it enters no node of ``blocked[i]``."""
    goal = len(waypoints)
    start = (graph.entry.index, frozenset(), _passed(graph.entry, waypoints, 0))
    if start[2] == goal:
        return True
    by_index = graph.nodes
    seen = {start}
    stack = [start]
    while stack:
        index, facts, stage = stack.pop()
        node = by_index[index]
        decided = decide(node, facts)
        for succ, label in node.succ:
            if decided is not None and label in (TRUE, FALSE) and label != decided:
                continue  # a test decided earlier on this run goes the same way
            if stage > 0 and succ.index in blocked[stage - 1]:
                continue
            learned = _learn(node, label, facts)
            after = still_known(succ, learned)
            reached = _passed(succ, waypoints, stage)
            if reached == goal:
                return True
            state = (succ.index, after, reached)
            if state not in seen:
                seen.add(state)
                stack.append(state)
    return False


def _passed(node: Node, waypoints: Sequence[Node], stage: int) -> int:
    while stage < len(waypoints) and waypoints[stage] is node:
        stage += 1
    return stage


def _learn(node: Node, label: str | None, facts: Known) -> Known:
    """``facts`` and what leaving an ``if`` by ``label`` says of its test."""
    if node.kind != "if" or node.test is None or label not in (TRUE, FALSE):
        return facts
    value = label == TRUE
    learned = set()
    for test in _operands(node.test, value):
        code, negated = plain_test(test)
        if code is not None:
            learned.add((code, value != negated))
    return facts | learned if learned else facts


def _operands(test, value: bool):
    """The test, and the operands its outcome decides: each of an ``and`` that held, each of
    an ``or`` that did not."""
    yield test
    operator = cst.And if value else cst.Or
    if type(test) is cst.BooleanOperation and type(test.operator) is operator:
        yield from _operands(test.left, value)
        yield from _operands(test.right, value)
