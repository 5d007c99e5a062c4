"""GMLP032's dropped gradient: the weight gradients a function computes with a GEMM or ``@``
into a fresh tensor and hands back, and whether one reaches a grad_added mark unused and
given to no main_grad (the gradient of that microbatch is then lost)."""

from __future__ import annotations

import libcst as cst

from . import consistent_paths, deliveries, holders, patterns, wgrad
from .deliveries import Deliveries
from .module import Unit
from .wgrad import Mark


class Gradients:
    """The weight gradients a function computes with a GEMM or ``@`` into a fresh tensor
    and hands back, and the nodes that read each (computed once for all its marks)."""

    def __init__(self, unit: Unit, facts: Deliveries) -> None:
        self.unit = unit
        returned = wgrad.handed_back(unit)
        self.defs = [
            d
            for d in unit.graph.defs
            if d.kind == "assign"
            and d.name in returned
            and d.node.index not in facts.touching
            and computes_gradient(d.value, unit.context.gradient_helpers)
            and not _multiplies_held(unit, d.value, d.node)
        ]
        self.uses = {d.index: self._uses(d) for d in self.defs}
        self.matches = any(n.kind == "case" for n in unit.graph.nodes)

    def _uses(self, d) -> frozenset[int]:
        return frozenset(
            n.index for n in self.unit.graph.nodes if n is not d.node and reads(self.unit, n, d)
        )

    def dropped_before(self, mark: Mark, writes: frozenset[int]):
        """A gradient that reaches the mark unused on some path and is given to main_grad
        by no node (a dgrad or scratch result is not handed back, so never judged)."""
        graph = self.unit.graph
        for d in self.defs:
            if d.node.index in writes:
                continue
            uses = self.uses[d.index]
            if any(i in writes for i in uses):
                continue
            blocked = frozenset(uses | writes)
            if d in self.unit.reaching.reaching(d.name, mark.node):
                if deliveries.through(graph, d.node, mark.node, blocked):
                    return d
            # Overwritten unused on the way (Habana's dummy block moved below the
            # non-fused GEMM: ``grad_weight = torch.empty(...)`` replaces the gradient the
            # run just computed, then the mark): a run that takes that way must be one
            # the tests allow (``else: gw = gemm`` then ``if fuse: gw = dummy`` is none).
            # consistent_paths does not relate a ``match`` to later tests: not judged there.
            elif not self.matches and consistent_paths.passes_in_order(
                graph, (d.node, mark.node), (blocked, frozenset())
            ):
                return d
        return None


def computes_gradient(value, helpers: frozenset[str]) -> bool:
    """A GEMM or ``@`` into a fresh tensor, or a call of a gradient helper of the run (one
    returning such a product and writing no main_grad: ``project.Helpers.gradient``). A
    product of the weight (``dx = general_gemm(weight_fp8, dy)[0]``) is the input
    gradient: it is handed back too, but it was never the weight's to lose."""
    if wgrad.multiplies_weight(value):
        return False
    if isinstance(value, cst.Subscript):
        value = value.value  # ``general_gemm(...)[0]``
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.MatrixMultiply):
        return True
    return isinstance(value, cst.Call) and (
        wgrad.looks_like_gemm(value) or patterns.callee_name(value) in helpers
    )


def _multiplies_held(unit: Unit, product, node) -> bool:
    """A product of a holder's tensor field (``grouped_mm(dy, slot.full)``: the weight the
    forward multiplied, kept beside the Parameter; analysis/holders.py) is the input
    gradient, as a product of a name spelled as the weight is."""
    if isinstance(product, cst.Subscript):
        product = product.value
    if isinstance(product, cst.BinaryOperation):
        operands = [product.left, product.right]
    elif isinstance(product, cst.Call):
        operands = [a.value for a in patterns.positional_args(product)]
    else:
        return False
    return any(holders.held_stand_in(unit, _root(o), node) for o in operands)


def _root(expr):
    """The tensor under ``.t()``, ``.transpose(...)``, ``.T`` and subscripts."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript) or (
            isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT", "H", "data")
        ):
            expr = expr.value
        else:
            return expr


def reads(unit: Unit, node, d) -> bool:
    """``node`` reads the value ``d`` bound."""
    owner = node.owner
    if owner is None or d not in unit.reaching.reaching(d.name, node):
        return False
    root = owner.test if isinstance(owner, (cst.If, cst.While)) else owner
    if isinstance(owner, cst.For):
        root = owner.iter
    if isinstance(owner, cst.BaseCompoundStatement) and root is owner:
        return False
    if isinstance(root, (cst.Assign, cst.AnnAssign)):
        root = root.value  # the targets are bound here, not read
        if root is None:
            return False
    return any(n.value == d.name for n in patterns.read_names(root))
