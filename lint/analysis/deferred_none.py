"""Backwards that defer a weight's gradient and hand autograd None for it (issue #19, class 5).

A split backward (zero-bubble and nano pipelines) hands the weight itself to a store
(``WeightGradStore.put(x, dy, weight)``) whose later step accumulates the gradient into
``weight.main_grad``. Megatron's DDP learns that a weight's gradient is ready from the
grad-accumulation hook, which fires only when autograd receives a gradient for the weight:
code that follows the dummy-gradient convention (it names ``grad_added_to_main_grad``) must
hand back a dummy ``.grad`` on the deferred path too, not None.

This module finds, in each ``backward`` of an autograd Function whose ``forward`` takes the
weight, the statements ``G = None`` that reach a ``return`` placing ``G`` in the weight's
slot (its position among ``forward``'s parameters) on a path that starts at a call handing
the weight to an object, with no test of ``main_grad`` / ``grad_added_to_main_grad``
around the ``None`` and no flag set in the function. The weight is recognised by name:
``forward``'s parameter itself, or the ``ctx`` attribute ``forward`` stored it in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .cfg import Node
from .module import ModuleContext, Unit, suite_body
from .wgrad import names_weight

FLAG = "grad_added_to_main_grad"
# The delayed-wgrad protocol of TE fires the hooks itself in backward_dw: None is right there.
SKIPS_HOOKS = "skip_backward_post_hook"


@dataclass(frozen=True)
class DeferredNone:
    none: cst.CSTNode  # the ``G = None`` statement
    handoff: cst.Call  # the call that handed the weight on
    weight: str


def deferred_nones(context: ModuleContext) -> list[DeferredNone]:
    """Every ``None`` handed back for a weight whose gradient a call deferred."""
    source = context.source
    if FLAG not in source or SKIPS_HOOKS in source:
        return []
    units = {id(u.owner): u for u in context.units}
    found: list[DeferredNone] = []
    for forward, backward in _function_pairs(context.module):
        unit = units.get(id(backward))
        if unit is not None and not _sets_flag(backward):
            found.extend(_in_backward(unit, _weight_slots(forward, backward)))
    return found


def _function_pairs(module: cst.Module) -> Iterator[tuple[cst.FunctionDef, cst.FunctionDef]]:
    """(forward, backward) of every class that defines both, at any depth."""
    for node in patterns.walk(module):
        if isinstance(node, cst.ClassDef):
            methods = {
                s.name.value: s for s in suite_body(node.body) if isinstance(s, cst.FunctionDef)
            }
            if "forward" in methods and "backward" in methods:
                yield methods["forward"], methods["backward"]


def _weight_slots(forward: cst.FunctionDef, backward: cst.FunctionDef) -> dict[str, int]:
    """Names of the backward that hold a forward input, with that input's gradient slot."""
    params = [p.name.value for p in forward.params.params]
    while params and params[0] in ("cls", "self"):  # a classmethod forward(cls, ctx, ...)
        params = params[1:]
    params = params[1:]  # after ctx
    slots = {name: index for index, name in enumerate(params) if names_weight(name)}
    stored: dict[str, int] = {}  # ctx attribute -> slot of the input stored there
    for node in patterns.walk(forward.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name):
            for target in node.targets:
                attr = patterns.attribute_of(target.target, "ctx")
                if attr is not None and node.value.value in slots:
                    stored[attr] = slots[node.value.value]
    for node in patterns.walk(backward.body):
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target, attr = node.targets[0].target, patterns.attribute_of(node.value, "ctx")
            if isinstance(target, cst.Name) and attr in stored and names_weight(target.value):
                slots[target.value] = stored[attr]
    return slots


def _sets_flag(function: cst.FunctionDef) -> bool:
    return any(
        isinstance(node, cst.Assign) and any(patterns.is_attr(t.target, FLAG) for t in node.targets)
        for node in patterns.walk(function.body)
    )


def _in_backward(unit: Unit, slots: dict[str, int]) -> Iterator[DeferredNone]:
    handoffs = [
        (node, call, weight)
        for stmt, _ in unit.statements()
        if (call := _statement_call(stmt)) is not None
        for weight in _handed_weights(call, slots)
        if (node := unit.node_for(stmt)) is not None
    ]
    if not handoffs:
        return
    returns = [
        (node, stmt.value.elements)
        for stmt, _ in unit.statements()
        if isinstance(stmt, cst.Return) and isinstance(stmt.value, cst.Tuple)
        if (node := unit.node_for(stmt)) is not None
    ]
    seen: set[int] = set()
    for start, call, weight in handoffs:
        slot = slots[weight]
        after = _reachable(start)
        for node, elements in returns:
            if node.index not in after or slot >= len(elements):
                continue
            returned = elements[slot].value
            if not isinstance(returned, cst.Name):
                continue
            name = returned.value
            # A None bound after the hand-off, or bound before it and kept to the return.
            before = set(unit.reaching.reaching(name, start))
            clear = _reachable(start, name)
            for d in unit.reaching.reaching(name, node):
                on_path = d.node.index in after or (d in before and node.index in clear)
                if on_path and _is_unguarded_none(d.value, d.node) and id(d) not in seen:
                    seen.add(id(d))
                    yield DeferredNone(d.node.owner, call, weight)


def _statement_call(stmt: cst.CSTNode) -> cst.Call | None:
    """The call a statement makes for its effect alone, on an object (``store.put(...)``)."""
    if (
        isinstance(stmt, cst.Expr)
        and isinstance(stmt.value, cst.Call)
        and isinstance(stmt.value.func, cst.Attribute)
    ):
        return stmt.value
    return None


def _handed_weights(call: cst.Call, slots: dict[str, int]) -> Iterator[str]:
    """Weights given to ``call`` as arguments (directly or in a list / tuple), not as the
    object it is made on."""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    owner = receiver.value if isinstance(receiver, cst.Name) else None
    for arg in call.args:
        values = arg.value.elements if isinstance(arg.value, (cst.List, cst.Tuple)) else ()
        for value in [arg.value, *(e.value for e in values)]:
            if isinstance(value, cst.Name) and value.value in slots and value.value != owner:
                yield value.value


def _reachable(start: Node, kept: str | None = None) -> set[int]:
    """Nodes reachable from ``start``; with ``kept``, only along paths that do not rebind
    that name (a node rebinding it is reached but not passed)."""
    seen = {start.index}
    stack = [start]
    while stack:
        node = stack.pop()
        if node is not start and kept is not None and any(d.name == kept for d in node.defs):
            continue
        for succ, _ in node.succ:
            if succ.index not in seen:
                seen.add(succ.index)
                stack.append(succ)
    return seen


def _is_unguarded_none(value: cst.CSTNode | None, node: Node) -> bool:
    """``G = None`` outside any test that asks about main_grad or its flag."""
    if not (isinstance(value, cst.Name) and value.value == "None"):
        return False
    return not any(
        patterns.spells(part, word)
        for stmt, _ in node.enclosing_ifs
        for part in patterns.walk(stmt.test)
        for word in ("main_grad", FLAG)
    )
