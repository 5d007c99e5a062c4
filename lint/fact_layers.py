"""Which ``self`` attributes a class's construction fills with weight layers, on CPython's
tree (issue #19, class 6; ``class_facts`` summarises classes of other files with it).

Real code does not always build its layers as ``self.fc1 = Linear(...)`` in ``__init__``:
Megatron-LM's ``SequentialMLP`` starts ``self.local_experts = ModuleList()`` and appends one
expert per loop turn; model variants fill ``ModuleDict``s by key (``self.gates[name] = ...``)
or register modules by name (``self.add_module("adapter", ...)``, ``setattr(self, ...)``);
and many ``__init__``s hand the building to helpers (``self._build_projections(...)``).
Each is a layer the class's ``backward_dw`` must reach, the same as a direct assignment.
The libcst side (``analysis/layer_builds.py``) applies the same reading to the file being
linted; keep the two in step.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from . import layer_facts

DELAY = "delay_wgrad_compute"
SPEC_BUILDERS = frozenset({"build_module"})
LAYER_WORDS = ("linear", "proj")
# Methods that put one or more values into a container attribute.
FILLING_METHODS = frozenset({"append", "extend", "insert"})
# Calls that register a module under a literal name: ``self.add_module("x", m)``,
# ``setattr(self, "x", m)``, ``self.register_module("x", m)``.
NAMING_METHODS = frozenset({"add_module", "register_module"})

Methods = dict[str, ast.FunctionDef | ast.AsyncFunctionDef]


def construction(methods: Methods) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """``__init__`` and the methods of the class it calls through ``self.``, transitively:
    what they build is built at construction."""
    init = methods.get("__init__")
    found, pending = [], [init] if init is not None else []
    while pending:
        current = pending.pop()
        if any(current is f for f in found):
            continue
        found.append(current)
        pending.extend(
            methods[n.func.attr]
            for n in ast.walk(current)
            if isinstance(n, ast.Call) and _is_self_attr(n.func) and n.func.attr in methods
        )
    return found


def built_layers(methods: Methods, is_layer: Callable[[ast.Call], bool]) -> list[str]:
    """The attributes construction gives a weight layer, in the order they are met. A
    method with no layer call is walked once (the run pays for this before linting)."""
    layers: list[str] = []
    for method in construction(methods):
        nodes = list(ast.walk(method))
        calls = {id(n) for n in nodes if type(n) is ast.Call and is_layer(n)}
        if not calls:
            continue
        holders = {  # locals bound to a layer: ``expert = Linear(...)``
            target.id
            for node in nodes
            if type(node) is ast.Assign and _holds_layer(node.value, calls, set())
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in nodes:
            attr = filled_attribute(node, lambda v, c=calls, h=holders: _holds_layer(v, c, h))
            if attr is not None and attr not in layers:
                layers.append(attr)
    return layers


def filled_attribute(node: ast.AST, holds_layer: Callable[[ast.AST], bool]) -> str | None:
    """The attribute ``node`` puts a layer into, if it does: ``self.a = L``,
    ``self.a[k] = L``, ``self.a.append(L)`` (also ``extend`` / ``insert``),
    ``self.add_module("a", L)``, ``setattr(self, "a", L)``."""
    kind = type(node)
    if kind is ast.Assign and holds_layer(node.value):
        for target in node.targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if _is_self_attr(target):
                return target.attr
        return None
    if kind is not ast.Call:
        return None
    func = node.func
    if (
        isinstance(func, ast.Attribute)
        and _is_self_attr(func.value)
        and func.attr in FILLING_METHODS
        and any(holds_layer(a) for a in node.args)
    ):
        return func.value.attr
    named = None
    if isinstance(func, ast.Attribute) and func.attr in NAMING_METHODS:
        if _is_self(func.value) and len(node.args) >= 2:
            named = node.args
    elif isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) >= 3:
        named = node.args[1:] if _is_self(node.args[0]) else None
    if named is not None and isinstance(named[0], ast.Constant) and holds_layer(named[1]):
        return str(named[0].value)
    return None


def _holds_layer(value: ast.AST, calls: set[int], holders: set[str]) -> bool:
    """``value`` holds one of the layer ``calls`` (by identity) or a local bound to one."""
    return any(id(n) in calls or (type(n) is ast.Name and n.id in holders) for n in ast.walk(value))


def is_layer_call(
    call: ast.Call, imports: dict[str, str], eager, aliases: dict[str, str] | None = None
) -> bool:
    """The same test as ``analysis.classes.layer_test``'s, on CPython's tree: handed a
    delay mode, a spec builder given a linear or projection spec, or a callee that names a
    ``Linear`` (through an import alias too) the run does not show to be eager."""
    delay = next((k.value for k in call.keywords if k.arg == DELAY), None)
    if delay is not None and not (isinstance(delay, ast.Constant) and delay.value in (False, None)):
        return True
    name = last_name(call.func) or ""
    if name in SPEC_BUILDERS:
        target = last_name(call.args[0]) if call.args else None
        return target is not None and any(word in target.lower() for word in LAYER_WORDS)
    if "Linear" not in (aliases or {}).get(name, name):
        return False
    func = call.func
    spelled = (
        f"{last_name(func.value)}.{func.attr}"
        if isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Name, ast.Attribute))
        else name
    )
    return not layer_facts.is_eager(spelled, imports.get(spelled), eager)


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _is_self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and _is_self(node.value)


def last_name(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None
