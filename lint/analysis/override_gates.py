"""A ``backward_dw`` override that runs the base's version only under a test unrelated to
the delay (issue #19, class 6): ``if self.fuse_wgrad_accumulation: super().backward_dw()``.

The base built with ``delay_wgrad_compute`` stored its weights' wgrad work in backward
whatever else is on; only the delay decides whether there is work to compute. A test on
another switch (fusion, a feature flag, the expert kind) leaves the stored work uncomputed
whenever that switch is off. Megatron-LM's own overrides gate on the delay
(``if self.config.delay_wgrad_compute:``), which this module counts as related.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from . import patterns
from .module import compound_suites, suite_body

# Words of a test about whether the work was delayed or exists at all: the delay itself,
# the store that holds it, whether the weights take gradients or the module trains.
RELATED_WORDS = ("delay", "defer", "backward_dw", "wgrad_store", "requires_grad", "training")


def unrelated_gate(
    method: cst.FunctionDef, calls_base, bindings: dict[str, list[cst.BaseExpression]]
) -> tuple[cst.If, bool] | None:
    """The ``if`` of an unrelated test that every call of the base's ``backward_dw`` in
    ``method`` sits under (in the body or ``else``, or after it as an early ``return``), and
    whether the call runs when the test is false; None when some call runs without one, or
    there is no call. ``calls_base(call)`` tells a call of the base's version; ``bindings``
    holds what each ``self.X`` of the class and each local of ``method`` is assigned."""
    paths = list(_call_paths(suite_body(method.body), (), calls_base))
    # A call on each side of one test (``if fp8: ...call... else: ...call...``) runs either
    # way: that test decides nothing about the work.
    sides: dict[int, set[bool]] = {}
    for path in paths:
        for stmt, when_false in path:
            sides.setdefault(id(stmt), set()).add(when_false)
    if any(len(found) == 2 for found in sides.values()):
        return None
    gates = [_gate(path, bindings) for path in paths]
    if not gates or any(g is None for g in gates):
        return None
    return gates[0]


def _gate(path: tuple[tuple[cst.If, bool], ...], bindings) -> tuple[cst.If, bool] | None:
    return next(((stmt, false) for stmt, false in path if not related(stmt.test, bindings)), None)


def related(test: cst.BaseExpression, bindings: dict[str, list[cst.BaseExpression]]) -> bool:
    """The test is about the delay, or may be: each operand of an ``and`` is, some operand
    of an ``or`` is; a bare None test asks whether something exists; a test that calls
    anything (a version or capability check: ``is_te_min_version(...)``, ``hasattr(...)``)
    is not judged. A name or ``self.X`` counts by what it was assigned as well as by its
    name (``self.enable_dw = config.delay_wgrad_compute``)."""
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test = test.expression
    if type(test) is cst.BooleanOperation:
        left, right = related(test.left, bindings), related(test.right, bindings)
        return (left and right) if type(test.operator) is cst.And else (left or right)
    if type(test) is cst.Comparison and all(
        type(c.operator) in (cst.Is, cst.IsNot) and patterns.is_none_like(c.comparator)
        for c in test.comparisons
    ):
        return True
    nodes = list(patterns.walk(test))
    if any(type(n) is cst.Call for n in nodes):
        return True
    if _says_delay(nodes):
        return True
    key = _binding_key(test)
    return key is not None and any(
        _says_delay(list(patterns.walk(value))) for value in bindings.get(key, ())
    )


def _says_delay(nodes: list[cst.CSTNode]) -> bool:
    words = " ".join(
        n.value.lower()
        if type(n) is cst.Name
        else n.attr.value.lower()
        if type(n) is cst.Attribute
        else (patterns.string_value(n) or "").lower()
        for n in nodes
        if type(n) in (cst.Name, cst.Attribute, cst.SimpleString)
    )
    return any(word in words for word in RELATED_WORDS)


def _binding_key(test: cst.BaseExpression) -> str | None:
    """``X`` for a local ``X``, ``self.X`` for an attribute of ``self``."""
    if type(test) is cst.Name:
        return test.value
    if type(test) is cst.Attribute and patterns.attribute_of(test, "self") is not None:
        return f"self.{test.attr.value}"
    return None


def bindings_of(methods: Sequence[cst.FunctionDef], method: cst.FunctionDef) -> dict:
    """What each ``self.X`` is assigned in ``methods`` and each plain local in ``method``."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for current in methods:
        for node in patterns.walk(current.body):
            if type(node) is not cst.Assign:
                continue
            for target in node.targets:
                key = _binding_key(target.target)
                if key is not None and (key.startswith("self.") or current is method):
                    found.setdefault(key, []).append(node.value)
    return found


def _call_paths(suite: Sequence[cst.CSTNode], outer: tuple, calls_base):
    """For each call of the base's version in ``suite``: the ``if`` statements it depends
    on, outermost first (enclosing ones, and earlier ones that ``return`` early), each with
    whether the call runs when its test is false (``else``, after an early ``return``)."""
    early: tuple = ()
    for stmt in suite:
        path = outer + early
        if isinstance(stmt, cst.If):
            yield from _if_paths(stmt, path, calls_base)
            if stmt.orelse is None and ends_in_return(suite_body(stmt.body)):
                early += ((stmt, True),)
        elif isinstance(stmt, cst.BaseCompoundStatement):
            for sub in compound_suites(stmt):
                yield from _call_paths(suite_body(sub), path, calls_base)
        elif any(type(n) is cst.Call and calls_base(n) for n in patterns.walk(stmt)):
            yield path


def _if_paths(stmt: cst.If, path, calls_base):
    yield from _call_paths(suite_body(stmt.body), (*path, (stmt, False)), calls_base)
    orelse = stmt.orelse
    if isinstance(orelse, cst.If):
        yield from _if_paths(orelse, (*path, (stmt, True)), calls_base)
    elif orelse is not None:
        yield from _call_paths(suite_body(orelse.body), (*path, (stmt, True)), calls_base)


def ends_in_return(statements: Sequence[cst.CSTNode]) -> bool:
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, cst.Return)
