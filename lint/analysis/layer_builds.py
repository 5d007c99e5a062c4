"""Which ``self`` attributes a class's construction fills with weight layers, on libcst's
tree (issue #19, class 6), and which of them the class uses only through their parameters.

Besides ``self.fc1 = Linear(...)``, real classes fill containers one layer at a time
(Megatron-LM's ``SequentialMLP``: ``self.local_experts = ModuleList()`` then
``self.local_experts.append(expert)`` per loop turn), fill a ``ModuleDict`` by key
(``self.gates[name] = ...``) or register a module by name (``self.add_module("adapter",
...)``, ``setattr(self, "adapter", ...)``). Each is a layer the class's ``backward_dw``
must reach. ``lint/fact_layers.py`` reads classes of other files the same way with CPython's
``ast``; keep the two in step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst

from . import patterns

FILLING_METHODS = frozenset({"append", "extend", "insert"})
NAMING_METHODS = frozenset({"add_module", "register_module"})
# Attributes of a layer that are its parameters: using only these never runs its forward.
PARAMETER_ATTRS = frozenset({"weight", "bias"})


def filled_layers(
    builders: Iterable[cst.FunctionDef], is_layer: Callable[[cst.Call], bool]
) -> dict[str, cst.CSTNode]:
    """attribute -> the node that puts a layer into it (the assignment, or the filling
    call), over ``__init__`` and the helpers it calls (``builders``)."""
    found: dict[str, cst.CSTNode] = {}
    for builder in builders:
        holders = {  # local names bound to a layer: ``expert = Linear(...)``
            t.target.value
            for n in patterns.walk(builder.body)
            if type(n) is cst.Assign and _holds(n.value, is_layer, set())
            for t in n.targets
            if type(t.target) is cst.Name
        }
        for node in patterns.walk(builder.body):
            attr = _filled(node, lambda v, h=holders: _holds(v, is_layer, h))
            if attr is not None:
                found.setdefault(attr, node)
    return found


def _filled(node: cst.CSTNode, holds: Callable[[cst.CSTNode], bool]) -> str | None:
    kind = type(node)
    if kind is cst.Assign:
        if not holds(node.value):
            return None
        for target in node.targets:
            inner = target.target
            while type(inner) is cst.Subscript:
                inner = inner.value
            if is_self_attr(inner):
                return inner.attr.value
        return None
    if kind is not cst.Call:
        return None
    func, args = node.func, patterns.positional_args(node)
    if (
        type(func) is cst.Attribute
        and is_self_attr(func.value)
        and func.attr.value in FILLING_METHODS
        and any(holds(a.value) for a in args)
    ):
        return func.value.attr.value
    named = None
    if type(func) is cst.Attribute and func.attr.value in NAMING_METHODS:
        if _is_self(func.value) and len(args) >= 2:
            named = args
    elif type(func) is cst.Name and func.value == "setattr" and len(args) >= 3:
        named = args[1:] if _is_self(args[0].value) else None
    if named is not None and holds(named[1].value):
        return patterns.string_value(named[0].value)
    return None


def _holds(value: cst.CSTNode, is_layer, holders: set[str]) -> bool:
    return any(
        (type(n) is cst.Call and is_layer(n)) or (type(n) is cst.Name and n.value in holders)
        for n in patterns.walk(value)
    )


def parameters_only(methods, layers: set[str], walk_all) -> set[str]:
    """Layers the class uses only through their parameters (``self.x.weight``): their
    forward never runs, so they compute no weight gradient to delay (THUDM/slime's
    ``weights_proj``, built as a projection and used as a weight for an eager autograd
    function). A layer called, or handed on whole, anywhere in the class is still one, and
    so is one the class never mentions again; a loop over a display of layers that only
    walks each one's parameters (to freeze them) hands none of them on whole."""
    used_whole: set[str] = set()
    parameters_used: set[str] = set()
    for method in methods:
        nodes = list(walk_all(method.body))
        owners = {  # ``self.x`` as the owner of one of its parameters
            id(n.value): n.value.attr.value
            for n in nodes
            if type(n) is cst.Attribute  # exact type: isinstance on libcst's ABCs is slow
            and n.attr.value in PARAMETER_ATTRS
            and is_self_attr(n.value)
        }
        parameters_used.update(owners.values())
        assigned = {id(t.target) for n in nodes if type(n) is cst.Assign for t in n.targets}
        walked = _walked_for_parameters(nodes)
        used_whole.update(
            n.attr.value
            for n in nodes
            if is_self_attr(n)
            and n.attr.value in layers
            and id(n) not in owners
            and id(n) not in assigned
            and id(n) not in walked
        )
    # A layer the class never mentions again may run in a subclass's forward: still one.
    return (layers & parameters_used) - used_whole


PARAMETER_WALKS = frozenset({"parameters", "named_parameters", "requires_grad_"})


def _walked_for_parameters(nodes) -> set[int]:
    """The ids of the ``self.x`` of a display a ``for`` walks only to reach each module's
    parameters (``for m in (self.wq_b, self.weights_proj): for p in m.parameters(): p.
    requires_grad = False``, radixark/miles' frozen indexer): not a use of the layer whole."""
    found: set[int] = set()
    for loop in nodes:
        if type(loop) is not cst.For or type(loop.target) is not cst.Name:
            continue
        if type(loop.iter) not in (cst.Tuple, cst.List):
            continue
        name = loop.target.value
        uses = [n for n in patterns.walk(loop.body) if type(n) is cst.Name and n.value == name]
        walks = [
            n
            for n in patterns.walk(loop.body)
            if type(n) is cst.Attribute
            and n.attr.value in PARAMETER_WALKS
            and type(n.value) is cst.Name
            and n.value.value == name
        ]
        if uses and len(walks) == len(uses):
            found.update(id(e.value) for e in loop.iter.elements if is_self_attr(e.value))
    return found


def _is_self(node: cst.CSTNode) -> bool:
    return type(node) is cst.Name and node.value == "self"


def is_self_attr(node: cst.CSTNode) -> bool:
    return type(node) is cst.Attribute and _is_self(node.value)


def calls_base_version(call: cst.Call) -> bool:
    """``super().m(...)`` or ``Base.m(self, ...)``: a base class's version of a method runs."""
    func = call.func
    receiver = func.value if type(func) is cst.Attribute else None
    if type(receiver) is cst.Call and patterns.callee_name(receiver) == "super":
        return True
    args = patterns.positional_args(call)
    return bool(args) and type(args[0].value) is cst.Name and args[0].value.value == "self"
