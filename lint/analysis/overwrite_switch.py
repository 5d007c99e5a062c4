"""A function's own overwrite-or-add choices: an ``if`` that replaces a destination on one side
and adds to it on the other, or a write whose accumulate switch is computed (``accumulate=not
is_zero(w)``, ``beta=beta``), says that its test decides how that destination is written
(``Switches``); which graph nodes run under a test on the same values; and the parameters
whose names say they are such a switch (``overwrite*``, ``accumulate*``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import libcst as cst

from . import patterns
from .statements import is_compound
from .tensor_writes import (
    ACCUMULATING_METHODS,
    LazyDicts,
    after,
    kinds_by_destination,
    leaves,
    syntactic_arguments,
    writes,
)
from .write_methods import ACCUMULATE_KEYWORDS

if TYPE_CHECKING:
    from .module import Unit


# Names that stand for an object, not a decision: a test reading only ``self.x`` is about
# ``self.x``, not about ``self``.
_OBJECT_NAMES = frozenset({"self", "ctx", "cls"})
# Names a computed switch's local may read that say nothing about the choice.
_BUILTINS = frozenset({"getattr", "hasattr", "isinstance", "len", "bool", "True", "False", "None"})


class Choice(NamedTuple):
    """Where a destination's write mode is decided: the ``if`` (or the write whose switch
    is computed), the expression that decides, and the values it reads."""

    node: cst.CSTNode
    test: cst.BaseExpression
    terms: frozenset[str]
    # True for a computed switch: the write is its own choice, and no ``if`` says which
    # side replaces; the choice is a gradient's (a GEMM's mode), never a dict's or a counter's.
    by_argument: bool = False


class Switches:
    """The function's own overwrite-or-add choices: for each destination (by its text) that
    an ``if`` replaces on one side and adds to on the other, or that a write adds to under
    a computed switch, the ``Choice``; and which graph nodes run under a test on its
    values."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.governed: dict[str, Choice] = {}
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
                    if _adds_under_computed_switch(key, body_writes + other_writes, code, dicts):
                        continue  # the add asks its own question: that switch decides
                    terms = switch_terms(stmt.test, code)
                    if terms and key not in self.governed:
                        self.governed[key] = Choice(stmt, stmt.test, terms)
        self._computed_switches(dicts)

    def _computed_switches(self, dicts) -> None:
        """A write into D whose accumulate switch is computed (Fast-LLM's
        ``input_row_sparse_matmul(..., out=w.grad_buffer, accumulate=not
        param_get_and_unset_is_zero(w))``, ``torch.addmm(D, a, b, beta=beta, out=D)``) is
        the function's own choice for D, decided by the values the switch reads (not the
        destination's owner: ``w`` is the object, the call on it is the decision). A name
        bound to nothing but literals is a constant, not a choice."""
        if not isinstance(self.unit.owner, cst.FunctionDef):
            return
        code = self.unit.context.code
        constants = _literal_locals(self.unit)
        loop_names = _loop_names(self.unit)
        sources = None  # local -> the names its bindings read (``acc = not is_first_mb``)
        found = (
            write
            for stmt, _ in self.unit.statements()
            if not is_compound(type(stmt))  # a body's statements come on their own
            for write in writes(stmt, None, dicts)
        )
        for dest, kind, at, _ in found:
            if kind != "accumulate" or type(at) is not cst.Call:
                continue
            key = code(dest).strip()
            if key in self.governed:
                continue
            value = _computed_switch(at, dicts)
            if value is None:
                continue
            owner_name = key.split(".")[0].split("[")[0]
            terms = switch_terms(value, code) - {owner_name} - constants
            # a loop's index (``accumulate=i > 0``) chooses per chunk, not per microbatch
            if not terms or terms <= loop_names:
                continue
            if sources is None:
                sources = _binding_sources(self.unit)
            # a test on what a local was computed from decides as much as one on the local
            # (not the owner again, nor a builtin every test may call)
            for term in list(terms):
                terms |= sources.get(term, frozenset()) - {owner_name} - _BUILTINS
            self.governed[key] = Choice(at, value, frozenset(terms), by_argument=True)

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
        return any(self.under(choice.terms, node) for choice in self.governed.values())


def _adds_under_computed_switch(key: str, side_writes, code, dicts) -> bool:
    return any(
        kind == "accumulate"
        and type(at) is cst.Call
        and _computed_switch(at, dicts) is not None
        and code(dest).strip() == key
        for dest, kind, at, _ in side_writes
    )


def _computed_switch(call: cst.Call, dicts):
    """The value of a call's accumulate switch (``accumulate=`` / ``beta=``, in any case,
    also from a ``**`` dict literal) when it is computed rather than a literal."""
    for word, value in syntactic_arguments(call, dicts).items():
        if word.lower() not in ACCUMULATE_KEYWORDS:
            continue
        if type(value) in (cst.Integer, cst.Float) or patterns.is_true_literal(value):
            return None
        if patterns.is_false_literal(value) or patterns.is_none_like(value):
            return None
        return value
    return None


def _loop_names(unit: Unit) -> frozenset[str]:
    """Names a ``for`` of the function binds."""
    return frozenset(
        name.value
        for stmt, _ in unit.statements()
        if type(stmt) is cst.For
        for name in patterns.walk(stmt.target)
        if type(name) is cst.Name
    )


def _binding_sources(unit: Unit) -> dict[str, frozenset[str]]:
    """local -> the names read by the values bound to it."""
    found: dict[str, set[str]] = {}
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Assign:
            continue
        read = {n.value for n in patterns.read_names(stmt.value)} - _OBJECT_NAMES
        for target in stmt.targets:
            if type(target.target) is cst.Name:
                found.setdefault(target.target.value, set()).update(read)
    return {name: frozenset(read) for name, read in found.items()}


def _literal_locals(unit: Unit) -> frozenset[str]:
    """Locals every assignment of which in the function binds a literal (``acc = True``)."""
    literal: set[str] = set()
    other: set[str] = set()
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Assign:
            continue
        constant = type(stmt.value) in (cst.Integer, cst.Float) or (
            type(stmt.value) is cst.Name and stmt.value.value in ("True", "False", "None")
        )
        for target in stmt.targets:
            if type(target.target) is cst.Name:
                (literal if constant else other).add(target.target.value)
    return frozenset(literal - other)


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
    sources = _binding_sources(unit)
    return any(sources.get(term, frozenset()) & names for term in terms)
