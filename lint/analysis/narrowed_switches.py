"""A switch handed on beside the narrowed value a helper of the file derived from it.

A helper such as Primus's ``_fuse_wgrad_accum_pattern(config, weight)`` returns None when
``config.gradient_accumulation_fusion`` is off, and also in further cases (a recipe whose
GEMM has no accumulating epilogue): its result is the switch narrowed. When a function asks
that helper and hands its result to the GEMM (which then accumulates into main_grad only
where the narrowed value is on), everything else that must agree with the GEMM (skipping
the separate add, marking ``grad_added_to_main_grad``, handing back a dummy) must be told
the narrowed value too. Handed the raw switch instead, it believes the GEMM accumulated in
exactly the cases the helper ruled out, and the weight gradient is lost there.

Known here: top-level helpers of the file whose body starts, at its top level, with ``if not
P.S: return None`` (or ``not getattr(P, "S", ...)``, ``return False``) for a parameter P
and that return None / False on some other path; a local bound to a call of such a helper in
a function; the raw switch ``A.S`` (A the expression handed for P) handed to another call
of that function, by keyword or position, directly or through a local every binding of
which reaching the call is that switch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import patterns

if TYPE_CHECKING:
    from .module import ModuleContext, Unit


@dataclass(frozen=True)
class Narrowing:
    """A helper that narrows switch ``switch`` of its parameter number ``index``."""

    name: str
    index: int
    parameter: str
    switch: str


@dataclass(frozen=True)
class RawUse:
    value: cst.BaseExpression  # the raw switch handed on
    switch: str  # its text, ``self.config.gradient_accumulation_fusion``
    narrowed: str  # the local holding the narrowed value
    helper: str


def narrowing_helpers(context: ModuleContext) -> dict[str, Narrowing]:
    found = {}
    for stmt in context.module.body:
        if type(stmt) is cst.FunctionDef:
            narrowing = _narrowing(stmt)
            if narrowing is not None:
                found[narrowing.name] = narrowing
    return found


def _narrowing(function: cst.FunctionDef) -> Narrowing | None:
    params = [p.name.value for p in function.params.params]
    body = function.body.body if type(function.body) is cst.IndentedBlock else ()
    for position, stmt in enumerate(body):
        if type(stmt) is not cst.If or stmt.orelse is not None or not _returns_off(stmt.body):
            continue
        owner, switch = _switch_off(stmt.test)
        if owner is None or owner not in params:
            continue
        later = [sub for s in body[position + 1 :] for sub in patterns.walk(s)]
        if any(type(sub) is cst.Return and _off(sub.value) for sub in later):
            return Narrowing(function.name.value, params.index(owner), owner, switch)
    return None


def _returns_off(block) -> bool:
    stmts = [s for line in block.body if type(line) is cst.SimpleStatementLine for s in line.body]
    return len(stmts) == 1 and type(stmts[0]) is cst.Return and _off(stmts[0].value)


def _off(value) -> bool:
    return value is None or patterns.is_false_literal(value)


def _switch_off(test) -> tuple[str | None, str]:
    """(P, S) for ``not P.S`` / ``not getattr(P, "S", ...)``."""
    if type(test) is not cst.UnaryOperation or type(test.operator) is not cst.Not:
        return None, ""
    inner = test.expression
    if type(inner) is cst.Attribute and type(inner.value) is cst.Name:
        return inner.value.value, inner.attr.value
    if type(inner) is cst.Call and patterns.callee_name(inner) == "getattr":
        args = patterns.positional_args(inner)
        if (
            len(args) >= 2
            and type(args[0].value) is cst.Name
            and type(args[1].value) is cst.SimpleString
        ):
            return args[0].value.value, args[1].value.evaluated_value
    return None, ""


def raw_uses(unit: Unit, helpers: dict[str, Narrowing]) -> Iterator[RawUse]:
    """The raw switch handed to a call of ``unit`` beside a narrowed local handed on too."""
    code = unit.context.code
    narrowed: dict[str, tuple[str, str]] = {}  # local -> (switch text, helper)
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Assign or len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0].target, stmt.value
        if type(target) is not cst.Name or type(value) is not cst.Call:
            continue
        helper = helpers.get(patterns.callee_name(value) or "")
        if helper is None or type(value.func) is not cst.Name:
            continue
        handed = _argument(value, helper)
        if handed is not None:
            narrowed[target.value] = (f"{code(handed).strip()}.{helper.switch}", helper.name)
    if not narrowed:
        return
    calls = [
        (sub, node)
        for root, node in unit.expression_roots()
        for sub in patterns.walk(root)
        if type(sub) is cst.Call
    ]
    handed_on = {
        name
        for call, _ in calls
        for arg in call.args
        for sub in patterns.walk(arg.value)
        if type(sub) is cst.Name and (name := sub.value) in narrowed
    }
    for local in handed_on:
        switch, helper = narrowed[local]
        for call, node in calls:
            if patterns.callee_name(call) == helper:
                continue
            for arg in call.args:
                if _is_switch(unit, arg.value, switch, node):
                    yield RawUse(arg.value, switch, local, helper)


def _argument(call: cst.Call, helper: Narrowing):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == helper.parameter:
            return arg.value
    positional = patterns.positional_args(call)
    return positional[helper.index].value if len(positional) > helper.index else None


def _is_switch(unit: Unit, value, switch: str, node, depth: int = 2) -> bool:
    """``value`` is the raw switch: its text, ``getattr(A, "S", ...)``, or a local every
    reaching binding of which is."""
    text = unit.context.code(value).strip()
    if text == switch:
        return True
    if type(value) is cst.Call and patterns.callee_name(value) == "getattr":
        args = patterns.positional_args(value)
        if len(args) >= 2 and type(args[1].value) is cst.SimpleString:
            spelled = f"{unit.context.code(args[0].value).strip()}.{args[1].value.evaluated_value}"
            return spelled == switch
    if type(value) is cst.Name and depth > 0 and node is not None:
        defs = unit.reaching.reaching(value.value, node)
        return bool(defs) and all(
            d.value is not None and _is_switch(unit, d.value, switch, d.node, depth - 1)
            for d in defs
        )
    return False
