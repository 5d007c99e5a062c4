"""Layers named one by one for their ``backward_dw`` from outside their class, that miss the
layers the class builds in their place (issue #19, class 6; GMLP043).

A schedule that runs the weight-gradient pass itself lists a layer's delayed-wgrad members
by attribute: ``backward_dw["attn"].append(layer.eh_proj)``, ``dw = [layer.q, layer.kv]``,
``for m in (layer.fc1, layer.fc2): m.backward_dw()``, ``layer.eh_proj.backward_dw()``. The
run's facts (``alternative_layers``, ``RunFacts.alternatives``) say which attributes a
class of the run fills with a weight layer on one path and sets to None on another, where
it builds other layers instead. A listing of ``X.c`` whose function never names those other
attributes calls ``backward_dw`` on None on that path and never on the layers built there.

Read here, on libcst's tree of the file being linted: the listings (``X.c`` with ``X`` not
``self`` or ``cls``) are ``X.c.backward_dw``; ``X.c`` put, alone or inside a list, tuple,
set, dict or conditional expression, into a container whose spelling says it holds
weight-gradient work (``dw`` or ``wgrad`` in the assigned target or the receiver of
``append`` / ``extend`` / ``insert``); and ``X.c`` in the literal a ``for`` walks whose body
calls ``backward_dw``. The function holding the listing (the outermost one, nested
functions included; the module's statement outside any) names an alternative ``a`` by an
attribute ``.a`` or a string ``"a"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from ..wgrad_words import LATER_WORDS, names_protocol_callables, says_deferred_wgrad
from .module import ModuleContext

BACKWARD_DW = "backward_dw"
FILLING_METHODS = frozenset({"append", "extend", "insert"})
NOT_OUTSIDE = frozenset({"self", "cls"})
TEST_DIRS = frozenset({"tests", "test", "unit_tests", "functional_tests"})
# Where a ``X.c.backward_dw`` is only looked at (``is not None``, ``assert``): no listing.
_ONLY_LOOKED_AT = (cst.Comparison, cst.Assert)


@dataclass(frozen=True)
class MissedAlternative:
    listed: cst.Attribute  # the ``X.c`` listed for backward_dw
    receiver: str  # ``X`` as written
    attribute: str  # ``c``
    owner: str  # the class that builds the alternatives
    missing: tuple[str, ...]  # the alternatives the function never names


def alternatives_by_attribute(facts: tuple[str, ...]) -> dict[str, list[tuple[str, list[str]]]]:
    """``Class.c=a,b`` entries as c -> [(Class, [a, b])]."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for entry in facts:
        owner_attr, _, instead = entry.partition("=")
        owner, _, attr = owner_attr.rpartition(".")
        found.setdefault(attr, []).append((owner, instead.split(",")))
    return found


def missed_alternatives(context: ModuleContext) -> list[MissedAlternative]:
    known = alternatives_by_attribute(context.alternatives)
    wanted = {a: v for a, v in known.items() if "." + a in context.source}
    if not wanted or _is_test_file(context.path):
        return []
    found: list[MissedAlternative] = []
    # A container named for wgrad / dw holds backward_dw work where its name says the
    # delayed work (``backward_dw[...]``, ``delayed_wgrad_modules``) or the file runs it
    # (``m.backward_dw()``): ``wgrad_offload_modules`` in a file that never calls
    # backward_dw is about something else. Read once, on the first such container.
    runs_work = _Lazy(lambda: _calls_backward_dw(context.module, called=True))
    for scope in _scopes(context.module):
        listed = list(_listings(scope, wanted, runs_work))
        if not listed:
            continue
        named = _names(scope) | _words_of_file(context.source, wanted)
        # Names built by an f-string (``getattr(layer, f"{p}_proj")``) may be any name its
        # text fits: the function may name the alternatives that way.
        built = _formatted_names(scope)
        for node, receiver in listed:
            for owner, instead in wanted[node.attr.value]:
                missing = tuple(
                    a for a in instead if a not in named and not any(b.fullmatch(a) for b in built)
                )
                if missing:
                    found.append(
                        MissedAlternative(
                            node, context.module.code_for_node(receiver), node.attr.value,
                            owner, missing,
                        )
                    )  # fmt: skip
                    break
    return found


def _is_test_file(path: str) -> bool:
    """A test pins its configuration (``enable_hyper_connections = False``) and lists the
    layers that configuration builds: not a schedule for every path."""
    parts = re.split(r"[\\/]", path)
    name = parts[-1]
    return (
        any(p in TEST_DIRS for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
    )


def _words_of_file(source: str, wanted) -> set[str]:
    """The alternatives the file spells anywhere as a whole word (another function that
    picks between the two listings, a module-level tuple of names, ``r"e_proj"``): the file
    knows of them, so its listing is taken to be one of its choices."""
    names = {a for pairs in wanted.values() for _, instead in pairs for a in instead}
    return {
        a for a in names if re.search(rf"(?<![\w.]){re.escape(a)}\b|\.{re.escape(a)}\b", source)
    }


def _scopes(module: cst.Module):
    """The outermost functions (methods of top-level classes included) and the module's
    other top-level statements."""
    for statement in module.body:
        if isinstance(statement, cst.ClassDef):
            yield from statement.body.body
        else:
            yield statement


def _children(node: cst.CSTNode):
    return node.children


def _walk(node: cst.CSTNode, prune: tuple[type, ...] = ()):
    """Every node under ``node``, but for what sits under a node of a ``prune`` type."""
    pending = [node]
    while pending:
        current = pending.pop()
        if prune and isinstance(current, prune):
            continue
        yield current
        pending.extend(reversed(_children(current)))


def _names(scope: cst.CSTNode) -> set[str]:
    """The attribute names and the string contents the scope spells."""
    found: set[str] = set()
    for node in _walk(scope):
        if isinstance(node, cst.Attribute):
            found.add(node.attr.value)
        elif isinstance(node, cst.SimpleString):
            found.add(node.value.strip("\"'"))
    return found


def _outside(node: cst.CSTNode, wanted) -> cst.Attribute | None:
    """``node`` if it is ``X.c`` for a wanted ``c`` and ``X`` not ``self`` / ``cls``."""
    if (
        isinstance(node, cst.Attribute)
        and node.attr.value in wanted
        and not (isinstance(node.value, cst.Name) and node.value.value in NOT_OUTSIDE)
    ):
        return node
    return None


def _held(expr: cst.CSTNode, wanted):
    """The wanted ``X.c`` that ``expr`` holds as itself or an element (through lists,
    tuples, sets, dict values, conditional expressions and starred elements)."""
    pending = [expr]
    while pending:
        current = pending.pop()
        found = _outside(current, wanted)
        if found is not None:
            yield found
        elif isinstance(current, (cst.List, cst.Tuple, cst.Set, cst.Dict)):
            pending.extend(e.value for e in current.elements)
        elif isinstance(current, cst.IfExp):
            pending.extend((current.body, current.orelse))
        elif isinstance(current, (cst.StarredElement, cst.StarredDictElement)):
            pending.append(current.value)


class _Lazy:
    """A yes/no answer computed on the first question."""

    def __init__(self, compute) -> None:
        self._compute, self._value = compute, None

    def __bool__(self) -> bool:
        if self._value is None:
            self._value = bool(self._compute())
        return self._value


def _formatted_names(scope: cst.CSTNode) -> list[re.Pattern[str]]:
    """For each f-string of the scope with some text of its own, the names it can spell: its
    text as written, any word characters where it formats a value (``f"{p}_proj"`` fits
    ``e_proj`` and ``h_proj``)."""
    found = []
    for node in _walk(scope):
        if not isinstance(node, cst.FormattedString):
            continue
        texts = [p.value for p in node.parts if isinstance(p, cst.FormattedStringText)]
        if not any(texts):
            continue  # no text of its own: it would fit every name
        pattern = "".join(
            re.escape(p.value) if isinstance(p, cst.FormattedStringText) else r"\w*"
            for p in node.parts
        )
        found.append(re.compile(pattern))
    return found


def _spells_work(node: cst.CSTNode, runs_work) -> bool:
    """A target or receiver whose names say it holds weight-gradient work."""
    for sub in _walk(node):
        if isinstance(sub, cst.Name):
            word = sub.value
        elif isinstance(sub, cst.SimpleString):
            word = sub.value.strip("\"'")
        else:
            continue
        if says_deferred_wgrad(word) and (_says_later(word) or runs_work):
            return True
    return False


def _says_later(word: str) -> bool:
    """A name for the delayed work itself (``backward_dw``, ``delayed_wgrad_modules``),
    not for something else about weight gradients (``wgrad_offload_modules``)."""
    lowered = word.lower()
    return names_protocol_callables(word) or any(w in lowered for w in LATER_WORDS)


def _calls_backward_dw(node: cst.CSTNode, called: bool = False) -> bool:
    """``node`` spells ``.backward_dw`` (with ``called``: calls it)."""
    return any(
        (isinstance(sub, cst.Call) and _is_backward_dw(sub.func))
        if called
        else _is_backward_dw(sub)
        for sub in _walk(node)
    )


def _is_backward_dw(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == BACKWARD_DW


def _listings(scope: cst.CSTNode, wanted, runs_work):
    """(``X.c``, ``X``) for each listing of a wanted attribute for backward_dw."""
    for node in _walk(scope, prune=_ONLY_LOOKED_AT):
        if isinstance(node, cst.Attribute) and node.attr.value == BACKWARD_DW:
            found = _outside(node.value, wanted)
            if found is not None:
                yield found, found.value
        elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            if node.value is not None and any(_spells_work(t, runs_work) for t in targets):
                for found in _held(node.value, wanted):
                    yield found, found.value
        elif isinstance(node, cst.Call):
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in FILLING_METHODS
                and _spells_work(func.value, runs_work)
            ):
                for arg in node.args:
                    for found in _held(arg.value, wanted):
                        yield found, found.value
        elif isinstance(node, cst.For) and _calls_backward_dw(node.body):
            for found in _held(node.iter, wanted):
                yield found, found.value
