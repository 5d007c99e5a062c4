"""GMLP002's delay-mode gate: the dummy-versus-real weight gradient chosen on whether this step
defers the weight gradient (blind corpus 17, the zero-bubble Megatron fork's linear backward
with ``grad_weight = _dummy_wgrad(...) if wgrad_compute else grad_output.t().matmul(x)`` and
``wgrad_compute = not WeightGradStore.split_bw()``).

Whether autograd gets a dummy or the real gradient depends on where the gradient goes (the
op-level fusion setting), not on when it is computed. Gated on the split or delay mode, a
deferred step computes the real gradient and hands it back while the store also adds it
into main_grad later (twice), and an immediate step without fusion hands back a dummy while
nothing wrote main_grad (lost). A choice between a dummy and None on that mode is right
(TE's delayed wgrad hands back None and lets ``backward_dw`` finish): only dummy against a
computed product counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from ..wgrad_words import delay_mode_spelling
from . import patterns, wgrad

if TYPE_CHECKING:
    from .module import Unit


def delay_gated_choices(unit: Unit) -> Iterator[tuple[cst.BaseExpression, str]]:
    """(the test, the delay spelling it depends on) of each choice between a dummy weight
    gradient and a computed product, as a conditional expression or an ``if`` / ``else``
    binding one name, whose test reads the delay mode (directly or through a local the
    function binds from it)."""
    helpers = unit.context.bookkeeping_helpers
    calls = unit.survey.calls
    if calls.isdisjoint(helpers) and not any("dummy" in name.lower() for name in calls):
        return  # no dummy is made here (the survey every rule shares says so: no walk)
    code = unit.context.code
    delay_locals = _delay_locals(unit)
    for stmt, _ in unit.statements():
        for test, sides in _choices(stmt):
            kinds = [_kind(side, helpers) for side in sides]
            if sorted(kinds) != ["dummy", "product"]:
                continue
            cause = _delay_cause(test, code, delay_locals)
            if cause is not None:
                yield test, cause


def _choices(stmt) -> Iterator[tuple[cst.BaseExpression, tuple]]:
    if type(stmt) is cst.If and type(stmt.orelse) is cst.Else:
        body = _sole_value(stmt.body)
        other = _sole_value(stmt.orelse.body)
        if body is not None and other is not None and body[0] == other[0]:
            yield stmt.test, (body[1], other[1])
        return
    if isinstance(stmt, cst.BaseCompoundStatement):
        return
    for sub in patterns.walk(stmt):
        if type(sub) is cst.IfExp:
            yield sub.test, (sub.body, sub.orelse)


def _sole_value(suite) -> tuple[str, cst.BaseExpression] | None:
    """(name, value) of a block that is one assignment ``name = value``."""
    body = wgrad.suite_body(suite)
    if len(body) != 1 or type(body[0]) is not cst.SimpleStatementLine or len(body[0].body) != 1:
        return None
    small = body[0].body[0]
    name = wgrad.assigned_name(small)
    return None if name is None else (name, small.value)


def _kind(expr: cst.BaseExpression, helpers: frozenset[str]) -> str:
    if type(expr) is cst.Call:
        name = patterns.callee_name(expr) or ""
        if "dummy" in name.lower() or name in helpers:
            return "dummy"
    if wgrad.has_product(expr) and not wgrad.multiplies_weight(expr):
        return "product"
    return "other"


def _delay_locals(unit: Unit) -> dict[str, str]:
    """Locals every assignment of which in the function reads the delay mode: name -> the
    spelling it reads."""
    found: dict[str, str] = {}
    other: set[str] = set()
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Assign:
            continue
        names = [t.target.value for t in stmt.targets if type(t.target) is cst.Name]
        word = delay_mode_spelling(unit.context.code(stmt.value))
        for name in names:
            if word is None:
                other.add(name)
            else:
                found.setdefault(name, word)
    return {name: word for name, word in found.items() if name not in other}


def _delay_cause(test, code, delay_locals: dict[str, str]) -> str | None:
    word = delay_mode_spelling(code(test))
    if word is not None:
        return word
    for name in patterns.read_names(test):
        if name.value in delay_locals:
            return f"{name.value}, bound from {delay_locals[name.value]}"
    return None
