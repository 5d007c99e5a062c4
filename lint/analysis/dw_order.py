"""A layer's delayed weight gradient flushed before its backward (issue #19, class 6).

A split backward queues the weight-gradient work of a layer in that layer's ``backward``
and computes it in ``backward_dw``. A schedule that drives the pieces of one layer itself
(a 1F1B overlap plan, a fine-grained pipeline step) must call ``node.backward(grad)``
before ``node.backward_dw()``: called first, ``backward_dw`` pops an empty store or a
previous microbatch's closures, and this microbatch's work is queued after the flush
(HYGON-AI/Megatron-LM-das e4d821e4). The order is a per-path fact of one function: some
path reaches ``R.backward_dw()`` before any ``R.backward(...)`` of the same receiver and
then goes on to that ``R.backward(...)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import paths, patterns
from .cfg import Node
from .module import ModuleContext

FLUSH = "backward_dw"
BACKWARD = "backward"
# Receivers that name no one layer: the class's own (a method calling its own pieces is a
# layer's protocol, not a schedule) and ``super()``.
OWN = frozenset({"self", "super()", "cls"})


@dataclass(frozen=True)
class EarlyFlush:
    call: cst.Call  # ``R.backward_dw()``
    receiver: str  # ``R``, as written
    backward_line: int  # the ``R.backward(...)`` it precedes


def _calls(root: cst.CSTNode, method: str) -> Iterator[tuple[cst.Call, cst.CSTNode]]:
    for node in patterns.walk(root):
        if (  # exact types: isinstance on libcst's ABC node classes is slow
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value == method
        ):
            yield node, node.func.value


def _own_calls(body, method: str) -> Iterator[tuple[cst.Call, cst.CSTNode]]:
    for stmt in body:
        if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            yield from _calls(stmt, method)


def early_flushes(context: ModuleContext) -> list[EarlyFlush]:
    if FLUSH not in context.source:
        return []
    found = []
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        # A syntactic pass first: the graph is built only for functions that flush a
        # receiver they also call ``backward`` on.
        flushed = {context.code(receiver) for _, receiver in _own_calls(unit.body, FLUSH)} - OWN
        if not flushed or not flushed & {
            context.code(receiver) for _, receiver in _own_calls(unit.body, BACKWARD)
        }:
            continue
        flushes: list[tuple[cst.Call, str, Node]] = []
        backwards: dict[str, list[tuple[Node, cst.Call]]] = {}
        for root, node in unit.expression_roots():
            for call, receiver in _calls(root, FLUSH):
                flushes.append((call, context.code(receiver), node))
            for call, receiver in _calls(root, BACKWARD):
                backwards.setdefault(context.code(receiver), []).append((node, call))
        for call, receiver, node in flushes:
            later = backwards.get(receiver)
            if receiver in OWN or not later:
                continue
            indices = {n.index for n, _ in later}
            if node.index in indices:  # one statement holds both: order unknown
                continue
            if paths.reachable_avoiding(unit.graph, node, indices) and paths.reaches(node, indices):
                line = min(context.line_of(c) for _, c in later)
                found.append(EarlyFlush(call, receiver, line))
    return found
