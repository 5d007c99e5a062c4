"""What a weight-gradient helper hands back, as its caller uses it (GMLP031; blind corpus 26).

A helper named for the weight gradient that marks ``grad_added_to_main_grad`` and returns
main_grad itself (quack's ``linear_bwd_compute_weight_grad`` with ``dweight = main_grad``)
hands main_grad on as ``.grad`` when a ``backward`` of the file returns its result; a
helper whose result is a GEMM's ``out=`` buffer does not (review 29).
"""

from __future__ import annotations

import libcst as cst

from . import patterns, wgrad
from .module import ModuleContext, Unit


def handed_on_results(context: ModuleContext) -> frozenset[str]:
    """For ``context.shared``: the functions of the file whose call's result a ``backward``
    returns, directly or through a local bound to the call (``dweight = helper(...)``, then
    ``return dx, dweight``): what they return is handed on as a gradient. A helper whose
    result is a GEMM's ``out=`` buffer is not one (review 29)."""
    found: set[str] = set()
    for unit in context.units:
        if unit.name != "backward":
            continue
        for root, node in unit.expression_roots():
            if type(root) is not cst.Return or root.value is None:
                continue
            for element in wgrad.elements(root.value):
                values = [element]
                if type(element) is cst.Name:
                    values = [
                        d.value
                        for d in unit.reaching.reaching(element.value, node)
                        if d.kind == "assign" and d.value is not None
                    ]
                found.update(
                    v.func.value for v in values if type(v) is cst.Call and type(v.func) is cst.Name
                )
    return frozenset(found)


def plain_main_grad(unit: Unit, expr, node, depth: int) -> bool:
    """``expr`` is main_grad itself (``w.main_grad``, ``getattr(w, "main_grad", ...)``) or
    a local every binding of which, reaching ``node``, is one (through at most ``depth``
    names)."""
    if patterns.is_attr(expr, patterns.MAIN_GRAD):
        return True
    if type(expr) is cst.Call and patterns.is_getattr_of(expr, patterns.MAIN_GRAD):
        return True
    if type(expr) is cst.IfExp:  # ``getattr(w, "main_grad", None) if w is not None else None``
        arms = (expr.body, expr.orelse)
        return any(plain_main_grad(unit, a, node, depth) for a in arms) and all(
            patterns.is_none_like(a) or plain_main_grad(unit, a, node, depth) for a in arms
        )
    if type(expr) is not cst.Name or depth == 0:
        return False
    defs = unit.reaching.reaching(expr.value, node)
    return bool(defs) and all(
        d.kind == "assign"
        and d.value is not None
        and plain_main_grad(unit, d.value, d.node, depth - 1)
        for d in defs
    )
