"""A subclass's override of a scheduler's W pass that skips the store's work under a
condition, with nothing in the class taking it instead (issue #19, class 6; GMLP038).

A zero-bubble scheduler's W pass takes the weight-gradient work its B pass queued
(``def schedule_w(...): WeightGradStore.pop(chunk=...)``). A subclass that fuses the W into
the B for some chunks overrides it (``if self._w_fused_into_b(chunk): return`` before
``super().schedule_w(...)``) and must then take the work in its own B pass (``if
self._w_fused_into_b(chunk): WeightGradStore.pop(...)``). Without that take (ColossalAI's
fused-tail scheduler in blind corpus 17 lost it), the work for those chunks is never run
and their weights get no gradient.

Seen: a class of the file whose base, defined in the file by the name the class gives it,
has a method that takes from a store named for weight gradients (``pop``, ``popleft``,
``flush`` on ``WeightGradStore``, ``wgrad_store``); the class overrides that method with
an early ``if T: return`` at its top level and calls ``super().<method>(...)`` after it;
and no method of the class takes from such a store itself. Reported at the class's call of
the base's B pass (``super().schedule_b(...)`` in its override of the base method that
queues the work: ``flush`` / ``put`` on the store), where the take belongs, or else at the
skipping test. Not seen: bases in other files,
a take through a helper of the class, an override that never calls the base's version.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns, store_calls
from .module import ModuleContext, suite_body
from .override_gates import ends_in_return


@dataclass(frozen=True)
class SkippedPass:
    test: cst.BaseExpression  # the early return's test in the override
    class_name: str
    method: str
    base: str
    # where the take belongs: the class's call of the base's B pass (the method that
    # queues the work) in its own override of it, when it has one
    queued_at: cst.Call | None


def skipped_passes(context: ModuleContext) -> Iterator[SkippedPass]:
    classes = {node.name.value: node for node in context.module.body if type(node) is cst.ClassDef}
    for cls in classes.values():
        methods = _methods(cls)
        if any(_takes(m) for m in methods.values()):
            continue
        for base_expr in cls.bases:
            base = classes.get(patterns.last_word(base_expr.value) or "")
            if base is None or base is cls:
                continue
            for name, base_method in _methods(base).items():
                override = methods.get(name)
                if override is None or not _takes(base_method):
                    continue
                test = _skipping_test(override, name)
                if test is None:
                    continue
                queued_at = _queuing_call(methods, _methods(base), name)
                yield SkippedPass(test, cls.name.value, name, base.name.value, queued_at)


def _queuing_call(methods, base_methods, skipped: str) -> cst.Call | None:
    """The class's ``super().<b>(...)`` in its override of a base method that queues the
    work (``flush`` / ``put`` on the store): the B pass the work must be taken in."""
    for name, base_method in base_methods.items():
        override = methods.get(name)
        if name == skipped or override is None or not _queues(base_method):
            continue
        for node in patterns.walk(override.body):
            if _is_super_call(node, name):
                return node
    return None


def _queues(function: cst.FunctionDef) -> bool:
    return any(store_calls.queues(node) for node in patterns.walk(function.body))


def _methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    return {stmt.name.value: stmt for stmt in suite_body(cls.body) if type(stmt) is cst.FunctionDef}


def _takes(function: cst.FunctionDef) -> bool:
    return any(store_calls.takes(node) for node in patterns.walk(function.body))


def _skipping_test(override: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    """``T`` of a top-level ``if T: return`` followed by ``super().<name>(...)``."""
    statements = suite_body(override.body)
    for index, stmt in enumerate(statements):
        if (
            type(stmt) is not cst.If
            or stmt.orelse is not None
            or not ends_in_return(suite_body(stmt.body))
        ):
            continue
        if any(_calls_super(s, name) for s in statements[index + 1 :]):
            return stmt.test
    return None


def _calls_super(stmt: cst.CSTNode, name: str) -> bool:
    return any(_is_super_call(node, name) for node in patterns.walk(stmt))


def _is_super_call(node: cst.CSTNode, name: str) -> bool:
    return (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value == name
        and patterns.callee_name(node.func.value) == "super"
    )
