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

from . import paths, patterns, unflushed_layers
from .cfg import Node
from .helper_facts import last_name
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
    helper: bool = False  # a flush helper called before the call running that backward


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
    found = _early_helper_flushes(context)
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


def _flushed_components(context: ModuleContext, name: str) -> set[str]:
    """What a call of ``name`` flushes, by the last names of the components: for a function
    of the file, those whose layers it calls ``backward_dw()`` on (``shared_experts`` for
    ``layer.mlp.shared_experts``); for any function named for the flush
    (``call_shared_experts_backward_dw``, defined in another file), the rest of its name."""
    found = set(context.shared(_helper_components).get(name, ()))
    if FLUSH in name:
        stem = name.replace(FLUSH, "").strip("_")
        for prefix in ("call_", "run_", "do_"):
            stem = stem.removeprefix(prefix)
        if len(stem) > 3:
            found.add(stem)
    return found


def _helper_components(context: ModuleContext) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            for component, _, _, method in unflushed_layers.layer_calls(unit):
                if method == FLUSH and component not in OWN:
                    found.setdefault(unit.name, set()).add(component.rsplit(".", 1)[-1])
    return found


def _early_helper_flushes(context: ModuleContext) -> list[EarlyFlush]:
    """A flush helper of the file called before the call that runs the same component's
    backward (``call_shared_experts_backward_dw(self)`` before
    ``run_graph_backward(self.shared_experts_graph, ...)``), the component matched by its
    last name appearing in the backward call's arguments."""
    found = []
    code = context.code
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        named = {c for c in unit.survey.calls if FLUSH in c and c != FLUSH} | (
            unit.survey.calls & set(context.shared(_helper_components))
        )
        helpers = {c: parts for c in named if (parts := _flushed_components(context, c))}
        if not helpers:
            continue
        flushes: list[tuple[cst.Call, set[str], Node]] = []
        backwards: list[tuple[cst.Call, set[str], Node]] = []
        for root, node in unit.expression_roots():
            for sub in patterns.walk(root):
                if type(sub) is not cst.Call or type(sub.func) is not cst.Name:
                    continue
                name = sub.func.value
                if name in helpers:
                    flushes.append((sub, helpers[name], node))
                elif BACKWARD in name and FLUSH not in name:
                    backwards.append((sub, _argument_components(sub), node))
        for call, components, node in flushes:
            later = [(c, n) for c, names, n in backwards if names & components]
            indices = {n.index for _, n in later}
            if not later or node.index in indices:
                continue
            if paths.reachable_avoiding(unit.graph, node, indices) and paths.reaches(node, indices):
                line = min(context.line_of(c) for c, _ in later)
                found.append(EarlyFlush(call, code(call.func), line, helper=True))
    return found


def _argument_components(call: cst.Call) -> set[str]:
    """The components a backward call's arguments name: the last name of each argument,
    without a ``_graph`` suffix (``self.shared_experts_graph`` -> ``shared_experts``)."""
    found = set()
    for arg in call.args:
        name = last_name(arg.value)
        if name:
            found.add(name.removesuffix("_graphs").removesuffix("_graph"))
    return found
