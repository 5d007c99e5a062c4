"""The arms of a ``match`` statement as sides of a branch on a flag (class 7 in ``match``).

``match accumulate: case True: out = w.main_grad; case _: out = scratch`` is the seed's
``if accumulate: ... else: ...`` with more arms. ``branches.py`` judges it by pairs of arms:
two arms that do different things with main_grad and ask different things of the flag.

What an arm asks of the flag is its *key*: the text of its pattern at the positions of the
subject that depend on the flag (all of it for a plain subject; the elements of a literal
tuple subject that do, ``match (accumulate, ctx.weight_requires_grad)``), a capture or
``_`` there being "anything", and its guard when the guard reads the flag. Two arms with
one key differ only in what the flag does not decide (``case (True, "a")`` and ``case
(True, "b")``), so they make no choice on it. An arm whose key is "anything" still counts:
it runs only when the arms before it did not match, so ``case True: ...`` then ``case _:
...`` is an ``if``/``else``. When no arm is irrefutable the subject may match none: that is
one more arm (key "anything"), doing nothing, or running what follows the match when some
arm leaves by a jump (as for an ``if`` without ``else`` whose body returns).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from .walking import children

WILDCARD = "_"


@dataclass(frozen=True)
class FlagMatch:
    """A match that decides something on the flag: where its test is, and its arms as
    (key, the case or None for "no arm matched")."""

    test: cst.BaseExpression  # the subject, or the first guard that reads the flag
    test_owner: cst.CSTNode  # the graph node's owner where ``test`` is evaluated
    arms: tuple[tuple[tuple[str, ...], cst.MatchCase | None], ...]


def flag_match(
    stmt: cst.Match,
    subject_tainted: Callable[[cst.BaseExpression], bool],
    guard_tainted: Callable[[cst.MatchCase], bool],
    text: Callable[[cst.CSTNode], str],
) -> FlagMatch | None:
    """``stmt`` read as a branch on the flag, or None when neither its subject nor any guard
    depends on it."""
    subject = stmt.subject
    whole = False
    positions: tuple[int, ...] = ()
    if isinstance(subject, (cst.Tuple, cst.List)) and not any(
        isinstance(e, cst.StarredElement) for e in subject.elements
    ):
        positions = tuple(i for i, e in enumerate(subject.elements) if subject_tainted(e.value))
    else:
        whole = subject_tainted(subject)
    guards = [case for case in stmt.cases if case.guard is not None and guard_tainted(case)]
    guarded = {id(case) for case in guards}
    if not (whole or positions or guards):
        return None
    arms: list[tuple[tuple[str, ...], cst.MatchCase | None]] = []
    for case in stmt.cases:
        key = [_pattern_text(case.pattern, text)] if whole else []
        if positions:
            elements = _sequence_elements(case.pattern)
            for i in positions:
                if elements is None:  # a capture of the whole tuple, a star: its whole text
                    key.append(_pattern_text(case.pattern, text))
                else:
                    key.append(_pattern_text(elements[i], text) if i < len(elements) else "")
        if id(case) in guarded:
            key.append("if " + text(case.guard))
        arms.append((tuple(key), case))
    if not exhaustive(stmt):
        arms.append(((WILDCARD,) * len(arms[0][0]), None))
    if whole or positions:
        return FlagMatch(subject, stmt, tuple(arms))
    return FlagMatch(guards[0].guard, guards[0], tuple(arms))


def exhaustive(stmt: cst.Match) -> bool:
    """Some arm surely runs: one is irrefutable (``case _:``, ``case name:``), or the arms
    without a guard cover True and False at each element of the subject (``case True:`` and
    ``case False:``; ``case (True, _):`` and ``case (False, _):`` for a literal pair). The
    second reads a match on flags as a test of flags, which hold True or False."""
    unguarded = [case for case in stmt.cases if case.guard is None]
    if any(_irrefutable(case) for case in unguarded):
        return True
    subject = stmt.subject
    if isinstance(subject, (cst.Tuple, cst.List)):
        width = len(subject.elements)
        if width > 6 or any(isinstance(e, cst.StarredElement) for e in subject.elements):
            return False
    else:
        width = 1
    covered: list[list[set[bool]]] = []
    for case in unguarded:
        elements = [case.pattern] if width == 1 else _sequence_elements(case.pattern)
        if elements is None or len(elements) != width:
            continue
        covered.append([_bool_values(e) for e in elements])
    return all(
        any(all(v in c for v, c in zip(combo, values)) for values in covered)
        for combo in itertools.product((True, False), repeat=width)
    )


def _bool_values(pattern: cst.MatchPattern) -> set[bool]:
    """Which of True and False a pattern matches (``None``, ``0`` and the like: neither)."""
    if _is_wildcard(pattern):
        return {True, False}
    if isinstance(pattern, cst.MatchAs) and pattern.pattern is not None:
        return _bool_values(pattern.pattern)
    if isinstance(pattern, cst.MatchSingleton) and isinstance(pattern.value, cst.Name):
        word = pattern.value.value
        return {word == "True"} if word in ("True", "False") else set()
    if isinstance(pattern, cst.MatchOr):
        return {v for option in pattern.patterns for v in _bool_values(option.pattern)}
    return set()


def pattern_names(pattern: cst.CSTNode) -> Iterator[cst.Name]:
    """The names a pattern captures (bound where its arm runs)."""
    stack: list[cst.CSTNode] = [pattern]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.MatchAs, cst.MatchStar)) and node.name is not None:
            yield node.name
        elif isinstance(node, cst.MatchMapping) and node.rest is not None:
            yield node.rest
        stack.extend(children(node))


def _irrefutable(case: cst.MatchCase) -> bool:
    """The arm matches every subject (``case _:``, ``case name:``, with no guard)."""
    return case.guard is None and _is_wildcard(case.pattern)


def _is_wildcard(pattern: cst.MatchPattern) -> bool:
    if isinstance(pattern, cst.MatchAs):
        return pattern.pattern is None or _is_wildcard(pattern.pattern)
    if isinstance(pattern, cst.MatchOr):
        return any(_is_wildcard(p.pattern) for p in pattern.patterns)
    return False


def _pattern_text(pattern: cst.MatchPattern, text: Callable[[cst.CSTNode], str]) -> str:
    if _is_wildcard(pattern):
        return WILDCARD
    if isinstance(pattern, cst.MatchAs) and pattern.pattern is not None:
        return _pattern_text(pattern.pattern, text)  # ``case True as flag``
    return text(pattern)


def _sequence_elements(pattern: cst.MatchPattern) -> list[cst.MatchPattern] | None:
    """The element patterns of ``case (a, b)`` / ``case [a, b]``, or None (a capture, a
    star, another kind of pattern)."""
    if isinstance(pattern, cst.MatchAs) and pattern.pattern is not None:
        return _sequence_elements(pattern.pattern)
    if not isinstance(pattern, (cst.MatchTuple, cst.MatchList)):
        return None
    elements = []
    for element in pattern.patterns:
        if not isinstance(element, cst.MatchSequenceElement):
            return None  # ``*rest`` shifts the positions after it
        elements.append(element.value)
    return elements
