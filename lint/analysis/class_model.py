"""One class of this file read into a ``ClassModel``: its bases (by name), its methods, the
weight layers its ``__init__`` builds (``self.X = SomeLinear(...)``, ``self.X =
build_module(submodules.linear_x, ...)``, or a container of such layers), which ``self``
attributes each method mentions, and what each ``self`` attribute is given (``self.fns =
[self.fc1.backward_dw]``, ``self.fns.append(f)``). ``classes`` resolves the bases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from .. import class_facts
from . import layer_builds, patterns
from .module import compound_suites, suite_body

DELAY = "delay_wgrad_compute"
# Pseudo-attributes of a method's mentions: it calls ``super()``; its body only raises (a
# class that does not support the protocol says so loudly: nothing is dropped silently).
SUPER, RAISES = class_facts.SUPER, class_facts.RAISES
# Methods that put a value into a container attribute: ``self.fns.append(f)``.
STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


@dataclass
class ClassModel:
    node: cst.ClassDef
    bases: list[str]
    methods: dict[str, cst.FunctionDef]
    layers: dict[str, cst.CSTNode] = field(default_factory=dict)  # attribute -> its assignment
    spells_delay: bool = False  # its own __init__ spells delay_wgrad_compute
    mentions: dict[str, set[str]] = field(default_factory=dict)  # method -> self attributes
    stores: dict[str, set[str]] = field(default_factory=dict)  # attribute -> what it is given
    # Whether a call builds a weight layer whose wgrad may be delayed (``layer_test``).
    is_layer: Callable[[cst.Call], bool] = field(default=lambda call: False, repr=False)

    @property
    def name(self) -> str:
        return self.node.name.value


def read_class(
    node: cst.ClassDef, is_layer: Callable[[cst.Call], bool], aliases: dict[str, str]
) -> ClassModel:
    """The model of the class ``node``; ``is_layer`` tells the calls that build a weight
    layer (``classes.layer_test``), ``aliases`` the names bases are imported under."""
    bases = [aliases.get(name, name) for arg in node.bases if (name := last_name(arg.value))]
    methods = {
        stmt.name.value: stmt for stmt in suite_body(node.body) if isinstance(stmt, cst.FunctionDef)
    }
    model = ClassModel(node, bases, methods, is_layer=is_layer)
    for name, method in methods.items():
        model.mentions[name] = _mentions(method)
        for sub in walk_all(method.body):
            stored = _stored(sub)
            if stored is not None:
                attr, value = stored
                model.stores.setdefault(attr, set()).update(
                    n.attr.value for n in walk_all(value) if is_self_attr(n)
                )
    init = methods.get("__init__")
    if init is not None:
        builders = self_call_closure(init, methods)
        model.spells_delay = any(_spells_delay(builder) for builder in builders)
        # Assigned, appended one at a time, set by key or registered by name.
        model.layers.update(layer_builds.filled_layers(builders, is_layer))
        eager_only = layer_builds.parameters_only(methods.values(), set(model.layers), walk_all)
        for attr in eager_only:
            del model.layers[attr]
    return model


def self_call_closure(
    method: cst.FunctionDef, methods: dict[str, cst.FunctionDef]
) -> list[cst.FunctionDef]:
    """``method`` and the ``methods`` of its class it calls through ``self.``, transitively:
    a layer built in ``self._build_projections(config)`` from ``__init__`` is built at
    construction too, and a piece ``backward_dw`` calls is part of its work."""
    found, pending = [], [method]
    while pending:
        current = pending.pop()
        if any(current is f for f in found):
            continue
        found.append(current)
        pending.extend(
            methods[n.func.attr.value]
            for n in patterns.walk(current.body)
            if type(n) is cst.Call and is_self_attr(n.func) and n.func.attr.value in methods
        )
    return found


def _mentions(method: cst.FunctionDef) -> set[str]:
    live = [n for stmt in _live_statements(method.body) for n in patterns.walk(stmt)]
    found = {n.attr.value for n in live if is_self_attr(n)}
    found |= _named_by_getattr(method, live)
    if "super" in {patterns.callee_name(n) for n in live}:
        found.add(SUPER)
    if _only_raises(method):
        found.add(RAISES)
    return found


def _named_by_getattr(method: cst.FunctionDef, live: list[cst.CSTNode]) -> set[str]:
    """Attributes reached by name: ``getattr(self, "wk")``, and ``getattr(self, name)`` in
    ``for name in ("wq_b", "wk", "weights_proj"):`` (THUDM/slime's indexer projections)."""
    spelled: dict[str, list[str]] = {}
    for node in patterns.walk(method.body):
        kind = type(node)
        if kind is cst.For and type(node.target) is cst.Name and type(node.iter) in _LITERALS:
            words = [patterns.string_value(e.value) for e in node.iter.elements]
            if words and None not in words:
                spelled.setdefault(node.target.value, []).extend(words)
    found: set[str] = set()
    for node in live:
        if type(node) is not cst.Call or patterns.callee_name(node) != "getattr":
            continue
        args = node.args
        if len(args) < 2 or type(args[0].value) is not cst.Name or args[0].value.value != "self":
            continue
        word = patterns.string_value(args[1].value)
        if word is not None:
            found.add(word)
        elif type(args[1].value) is cst.Name:
            found.update(spelled.get(args[1].value.value, ()))
    return found


_LITERALS = (cst.Tuple, cst.List)


# Statements after which the rest of their block never runs.
_ENDS_BLOCK = (cst.Return, cst.Raise, cst.Continue, cst.Break)


def _live_statements(block) -> list[cst.CSTNode]:
    """The statements of a block that may run and do something, nested blocks opened up:
    none after a ``return`` / ``raise`` / ``continue`` / ``break`` of the same block, and no
    statement that only names something (``self.fc2.backward_dw`` without the call)."""
    found: list[cst.CSTNode] = []
    for stmt in suite_body(block):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if type(small) is cst.Expr and type(small.value) in (cst.Attribute, cst.Name):
                    continue
                found.append(small)
                if type(small) in _ENDS_BLOCK:
                    return found
            continue
        found.extend(_live_compound(stmt))
    return found


def _live_compound(stmt) -> list[cst.CSTNode]:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return [stmt]  # walked as a whole, as before
    if type(stmt) is cst.If:
        found = [stmt.test, *_live_statements(stmt.body)]
        orelse = stmt.orelse
        if type(orelse) is cst.If:
            found += _live_compound(orelse)
        elif orelse is not None:
            found += _live_statements(orelse.body)
        return found
    header = [getattr(stmt, field, None) for field in ("test", "iter", "target", "subject")]
    found = [part for part in header if isinstance(part, cst.CSTNode)]
    found += list(getattr(stmt, "items", ()))  # a ``with``'s context managers
    for suite in compound_suites(stmt):
        found += _live_statements(suite)
    return found


def _only_raises(method: cst.FunctionDef) -> bool:
    """The body is a ``raise`` (after a docstring, if any)."""
    body = [
        s
        for s in suite_body(method.body)
        if not (
            isinstance(s, cst.SimpleStatementLine)
            and all(
                isinstance(x, cst.Expr) and isinstance(x.value, cst.SimpleString) for x in s.body
            )
        )
    ]
    return (
        len(body) == 1
        and isinstance(body[0], cst.SimpleStatementLine)
        and isinstance(body[0].body[0], cst.Raise)
    )


def walk_all(node: cst.CSTNode):
    """Every node, nested functions and lambdas included (a closure stored in an attribute
    runs with the class's ``self``)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(patterns.children(current))


def _stored(node: cst.CSTNode) -> tuple[str, cst.CSTNode] | None:
    """(attribute, value) for ``self.a = v``, ``self.a[k] = v``, ``self.a += v`` and
    ``self.a.append(v)``."""
    kind = type(node)  # exact types: isinstance on libcst's ABC node classes is slow
    if (kind is cst.Assign or kind is cst.AugAssign or kind is cst.AnnAssign) and (
        node.value is not None
    ):
        for target in patterns.assignment_targets(node):
            while type(target) is cst.Subscript:
                target = target.value
            if is_self_attr(target):
                return target.attr.value, node.value
    if (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value in STORING_METHODS
        and is_self_attr(node.func.value)
    ):
        return node.func.value.attr.value, node
    return None


def _spells_delay(init: cst.FunctionDef) -> bool:
    if any(p.name.value == DELAY for p in init.params.params + init.params.kwonly_params):
        return True
    return any(
        (isinstance(n, cst.Attribute) and n.attr.value == DELAY)
        or (isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == DELAY)
        for n in patterns.walk(init.body)
    )


def is_self_attr(node: cst.CSTNode) -> bool:
    return (
        type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self"
    )


def last_name(expr: cst.CSTNode) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None
