"""main_grad set up on the wrong module (issue #19, class 8; GMLP058).

A test or benchmark builds a module with ``accumulate_into_main_grad=True`` (or
``fuse_wgrad_accumulation=True``), runs a backward through it, and gives main_grad buffers to
the parameters of another module of the same function instead (blind corpus 25, a DeepGEMM
grouped linear's wgrad test: ``weight = getattr(grouped_linear_deepgemm, f"weight{i}")``
where the fused one is ``grouped_linear_main_grad``). The fused module's weight-gradient
GEMMs find no main_grad (Megatron-LM #5209's shape).

Seen, per function: a local bound to a class's call (a capitalised callee) given one of
those keywords as the literal ``True``, called later (its forward) with a ``.backward(``
after that call; no statement of the function binds ``X.main_grad`` on an expression
naming that local, or on a name bound from one, and no set-up call is handed it; while
some ``X.main_grad = ...`` binding does name another local module (directly, or through
a name bound from it). Reported at that binding of ``X`` (or at the main_grad binding
itself when ``X`` names the module directly).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from . import patterns
from .late_main_grads import is_setup_call
from .module import Unit

FUSED_KEYWORDS = ("accumulate_into_main_grad", "fuse_wgrad_accumulation")
_FUSED_TRUE = re.compile(r"(?:accumulate_into_main_grad|fuse_wgrad_accumulation)\s*=\s*True")


def builds_fused(source: str) -> bool:
    """The file hands one of the keywords the literal True somewhere (a quick test)."""
    return _FUSED_TRUE.search(source) is not None


def misdirected(unit: Unit, helpers: frozenset[str]) -> Iterator[tuple[cst.CSTNode, str, str]]:
    """(where to report, the module set up instead, the fused module) for each."""
    body = unit.owner.body
    assigns = [n for n in patterns.walk(body) if type(n) is cst.Assign]
    fused = [name for name in (_fused_module(a) for a in assigns) if name is not None]
    if not fused:
        return
    # locals bound to a class built here (``GroupedLinear(...)``: a capitalised callee)
    modules = {_bound_name(a) for a in assigns if _builds_an_object(a.value)} - {None}
    # a name bound from an expression naming a module: ``weight = getattr(m, "weight0")``
    derived: dict[str, tuple[str, cst.Assign]] = {}
    for a in assigns:
        target = _bound_name(a)
        if target is None:
            continue
        named = _names(a.value) & modules
        if len(named) == 1:
            derived.setdefault(target, (named.pop(), a))
    setups: list[tuple[str, cst.CSTNode]] = []  # (module, where) per main_grad binding
    for stmt in patterns.walk(body):
        found = patterns.attribute_set(stmt, patterns.MAIN_GRAD)  # ``X.main_grad =``, setattr
        if found is None:
            continue
        owner = found[0]
        named = _names(owner) & modules
        if len(named) == 1:
            setups.append((named.pop(), stmt))
        elif type(owner) is cst.Name and owner.value in derived:
            setups.append(derived[owner.value])
    set_up = {module for module, _ in setups}
    for call in patterns.walk(body):
        if type(call) is cst.Call and is_setup_call(call, helpers):
            set_up |= _names(call) & modules
    for module in fused:
        if module in set_up or not _runs_backward(body, module):
            continue
        others = [(m, where) for m, where in setups if m != module and m not in fused]
        if others:
            other, where = others[0]
            yield where, other, module


def _fused_module(assign: cst.Assign) -> str | None:
    if type(assign.value) is not cst.Call:
        return None
    for arg in assign.value.args:
        if (
            arg.keyword is not None
            and arg.keyword.value in FUSED_KEYWORDS
            and patterns.is_true_literal(arg.value)
        ):
            return _bound_name(assign)
    return None


def _builds_an_object(value: cst.CSTNode) -> bool:
    if type(value) is not cst.Call:
        return False
    name = patterns.callee_name(value) or ""
    return name[:1].isupper()


def _bound_name(assign: cst.Assign) -> str | None:
    if len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name:
        return assign.targets[0].target.value
    return None


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in patterns.walk(node) if type(n) is cst.Name}


def _runs_backward(body: cst.CSTNode, module: str) -> bool:
    """The module is called, and a ``.backward(`` call comes after (in source order)."""
    seen_call = False
    for node in patterns.walk(body):  # depth-first, in source order
        if type(node) is not cst.Call:
            continue
        if type(node.func) is cst.Name and node.func.value == module:
            seen_call = True
        elif seen_call and type(node.func) is cst.Attribute and node.func.attr.value == "backward":
            return True
    return False
