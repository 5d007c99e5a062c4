"""A mode of the backward in which the weight gradient goes nowhere (issue #19, classes 3
and 6).

A split backward chooses per mode: ``if ctx.use_zbv: store.put(..., work); g = None``
``else: g = x.t() @ dy``. Each arm delivers the gradient once, the first through the store
(or a write into the weight's buffer), the second by returning it. An arm that sets the
returned ``g`` to None and does nothing else (ColossalAI's vocabulary-parallel LM head in
blind corpus 17 lost its ``put``: "dW is computed in the W pass", by nobody) drops the
weight gradient for every step run in that mode.

Only plain shapes are taken, so that a None is never read as a drop where something else
delivers: ``g = None`` as the only work of an ``if`` arm (the arm binds only constants and
names, and may return names: ``if zbv: g = None; return dx, g``), or ``g = None if T else
<product>``; ``g`` returned by the backward and bound somewhere to a product of no weight
(the weight gradient; ``dy @ w`` is the input's; a name with ``bias`` is a bias gradient);
in a backward that names no main_grad, assigns no ``.grad``, hands no work on, puts
nothing into a container (``append``, ``put``, ...) and spells no string with ``grad``. The
test must read the split-backward mode (``zbv``, ``zero_bubble``, ``split``, ``delay``,
``defer``, ``store``, ``w_pass``): a None elsewhere has other reasons (a frozen LoRA base,
an int8 weight, an expert with no tokens). Tests about whether the weight wants a gradient
at all (``requires_grad``, ``needs_input_grad``: any test naming ``grad``, ``requires``,
``need``, ``freez``, ``frozen``, ``train`` or ``None``) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from ..wgrad_words import SPLIT_MODE_WORDS, STORE_PUT_METHODS
from . import deferral, dropped_dummy, patterns, wgrad
from .decided_tests import text_of
from .module import ModuleContext, compound_suites, suite_body

# Words of a test that asks whether the weight wants a gradient (see the module's text):
# GMLP024's (analysis/dropped_dummy.py), and wider ones (any ``grad``, a frozen or absent weight).
WANTS_GRADIENT_WORDS = (
    *dropped_dummy.WANTS_GRAD_WORDS,
    "grad",
    "need",
    "freez",
    "frozen",
    "train",
    "none",
)
# Names of a bias gradient besides those naming ``bias`` (``db = ones @ dy`` is a product of
# no weight too).
BIAS_NAMES = frozenset({"db", "dbias", "d_bias"})
# Methods that put work (or its inputs) into a container a later pass drains: a store's, and
# a list's or deque's.
QUEUEING_METHODS = STORE_PUT_METHODS | {"extend", "appendleft"}


@dataclass(frozen=True)
class DroppedArm:
    binding: cst.CSTNode  # ``g = None`` in the arm that does nothing else
    name: str
    test: cst.BaseExpression


def dropped_arms(context: ModuleContext) -> list[DroppedArm]:
    handed = {id(h.call) for h in context.shared(deferral.handoffs)}
    found = []
    for unit in context.units:
        owner = unit.owner
        if not isinstance(owner, cst.FunctionDef) or owner.name.value != "backward":
            continue
        if _delivers_elsewhere(owner, handed):
            continue
        returned = unit.returned_names
        computed = _computed_names(owner.body)
        for binding, name, test in _none_bindings(suite_body(owner.body), None):
            if name not in returned or name not in computed or _names_bias(name):
                continue
            text = text_of(test).lower()
            if any(word in text for word in WANTS_GRADIENT_WORDS):
                continue
            # only on the split-backward mode is a None the promise that a later pass
            # delivers (a frozen LoRA base, an int8 weight, an expert with no tokens return
            # None for other reasons)
            if any(word in text for word in SPLIT_MODE_WORDS):
                found.append(DroppedArm(binding, name, test))
    return found


def _none_bindings(body, test) -> Iterator[tuple[cst.Assign, str, cst.BaseExpression]]:
    """``g = None`` as the only work of an ``if`` arm (with the ``if``'s test), and ``g =
    None if T else <product>`` (with ``T``), in ``body`` and the blocks nested in it."""
    if test is not None and _inert(body):
        for stmt in body:
            for small in getattr(stmt, "body", ()):
                if _binds_none(small):
                    yield small, small.targets[0].target.value, test
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                choice = _none_or_product(small)
                if choice is not None:
                    yield small, small.targets[0].target.value, choice
        elif isinstance(stmt, cst.If):
            yield from _none_bindings(suite_body(stmt.body), stmt.test)
            orelse = stmt.orelse
            if isinstance(orelse, cst.Else):
                yield from _none_bindings(suite_body(orelse.body), stmt.test)
            elif isinstance(orelse, cst.If):
                yield from _none_bindings([orelse], None)
        elif not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            for suite in compound_suites(stmt):
                yield from _none_bindings(suite_body(suite), None)


def _inert(arm) -> bool:
    """The arm binds only constants and names and may return names: it calls nothing."""
    for stmt in arm:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Return):
                if small.value is not None and any(
                    not isinstance(sub, (cst.Name, cst.Tuple, cst.Element, cst.Comma))
                    for sub in patterns.walk(small.value)
                ):
                    return False
                continue
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                return False
            if not isinstance(small.targets[0].target, cst.Name):
                return False
            if not isinstance(small.value, (cst.Name, cst.BaseNumber, cst.BaseString)):
                return False
    return True


def _binds_none(small) -> bool:
    return (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and patterns.is_none_like(small.value)
    )


def _none_or_product(small) -> cst.BaseExpression | None:
    """The test of ``g = None if T else <product>`` (either way round), else None."""
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return None
    value = small.value
    if not isinstance(small.targets[0].target, cst.Name) or type(value) is not cst.IfExp:
        return None
    for none_arm, other in ((value.body, value.orelse), (value.orelse, value.body)):
        if patterns.is_none_like(none_arm) and _weight_gradient(other):
            return value.test
    return None


def _computed_names(body: cst.BaseSuite) -> set[str]:
    """Names some statement of ``body`` (nested blocks included) binds to a weight gradient
    (a product none of whose operands is a weight)."""
    names = set()
    for sub in patterns.walk(body):
        if isinstance(sub, cst.Assign) and len(sub.targets) == 1:
            target = sub.targets[0].target
            if isinstance(target, cst.Name) and _weight_gradient(sub.value):
                names.add(target.value)
    return names


def _weight_gradient(value) -> bool:
    return wgrad.weight_gradient_product(value) is not None


def _names_bias(name: str) -> bool:
    lowered = name.lower()
    return "bias" in lowered or lowered in BIAS_NAMES


def _delivers_elsewhere(function: cst.FunctionDef, handed: set[int]) -> bool:
    """The backward may deliver a weight gradient some other way than returning it: a
    hand-off, main_grad or a ``.grad`` named, or anything put into a container (``pending.
    append((x, dy, weight))``, drained by a later pass)."""
    for sub in patterns.walk(function.body):
        if id(sub) in handed:
            return True
        if type(sub) is cst.Call and patterns.callee_name(sub) in QUEUEING_METHODS and sub.args:
            return True
        if type(sub) is cst.Attribute and sub.attr.value in ("main_grad", "grad"):
            return True  # names main_grad, assigns or hands on a ``.grad``
        if type(sub) is cst.Name and "main_grad" in sub.value:
            return True
        if type(sub) is cst.SimpleString and "grad" in sub.value:
            return True  # ``getattr(w, "main_grad")``
    return False
