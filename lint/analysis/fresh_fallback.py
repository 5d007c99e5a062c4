"""main_grad, or a fresh tensor where it is missing, written and dropped (issue #19,
class 2).

A backward that finds a parameter's main_grad not yet allocated may make one:
``if w.main_grad is None: w.main_grad = zeros(...)``, then write ``w.main_grad``. Bound to a
local instead (``main_grad = w.main_grad if w.main_grad is not None else zeros(...)``,
blind corpus 16's PaddleFleet expert path), the fresh tensor is written on that path and
then dropped: nothing hands it back to the parameter, and that weight's gradient for the
step is lost.

A local is such a stand-in when the bindings reaching a write of it include the
parameter's main_grad (``X.main_grad``) and an allocation (``zeros``, ``empty``, ...),
bound as two arms of one conditional expression or by two assignments, the allocation
chosen on a test of whether main_grad is there (naming ``main_grad``, ``None`` or
``hasattr``). A write is the
local handed to a GEMM (a callee named with ``gemm`` or ``matmul``, ending in ``mm``, or
given it as ``out=``; a kernel named for adding, ``accum`` or ``param_grad_add``) or an
in-place method called on it (``add_``). The local is kept when any assignment's value
mentions it (``X.main_grad = main_grad``, ``g = buf.to(dt)`` handed back), when it is
returned or yielded, or handed to a call that is not such a write: then it is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import decided_tests, grad_buffers, patterns, wgrad
from .module import Unit


@dataclass(frozen=True)
class FreshFallback:
    binding: cst.CSTNode  # the statement binding the allocation (or the choice)
    name: str
    owner: str  # X of ``X.main_grad``, as written


def fresh_fallbacks(unit: Unit) -> list[FreshFallback]:
    found = []
    for name, (owner, binding) in _stand_ins(unit).items():
        writes, kept = _uses(unit, name)
        if writes and not kept:
            found.append(FreshFallback(binding, name, owner))
    return found


def _stand_ins(unit: Unit) -> dict[str, tuple[str, cst.CSTNode]]:
    """Locals bound both to ``X.main_grad`` and to an allocation: name -> (X, the binding
    that allocates, or the conditional expression's statement)."""
    owners: dict[str, str] = {}
    fresh: dict[str, cst.CSTNode] = {}
    for d in unit.graph.defs:
        if d.kind != "assign" or d.value is None or d.node.owner is None:
            continue
        if type(d.value) is cst.IfExp:
            arms, tests = [d.value.body, d.value.orelse], [d.value.test]
        else:
            arms, tests = [d.value], [stmt.test for stmt, _ in d.node.enclosing_ifs]
        for arm in arms:
            owner = patterns.main_grad_owner(arm)
            if owner is not None:
                owners.setdefault(d.name, unit.context.code(owner).strip())
            elif patterns.callee_name(arm) in patterns.ALLOCATORS and _asks_missing(tests):
                fresh.setdefault(d.name, d.node.owner)
    return {name: (owners[name], fresh[name]) for name in owners.keys() & fresh.keys()}


def _asks_missing(tests) -> bool:
    """The allocation is chosen on whether main_grad is there (``main_grad is None``,
    ``hasattr(w, "main_grad")``), not on a mode (an overwrite switch choosing a scratch
    buffer is GMLP001's)."""
    for test in tests:
        text = decided_tests.text_of(test)
        if patterns.MAIN_GRAD in text or "None" in text or "hasattr" in text:
            return True
    return False


def _uses(unit: Unit, name: str) -> tuple[bool, bool]:
    """Whether the function writes the local (see the module's text), and whether it keeps
    it anywhere (or hands it to something else)."""
    writes = kept = False
    for root, _ in unit.expression_roots():
        for sub in patterns.walk(root):
            if type(sub) is cst.Call:
                role = _role_in_call(sub, name)
                writes |= role == "write"
                kept |= role == "other"
            elif type(sub) in (cst.Return, cst.Yield) and _mentions(sub.value, name):
                kept = True
            elif type(sub) is cst.Assign and _mentions(sub.value, name):
                kept = True  # bound, stored, or converted and handed on (``g = buf.to(dt)``)
    return writes, kept


def _role_in_call(call: cst.Call, name: str) -> str | None:
    func = call.func
    receiver = type(func) is cst.Attribute and _is_name(func.value, name)
    if receiver:
        method = func.attr.value
        if method.endswith("_") and not method.endswith("__"):
            return "write"  # ``main_grad.add_(g)``
        return None  # ``main_grad.shape``-like reads: ``.view(...)``, ``.sum()``
    handed = [a for a in call.args if _is_name(a.value, name)]
    if not handed:
        return None
    if wgrad.looks_like_gemm(call) or grad_buffers.adds_into_argument(call):
        return "write"
    if (patterns.callee_name(call) or "") in patterns.NON_ALIASING_CALLS:
        return None
    return "other"


def _mentions(expr, name: str) -> bool:
    return expr is not None and any(_is_name(sub, name) for sub in patterns.walk(expr))


def _is_name(expr, name: str) -> bool:
    return type(expr) is cst.Name and expr.value == name
