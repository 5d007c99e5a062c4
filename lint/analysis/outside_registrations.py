"""Delayed-wgrad pieces registered on an instance from outside its class (issue #19, class
6; GMLP014 reports them).

A class's ``backward_dw`` covers the layers its construction builds. Code outside the class
can change that without touching it:

* a factory hangs one more delayed layer on an instance
  (``mlp.lora_proj = TELinear(..., delay_wgrad_compute=...)``) that the class's
  ``backward_dw`` never reaches;
* a setup pass switches delayed wgrad on for instances of a class that builds layers and
  has no ``backward_dw`` at all (``module.delay_wgrad_compute = True`` under
  ``isinstance(module, Router)``);
* a schedule replaces an instance's ``backward_dw`` with a function (a ``def`` of the same
  function, or a lambda) that never calls the original (``original = layer.backward_dw``
  then ``original()``, or ``type(layer).backward_dw(layer)``): the layer's stored weight
  gradient is then never computed.

The instance's class is known when the function binds it from a call of the class
(``mlp = ExpertMLP(...)``), annotates a parameter with it (``layer: Linear``) or tests it
with ``isinstance(x, C)`` anywhere in the function; the class is resolved through this file
and the summaries of the run's other files (``class_facts``, given to such files by
``registration_facts``). A class with a base nobody summarised may define anything and is
not judged. Flow-insensitive: the facts hold for the whole function.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .classes import BACKWARD_DW, DELAY, ClassIndex, Model, last_name, super_chain_open
from .walking import children


@dataclass(frozen=True)
class Registration:
    node: cst.CSTNode  # the assignment (or ``setattr`` call) to report
    kind: str  # "layer", "delay" or "wrapper"
    receiver: str
    attr: str
    class_name: str


def registrations(module: cst.Module, index: ClassIndex, is_layer) -> list[Registration]:
    found: list[Registration] = []
    for function in _functions(module):
        types = _instance_types(function, index)
        if not types:
            continue
        local_defs = {
            n.name.value: n for n in patterns.walk(function.body) if type(n) is cst.FunctionDef
        }
        originals = _original_holders(function)
        for node in patterns.walk(function.body):
            target = _registered(node)
            if target is None:
                continue
            receiver, attr, value = target
            model = index.resolve(types.get(receiver, ""))
            if model is None or index.may_inherit_unknown(model):
                continue
            kind = _judge(index, model, attr, value, is_layer, local_defs, originals)
            if kind is not None:
                found.append(Registration(node, kind, receiver, attr, model.name))
    return found


def _judge(index, model: Model, attr, value, is_layer, local_defs, originals) -> str | None:
    owner = index.owner(model, BACKWARD_DW)
    computes = (
        owner is not None
        and not index.only_raises(model, BACKWARD_DW)
        and not super_chain_open(index, model, BACKWARD_DW)
    )
    if attr == BACKWARD_DW:
        function = _assigned_function(value, local_defs)
        if computes and function is not None and not _calls_original(function, originals):
            return "wrapper"
        return None
    if attr == DELAY:
        if owner is None and model.layers and not patterns.is_false_literal(value):
            return "delay"
        return None
    calls = [n for n in patterns.walk(value) if type(n) is cst.Call and is_layer(n)]
    if not calls:
        return None
    if computes:
        return None if attr in index.reached_attributes(model, BACKWARD_DW) else "layer"
    # No backward_dw at all: only a layer handed the delay mode is known to be lost.
    modes = [arg.value for c in calls if (arg := patterns.keyword_arg(c, DELAY)) is not None]
    if owner is None and any(not patterns.is_false_literal(mode) for mode in modes):
        return "layer"
    return None


def _functions(module: cst.Module) -> Iterator[cst.FunctionDef]:
    """Every function of the file, methods and nested functions included."""
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if type(node) is cst.FunctionDef:
            yield node
        stack.extend(children(node))


def _instance_types(function: cst.FunctionDef, index: ClassIndex) -> dict[str, str]:
    """Local name -> the class of the run it holds an instance of."""
    types: dict[str, str] = {}
    for param in function.params.params + function.params.kwonly_params:
        if param.annotation is not None:
            name = last_name(param.annotation.annotation)
            if name and index.resolve(name) is not None:
                types[param.name.value] = name
    for node in patterns.walk(function.body):
        if type(node) is cst.Assign and type(node.value) is cst.Call:
            name = last_name(node.value.func)
            if name and name[:1].isupper() and index.resolve(name) is not None:
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        types[target.target.value] = name
        elif type(node) is cst.Call and patterns.callee_name(node) == "isinstance":
            args = patterns.positional_args(node)
            if len(args) == 2 and type(args[0].value) is cst.Name:
                name = last_name(args[1].value)
                if name and index.resolve(name) is not None:
                    types[args[0].value.value] = name
    return types


def _registered(node: cst.CSTNode) -> tuple[str, str, cst.CSTNode] | None:
    """(receiver, attribute, value) for ``x.a = v`` and ``setattr(x, "a", v)``, ``x`` a
    plain name other than ``self``."""
    if type(node) is cst.Assign:
        for target in node.targets:
            t = target.target
            if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value != "self":
                return t.value.value, t.attr.value, node.value
        return None
    if type(node) is cst.Call and patterns.callee_name(node) == "setattr":
        args = patterns.positional_args(node)
        if len(args) == 3 and type(args[0].value) is cst.Name and args[0].value.value != "self":
            attr = patterns.string_value(args[1].value)
            if attr is not None:
                return args[0].value.value, attr, args[2].value
    return None


def _assigned_function(value: cst.CSTNode, local_defs) -> cst.CSTNode | None:
    """The lambda or the function of the enclosing function that ``value`` is."""
    if type(value) is cst.Lambda:
        return value
    if type(value) is cst.Name:
        return local_defs.get(value.value)
    return None


def _original_holders(function: cst.FunctionDef) -> set[str]:
    """Names bound to an instance's own ``backward_dw`` (``original = layer.backward_dw``)."""
    return {
        t.target.value
        for n in patterns.walk(function.body)
        if type(n) is cst.Assign
        and any(patterns.is_attr(x, BACKWARD_DW) for x in patterns.walk(n.value))
        for t in n.targets
        if type(t.target) is cst.Name
    }


def _calls_original(function: cst.CSTNode, originals: set[str]) -> bool:
    """The replacement runs the original: it calls a name bound to it, or a ``backward_dw``
    reached through something (``type(layer).backward_dw(layer)``, ``Base.backward_dw``)."""
    body = function.body
    for node in _all_nodes(body):
        if type(node) is not cst.Call:
            continue
        func = node.func
        if type(func) is cst.Name and func.value in originals:
            return True
        if patterns.is_attr(func, BACKWARD_DW):
            return True
    return False


def _all_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))
