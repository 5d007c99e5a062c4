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
from .consistent_paths import passes_in_order
from .marking_calls import MAIN_GRAD_FETCHES

if TYPE_CHECKING:
    from .module import Unit


def delay_gated_choices(unit: Unit) -> Iterator[tuple[cst.BaseExpression, str, str | None]]:
    """(the test, the delay spelling it depends on, None) of each choice between a dummy
    weight gradient and a computed product, as a conditional expression or an ``if`` /
    ``else`` binding one name, whose test reads the delay mode (directly or through a local
    the function binds from it); (the test, the spelling, the name) of each dummy made only
    under such a test over a name holding main_grad or a product (``_dummy_only_under_test``)."""
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
                yield test, cause, None
        fallthrough = _dummy_only_under_test(unit, stmt, helpers)
        if fallthrough is not None:
            cause = _delay_cause(stmt.test, code, delay_locals)
            if cause is not None:
                yield stmt.test, cause, fallthrough


def _dummy_only_under_test(unit: Unit, stmt, helpers: frozenset[str]) -> str | None:
    """``if T: X = <dummy>`` with no ``else``, where X is returned and a binding of X
    reaching the ``if`` holds main_grad (``X = [get_main_grad_from_param(w) for w in
    weights]``) or a computed product: a run that fails T hands that back (blind corpus
    24, Transformer Engine's grouped MLP backward with the dummies made only ``if
    accumulate and delay_wgrad``). The name X, or None."""
    if type(stmt) is not cst.If or type(stmt.orelse) is cst.Else:
        return None
    body = _sole_value(stmt.body)
    if body is None or _kind(body[1], helpers) != "dummy":
        return None
    name = body[0]
    node = unit.node_for(stmt)
    if node is None or name not in unit.returned_names:
        return None
    # Some run binds the name to main_grad or a product, passes the ``if`` without taking
    # its dummy and returns the name, binding it to nothing else on the way (repeated
    # tests taken the same way: an immediate step that returned its dummies earlier, or an
    # ``elif`` that makes them too, is no such run).
    rebinds = frozenset(d.node.index for d in unit.graph.defs if d.name == name)
    carried = _carrying(unit, name)  # ``grad_params = w_list + bias_list``; returned
    returns = [
        n
        for n in unit.graph.nodes
        if type(n.owner) is cst.Return
        and n.owner.value is not None
        and any(r.value in carried for r in patterns.read_names(n.owner.value))
    ]
    for d in unit.reaching.reaching(name, node):
        held = d.kind == "assign" and d.value is not None
        if not held or (_kind(d.value, helpers) != "product" and not _holds_main_grads(d.value)):
            continue
        if any(
            passes_in_order(unit.graph, (d.node, node, ret), (rebinds, rebinds, rebinds))
            for ret in returns
        ):
            return name
    return None


def _carrying(unit: Unit, name: str) -> set[str]:
    """``name`` and the locals bound from it, directly or through one another."""
    carried = {name}
    grown = True
    while grown:
        grown = False
        for d in unit.graph.defs:
            if d.name in carried or d.value is None:
                continue
            if any(r.value in carried for r in patterns.read_names(d.value)):
                carried.add(d.name)
                grown = True
    return carried


def _holds_main_grads(value) -> bool:
    """main_grad itself, or a list made of one per weight (a comprehension whose element
    is a weight's main_grad or TE's fetch of it)."""
    if patterns.is_main_grad_direct(value):
        return True
    if type(value) not in (cst.ListComp, cst.GeneratorExp):
        return False
    element = value.elt
    return patterns.is_main_grad_direct(element) or (
        patterns.callee_name(element) in MAIN_GRAD_FETCHES
    )


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
    value = getattr(small, "value", None)  # ``x: T`` binds no value
    return None if name is None or value is None else (name, value)


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
