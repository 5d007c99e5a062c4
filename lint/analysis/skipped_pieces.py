"""A ``backward_dw`` that returns before its work under a test about something else than the
delayed weight gradient (issue #19, class 6).

``backward_dw`` is called by the schedule once per step for every layer that deferred its
weight gradient. An exit at its top is right when it says there is nothing deferred (``if
not self.delay_wgrad_compute: return``, ``if not self.need_backward_dw(): return``, ``if
self.wgrad_store.context.empty(): return``), nothing to compute (``if self.fc is None``,
``if not w.requires_grad``) or that another path does it (a CUDA graph). An exit on a feature
switch (``if not self.config.moe_shared_expert_overlap: return`` in front of
``super().backward_dw()``, blind corpus 21) leaves every deferred weight gradient of the
layer uncomputed whenever the feature is off: the layer's wgrad never reaches main_grad.

Per method named ``backward_dw``: its top-level statements in order, up to the first one
that calls a ``backward_dw`` / ``*_dw`` piece (``super().backward_dw()``,
``self.fc1.backward_dw()``, ``self._mlp_dw()``); an ``if`` among them without ``else``
whose body calls no piece and ends in a bare ``return`` (or ``return None``), where a
piece is called after it and the test reads no term about the deferred work. A term is a
name or attribute (or a string, or a call's name) containing one of ``DEFERRED_WORDS``, also
in a value the class assigns to a ``self`` attribute the test reads (``self.enabled =
cfg.delay_wgrad_compute``); a test of ``None`` or ``hasattr`` asks whether there is anything
to compute. A class whose ``__init__`` hands ``delay_wgrad_compute`` to its base is GMLP038's.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .module import ModuleContext

PIECE = "backward_dw"
# Words of a test about the deferred work itself (its mode, store, queue, graph, whether a
# gradient is wanted at all, training) rather than an unrelated feature.
DEFERRED_WORDS = (
    "delay", "wgrad", "dw", "store", "defer", "split", "graph", "pending", "queue",
    "empty", "need", "skip", "requires_grad", "train", "freeze", "frozen",
)  # fmt: skip


def skipped_pieces(context: ModuleContext) -> list[cst.BaseExpression]:
    """For ``context.shared``: the ``return`` statements of the early exits found (where each
    is reported: the exit is the slip, the test may be right for something else)."""
    found = []
    for unit in context.units:
        owner = unit.owner
        if type(owner) is not cst.FunctionDef or owner.name.value != PIECE:
            continue
        cls = context.class_of(unit)
        if cls is None or _hands_delay_to_base(cls):
            continue  # GMLP038 judges the backward_dw of a class whose base delays for it
        found.extend(_early_exits(unit.body, _self_attribute_values(cls)))
    return found


def _early_exits(body, attributes) -> Iterator[cst.BaseExpression]:
    exits = []
    for stmt in body:
        if _calls_piece(stmt):
            yield from exits  # the work starts here: the exits before it skip all of it
            return
        if (
            type(stmt) is cst.If
            and stmt.orelse is None
            and _only_exits(stmt.body.body)
            and not _about_deferred_work(stmt.test, attributes)
        ):
            exits.append(stmt.body.body[-1])


def _hands_delay_to_base(cls: cst.ClassDef) -> bool:
    """``super().__init__(..., delay_wgrad_compute=...)`` in the class's ``__init__``."""
    for stmt in cls.body.body:
        if type(stmt) is cst.FunctionDef and stmt.name.value == "__init__":
            return any(
                type(sub) is cst.Arg
                and sub.keyword is not None
                and sub.keyword.value == "delay_wgrad_compute"
                for sub in patterns.walk(stmt)
            )
    return False


def _self_attribute_values(cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
    """``self.X = value`` anywhere in the class's methods: what ``self.X`` in a test holds
    (``self.enabled = cfg.delay_wgrad_compute``)."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for sub in patterns.walk(cls):
        if type(sub) is not cst.Assign:
            continue
        for target in sub.targets:
            t = target.target
            if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == "self":
                found.setdefault(t.attr.value, []).append(sub.value)
    return found


def _calls_piece(node) -> bool:
    return any(
        type(sub) is cst.Call and (patterns.callee_name(sub) or "").endswith("_dw")
        for sub in patterns.walk(node)
    )


def _only_exits(statements) -> bool:
    """A body that calls no piece and ends in ``return`` / ``return None``."""
    if not statements or any(map(_calls_piece, statements)):
        return False
    last = statements[-1]
    if type(last) is cst.SimpleStatementLine:
        last = last.body[-1]
    return type(last) is cst.Return and (last.value is None or patterns.is_none_like(last.value))


def _about_deferred_work(test, attributes) -> bool:
    """The test reads a term of the deferred work, itself or through what the class put in
    a ``self`` attribute it reads."""
    if _spells_deferred_work(test):
        return True
    return any(
        type(sub) is cst.Attribute
        and type(sub.value) is cst.Name
        and sub.value.value == "self"
        and any(_spells_deferred_work(v) for v in attributes.get(sub.attr.value, ()))
        for sub in patterns.walk(test)
    )


def _spells_deferred_work(test) -> bool:
    for sub in patterns.walk(test):
        kind = type(sub)
        if kind is cst.Comparison and any(
            type(c.operator) in (cst.Is, cst.IsNot) for c in sub.comparisons
        ):
            return True
        if kind is cst.Call and patterns.callee_name(sub) == "hasattr":
            return True
        word = None
        if kind is cst.Name:
            word = sub.value
        elif kind is cst.Attribute:
            word = sub.attr.value
        elif kind is cst.SimpleString:
            word = patterns.string_value(sub)
        if word and any(w in word.lower() for w in DEFERRED_WORDS):
            return True
    return False
