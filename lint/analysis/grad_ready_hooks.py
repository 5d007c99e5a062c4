"""Gradient-ready hooks that ignore TE's delayed-wgrad contract (issue #19, class 5).

A data-parallel wrapper learns that a parameter's gradient is ready from a hook autograd
fires when it has accumulated into ``.grad``: ``p.register_post_accumulate_grad_hook(h)``,
or ``g.register_hook(h)`` on the gradient accumulator
``g = p.expand_as(p).grad_fn.next_functions[0][0]``. Transformer Engine's layers built with
``delay_wgrad_compute`` compute a weight's gradient later, in ``backward_dw()``; they mark
such a weight ``skip_backward_post_hook = True``, and a wrapper must register its
completion for it through the layer's ``register_wgrad_accumulation_and_reduce_hooks``
instead. A hook registered on every parameter regardless fires during autograd while the
delayed weight's ``.grad`` is still None: the wrapper counts it ready, reduces and reshards
before the gradient exists, and ``backward_dw()`` does not fire the hook again
(NVIDIA/Megatron-LM#6697).

Reported only when the run uses the contract (``RunFacts.delayed_wgrad``: some file reads
the mark or calls the registration), and only in a function that spells neither the mark
nor the registration, nor names a function of the file that does (a hook factory, a
predicate), and is nested in no function that does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ..contract_facts import DELAYED_WGRAD_WORDS
from ..function_index import DEF_LINE, enclosing_def
from . import patterns
from .module import ModuleContext, Unit

POST_ACCUMULATE = "register_post_accumulate_grad_hook"
TENSOR_HOOK = "register_hook"
ACCUMULATOR = "next_functions"  # ``grad_fn.next_functions[0][0]``
PARAMETERS = "param"  # in a loop's iterable: ``parameters()``, ``params``, ``fsdp_parameters``


@dataclass(frozen=True)
class Registration:
    call: cst.Call
    method: str  # POST_ACCUMULATE or TENSOR_HOOK


def unaware_registrations(context: ModuleContext) -> list[Registration]:
    if not context.delayed_wgrad_contract:
        return []
    source = context.source
    if POST_ACCUMULATE not in source and not (TENSOR_HOOK in source and ACCUMULATOR in source):
        return []
    found: list[Registration] = []
    aware: frozenset[str] | None = None  # the file's functions that spell the contract
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        candidates = [
            (call, method)
            for call, method in _in_parameter_loops(context, unit.body)
            if not _does_nothing(call)
        ]
        if not candidates:
            continue
        if aware is None:
            aware = _aware_functions(context)
        if not _asks(context, unit, aware):
            found.extend(Registration(call, method) for call, method in candidates)
    return found


def _aware_functions(context: ModuleContext) -> frozenset[str]:
    """The names of the file's functions whose text spells the mark or the registration
    (and of the functions they are nested in), found from the lines (no code regenerated)."""
    source = context.source.replace("\r\n", "\n").replace("\r", "\n")
    lines = source.split("\n")
    names = set()
    for word in DELAYED_WGRAD_WORDS:
        start = source.find(word)
        while start >= 0:
            number = source.count("\n", 0, start)
            line: int | None = (
                number if DEF_LINE.match(lines[number]) else enclosing_def(lines, number)
            )
            while line is not None:
                names.add(DEF_LINE.match(lines[line]).group(2))
                line = enclosing_def(lines, line)
            start = source.find(word, start + len(word))
    return frozenset(names)


def _asks(context: ModuleContext, unit: Unit | None, aware: frozenset[str]) -> bool:
    """The function, or one it is nested in, spells the mark or the registration, or names
    a function of the file that does (``if self._delays(p)``, ``self._make_hook(p)``): it
    is taken to handle the delayed parameters. (By name: a method named like one that
    spells them counts as asking too.)"""
    while unit is not None:
        if isinstance(unit.owner, cst.FunctionDef):
            if unit.owner.name.value in aware:
                return True
            for stmt in unit.body:
                for node in patterns.walk(stmt):
                    kind = type(node)
                    if (kind is cst.Name and node.value in aware) or (
                        kind is cst.Attribute and node.attr.value in aware
                    ):
                        return True
        unit = unit.parent
    return False


def _does_nothing(call: cst.Call) -> bool:
    """The hook is ``lambda *_: None`` (or ``...``): it keeps the accumulator alive, it
    counts nothing ready."""
    if len(call.args) != 1 or type(call.args[0].value) is not cst.Lambda:
        return False
    body = call.args[0].value.body
    return (type(body) is cst.Name and body.value == "None") or type(body) is cst.Ellipsis


def _in_parameter_loops(context: ModuleContext, body) -> list[tuple[cst.Call, str]]:
    """The registrations of the function's own code (not its nested functions) made in a
    loop (or comprehension) over parameters, on the loop's parameter."""
    found: dict[int, tuple[cst.Call, str]] = {}
    for stmt in body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        for node in patterns.walk(stmt):
            if type(node) is cst.For and _over_parameters(context, node.iter):
                for call, method in _registrations(node.body, _names(node.target)):
                    found.setdefault(id(call), (call, method))
            elif type(node) in (cst.ListComp, cst.GeneratorExp, cst.SetComp):
                loops = _comp_fors(node.for_in)
                if any(_over_parameters(context, f.iter) for f in loops):
                    names = set().union(*(_names(f.target) for f in loops))
                    for call, method in _registrations(node.elt, names):
                        found.setdefault(id(call), (call, method))
    return list(found.values())


def _over_parameters(context: ModuleContext, iterable: cst.CSTNode) -> bool:
    return PARAMETERS in context.code(iterable).lower()


def _comp_fors(comp: cst.CompFor | None) -> list[cst.CompFor]:
    loops = []
    while comp is not None:
        loops.append(comp)
        comp = comp.inner_for_in
    return loops


def _names(target: cst.CSTNode) -> set[str]:
    return {n.value for n in patterns.walk(target) if type(n) is cst.Name}


def _root(node: cst.CSTNode) -> str | None:
    """The name an attribute / item / call chain starts from (``p`` of ``p.a[0].b()``)."""
    while True:
        kind = type(node)
        if kind is cst.Name:
            return node.value
        if kind in (cst.Attribute, cst.Subscript):
            node = node.value
        elif kind is cst.Call:
            node = node.func
        else:
            return None


def _registrations(root: cst.CSTNode, params: set[str]) -> Iterator[tuple[cst.Call, str]]:
    """Hook registrations in ``root`` on a loop parameter (or a name bound from one in the
    loop), or on a gradient accumulator (``...grad_fn.next_functions[0][0]``)."""
    derived = set(params)
    accumulators: set[str] = set()
    for node in patterns.walk(root):
        kind = type(node)
        if kind is cst.Assign and len(node.targets) == 1:
            target = node.targets[0].target
            if type(target) is cst.Name:
                value_names = _names(node.value)
                if _spells_accumulator(node.value):
                    accumulators.add(target.value)
                elif value_names & derived:
                    derived.add(target.value)
        elif kind is cst.Call and type(node.func) is cst.Attribute:
            method = node.func.attr.value
            receiver = node.func.value
            on_parameter = method == POST_ACCUMULATE and _root(receiver) in derived
            on_accumulator = method == TENSOR_HOOK and (
                _root(receiver) in accumulators or _spells_accumulator(receiver)
            )
            if on_parameter or on_accumulator:
                yield node, method


def _spells_accumulator(node: cst.CSTNode) -> bool:
    return any(
        type(n) is cst.Attribute and n.attr.value == ACCUMULATOR for n in patterns.walk(node)
    )
