"""A module that owns a weight-gradient store and hands its op None for it.

Transformer Engine's modules build ``self.wgrad_store = WeightGradStore(delay_wgrad_compute)``
and pass it to their autograd Function, whose backward defers the wgrad into it when the
delay is on; ``backward_dw`` then pops it. A module that hands the op ``None`` where its
``forward`` takes the store (blind corpus 25: a DeepGEMM grouped linear's
``_GroupedLinearDeepGemm.apply(inp, m_splits, None, ...)``) makes the backward compute
eagerly, or not at all where it defers on the module's own switch, and ``backward_dw`` pops
an empty store: the delayed weight gradient never reaches main_grad.

Seen: ``F.apply(...)`` (``F`` a class of the file with a ``forward(ctx, ...)``) called in a
method of a class that assigns ``self.S = <a call named for a store>`` (itself or through
its bases of the file), giving the literal ``None`` for the forward parameter named for a
weight-gradient store (``*grad*store``, by position or by keyword), or a store built in the
call (``WeightGradStore(True)``: blind corpus 26), while no ``apply`` call of the class
hands ``self.S`` (one that does, on another op or on the delay-on branch, has chosen where
deferring happens).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .class_model import is_self_attr, walk_all
from .module import ModuleContext


def _names_store(word: str) -> bool:
    lowered = word.lower()
    return lowered.endswith("store") and not lowered.endswith("restore")


def _names_wgrad_store(word: str) -> bool:
    """A parameter named for a weight-gradient store (``wgrad_store``), not another store
    (``activation_store``)."""
    return _names_store(word) and "grad" in word.lower()


def _function_params(module: cst.Module) -> dict[str, list[str]]:
    """Class name -> the parameter names of its ``forward`` after ``ctx``, up to a ``*``."""
    found = {}
    for stmt in module.body:
        if type(stmt) is not cst.ClassDef:
            continue
        for item in stmt.body.body:
            if type(item) is cst.FunctionDef and item.name.value == "forward":
                params = [p.name.value for p in item.params.params]
                if params and params[0] == "ctx":
                    found[stmt.name.value] = params[1:]
    return found


def _own_stores(cls: cst.ClassDef) -> set[str]:
    """The ``self`` attributes the class binds to a call named for a store."""
    found = set()
    for node in walk_all(cls):
        if type(node) is not cst.Assign or type(node.value) is not cst.Call:
            continue
        if not _names_store(patterns.callee_name(node.value) or ""):
            continue
        for target in node.targets:
            if is_self_attr(target.target):
                found.add(target.target.attr.value)
    return found


def withheld(context: ModuleContext) -> Iterator[tuple[cst.Arg, str, str]]:
    """(the ``None`` argument, the Function's class name, the store attribute) for each."""
    if "store" not in context.source.lower() or ".apply(" not in context.source:
        return
    functions = _function_params(context.module)
    if not functions:
        return
    classes = {c.name.value: c for c in context.module.body if type(c) is cst.ClassDef}
    for cls in classes.values():
        stores = _stores_with_bases(cls, classes)
        if not stores:
            continue
        applies = [
            call
            for call in walk_all(cls)
            if type(call) is cst.Call
            and type(call.func) is cst.Attribute
            and call.func.attr.value == "apply"
            and type(call.func.value) is cst.Name
            and call.func.value.value in functions
        ]
        # a class that hands its store to some call (another op, the delay-on branch) has
        # chosen where deferring happens: a None elsewhere is on purpose (review 28)
        if any(_reads_a_store(call, stores) for call in applies):
            continue
        for call in applies:
            params = functions[call.func.value.value]
            for arg, param in _matched(call, params):
                if _names_wgrad_store(param) and (_is_none(arg.value) or _is_fresh(arg.value)):
                    yield arg, call.func.value.value, sorted(stores)[0]


def _stores_with_bases(cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> set[str]:
    """The class's own stores and those its bases of the file bind (a subclass's
    ``forward`` hands the op what its base's ``backward_dw`` pops; blind corpus 26)."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [cls]
    while todo:
        current = todo.pop()
        found |= _own_stores(current)
        for base in current.bases:
            name = base.value.value if type(base.value) is cst.Name else None
            if name in classes and name not in seen:
                seen.add(name)
                todo.append(classes[name])
    return found


def _is_fresh(value) -> bool:
    """A store built in the call itself (``WeightGradStore(True)``): what the backward defers
    into it nobody pops."""
    if type(value) is not cst.Call or not _names_store(patterns.callee_name(value) or ""):
        return False
    # ``WeightGradStore(False)``: a store that defers nothing (review 29)
    args = patterns.positional_args(value)
    delay = patterns.keyword_arg(value, "delay_wgrad_compute")
    switch = delay.value if delay is not None else args[0].value if args else None
    return switch is None or not patterns.is_false_literal(switch)


def _reads_a_store(call: cst.Call, stores: set[str]) -> bool:
    return any(is_self_attr(n) and n.attr.value in stores for n in patterns.walk(call))


def _matched(call: cst.Call, params: list[str]) -> Iterator[tuple[cst.Arg, str]]:
    position = 0
    for arg in call.args:
        if arg.star:
            return  # positions after an unpacked sequence are unknown
        if arg.keyword is not None:
            yield arg, arg.keyword.value
        elif position < len(params):
            yield arg, params[position]
            position += 1


def _is_none(value) -> bool:
    return type(value) is cst.Name and value.value == "None"
