"""Weight layers a class keeps in ``self.x`` outside ``__init__`` (issue #19, class 6,
GMLP014): a fused implementation made on the first forward is a layer the class's
``backward_dw`` must reach as much as one built in ``__init__``."""

from __future__ import annotations

import libcst as cst

from . import patterns
from .class_model import ClassModel, is_self_attr


def late_layers(model: ClassModel) -> dict[str, cst.CSTNode]:
    """Attributes given a weight layer outside ``__init__`` (not already a layer of
    ``__init__``), each with the node a finding names: the assignment, or the first layer
    call of the method that built it. A fused implementation made on the first forward
    (``self._fused = (self._make_fused(),)``) is a weight layer the class's ``backward_dw``
    must reach as much as one made in ``__init__``. Computed on demand: only a class with
    a ``backward_dw`` to check needs it."""
    found: dict[str, cst.CSTNode] = {}
    builders = {
        name: first
        for name, method in model.methods.items()
        if name != "__init__"
        and (
            first := next(
                (n for n in patterns.walk(method.body) if _is_layer_node(n, model.is_layer)),
                None,
            )
        )
    }
    if not builders:
        return found
    for name, method in model.methods.items():
        if name == "__init__":
            continue
        for inner in patterns.walk(method.body):
            if not isinstance(inner, cst.Assign):
                continue
            attrs = [t.target.attr.value for t in inner.targets if is_self_attr(t.target)]
            if not attrs:
                continue
            where = _layer_source(inner.value, builders, inner, model.is_layer)
            for attr in attrs:
                if where is not None and attr not in model.layers:
                    found.setdefault(attr, where)
    return found


def _is_layer_node(node: cst.CSTNode, is_layer) -> bool:
    return type(node) is cst.Call and is_layer(node)


def _layer_source(value, builders, assignment, is_layer) -> cst.CSTNode | None:
    """Where the value's layer is built: the assignment for a layer call, the first layer
    call of a method of the class it calls (``self.m()``); None when it holds no layer."""
    for node in patterns.walk(value):
        if type(node) is not cst.Call:
            continue
        if is_layer(node):
            return assignment
        func = node.func
        if is_self_attr(func) and func.attr.value in builders:
            return builders[func.attr.value]
    return None
