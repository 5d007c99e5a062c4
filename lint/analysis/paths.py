"""Questions about paths through a ``cfg.Graph``: does every path to a node pass another
(dominance), and which ways out of the function can be reached from a node without passing
some nodes."""

from __future__ import annotations

from collections.abc import Iterable

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
        everything = (1 << len(nodes)) - 1
        dom = [everything] * len(nodes)
        entry = graph.entry.index
        dom[entry] = 1 << entry
        order = _reverse_postorder(graph)
        changed = True
        while changed:
            changed = False
            for i in order:
                if i == entry:
                    continue
                meet = everything
                for p in preds[i]:
                    meet &= dom[p]
                value = meet | (1 << i)
                if value != dom[i]:
                    dom[i] = value
                    changed = True
        self._dom = dom

    def dominates(self, a: Node, b: Node) -> bool:
        return bool((self._dom[b.index] >> a.index) & 1)


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
    leaving: dict[int, Node] = {}
    seen = {start.index}
    stack = [start]
    while stack:
        node = stack.pop()
        for succ, _ in node.succ:
            if succ.index == exit_index:
                leaving[node.index] = node
            elif succ.index not in seen and succ.index not in stop:
                seen.add(succ.index)
                stack.append(succ)
    return [leaving[i] for i in sorted(leaving)]
