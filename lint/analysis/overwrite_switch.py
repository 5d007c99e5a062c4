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
                other_roots = [stmt.orelse]
            elif leaves(stmt.body):
                other_roots = after(stmt, suite)
            else:
                continue
            other_writes = [w for rest in other_roots for w in writes(rest, None, dicts)]
            kinds = {k for _, k, _, _ in body_writes} | {k for _, k, _, _ in other_writes}
            if len(kinds) < 2:
                continue
            body = kinds_by_destination(body_writes, code)
            other = kinds_by_destination(other_writes, code)
            # A side that reads what it replaces adds to it: that removes a choice (never
            # makes one).
            body_rmw = _read_modify_write(body, [stmt.body], body_writes, code)
            other_rmw = _read_modify_write(other, other_roots, other_writes, code)
            for key, mine in body.items():
                theirs = other.get(key, set())
                # Each side only replaces or only adds to it, and they differ: a choice.
                if len(mine) == 1 and len(theirs) == 1 and mine != theirs:
                    if body_rmw[key] == other_rmw.get(key, set()):
                        continue
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


def _read_modify_write(kinds: dict[str, set[str]], roots, side_writes, code) -> dict[str, set[str]]:
    """A side that reads a destination it replaces adds to it: ``tmp.copy_(D); tmp.add_(g);
    D.copy_(tmp)`` (an add staged through another device) is not a choice to overwrite D."""
    replaced = {key for key, found in kinds.items() if found == {"replace"}}
    if not replaced:
        return kinds
    targets = {id(dest) for dest, _, _, _ in side_writes}
    read = set()
    for root in roots:
        for sub in patterns.walk(root):
            if type(sub) in (cst.Name, cst.Attribute, cst.Subscript) and id(sub) not in targets:
                text = code(sub).strip()
                if text in replaced:
                    read.add(text)
    if not read:
        return kinds
    return {key: ({"accumulate"} if key in read else found) for key, found in kinds.items()}


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


def handed_in(unit: Unit, terms: frozenset[str], destination: str) -> bool:
    """A test on ``terms`` is the caller's decision: it reads a parameter of the function
    (not ``self``, not the destination itself), directly or through a local the function
    binds from one (``add_mode = not overwrite_grad``). A choice on the function's own state
    (a device, a dtype, whether a key is already in a dict) may be one that a dict or a
    counter makes, not a switch handed in."""
    params = unit.params
    if params is None:
        return False
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    names -= _OBJECT_NAMES | {destination.split(".")[0].split("[")[0]}
    if terms & names:
        return True
    for stmt, _ in unit.statements():
        smalls = stmt.body if type(stmt) is cst.SimpleStatementLine else (stmt,)
        for small in smalls:
            if type(small) is not cst.Assign:
                continue
            bound = {t.target.value for t in small.targets if type(t.target) is cst.Name}
            if bound & terms and {n.value for n in patterns.read_names(small.value)} & names:
                return True
    return False
