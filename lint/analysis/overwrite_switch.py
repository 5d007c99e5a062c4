"""A function's own overwrite-or-add choices: an ``if`` that replaces a destination on one side
and adds to it on the other says that its test decides how that destination is written
(``Switches``); which graph nodes run under a test on the same values; and the parameters
whose names say they are such a switch (``overwrite*``, ``accumulate*``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns
from .tensor_writes import (
    ACCUMULATING_METHODS,
    LazyDicts,
    after,
    kinds_by_destination,
    leaves,
    writes,
)

if TYPE_CHECKING:
    from .module import Unit


# Names that stand for an object, not a decision: a test reading only ``self.x`` is about
# ``self.x``, not about ``self``.
_OBJECT_NAMES = frozenset({"self", "ctx", "cls"})


class Switches:
    """The function's own overwrite-or-add choices: for each destination (by its text) that
    an ``if`` replaces on one side and adds to on the other, that ``if`` and the values its
    test reads; and which graph nodes run under a test on those values."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.governed: dict[str, tuple[cst.If, frozenset[str]]] = {}
        code = unit.context.code
        self._taints: dict[frozenset[str], object] = {}
        # By syntax alone (the graph is built only for a function that has such a choice).
        # A choice needs a write that adds: an in-place add, ``+=`` or a GEMM's ``out=``
        # (from the unit's survey, which every rule shares: nothing is walked here).
        survey = unit.survey
        if not (survey.adds_in_place or survey.calls & ACCUMULATING_METHODS):
            return
        # The other side of an ``if`` is its ``else``, or, when its body ends by leaving
        # (``return``, ``continue``, ``break``, ``raise``), the statements after it.
        dicts = LazyDicts(unit)
        for stmt, suite in unit.statements():
            if type(stmt) is not cst.If:
                continue
            body_writes = list(writes(stmt.body, None, dicts))
            if not body_writes:
                continue
            if stmt.orelse is not None:
                other_writes = list(writes(stmt.orelse, None, dicts))
            elif leaves(stmt.body):
                following = after(stmt, suite)
                other_writes = [w for rest in following for w in writes(rest, None, dicts)]
            else:
                continue
            kinds = {k for _, k, _, _ in body_writes} | {k for _, k, _, _ in other_writes}
            if len(kinds) < 2:
                continue
            body = kinds_by_destination(body_writes, code)
            other = kinds_by_destination(other_writes, code)
            for key, mine in body.items():
                theirs = other.get(key, set())
                # Each side only replaces or only adds to it, and they differ: a choice.
                if len(mine) == 1 and len(theirs) == 1 and mine != theirs:
                    terms = switch_terms(stmt.test, code)
                    if terms and key not in self.governed:
                        self.governed[key] = (stmt, terms)

    def _taint(self, terms: frozenset[str]):
        if terms not in self._taints:
            self._taints[terms] = switch_taint(self.unit, terms)
        return self._taints[terms]

    def under(self, terms: frozenset[str], node) -> bool:
        """``node`` runs only under a test on ``terms`` (or on values computed from them)."""
        taint = self._taint(terms)
        return any(taint.branch(b) for b in self.unit.control.ancestors(node))

    def decides(self, node) -> bool:
        """``node`` runs under one of the function's overwrite-or-add choices."""
        if not self.governed:
            return False
        return any(self.under(terms, node) for _, terms in self.governed.values())


def switch_parameters(unit: Unit) -> list[str]:
    """The function's parameters that say whether to overwrite or add (by their names:
    ``overwrite*``, ``accumulate*``, ``*_overwrite*``)."""
    params = unit.params
    if params is None:
        return []
    found = []
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        name = param.name.value.lower()
        if "overwrite" in name or name.lstrip("_").startswith("accumulat"):
            found.append(param.name.value)
    return found


def switch_terms(test, code) -> frozenset[str]:
    """The values a test reads, as the text of each name and attribute chain in it."""
    terms: set[str] = set()
    for sub in patterns.walk(test):
        if type(sub) is cst.Attribute and type(sub.value) is cst.Name:
            terms.add(code(sub).strip())
    for name in patterns.read_names(test):
        if name.value not in _OBJECT_NAMES:
            terms.add(name.value)
    return frozenset(terms)


def switch_taint(unit: Unit, terms: frozenset[str]):
    from .dataflow import Taint

    code = unit.context.code

    def is_source(node) -> bool:
        kind = type(node)
        if kind is cst.Name:
            return node.value in terms
        return kind is cst.Attribute and code(node).strip() in terms

    return Taint(unit.graph, unit.reaching, unit.control, is_source)
