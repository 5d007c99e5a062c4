"""A class's ``backward_dw`` that reaches a delayed layer's ``backward_dw`` only under a test
unrelated to the delay (issue #19, class 6): ``if self.cfg.recompute: return`` before
``self.linear_fc1.backward_dw()``, or ``if self.fp8: self.fc2.backward_dw()``.

The layer's backward stored its wgrad work whatever recompute, fusion or precision say; only
the delay decides whether there is work to compute. So a call of the layer's ``backward_dw``
that runs only while such a switch has some value leaves the layer's gradient uncomputed
whenever it has the other. The same judgement as GMLP038's for ``super().backward_dw()``
(``override_gates``), applied to the layers a class builds itself.

Left alone, since the work may exist only when the test holds or may be computed elsewhere:
a layer built under a condition in ``__init__`` (it may not exist), a test that reads a
parameter of ``backward_dw`` (the caller schedules the work: Megatron-LM's
``MoELayer.backward_dw(routed_experts=True, shared_experts=False)``), a layer that a method
``backward_dw`` calls also reaches, and a ``backward_dw`` that mentions the layer other than
by calling its ``backward_dw``.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .classes import BACKWARD_DW, ClassIndex, ClassModel
from .module import suite_body
from .override_gates import bindings_of, unrelated_gate


def gated_layers(
    index: ClassIndex, model: ClassModel, reached: set[str]
) -> Iterator[tuple[str, cst.If, bool]]:
    """Each layer of ``model`` whose every ``backward_dw`` call in the class's own
    ``backward_dw`` sits under an unrelated test: the attribute, the ``if`` and whether the
    call runs when its test is false."""
    method = model.methods.get(BACKWARD_DW)
    init = model.methods.get("__init__")
    if method is None or init is None:
        return
    params = {p.name.value for p in method.params.params} - {"self"}
    params |= {p.name.value for p in method.params.kwonly_params}
    bindings = bindings_of(list(model.methods.values()), method)
    for attr, assignment in model.layers.items():
        if attr not in reached or not _built_unconditionally(init, assignment):
            continue
        if not _only_called(method, attr) or _reached_by_helpers(index, model, method, attr):
            continue
        gate = unrelated_gate(method, lambda call, a=attr: _calls_layer(call, a), bindings)
        if gate is not None and not (_names(gate[0].test) & params):
            yield attr, gate[0], gate[1]


def _calls_layer(call: cst.Call, attr: str) -> bool:
    """``self.<attr>.backward_dw()``."""
    func = call.func
    return (
        type(func) is cst.Attribute
        and func.attr.value == BACKWARD_DW
        and patterns.attribute_of(func.value, "self") == attr
    )


def _only_called(method: cst.FunctionDef, attr: str) -> bool:
    """Every mention of ``self.<attr>`` in ``method`` is the receiver of a ``backward_dw``
    call (a layer handed to a helper or put in a list may be computed there)."""
    mentions = [n for n in patterns.walk(method.body) if patterns.attribute_of(n, "self") == attr]
    calls = [
        n.func.value
        for n in patterns.walk(method.body)
        if type(n) is cst.Call and _calls_layer(n, attr)
    ]
    return bool(calls) and len(calls) == len(mentions)


def _reached_by_helpers(index, model, method: cst.FunctionDef, attr: str) -> bool:
    """A method of the class that ``backward_dw`` calls through ``self.`` reaches the layer."""
    called = {
        patterns.attribute_of(n.func, "self")
        for n in patterns.walk(method.body)
        if type(n) is cst.Call
    }
    return any(
        attr in index.reached_attributes(model, name)
        for name in called
        if name is not None and name != attr and name in model.methods
    )


def _built_unconditionally(init: cst.FunctionDef, assignment: cst.CSTNode) -> bool:
    """The layer's assignment is a simple statement of ``__init__``'s own body (under no
    ``if``, loop or ``try``)."""
    return any(
        type(stmt) is cst.SimpleStatementLine and any(n is assignment for n in patterns.walk(stmt))
        for stmt in suite_body(init.body)
    )


def _names(test: cst.BaseExpression) -> set[str]:
    return {n.value for n in patterns.walk(test) if type(n) is cst.Name}


def anchor(gate: cst.If, when_false: bool) -> cst.CSTNode:
    """Where to point: the early ``return`` that skips the call (what to remove), else the
    test the call sits under."""
    body = suite_body(gate.body)
    if when_false and gate.orelse is None and body and type(body[-1]) is cst.SimpleStatementLine:
        last = body[-1].body[-1]
        if type(last) is cst.Return:
            return last
    return gate.test
