"""A weight gradient handed to a store and also returned (issue #19, class 3).

A split backward hands its weight-gradient work to a store (``WeightGradStore.put(...,
work)``, ``queue.append(lambda: ...)``) and returns ``None`` in the weight's slot: the work,
run now or later, delivers the gradient (into main_grad, or ``.grad`` outside autograd). A
path that then rebinds that slot to a computed product hands autograd a second copy of the
same gradient: it is accumulated twice, or queued once and returned once
(Megatron-DeepSpeed #415's merge left an ``if`` where an ``elif`` was meant). The fact is
per path: from the hand-off, a path reaches ``slot = None`` and goes on to ``slot =
<product>``, with ``slot`` one of the names the backward returns. ``slot = None`` must sit
beside the hand-off: in its block or a block around it, up to the innermost ``if`` branch
holding the hand-off (a ``dgamma = None`` later in the function clears another gradient:
Transformer Engine's LayerNormLinear queues its wgrad in an ``if`` and computes the norm's
gradient after it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from . import deferral, implied_tests, paths, patterns, wgrad
from .cfg import Def, Graph, Node
from .module import ModuleContext, Unit, suite_body


@dataclass(frozen=True)
class DoubleDelivery:
    call: cst.Call  # the hand-off
    slot: str  # the returned name set to None after it
    product_line: int  # where a path rebinds it to a computed gradient


def _node_of(unit: Unit, call: cst.Call) -> Node | None:
    for root, node in unit.expression_roots():
        if any(sub is call for sub in patterns.walk(root)):
            return node
    return None


def _branch_suites(stmt: cst.CSTNode) -> list[tuple[cst.BaseSuite, bool]]:
    """The suites of a compound statement, each with whether it is an ``if`` branch."""
    if isinstance(stmt, cst.If):
        arms: list[tuple[cst.BaseSuite, bool]] = [(stmt.body, True)]
        if isinstance(stmt.orelse, cst.Else):
            arms.append((stmt.orelse.body, True))
        elif isinstance(stmt.orelse, cst.If):
            arms.extend(_branch_suites(stmt.orelse))
        return arms
    suites = [getattr(stmt, "body", None)]
    suites += [handler.body for handler in getattr(stmt, "handlers", ())]
    suites += [case.body for case in getattr(stmt, "cases", ())]
    suites += [getattr(getattr(stmt, a, None), "body", None) for a in ("orelse", "finalbody")]
    return [(suite, False) for suite in suites if isinstance(suite, cst.BaseSuite)]


def _frames(body, call: cst.Call) -> list[tuple[Sequence[cst.CSTNode], bool]] | None:
    """The blocks around the statement holding ``call``, outermost first."""
    for stmt in body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(stmt, cst.SimpleStatementLine):
            if any(sub is call for sub in patterns.walk(stmt)):
                # an arm of ``compute() if mode else store.put(work)`` is a branch of its
                # own, with nothing beside it
                return [((), True)] if _in_conditional_arm(stmt, call) else []
            continue
        for suite, is_if in _branch_suites(stmt):
            inner = _frames(suite_body(suite), call)
            if inner is not None:
                return [(suite_body(suite), is_if), *inner]
    return None


def _in_conditional_arm(stmt: cst.CSTNode, call: cst.Call) -> bool:
    return any(
        type(sub) is cst.IfExp
        and any(node is call for arm in (sub.body, sub.orelse) for node in patterns.walk(arm))
        for sub in patterns.walk(stmt)
    )


def _beside(function: cst.FunctionDef, call: cst.Call) -> list[Sequence[cst.CSTNode]]:
    """The blocks where the hand-off's ``slot = None`` may sit (see the module's text)."""
    frames = [(suite_body(function.body), False), *(_frames(suite_body(function.body), call) or [])]
    blocks = []
    for block, is_if in reversed(frames):
        blocks.append(block)
        if is_if:
            break
    return blocks


def _in_blocks(owner: cst.CSTNode | None, blocks: list[Sequence[cst.CSTNode]]) -> bool:
    return any(
        isinstance(stmt, cst.SimpleStatementLine) and any(small is owner for small in stmt.body)
        for block in blocks
        for stmt in block
    )


def _is_product(value: cst.CSTNode | None) -> bool:
    """A computed gradient: a call or arithmetic, but not an allocation or a dummy (the
    placeholder a fused path hands autograd while the store writes main_grad: TE's
    LayerNormMLP of 2025 put the wgrad GEMM, set it to None, then made the dummy)."""
    if not isinstance(value, (cst.Call, cst.BinaryOperation)) or patterns.is_none_like(value):
        return False
    callee = patterns.callee_name(value) or ""
    return callee not in patterns.ALLOCATORS and "dummy" not in callee


def _second_delivery(
    graph: Graph, start: Node, returned: frozenset[str], blocks: list[Sequence[cst.CSTNode]]
) -> Def | None:
    nones = [
        d
        for d in graph.defs
        if d.kind == "assign"
        and patterns.is_none_like(d.value)
        and _in_blocks(d.node.owner, blocks)
    ]
    for cleared in nones:
        if cleared.name not in returned or not paths.reaches(start, [cleared.node.index]):
            continue
        for product in graph.defs:
            if (
                product.name == cleared.name
                and product.kind == "assign"
                and _is_product(product.value)
                and paths.reaches(cleared.node, [product.node.index])
            ):
                return product
    return None


def _backward_handoffs(context: ModuleContext) -> Iterator[tuple[Unit, deferral.Handoff, Node]]:
    """Each hand-off of the file with the ``backward`` holding it and its graph node."""
    handoffs = context.shared(deferral.handoffs)
    if not handoffs:
        return
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef) or unit.owner.name.value != "backward":
            continue
        for handoff in handoffs:
            start = _node_of(unit, handoff.call)
            if start is not None:
                yield unit, handoff, start


def double_deliveries(context: ModuleContext) -> list[DoubleDelivery]:
    found = []
    for unit, handoff, start in _backward_handoffs(context):
        blocks = _beside(unit.owner, handoff.call)
        product = _second_delivery(unit.graph, start, unit.returned_names, blocks)
        if product is not None and product.node.owner is not None:
            line = context.line_of(product.node.owner)
            found.append(DoubleDelivery(handoff.call, product.name, line))
    return found


@dataclass(frozen=True)
class ReturnedChoice:
    call: cst.Call  # the hand-off
    product: cst.BaseExpression  # the arm of the returned choice that computes the gradient
    test: cst.BaseExpression  # the choice's test


def returned_choices(context: ModuleContext) -> list[ReturnedChoice]:
    """A hand-off, then a ``return`` reached from it whose element chooses between ``None``
    and a computed product (``None if wgrad_now else x.t() @ dy``) on a test that the
    hand-off's own ``if``s decide for the product (``wgrad_now = accum and not use_zbv``
    after ``if use_zbv: WeightGradStore.put(...)``): the second delivery returned directly
    (ColossalAI's ``MatmulWithAsyncCommunication``, blind corpus 17)."""
    found = []
    for unit, handoff, start in _backward_handoffs(context):
        if not start.enclosing_ifs:
            continue
        for root, node in unit.expression_roots():
            if type(root) is not cst.Return or root.value is None:
                continue
            if not paths.reaches(start, [node.index]):
                continue
            for element in _displayed(root.value):
                choice = _product_choice(element)
                if choice is None:
                    continue
                product, taken = choice
                decided = implied_tests.decides(unit, start.enclosing_ifs, element.test)
                if decided is taken:
                    found.append(ReturnedChoice(handoff.call, product, element.test))
    return found


def _displayed(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The elements of a returned tuple or list (the expression itself otherwise)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [element.value for element in expr.elements]
    return [expr]


def _product_choice(element) -> tuple[cst.BaseExpression, bool] | None:
    """For ``None if t else product`` (or ``product if t else None``), the product a weight
    gradient: the product arm and the value of ``t`` that takes it."""
    if type(element) is not cst.IfExp:
        return None
    # a weight gradient: a product of no weight (``dy @ w`` is the input's, ``dy.sum(0)``
    # the bias's)
    if patterns.is_none_like(element.body) and wgrad.weight_gradient_product(element.orelse):
        return element.orelse, False
    if patterns.is_none_like(element.orelse) and wgrad.weight_gradient_product(element.body):
        return element.body, True
    return None
