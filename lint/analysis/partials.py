"""Keyword arguments a call is given through ``functools.partial``.

``_wgrad_gemm = functools.partial(general_gemm, layout="NT", accumulate=False)`` at the top
of a file, then ``_wgrad_gemm(x, dy, out=w.main_grad)`` in a backward: the call writes
main_grad with ``accumulate=False`` although its own argument list never says so. Here a
partial's keywords count as given at every call of the name bound to it, the call's own
keywords overriding them (as Python does).

Seen: a callee that is a name bound to ``partial(f, ...)`` / ``functools.partial(f, ...)``
by the only binding of the function reaching the call, or, when the function binds the
name nowhere, by the only binding in a function or module around it (a module-level
constant); ``partial(f, ...)(...)`` called at once; a partial of a partial. Not seen: a
partial kept on ``self`` or in a container, or made in another file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns

if TYPE_CHECKING:
    from .module import Unit

PARTIAL = "partial"
# How many partials of partials are followed.
MAX_DEPTH = 3


def pinned_keywords(unit: Unit, call: cst.Call, node) -> dict[str, cst.BaseExpression]:
    """The keyword arguments partials pin for ``call`` where graph node ``node`` of ``unit``
    runs it (innermost partial last, so its keywords win); {} when its callee is no
    partial the function or the code around it binds."""
    found: dict[str, cst.BaseExpression] = {}
    if PARTIAL not in unit.context.source:  # most files make none: look no further
        return found
    chain = []
    current = _partial_of(unit, call.func, node)
    while current is not None and len(chain) < MAX_DEPTH:
        chain.append(current)
        target = patterns.positional_args(current)
        current = _partial_of(unit, target[0].value, node) if target else None
    for partial in reversed(chain):  # the outermost (the innermost function's) first
        found.update(
            (arg.keyword.value, arg.value) for arg in partial.args if arg.keyword is not None
        )
    return found


def _partial_of(unit: Unit, func, node) -> cst.Call | None:
    if is_partial(func):
        return func
    if type(func) is not cst.Name:
        return None
    defs = unit.reaching.reaching(func.value, node)
    if defs:
        return _only_partial(defs)
    # Not bound in the function: a closure variable or a module-level constant.
    around = unit.parent
    while around is not None:
        defs = [d for d in around.graph.defs if d.name == func.value]
        if defs:
            return _only_partial(defs)
        around = around.parent
    return None


def _only_partial(defs) -> cst.Call | None:
    if len(defs) != 1 or defs[0].kind != "assign":
        return None
    value = defs[0].value
    return value if is_partial(value) else None


def is_partial(value) -> bool:
    """``partial(f, ...)`` / ``functools.partial(f, ...)`` with ``f`` given by position."""
    return (
        type(value) is cst.Call
        and patterns.callee_name(value) == PARTIAL
        and bool(patterns.positional_args(value))
    )
