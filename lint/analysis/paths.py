"""Questions about paths through a ``cfg.Graph``: does every path to a node pass another
(dominance), and which ways out of the function can be reached from a node without passing
some nodes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

from .cfg import Graph, Node


class Dominators:
    """``a`` dominates ``b`` when every path from the entry to ``b`` passes ``a``.
    Unreachable nodes are dominated by everything (no path reaches them)."""

    def __init__(self, graph: Graph) -> None:
        nodes = graph.nodes
        preds: list[list[int]] = [[] for _ in nodes]
        for node in nodes:
            for succ, _ in node.succ:
                preds[succ.index].append(node.index)
        dom = dominator_sets(len(nodes), graph.entry.index, _reverse_postorder(graph), preds)
        self._dom = dom

    def dominates(self, a: Node, b: Node) -> bool:
        return bool((self._dom[b.index] >> a.index) & 1)


def dominator_sets(
    count: int, root: int, order: Sequence[int], incoming: Sequence[Sequence[int]]
) -> list[int]:
    """For each node, the bitset of the nodes that lie on every path from ``root`` to it,
    following the edges ``incoming[i]`` (node indices) into node ``i``. ``order`` lists the
    nodes to compute; nodes near ``root`` first only make it converge in fewer rounds."""
    everything = (1 << count) - 1
    dom = [everything] * count
    dom[root] = 1 << root
    changed = True
    while changed:
        changed = False
        for i in order:
            if i == root:
                continue
            meet = everything
            for p in incoming[i]:
                meet &= dom[p]
            value = meet | (1 << i)
            if value != dom[i]:
                dom[i] = value
                changed = True
    return dom


def _reverse_postorder(graph: Graph) -> list[int]:
    seen: set[int] = set()
    order: list[int] = []
    stack: list[tuple[Node, int]] = [(graph.entry, 0)]
    seen.add(graph.entry.index)
    while stack:
        node, i = stack.pop()
        if i < len(node.succ):
            stack.append((node, i + 1))
            succ = node.succ[i][0]
            if succ.index not in seen:
                seen.add(succ.index)
                stack.append((succ, 0))
        else:
            order.append(node.index)
    order.reverse()
    return order


def exits_avoiding(graph: Graph, start: Node, blocked: Iterable[Node]) -> list[Node]:
    """The nodes that leave the function normally (a ``return``, or the last statement of a
    path that falls off the end) and can be reached from ``start`` without passing a node of
    ``blocked``, in graph order. ``start`` itself counts when it leaves."""
    stop = {node.index for node in blocked}
    if start.index in stop:
        return []
    exit_index = graph.exit.index
    # A ``return`` inside a ``try`` leaves through a copy of its ``finally`` (cfg.py): the
    # ``return`` is the statement that leaves, not the finally's last statement.
    copied = {n.index for nodes in graph.copies.values() for n in nodes}
    leaving: dict[int, Node] = {}
    seen = {start.index}
    stack = [start]
    deferred: list[Node] = []
    while stack:
        node = stack.pop()
        if type(node.owner) is cst.Return and all(s.index != exit_index for s, _ in node.succ):
            deferred.append(node)
        for succ, _ in node.succ:
            if succ.index == exit_index:
                if node.index not in copied or type(node.owner) is cst.Return:
                    leaving[node.index] = node
            elif succ.index not in seen and succ.index not in stop:
                seen.add(succ.index)
                stack.append(succ)
    for node in deferred:
        if reaches(node, (exit_index,), stop):
            leaving[node.index] = node
    return [leaving[i] for i in sorted(leaving)]


def reaches(start: Node, targets: Iterable[int], blocked: Iterable[int] = ()) -> bool:
    """A path of one or more steps leads from ``start`` to a node whose index is in
    ``targets`` (``start`` itself counts only when a loop comes back to it), going on from no
    node whose index is in ``blocked`` (a target is reached even when it is blocked)."""
    goal = set(targets)
    seen = set(blocked)
    stack = [succ for succ, _ in start.succ]
    while stack:
        node = stack.pop()
        if node.index in goal:
            return True
        if node.index not in seen:
            seen.add(node.index)
            stack.extend(succ for succ, _ in node.succ)
    return False


def reachable_avoiding(graph: Graph, target: Node, blocked: Iterable[int]) -> bool:
    """Some path from the entry reaches ``target`` passing no node whose index is in
    ``blocked``."""
    stop = set(blocked)
    seen = {graph.entry.index}
    stack = [graph.entry]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        for succ, _ in node.succ:
            if succ.index not in seen and succ.index not in stop:
                seen.add(succ.index)
                stack.append(succ)
    return False
