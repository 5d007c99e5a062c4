"""Gradient hooks that reduce a weight's `.grad` where main_grad holds the real one (issue
#19, class 5).

Megatron-Core's parallel linears and Transformer Engine's linears may write the weight
gradient straight into ``weight.main_grad`` (``gradient_accumulation_fusion``,
``fuse_wgrad_accumulation``) and hand autograd only a dummy. A hook registered on such a
weight with ``weight.register_hook(f)`` receives that dummy: an ``f`` that all-reduces its
gradient (to keep a replicated weight in sync) then reduces nothing that the optimizer
reads, and the replicas drift apart (radixark/miles #2723, Megatron-Bridge's shared LoRA
factor).

This module finds ``T.register_hook(f)`` where ``f`` (a function of the file, a method of
the class, a lambda) hands its gradient parameter to a collective (a call whose name says
``reduce``) and neither it nor the registering function spells main_grad or the fusion
switches, and ``T`` is the ``weight`` of a layer a class of the file builds from a linear
class it imports (``ColumnParallelLinear``, ``TELinear``...; not ``nn.Linear``, not a class
of the file, not one built with the fusion switched off by a literal). ``T`` is followed
through local names, conditional expressions, loops over tuples of layers,
``getattr(layer, "weight")``, and one call of a function of the file that takes it as a
parameter (the finding is then that call).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .module import ModuleContext, suite_body

HOOK_REGISTRATIONS = frozenset({"register_hook"})
FUSION_WORDS = (
    "main_grad",
    "gradient_accumulation_fusion",
    "fuse_wgrad_accumulation",
    "grad_added_to_main_grad",
)
FUSION_SWITCHES = frozenset({"gradient_accumulation_fusion", "fuse_wgrad_accumulation"})
EAGER_LINEARS = frozenset({"nn.Linear", "torch.Linear"})
WEIGHT = "weight"


@dataclass(frozen=True)
class ReducingHook:
    site: cst.CSTNode  # the registration, or the call of the helper that registers
    layer: str  # the ``self`` attribute whose weight gets the hook
    hook: str  # the hook's name as written


def reducing_hooks(context: ModuleContext) -> list[ReducingHook]:
    if "register_hook" not in context.source:
        return []
    module = context.module
    local_classes = {n.name.value for n in patterns.walk(module) if isinstance(n, cst.ClassDef)}
    top = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    helpers = {  # top-level function -> (parameter index, registration, hook name)
        name: found for name, f in top.items() if (found := _registers_on_param(f, top)) is not None
    }
    found: list[ReducingHook] = []
    for cls in (n for n in patterns.walk(module) if isinstance(n, cst.ClassDef)):
        methods = {s.name.value: s for s in suite_body(cls.body) if isinstance(s, cst.FunctionDef)}
        layers = _fusing_layers(methods.values(), local_classes)
        if not layers:
            continue
        for method in methods.values():
            found.extend(_in_method(method, layers, methods, top, helpers))
    return found


def _fusing_layers(methods, local_classes: set[str]) -> set[str]:
    """``self`` attributes some method assigns a linear that may fuse its wgrad."""
    layers: set[str] = set()
    for method in methods:
        for node in patterns.walk(method.body):
            if not (isinstance(node, cst.Assign) and isinstance(node.value, cst.Call)):
                continue
            if _may_fuse(node.value, local_classes):
                attrs = (patterns.attribute_of(t.target, "self") for t in node.targets)
                layers.update(a for a in attrs if a is not None)
    return layers


def _may_fuse(call: cst.Call, local_classes: set[str]) -> bool:
    func = call.func
    name = patterns.callee_name(call) or ""  # "" for ``make()(...)``, ``layers[i](...)``
    if not name.endswith("Linear") or name in local_classes:
        return False
    owner = func.value if isinstance(func, cst.Attribute) else None
    owner_name = patterns.callee_name(cst.Call(func=owner)) if owner is not None else None
    if f"{owner_name}.{name}" in EAGER_LINEARS:
        return False
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword in FUSION_SWITCHES and patterns.is_false_literal(arg.value):
            return False
    return True


def _in_method(method, layers, methods, top, helpers) -> Iterator[ReducingHook]:
    if _spells_fusion(method):
        return
    bindings = _bindings(method)
    for node in patterns.walk(method.body):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in HOOK_REGISTRATIONS and node.args:
            hook = _hook_function(node.args[0].value, methods, top)
            if hook is not None and _reduces_its_gradient(hook):
                for layer in sorted(_layers_of(func.value, bindings, layers)):
                    yield ReducingHook(node, layer, _code_name(node.args[0].value))
        elif isinstance(func, cst.Name) and func.value in helpers:
            index, hook_name = helpers[func.value]
            if index < len(node.args):
                for layer in sorted(_layers_of(node.args[index].value, bindings, layers)):
                    yield ReducingHook(node, layer, hook_name)


def _registers_on_param(function: cst.FunctionDef, top) -> tuple[int, str] | None:
    """(index of the parameter, hook name) when ``function`` registers a reducing hook on
    one of its parameters and never spells the fusion words."""
    if _spells_fusion(function):
        return None
    params = [p.name.value for p in function.params.params]
    nested = {
        n.name.value: n for n in patterns.walk(function.body) if isinstance(n, cst.FunctionDef)
    }
    for node in patterns.walk(function.body):
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            continue
        target = node.func.value
        if (
            node.func.attr.value in HOOK_REGISTRATIONS
            and isinstance(target, cst.Name)
            and node.args
        ):
            hook = _hook_function(node.args[0].value, nested, {**top, **nested})
            if target.value in params and hook is not None and _reduces_its_gradient(hook):
                return params.index(target.value), _code_name(node.args[0].value)
    return None


def _hook_function(expr, methods, functions) -> cst.FunctionDef | cst.Lambda | None:
    if isinstance(expr, cst.Lambda):
        return expr
    if isinstance(expr, cst.Name):
        return functions.get(expr.value)
    attr = patterns.attribute_of(expr, "self")
    return methods.get(attr) if attr is not None else None


def _reduces_its_gradient(hook: cst.FunctionDef | cst.Lambda) -> bool:
    """The hook hands its gradient parameter to a collective (a call naming ``reduce``)."""
    params = [p.name.value for p in hook.params.params if p.name.value != "self"]
    if not params or _spells_fusion(hook):
        return False
    grad = params[0]
    for node in patterns.walk(hook.body):
        if (
            isinstance(node, cst.Call)
            and "reduce" in (patterns.callee_name(node) or "")
            and any(isinstance(a.value, cst.Name) and a.value.value == grad for a in node.args)
        ):
            return True
    return False


def _spells_fusion(node: cst.CSTNode) -> bool:
    return any(patterns.spells(n, w) for n in patterns.walk(node) for w in FUSION_WORDS)


def _bindings(method: cst.FunctionDef) -> dict[str, list[cst.CSTNode]]:
    """What each local name of the method may hold: assigned values, and for a loop
    variable the elements of the tuple / list it runs over."""
    found: dict[str, list[cst.CSTNode]] = {}
    for node in patterns.walk(method.body):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    found.setdefault(target.target.value, []).append(node.value)
        elif isinstance(node, cst.For) and isinstance(node.target, cst.Name):
            if isinstance(node.iter, (cst.Tuple, cst.List)):
                values = [e.value for e in node.iter.elements]
                found.setdefault(node.target.value, []).extend(values)
        elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            found.setdefault(node.target.value, []).append(node.value)
    return found


def _layers_of(expr, bindings, layers: set[str], depth: int = 0) -> set[str]:
    """Layers whose ``weight`` ``expr`` may be."""
    if depth > 4:
        return set()
    if isinstance(expr, cst.IfExp):
        return _layers_of(expr.body, bindings, layers, depth + 1) | _layers_of(
            expr.orelse, bindings, layers, depth + 1
        )
    if isinstance(expr, cst.Name):
        return {
            layer
            for value in bindings.get(expr.value, ())
            for layer in _layers_of(value, bindings, layers, depth + 1)
        }
    owner = None
    if isinstance(expr, cst.Attribute) and expr.attr.value == WEIGHT:
        owner = expr.value
    elif patterns.is_getattr_of(expr, WEIGHT):
        owner = patterns.getattr_owner(expr, WEIGHT)
    if owner is None:
        return set()
    return {layer for layer in _modules_of(owner, bindings, depth) if layer in layers}


def _modules_of(expr, bindings, depth: int) -> set[str]:
    attr = patterns.attribute_of(expr, "self")
    if attr is not None:
        return {attr}
    if isinstance(expr, cst.Name) and depth <= 4:
        return {
            m for v in bindings.get(expr.value, ()) for m in _modules_of(v, bindings, depth + 1)
        }
    return set()


def _code_name(expr: cst.CSTNode) -> str:
    if isinstance(expr, cst.Lambda):
        return "a lambda"
    attr = patterns.attribute_of(expr, "self")
    if attr is not None:
        return f"self.{attr}"
    return expr.value if isinstance(expr, cst.Name) else "the hook"
