"""A dummy wgrad owed under fused accumulation, shadowed by an earlier "delayed" arm.

When the weight gradient goes into main_grad (``accumulate_into_main_grad``,
``fuse_wgrad_accumulation``), autograd must be handed a dummy for the weight whether the
wgrad GEMM runs now or later in ``backward_dw()``: the grad-accumulation hook that
``backward_dw()`` fires reads ``.grad`` (Megatron's DDP asserts it is not None under
``overlap_grad_reduce``) and the dummy maker marks ``grad_added_to_main_grad``. Transformer
Engine asks the fused-accumulation test first and hands back None for a delayed wgrad only
on its ``elif``. Asked the other way round, ``if delay: G = None / elif accumulate: G =
dummy``, the delayed arm wins whenever both hold, since its test says nothing against
accumulation: the fused, delayed case hands back None. Found in ``if`` / ``elif`` chains and
in conditional expressions (``None if delay else (dummy if fuse else g)``), by what the two
arms do to one name (or to the returned value), not by the tests' spelling beyond the words
below.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from . import patterns

if TYPE_CHECKING:
    from .module import Unit

# A test about the delayed wgrad (``delay_wgrad``, ``wgrad_store.delay_wgrad_compute()``).
DELAY_WORD = "delay"
# A test about the wgrad going into main_grad.
FUSION_WORDS = ("main_grad", "wgrad_accumulation", "accumulation_fusion", "accumulate")


def shadowing_tests(unit: Unit) -> Iterator[cst.BaseExpression]:
    """The test of each earlier arm that hands None on a delay test not excluding fused
    accumulation, where a later arm of the same chain, tested on fused accumulation, hands a
    dummy to the same name (or returns one)."""
    seen: set[int] = set()
    for stmt, _ in unit.statements():
        if type(stmt) is cst.If and id(stmt) not in seen:
            arms = list(_if_arms(stmt, seen))
            yield from _shadowing(arms, _none_targets, _dummy_targets)
    for root, _ in unit.expression_roots():
        for sub in patterns.walk(root):
            if type(sub) is cst.IfExp and id(sub) not in seen:
                arms = list(_ifexp_arms(sub, seen))
                yield from _shadowing(arms, _none_value, _dummy_value)


def _shadowing(arms, nones, dummies) -> Iterator[cst.BaseExpression]:
    for i, (test, body) in enumerate(arms):
        held = nones(body)
        if not held or test is None or not _about_delay(test) or _excludes_fusion(test):
            continue
        for later_test, later_body in arms[i + 1 :]:
            if later_test is not None and _about_fusion(later_test) and held & dummies(later_body):
                yield test
                break


def _if_arms(stmt: cst.If, seen: set[int]):
    current = stmt
    while type(current) is cst.If:
        seen.add(id(current))
        yield current.test, current.body
        current = current.orelse
    if type(current) is cst.Else:
        yield None, current.body


def _ifexp_arms(expr: cst.IfExp, seen: set[int]):
    current = expr
    while type(current) is cst.IfExp:
        seen.add(id(current))
        yield current.test, current.body
        current = current.orelse
    yield None, current


def _names(test) -> list[str]:
    return [
        sub.value if type(sub) is cst.Name else sub.attr.value
        for sub in patterns.walk(test)
        if type(sub) in (cst.Name, cst.Attribute)
    ]


def _about_delay(test) -> bool:
    return any(DELAY_WORD in name.lower() for name in _names(test))


def _about_fusion(test) -> bool:
    return any(word in name.lower() for name in _names(test) for word in FUSION_WORDS)


def _excludes_fusion(test) -> bool:
    """The test holds only without fused accumulation: ``not accumulate`` among its terms."""
    return any(
        type(sub) is cst.UnaryOperation and type(sub.operator) is cst.Not and _about_fusion(sub)
        for sub in patterns.walk(test)
    )


def _small(body):
    for stmt in patterns.walk(body):
        if type(stmt) in (cst.Assign, cst.Return):
            yield stmt


def _none_targets(body) -> set[str]:
    """Names an arm binds to no gradient (``G = None``, ``G = [None] * n``), and the
    positions of a returned tuple that hold none."""
    found = set()
    for stmt in _small(body):
        if type(stmt) is cst.Assign and patterns.is_none_like(stmt.value):
            found |= {_text(t.target) for t in stmt.targets}
        elif type(stmt) is cst.Return and stmt.value is not None:
            found |= _slots(stmt.value, patterns.is_none_like)
    return found - {None}


def _dummy_targets(body) -> set[str]:
    found = set()
    for stmt in _small(body):
        if type(stmt) is cst.Assign and _makes_dummy(stmt.value):
            found |= {_text(t.target) for t in stmt.targets}
        elif type(stmt) is cst.Return and stmt.value is not None:
            found |= _slots(stmt.value, _makes_dummy)
    return found - {None}


def _none_value(expr) -> set[str]:
    return {"<value>"} if patterns.is_none_like(expr) else set()


def _dummy_value(expr) -> set[str]:
    return {"<value>"} if _makes_dummy(expr) else set()


def _makes_dummy(expr) -> bool:
    return any("dummy" in (patterns.callee_name(sub) or "") for sub in patterns.walk(expr))


def _slots(expr, holds) -> set[str]:
    """``<return:k>`` for each position k of a returned tuple whose value ``holds``."""
    values = [e.value for e in expr.elements] if type(expr) is cst.Tuple else [expr]
    return {f"<return:{k}>" for k, value in enumerate(values) if holds(value)}


def _text(expr) -> str | None:
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name:
        return f"{expr.value.value}.{expr.attr.value}"
    return None
