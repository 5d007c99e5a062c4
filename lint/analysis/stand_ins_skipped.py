"""Layers whose wgrad hooks fire after backward_dw() ran on the fused stand-ins of other
layers only (issue #19, class 6, GMLP014).

A class with a fused path builds new ops that stand for its layers (Megatron-LM's
TEGroupedMLP: ``_make_fused_ops`` appends a GroupedLinear made from ``self.linear_fc1``, an
activation, one made from ``self.linear_fc2``, to a ``Sequential``). With delayed wgrad the
work sits in those ops, so the class's ``backward_dw`` calls the ops' ``backward_dw()`` (by
position: ``list(seq.children())[i]``) and then fires each original layer's wgrad hooks by
hand. A layer whose hooks fire when no op standing for it (nor the layer itself) computed
its wgrad on the way hands the engine a main_grad without this step's gradient.

Which op stands for which layer is read from the builder: the *i*-th ``X.append(op)`` (or
the *i*-th argument of ``Sequential(a, b, c)``) of a method of the class, ``op`` a call, or
a local bound to one, whose arguments read attributes of exactly one ``self.L``. A firing
is judged only where every ``backward_dw()`` before it is one we can place (a child by a
literal index of ``list(E.children())``, or ``self.L.backward_dw()``) and one of them ran
a stand-in: a loop, an unplaced call or an unknown container keeps it quiet.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from . import patterns
from .classes import BACKWARD_DW, ClassModel
from .hooks import fires_hooks
from .module import suite_body

CHILDREN = "children"
LISTINGS = ("list", "tuple")


def skipped(model: ClassModel) -> Iterator[tuple[str, cst.Call]]:
    """(layer attribute, firing) for each firing of ``self.L``'s wgrad hooks in the class's
    own ``backward_dw`` reached after stand-ins of other layers, never L's, computed."""
    method = model.methods.get(BACKWARD_DW)
    if method is None:
        return
    builds = [
        order for name, m in model.methods.items() if name != BACKWARD_DW for order in _orders(m)
    ]
    if len(builds) != 1:
        return  # no fused container, or several: which one is indexed is not known
    yield from _walk(suite_body(method.body), _State(), builds[0])


@dataclass
class _State:
    children: set[str] = field(default_factory=set)  # locals holding list(E.children())
    computed: set[str] = field(default_factory=set)  # layers whose wgrad was computed
    stand_ins: bool = False  # some stand-in's backward_dw() ran
    unknown: bool = False  # some backward_dw() ran that we cannot place

    def copy(self) -> _State:
        return _State(set(self.children), set(self.computed), self.stand_ins, self.unknown)

    def join(self, other: _State) -> None:
        """After a branch: what either side did may have happened (keeps findings sure)."""
        self.computed |= other.computed
        self.stand_ins |= other.stand_ins
        self.unknown |= other.unknown
        self.children |= other.children


def _walk(body, state: _State, order: list[str | None]) -> Iterator[tuple[str, cst.Call]]:
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                yield from _statement(small, state, order)
        elif isinstance(stmt, cst.If):
            arms = [stmt.body]
            orelse = stmt.orelse
            while orelse is not None:
                arms.append(orelse.body)
                orelse = orelse.orelse if isinstance(orelse, cst.If) else None
            after = state.copy()
            for arm in arms:
                inner = state.copy()
                yield from _walk(suite_body(arm), inner, order)
                after.join(inner)
            state.join(after)
        elif isinstance(stmt, (cst.With, cst.Try)):
            yield from _walk(suite_body(stmt.body), state, order)
        elif any(_backward_dw(n) for n in patterns.walk(stmt)):
            state.unknown = True  # a loop of backward_dw calls: which layers, not known


def _statement(small, state: _State, order) -> Iterator[tuple[str, cst.Call]]:
    if type(small) is cst.Assign and _lists_children(small.value):
        for target in small.targets:
            if type(target.target) is cst.Name:
                state.children.add(target.target.value)
    for node in patterns.walk(small):
        call = _backward_dw(node)
        if call is not None:
            _ran(call, state, order)
        elif type(node) is cst.Call and (layer := _fired_layer(node)) is not None:
            # Fired after stand-ins ran, every backward_dw placed, none of them L's.
            sure = state.stand_ins and not state.unknown
            if sure and layer not in state.computed and layer in order:
                yield layer, node


def _ran(call: cst.Call, state: _State, order) -> None:
    owner = call.func.value
    layer = _self_attr(owner)
    if layer is not None:
        state.computed.add(layer)
        return
    position = _child_position(owner, state, len(order))
    if position is None or order[position] is None:
        state.unknown = True
        return
    state.stand_ins = True
    state.computed.add(order[position])


def _child_position(owner, state: _State, size: int) -> int | None:
    if type(owner) is not cst.Subscript or type(owner.value) is not cst.Name:
        return None
    if owner.value.value not in state.children or len(owner.slice) != 1:
        return None
    index = _literal_int(owner.slice[0].slice)
    if index is None or not -size <= index < size:
        return None
    return index % size


def _literal_int(node) -> int | None:
    value = getattr(node, "value", None)
    if type(value) is cst.Integer:
        return value.evaluated_value
    if (
        type(value) is cst.UnaryOperation
        and type(value.operator) is cst.Minus
        and type(value.expression) is cst.Integer
    ):
        return -value.expression.evaluated_value
    return None


def _lists_children(value) -> bool:
    """``list(E.children())`` / ``tuple(...)``: the fused container's ops in order."""
    if patterns.callee_name(value) not in LISTINGS:
        return False
    args = patterns.positional_args(value)
    return len(args) == 1 and patterns.callee_name(args[0].value) == CHILDREN


def _backward_dw(node) -> cst.Call | None:
    if type(node) is cst.Call and patterns.is_attr(node.func, BACKWARD_DW) and not node.args:
        return node
    return None


def _fired_layer(call: cst.Call) -> str | None:
    """L in ``self.L.<method firing hooks>()``."""
    if type(call.func) is not cst.Attribute or not fires_hooks(call):
        return None
    return _self_attr(call.func.value)


def _self_attr(expr) -> str | None:
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
        return expr.attr.value
    return None


# -- the builder ------------------------------------------------------------------------
def _orders(method: cst.FunctionDef) -> Iterator[list[str | None]]:
    """For each container the method fills in order at its top level, the layer each
    position stands for (None: an op made from no single layer, such as an activation)."""
    body = suite_body(method.body)
    bound: dict[str, cst.CSTNode] = {}  # local -> the value last bound to it
    appended: dict[str, list[str | None]] = {}  # container local ("" returned) -> order
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if type(small) is cst.Assign:
                for target in small.targets:
                    if type(target.target) is cst.Name:
                        bound[target.target.value] = small.value
                        if type(small.value) is cst.Call and _holds_positions(small.value):
                            appended[target.target.value] = [
                                _stands_for(a.value, bound) for a in small.value.args
                            ]
            elif type(small) is cst.Return and type(small.value) is cst.Call:
                if _holds_positions(small.value):
                    appended[""] = [_stands_for(a.value, bound) for a in small.value.args]
            elif type(small) is cst.Expr and _is_append(small.value):
                receiver = small.value.func.value.value
                if receiver in bound:
                    value = small.value.args[0].value
                    appended.setdefault(receiver, []).append(_stands_for(value, bound))
    for order in appended.values():
        if any(order) and len(order) > 1:
            yield order


def _holds_positions(call: cst.Call) -> bool:
    """``Sequential(a, b, c)``: a container given ops bound to locals before, in order (a
    layer built from literal sizes, ``Linear(self.d, 4)``, is no container)."""
    args = call.args
    return len(args) > 1 and all(
        a.keyword is None and not a.star and type(a.value) is cst.Name for a in args
    )


def _is_append(value) -> bool:
    return (
        type(value) is cst.Call
        and patterns.is_attr(value.func, "append")
        and type(value.func.value) is cst.Name
        and len(value.args) == 1
    )


def _stands_for(value, bound) -> str | None:
    if type(value) is cst.Name:
        value = bound.get(value.value)
    if type(value) is not cst.Call:
        return None
    layers = {
        layer
        for node in patterns.walk(value)
        if type(node) is cst.Attribute and (layer := _self_attr(node.value)) is not None
    }
    return layers.pop() if len(layers) == 1 else None
