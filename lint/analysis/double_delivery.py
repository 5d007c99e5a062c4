"""A weight gradient handed to a store and also returned (issue #19, class 3).

A split backward hands its weight-gradient work to a store (``WeightGradStore.put(...,
work)``, ``queue.append(lambda: ...)``) and returns ``None`` in the weight's slot: the work,
run now or later, delivers the gradient (into main_grad, or ``.grad`` outside autograd). A
path that then rebinds that slot to a computed product hands autograd a second copy of the
same gradient: it is accumulated twice, or queued once and returned once
(Megatron-DeepSpeed #415's merge left an ``if`` where an ``elif`` was meant). The fact is
per path: from the hand-off, a path reaches ``slot = None`` and goes on to ``slot =
<product>``, with ``slot`` one of the names the backward returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import deferral, patterns
from .cfg import Def, Graph, Node
from .module import ModuleContext, Unit


@dataclass(frozen=True)
class DoubleDelivery:
    call: cst.Call  # the hand-off
    slot: str  # the returned name set to None after it
    product_line: int  # where a path rebinds it to a computed gradient


def _reaches(start: Node, target: Node) -> bool:
    seen: set[int] = set()
    stack = [succ for succ, _ in start.succ]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        if node.index in seen:
            continue
        seen.add(node.index)
        stack.extend(succ for succ, _ in node.succ)
    return False


def _node_of(unit: Unit, call: cst.Call) -> Node | None:
    for root, node in unit.expression_roots():
        if any(sub is call for sub in patterns.walk(root)):
            return node
    return None


def _is_product(value: cst.CSTNode | None) -> bool:
    return isinstance(value, (cst.Call, cst.BinaryOperation)) and not patterns.is_none_like(value)


def _second_delivery(graph: Graph, start: Node, returned: frozenset[str]) -> Def | None:
    nones = [d for d in graph.defs if d.kind == "assign" and patterns.is_none_like(d.value)]
    for cleared in nones:
        if cleared.name not in returned or not _reaches(start, cleared.node):
            continue
        for product in graph.defs:
            if (
                product.name == cleared.name
                and product.kind == "assign"
                and _is_product(product.value)
                and _reaches(cleared.node, product.node)
            ):
                return product
    return None


def double_deliveries(context: ModuleContext) -> list[DoubleDelivery]:
    handoffs = context.shared(deferral.handoffs)
    if not handoffs:
        return []
    found = []
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef) or unit.owner.name.value != "backward":
            continue
        for handoff in handoffs:
            start = _node_of(unit, handoff.call)
            if start is None:
                continue
            product = _second_delivery(unit.graph, start, unit.returned_names)
            if product is not None and product.node.owner is not None:
                line = context.line_of(product.node.owner)
                found.append(DoubleDelivery(handoff.call, product.name, line))
    return found
