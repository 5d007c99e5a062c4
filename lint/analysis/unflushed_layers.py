"""Layers whose delayed wgrad a file switches on and a flush of their siblings leaves out
(GMLP059; issue #19, class 6).

Schedules that overlap communication with the weight gradients (DualPipeV's fine-grained
backward in FlagScale and Megatron-LM-FL) switch each layer's delay on by hand
(``experts_layer.linear_fc1.wgrad_store.enable_delay_wgrad_compute()``), run the
component's backward, then flush it (``experts_layer.linear_fc1.backward_dw()``). A layer
switched on and left out of its component's flush keeps its weight gradient in the store:
main_grad misses it for the step. Components are matched by the object the layers hang on:
the attribute path a local was bound from (``bwd_layer_graph.layer.mlp.experts``, its first
name dropped: ``layer.mlp.experts``), else the receiver as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .module import ModuleContext, Unit

ENABLE = "enable_delay_wgrad_compute"
FLUSH = "backward_dw"
STORE = "wgrad_store"


@dataclass(frozen=True)
class LeftOut:
    call: cst.Call  # the component's last flush call
    component: str  # as the message names it
    missing: tuple[str, ...]  # layers switched on and not flushed


def left_out(context: ModuleContext) -> list[LeftOut]:
    if ENABLE not in context.source or FLUSH not in context.source:
        return []
    enabled: dict[str, set[str]] = {}
    flushes: list[tuple[str, dict[str, cst.Call]]] = []
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        flushed: dict[str, dict[str, cst.Call]] = {}
        for component, layer, call, method in layer_calls(unit):
            if method == ENABLE:
                enabled.setdefault(component, set()).add(layer)
            else:
                flushed.setdefault(component, {})[layer] = call
        flushes.extend(flushed.items())
    found = []
    for component, calls in flushes:
        missing = enabled.get(component, set()) - set(calls)
        if missing and set(calls) & enabled.get(component, set()):
            last = max(calls.values(), key=context.line_of)
            found.append(LeftOut(last, component, tuple(sorted(missing))))
    return found


def layer_calls(unit: Unit) -> Iterator[tuple[str, str, cst.Call, str]]:
    """(component, layer, call, method) for ``C.layer.wgrad_store.enable_delay_wgrad_compute()``
    and ``C.layer.backward_dw()`` in the unit's own code."""
    if not unit.survey.calls & {ENABLE, FLUSH}:
        return
    bound = _bound_paths(unit)
    code = unit.context.code
    for root, _ in unit.statements():
        if isinstance(root, cst.BaseCompoundStatement):
            continue  # its header's calls are no layer calls; its body's are listed
        for sub in patterns.walk(root):
            if type(sub) is not cst.Call or type(sub.func) is not cst.Attribute:
                continue
            method, receiver = sub.func.attr.value, sub.func.value
            if method == ENABLE and patterns.is_attr(receiver, STORE):
                receiver = receiver.value
            elif method != FLUSH:
                continue
            if type(receiver) is not cst.Attribute:
                continue
            holder = receiver.value
            text = code(holder).strip()
            component = bound.get(text, text) if type(holder) is cst.Name else text
            yield component, receiver.attr.value, sub, method


def _bound_paths(unit: Unit) -> dict[str, str]:
    """Locals bound once to an attribute path, to that path without its first name."""
    found: dict[str, str] = {}
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Assign or len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0].target, stmt.value
        if type(target) is cst.Name and type(value) is cst.Attribute:
            text = unit.context.code(value).strip()
            found[target.value] = text.split(".", 1)[1] if "." in text else text
    return found
