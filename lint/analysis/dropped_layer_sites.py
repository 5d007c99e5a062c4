"""Where a layer that a class's ``backward_dw`` never reaches was dropped, when the code says
(GMLP014, issue #19 class 6): a method named for that layer that runs another layer's
``backward_dw`` (a copy-paste slip), or the one call running a layer built beside it in a
branch of ``__init__`` (the pair a path's ``backward_dw`` must run together). The rule
reports there instead of at the layer's build."""

from __future__ import annotations

import libcst as cst

from .class_model import walk_all

NAMED_FOR = "named for"
BESIDE = "beside"


def where_dropped(lineage, attr: str, layers) -> tuple[str, str, cst.Call] | None:
    """(kind, other layer, call) where the layer ``attr`` was dropped, in the class or a
    base of the file: a method named for ``attr`` (``_backward_out_proj``) that calls
    ``self.<other>.backward_dw()`` for another layer of the class (a copy-paste slip); or
    the one call reaching a layer built in the same block of ``__init__`` as ``attr``
    (``linear_q_down_proj`` beside ``linear_q_up_proj`` under ``else:``, only the second
    run: the call its sibling lost)."""
    siblings = _built_beside(lineage[0].node, attr, layers)
    beside = []
    for model in lineage:
        for item in model.node.body.body:
            if type(item) is not cst.FunctionDef or item.name.value == "__init__":
                continue
            for node in walk_all(item.body):
                other = _layer_dw_call(node, layers)
                if other is None or other == attr:
                    continue
                if _names_layer(item.name.value, attr, layers):
                    return NAMED_FOR, other, node
                if other in siblings:
                    beside.append((BESIDE, other, node))
    return beside[0] if len(beside) == 1 else None


def _names_layer(method: str, attr: str, layers) -> bool:
    """The method's name spells ``attr`` and no longer layer name containing it
    (``_backward_fc2_latent_proj`` is named for ``fc2_latent_proj``, not ``latent_proj``)."""
    if attr not in method:
        return False
    return not any(attr in other and other != attr and other in method for other in layers)


def _layer_dw_call(node, layers) -> str | None:
    """``X`` for ``self.X.backward_dw()`` with ``X`` a layer of the class."""
    if (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value == "backward_dw"
        and type(node.func.value) is cst.Attribute
        and type(node.func.value.value) is cst.Name
        and node.func.value.value.value == "self"
        and node.func.value.attr.value in layers
    ):
        return node.func.value.attr.value
    return None


def _built_beside(cls, attr: str, layers) -> set[str]:
    """The other layers ``__init__`` builds in the same block as ``attr``, a block of a
    branch (``if`` / ``else``): layers built together on one path, the pair a path's
    ``backward_dw`` must run together (its own top-level block says nothing so specific)."""
    for item in cls.body.body:
        if type(item) is cst.FunctionDef and item.name.value == "__init__":
            for node in walk_all(item.body):
                if type(node) is cst.IndentedBlock and node is not item.body:
                    built = set()
                    for statement in node.body:
                        if type(statement) is cst.SimpleStatementLine:
                            for small in statement.body:
                                if type(small) is cst.Assign:
                                    for target in small.targets:
                                        t = target.target
                                        if (
                                            type(t) is cst.Attribute
                                            and type(t.value) is cst.Name
                                            and t.value.value == "self"
                                        ):
                                            built.add(t.attr.value)
                    if attr in built:
                        return (built & set(layers)) - {attr}
    return set()


def method_of(call, lineage) -> str:
    for model in lineage:
        for item in model.node.body.body:
            if type(item) is cst.FunctionDef and any(n is call for n in walk_all(item.body)):
                return item.name.value
    return "backward_dw"
