"""The statements of a suite in order, nested compound statements' included and nested
functions and classes left to their own units (``iter_statements``), and the suites of a
compound statement (``compound_suites``): how every unit and rule walks statements. Exact
types are compared throughout: ``isinstance`` on libcst's abstract node classes is slow."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from . import walking

SCOPES = walking.SCOPES  # exact types: the functions and classes ``patterns.walk`` skips
_COMPOUND: dict[type, bool] = {}  # node class -> whether it is a compound statement's


def is_compound(kind: type) -> bool:
    """``issubclass(kind, cst.BaseCompoundStatement)``, found once per class."""
    flag = _COMPOUND.get(kind)
    if flag is None:
        flag = _COMPOUND[kind] = issubclass(kind, cst.BaseCompoundStatement)
    return flag


def suite_body(suite: cst.CSTNode) -> Sequence[cst.CSTNode]:
    kind = type(suite)
    return suite.body if kind is cst.IndentedBlock or kind is cst.SimpleStatementSuite else ()


def iter_statements(body: Sequence[cst.CSTNode]) -> Iterator[tuple[cst.CSTNode, Sequence]]:
    for stmt in body:
        kind = type(stmt)  # exact types: isinstance on libcst's ABC node classes is slow
        if kind is cst.SimpleStatementLine:
            for small in stmt.body:
                yield small, body
            continue
        yield stmt, body
        if kind in SCOPES:
            continue
        yield from _compound_children(stmt)


def _compound_children(stmt: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, Sequence]]:
    if type(stmt) is cst.If:
        yield from iter_statements(suite_body(stmt.body))
        orelse = type(stmt.orelse)
        if orelse is cst.If:
            yield stmt.orelse, ()
            yield from _compound_children(stmt.orelse)
        elif orelse is cst.Else:
            yield from iter_statements(suite_body(stmt.orelse.body))
        return
    for suite in compound_suites(stmt):
        yield from iter_statements(suite_body(suite))


def compound_suites(stmt: cst.CSTNode) -> Iterator[cst.BaseSuite]:
    """The suites of a compound statement: its body, its ``except`` handlers, its ``match``
    cases, its ``else`` and its ``finally`` (an ``if``'s ``elif`` is an ``If``, not a
    suite: callers that tell the arms of an ``if`` apart handle ``If`` first)."""
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.BaseSuite):
        yield body
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body
    for attr in ("orelse", "finalbody"):
        part = getattr(stmt, attr, None)
        if part is not None and isinstance(getattr(part, "body", None), cst.BaseSuite):
            yield part.body
