"""Megatron-FSDP's main_grad fetched only when a fused path is first built (issue #19, class 8).

A module that builds fused ops on its first forward (``if self._fused is None: self._fused =
self._make_fused()``) and fetches its parameters' main_grad in the same block
(``p.main_grad = p.get_main_grad()``, or a method of the class that does) exposes the buffer
once. Megatron-FSDP resets ``main_grad`` to None at every gradient reduce (Megatron-LM
#5209's shape): from the second step on the fused ops find no buffer. The fetch belongs
outside the construction, on every forward.

Seen: in a method of a class, an ``if`` whose test asks whether ``self.X`` is unset (``self.X
is None``, ``not self.X``, ``not hasattr(self, "X")``) and whose body assigns ``self.X``,
holding a fetch (a call of ``get_main_grad``) or a call of a method of the class whose body
holds one (one call deep), when the class fetches nowhere else (outside the block, a later
fetch runs on every call) and no method but ``__init__`` sets ``self.X`` back to None (a
cache cleared after each reduce is built, and fetched, again). A fetch inside a lambda runs
when the lambda does, later: not counted. Reported at the fetch or the call. Not seen: a
flag set after the first run (``self._built = True``) tested instead of the built object.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns
from .unexposed_fetches import FETCH


def first_call_fetches(cls: cst.ClassDef) -> Iterator[tuple[cst.CSTNode, str]]:
    """(the fetch or the call of the fetching method, the attribute the block builds)."""
    methods = {s.name.value: s for s in cls.body.body if type(s) is cst.FunctionDef}
    fetching = {name for name, m in methods.items() if _fetches(m.body)}

    def fetch_calls(node: cst.CSTNode, caller: str) -> list[cst.Call]:
        """Fetches and calls of fetching methods in ``node``, not inside a lambda (it runs
        when called, later)."""
        inside_lambda = {
            id(sub) for lam in patterns.walk(node) if type(lam) is cst.Lambda
            for sub in patterns.walk(lam.body)
        }  # fmt: skip
        return [
            sub
            for sub in patterns.walk(node)
            if type(sub) is cst.Call
            and id(sub) not in inside_lambda
            and (
                patterns.callee_name(sub) == FETCH
                or (patterns.attribute_of(sub.func, "self") in fetching - {caller})
            )
        ]

    # Where fetches start: a fetching helper's own fetch is where its callers are.
    called = {
        patterns.attribute_of(sub.func, "self")
        for m in methods.values()
        for sub in patterns.walk(m.body)
        if type(sub) is cst.Call
    }
    all_calls = {
        id(c)
        for name, m in methods.items()
        for c in fetch_calls(m.body, name)
        if not (name in called and patterns.callee_name(c) == FETCH)
    }
    for method in methods.values():
        for block in patterns.walk(method.body):
            if type(block) is not cst.If:
                continue
            attr = _unset_test(block.test)
            if attr is None or not _assigns_self(block.body, attr):
                continue
            if _reset_elsewhere(methods, attr):
                continue  # rebuilt after each reduce: the fetch runs again
            inside = fetch_calls(block.body, method.name.value)
            inside_ids = {id(c) for c in inside}
            if inside and all(i in inside_ids for i in all_calls):
                yield inside[0], attr


def _reset_elsewhere(methods: dict[str, cst.FunctionDef], attr: str) -> bool:
    """A method other than ``__init__`` sets ``self.<attr> = None``."""
    return any(
        isinstance(sub, cst.Assign)
        and patterns.is_none_like(sub.value)
        and any(patterns.attribute_of(t.target, "self") == attr for t in sub.targets)
        for name, method in methods.items()
        if name != "__init__"
        for sub in patterns.walk(method.body)
    )


def _fetches(body: cst.CSTNode) -> bool:
    return any(
        type(sub) is cst.Call and patterns.callee_name(sub) == FETCH for sub in patterns.walk(body)
    )


def _unset_test(test: cst.BaseExpression) -> str | None:
    """X for ``self.X is None``, ``not self.X`` or ``not hasattr(self, "X")``."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        if type(comparison.operator) is cst.Is and patterns.is_none_like(comparison.comparator):
            return patterns.attribute_of(test.left, "self")
        return None
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = test.expression
        if type(inner) is cst.Call and patterns.callee_name(inner) == "hasattr":
            args = inner.args
            first = args[0].value if args else None
            if len(args) == 2 and type(first) is cst.Name and first.value == "self":
                return patterns.string_value(args[1].value)
            return None
        return patterns.attribute_of(inner, "self")
    return None


def _assigns_self(body: cst.CSTNode, attr: str) -> bool:
    return any(
        isinstance(sub, cst.Assign)
        and any(patterns.attribute_of(t.target, "self") == attr for t in sub.targets)
        for sub in patterns.walk(body)
    )
