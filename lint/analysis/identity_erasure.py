"""GMLP032's consumer side: a reduction that decides whether a parameter's main-grad buffer
holds a write by where main_grad points (pointer or storage identity, ``is``) and erases it
only then. The flag is what records a write; where main_grad points records nothing."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .module import ModuleContext, Unit

# Methods that erase a buffer before it is reduced (zeroing for a parameter with no grad).
_ERASING = frozenset({"zero_", "fill_"})
# Calls that give a tensor's storage identity, and the cheap file test for them.
_IDENTITY_CALLS = frozenset({"data_ptr", "untyped_storage", "storage", "id"})


# The cheap file test: a file without one of these words has no identity test.
IDENTITY_WORDS = ("data_ptr", "storage(", "id(", " is ")


def erased_by_identity(context: ModuleContext) -> Iterator[tuple[cst.BaseExpression, str, str]]:
    """Each identity test that decides an erasure (``param.main_grad.data_ptr() !=
    main_grad.data_ptr()`` around ``main_grad.zero_()``, a fork's Megatron-FSDP v2
    reduction before 7a9e39ee's fix): the test, the erased buffer's text and the test's."""
    for unit in context.units:
        if not (unit.survey.spells_main_grad and isinstance(unit.owner, cst.FunctionDef)):
            continue
        if not (_ERASING & unit.survey.calls) or not _tests_identity(unit):
            continue
        for root, node in unit.expression_roots():
            for sub in patterns.walk(root):
                method = patterns.method_call(sub)
                if method is None or method[1] not in _ERASING:
                    continue
                if not unit.aliases.expr(method[0], node):
                    continue
                for branch in unit.control.ancestors(node):
                    how = _identity_test(unit, branch)
                    if how is not None:
                        yield branch.test, context.text(method[0]), how
                        break


def _tests_identity(unit: Unit) -> bool:
    """Some ``if`` of the function tests an identity (a storage call, ``is`` between two
    values): by syntax, before any graph is built."""
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.If:
            continue
        for sub in patterns.walk(stmt.test):
            kind = type(sub)
            if kind is cst.Call and patterns.callee_name(sub) in _IDENTITY_CALLS:
                return True
            if (
                kind is cst.ComparisonTarget
                and type(sub.operator) in (cst.Is, cst.IsNot)
                and not patterns.is_false_literal(sub.comparator)
            ):
                return True
    return False


def _identity_test(unit: Unit, branch) -> str | None:
    """The identity comparison of main-grad storage a branch's test makes (its text), when
    that test does not also read grad_added_to_main_grad; None otherwise."""
    test = branch.test
    if test is None or branch.kind != "if":
        return None
    found = None
    for sub in patterns.walk(test):
        kind = type(sub)
        if kind is cst.Attribute and sub.attr.value == patterns.GRAD_ADDED:
            return None
        if kind is cst.SimpleString and patterns.string_is(sub, patterns.GRAD_ADDED):
            return None
        if found is not None:
            continue
        if kind is cst.Call and patterns.callee_name(sub) in _IDENTITY_CALLS:
            func = sub.func
            if type(func) is cst.Attribute:
                subject = func.value
                if type(subject) is cst.Call and patterns.callee_name(subject) in _IDENTITY_CALLS:
                    subject = subject.func.value if type(subject.func) is cst.Attribute else None
            else:
                subject = sub.args[0].value if sub.args else None
            if subject is not None and unit.aliases.expr(subject, branch):
                found = unit.context.text(sub)
        elif kind is cst.Comparison:
            for target in sub.comparisons:
                if type(target.operator) in (cst.Is, cst.IsNot) and not patterns.is_false_literal(
                    target.comparator
                ):
                    sides = (sub.left, target.comparator)
                    if all(unit.aliases.expr(side, branch) for side in sides):
                        found = unit.context.text(sub)
    return found
