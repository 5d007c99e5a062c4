"""A weight marked as written into main_grad on a path that then returns the weight gradient
it computes (issue #19, class 3: a flag with no write; GMLP032; blind corpus 26).

A helper that computes a weight gradient for a fused backward writes it into main_grad on
one path and, on its fallback path (no main_grad, fusion off, compiling), returns the
product for autograd to put into ``.grad``:

    if not ctx.fuse_grad_accum or main_grad is None:
        return gemm(dout.T, x, out_dtype=ctx.weight_dtype)

A mark on the way to that ``return`` (``weight.grad_added_to_main_grad = True``) tells
Megatron's hook that the gradient is in main_grad already: the hook skips ``.grad`` and the
gradient is lost. analysis/marked_real_returns.py sees the gradient handed to the helper;
this is the gradient computed in the ``return`` itself.

Seen: in a function not named ``backward`` (whose returns are the inputs' gradients beside
the weight's) that writes the marked weight's main_grad on some path (a statement making a
call: a GEMM, an in-place add; binding a local to main_grad writes nothing), a run from the
entry through a mark to a ``return`` whose whole value is a product (``@`` or a GEMM call)
whose first operand is transposed and none of whose operands is a weight (a weight
gradient, ``dout.T @ x``, not an input's ``dy @ w_t``), that passes no write of that
main_grad, no loop writing it on every pass, no erasure asked only in overwrite mode and no
test skipping a write for nothing to write (GMLP032's own paths), taking every test it asks
twice the same way (consistent_paths).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import consistent_paths, overwrite_erasures, patterns, wgrad, writing_loops

if TYPE_CHECKING:
    from .deliveries import Deliveries
    from .module import Unit


@dataclass(frozen=True)
class MarkedProduct:
    mark: wgrad.Mark
    returned: cst.Return


def marked_products(unit: Unit, facts: Deliveries, marks) -> list[MarkedProduct]:
    """Each of ``marks`` (the function's marks) from which such a run reaches a returned
    weight-gradient product, with the first such ``return``."""
    function = unit.owner
    if type(function) is not cst.FunctionDef or function.name.value == "backward":
        return []
    graph = unit.graph
    returns = [
        node
        for node in graph.nodes
        if type(node.owner) is cst.Return and _is_weight_gradient(node.owner.value)
    ]
    if not returns:
        return []
    found = []
    for mark in marks:
        writes = facts.handing(frozenset({wgrad.stem(mark.subject)} - {None}))
        writes -= {node.index for node in graph.nodes_for(mark.stmt)}
        # (binding a local to main_grad, ``mg = getattr(w, "main_grad", None)``, hands it on
        # and writes nothing: only a statement making a call may write)
        writes = {i for i in writes if _calls(graph.nodes[i].owner)}
        if not writes:
            continue  # the function writes no main_grad of it: the write may be the caller's
        # As on GMLP032's other paths, a loop writing on every pass, an erasure asked only in
        # overwrite mode and a test skipping a write for nothing to write are no missing
        # write (review 29); but the mark's own guard (``if main_grad is None: <mark,
        # return>``) is the way to it.
        around = {branch.index for branch in unit.control.ancestors(mark.node)}
        blocked = frozenset(
            writes
            | writing_loops.writing_loops(unit, writes)
            | overwrite_erasures.erasure_tests(unit, writes)
            | (facts.skipping_tests - around)
        )
        for node in returns:
            if consistent_paths.passes_in_order(
                graph, (graph.entry, mark.node, node), (blocked, blocked)
            ):
                found.append(MarkedProduct(mark, node.owner))
                break
    return found


# Calls that only look a buffer up.
_LOOKUPS = frozenset({"getattr", "hasattr", "get_main_grad"})


def _calls(statement: cst.CSTNode | None) -> bool:
    """The statement makes a call other than a look-up (``getattr``): it may write."""
    if statement is None or type(statement) in (cst.If, cst.While):
        return False
    return any(
        type(sub) is cst.Call and patterns.callee_name(sub) not in _LOOKUPS
        for sub in patterns.walk(statement)
    )


def _is_weight_gradient(value: cst.CSTNode | None) -> bool:
    """The returned value is itself a product whose first operand is transposed and none of
    whose operands is a weight or names main_grad (``gemm(dout.T, x)``, ``dy.t() @ x``)."""
    if value is None:
        return False
    is_matmul = type(value) is cst.BinaryOperation and type(value.operator) is cst.MatrixMultiply
    if not (is_matmul or (type(value) is cst.Call and wgrad.looks_like_gemm(value))):
        return False
    if wgrad.multiplies_weight(value):
        return False
    if any(patterns.spells(sub, patterns.MAIN_GRAD) for sub in patterns.walk(value)):
        return False
    # A weight gradient multiplies the transposed output gradient (``dout.T @ x``,
    # ``gemm(dy.t(), x)``); an input gradient multiplies the weight, whatever its name
    # (``grad_output @ w_t``: review 29).
    operands = (
        [value.left]
        if is_matmul
        else [a.value for a in value.args if a.keyword is None and not a.star][:1]
    )
    return bool(operands) and _transposed(operands[0])


TRANSPOSING = frozenset({"t", "transpose", "permute", "T", "mT"})


def _transposed(operand: cst.CSTNode) -> bool:
    """``x.T``, ``x.mT``, ``x.t()``, ``x.transpose(0, 1)``, ``x.permute(1, 0)``."""
    if type(operand) is cst.Attribute:
        return operand.attr.value in TRANSPOSING
    return (
        type(operand) is cst.Call
        and type(operand.func) is cst.Attribute
        and operand.func.attr.value in TRANSPOSING
    )
