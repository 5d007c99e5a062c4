"""A wrapper that marks `grad_added_to_main_grad` applied to a function that writes none.

A file may factor the mark out of its wgrad functions into a decorator (or any wrapper
factory): ``def marks(fn)`` returning an inner ``wrapper(weight, ...)`` that calls
``fn(weight, ...)`` and then sets ``weight.grad_added_to_main_grad = True``. That is right
around a function that wrote ``weight.main_grad``; around one that computes the gradient
into a fresh tensor and returns it (a gradient helper, ``project.Helpers.gradient``), the
mark claims a write that never happened and Megatron's hook drops the returned gradient
(issue #19, class 3).

Seen: top-level functions of the file with one parameter, defining a wrapper that calls
that parameter and marks one of its own positional parameters (under no test but
``hasattr`` / grad_added ones, which are not correlated with a write); applied as a
decorator (``@marks``) or called (``marks(f)``) on a gradient helper of the run, whose
parameter at the marked position is thereby marked. Not seen: wrappers defined in other
files, class-based decorators, marks on a keyword-only or ``*args`` parameter, and wrapped
functions that write through a helper which is not a gradient helper (those may write).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns, wgrad
from .module import ModuleContext, suite_body


@dataclass(frozen=True)
class MarkedHelper:
    site: cst.CSTNode  # the decorator or the wrapping call
    wrapper: str
    helper: str
    parameter: str  # the helper's parameter that gets marked


def marked_helpers(context: ModuleContext) -> list[MarkedHelper]:
    """For ``context.shared``: gradient helpers wrapped by a marking wrapper."""
    helpers = context.gradient_helpers
    if not helpers or "grad_added_to_main_grad" not in context.source:
        return []
    top = [s for s in context.module.body if type(s) is cst.FunctionDef]
    wrappers = {w.name.value: p for w in top if (p := _marked_position(w)) is not None}
    if not wrappers:
        return []
    found = []
    functions = {f.name.value: f for f in top}
    for function in top:
        if function.name.value not in helpers:
            continue
        for decorator in function.decorators:
            name = _name(decorator.decorator)
            if name in wrappers:
                found.extend(_marked(decorator, name, function, wrappers[name]))
    nodes = (n for u in context.units for stmt in u.body for n in patterns.walk(stmt))
    for call in (n for n in nodes if type(n) is cst.Call):
        name = _name(call.func)
        args = patterns.positional_args(call)
        if name in wrappers and len(args) == 1 and type(args[0].value) is cst.Name:
            target = functions.get(args[0].value.value)
            if target is not None and target.name.value in helpers:
                found.extend(_marked(call, name, target, wrappers[name]))
    return found


def _marked(site, wrapper: str, helper: cst.FunctionDef, position: int) -> Iterator[MarkedHelper]:
    params = [p.name.value for p in (*helper.params.posonly_params, *helper.params.params)]
    if position < len(params):
        yield MarkedHelper(site, wrapper, helper.name.value, params[position])


def _name(expr) -> str | None:
    return expr.value if type(expr) is cst.Name else None


def _marked_position(factory: cst.FunctionDef) -> int | None:
    """The position of the parameter the factory's wrapper marks after calling the wrapped
    function; None when the factory is no such wrapper."""
    params = factory.params.params
    if len(params) != 1 or factory.params.posonly_params:
        return None
    wrapped = params[0].name.value
    for inner in suite_body(factory.body):
        if type(inner) is not cst.FunctionDef:
            continue
        names = [p.name.value for p in (*inner.params.posonly_params, *inner.params.params)]
        calls = any(
            type(n) is cst.Call and _name(n.func) == wrapped for n in patterns.walk(inner.body)
        )
        if not calls:
            continue
        for small, tests in _marks(inner.body.body, ()):
            subject = wgrad.marked_subject(small)
            if (
                type(subject) is cst.Name
                and subject.value in names
                and all(_guard_only(test) for test in tests)
            ):
                return names.index(subject.value)
    return None


def _marks(body, tests) -> Iterator[tuple[cst.CSTNode, tuple]]:
    """Small statements of a body with the ``if`` tests around them (loops and ``with``
    are walked, other compound statements are not: a mark there may be correlated)."""
    for stmt in body:
        kind = type(stmt)
        if kind is cst.SimpleStatementLine:
            for small in stmt.body:
                yield small, tests
        elif kind is cst.If:
            yield from _marks(suite_body(stmt.body), (*tests, stmt.test))
        elif kind in (cst.For, cst.With):
            yield from _marks(suite_body(stmt.body), tests)


def _guard_only(test) -> bool:
    """A ``hasattr`` / grad_added test: whether the weight has the flag at all."""
    return any(
        type(n) is cst.Call and patterns.callee_name(n) == "hasattr" for n in patterns.walk(test)
    ) or any(
        type(n) is cst.Attribute and n.attr.value == patterns.GRAD_ADDED
        for n in patterns.walk(test)
    )
