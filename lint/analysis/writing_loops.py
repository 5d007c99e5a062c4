"""Loops whose every iteration writes main_grad (GMLP032's paths; blind corpus 26).

A ``for`` (or ``while``) loop over the experts or their pending gradients that adds each one
into main_grad (``for e, g in pending: w.main_grad[e].add_(g)``) and a mark after it
(``w.grad_added_to_main_grad = True``) is the ordinary grouped-weight shape. The
control-flow graph also has the run that leaves the loop before its first iteration, and that run
reaches the mark with nothing written; but a loop that runs no times had no gradient to
write, so the mark loses nothing there. Such a loop counts as a write on the way through it.

Only a write every iteration makes counts: one among the statements of the loop's own body
(not under an ``if``, ``try`` or nested loop), with no ``break``, ``continue``, ``return``
or ``yield`` anywhere in the body before it (a jump could leave an iteration before the
write), that is no erasure (``zero_()``), in a loop over no comprehension that filters. A
write under a condition inside the loop (``if tokens[e]: ...``) is no write of every
iteration, and the run skipping it is still followed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import overwrite_erasures, patterns

if TYPE_CHECKING:
    from .module import Unit

# Statements that may leave an iteration before the statements after them run.
_JUMPS = (cst.Break, cst.Continue, cst.Return, cst.Yield)


def writing_loops(unit: Unit, writes: set[int]) -> frozenset[int]:
    """The nodes of the ``for`` and ``while`` loops of ``unit`` whose every iteration passes
    one of the nodes ``writes``."""
    graph = unit.graph
    found: set[int] = set()
    for node in graph.nodes:
        owner = node.owner
        if node.kind == "for" and type(owner) is cst.For:
            if _filtered(owner.iter):
                continue  # ``for e in [e for e in experts if tokens[e]]``: the others skipped
        elif not (node.kind == "while" and type(owner) is cst.While):
            continue  # (``while e < n: ...; e += 1`` walks the experts as ``for`` does)
        if _every_iteration_writes(unit, owner.body, writes):
            found.add(node.index)
    return frozenset(found)


def _filtered(iterable: cst.CSTNode) -> bool:
    """The loop walks a comprehension that leaves items out (an ``if`` clause): the items
    it drops are written by no pass (review 29)."""
    return any(type(sub) is cst.CompIf for sub in patterns.walk(iterable))


def _every_iteration_writes(unit: Unit, body: cst.BaseSuite, writes: set[int]) -> bool:
    if type(body) is cst.SimpleStatementSuite:  # ``for g in gs: mg.add_(g)``
        return _holds_write(unit, body.body, writes)
    for stmt in body.body:
        if _is_write(unit, stmt, writes):
            return True
        if any(isinstance(sub, _JUMPS) for sub in patterns.walk(stmt)):
            return False
    return False


def _is_write(unit: Unit, stmt: cst.CSTNode, writes: set[int]) -> bool:
    """``stmt``, a statement of the loop's own body, is one of the write nodes: a simple
    statement line whose small statements hold one (``g = g.float(); mg.add_(g)``)."""
    if type(stmt) is cst.SimpleStatementLine:
        return _holds_write(unit, stmt.body, writes)
    if type(stmt) is cst.With:  # a block every iteration enters (a stream, a timer)
        return _every_iteration_writes(unit, stmt.body, writes)
    return False


def _holds_write(unit: Unit, smalls, writes: set[int]) -> bool:
    """One of the small statements is a write node, and no erasure (``mg.zero_()``: a loop
    that only clears buffers writes no gradient; review 29)."""
    for small in smalls:
        node = unit.graph.node_for(small)
        if node is not None and node.index in writes and not overwrite_erasures.erases(small):
            return True
    return False
