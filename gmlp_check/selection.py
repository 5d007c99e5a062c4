"""``-k`` expressions over case ids, in the spirit of pytest's ``-k``.

An expression is made of terms combined with ``and``, ``or``, ``not`` and parentheses. A term
is any other run of characters without spaces or parentheses and matches a case whose id
contains it: ``-k 'mode=overwrite and not delay=1'``, ``-k 'act=gelu or act=relu'``. A full
case id is a term that matches exactly that case, which is what rerun commands use.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")
_KEYWORDS = {"and", "or", "not"}
# Parentheses and ``not`` nest by recursion: far deeper than any selection needs, far below
# Python's recursion limit.
MAX_DEPTH = 100
_SHOWN_CHARS = 80  # of an expression quoted in an error line

Matcher = Callable[[str], bool]


class SelectionError(ValueError):
    pass


def _tokenize(expression: str) -> list[str]:
    tokens, pos = [], 0
    expression = expression.rstrip()
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if match is None:  # only trailing blanks can fail to match, and they were stripped
            break
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def compile_expression(expression: str) -> Matcher:
    """Compile a -k expression into a predicate on case ids; SelectionError if malformed."""
    tokens = _tokenize(expression)
    if not tokens:
        raise SelectionError(f"-k: expected an expression, got {expression!r}")
    pos = 0
    depth = 0
    shown = expression if len(expression) <= _SHOWN_CHARS else expression[:_SHOWN_CHARS] + "..."

    def fail(why: str) -> SelectionError:
        return SelectionError(f"-k {shown!r}: {why}")

    def nest() -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_DEPTH:
            raise fail(f"parentheses and 'not' nest deeper than {MAX_DEPTH} levels")

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    # Chains of ``or`` and ``and`` are flat lists, not nested closures: a long one must not
    # recurse when it is evaluated.
    def parse_or() -> Matcher:
        terms = [parse_and()]
        while peek() == "or":
            take()
            terms.append(parse_and())
        return terms[0] if len(terms) == 1 else lambda s: any(t(s) for t in terms)

    def parse_and() -> Matcher:
        terms = [parse_not()]
        while peek() == "and":
            take()
            terms.append(parse_not())
        return terms[0] if len(terms) == 1 else lambda s: all(t(s) for t in terms)

    def parse_not() -> Matcher:
        nonlocal depth
        if peek() == "not":
            take()
            nest()
            inner = parse_not()
            depth -= 1
            return lambda s: not inner(s)
        return parse_atom()

    def parse_atom() -> Matcher:
        nonlocal depth
        token = peek()
        if token is None:
            raise fail("expression ends early")
        take()
        if token == "(":
            nest()
            inner = parse_or()
            if peek() != ")":
                raise fail("missing ')'")
            take()
            depth -= 1
            return inner
        if token == ")" or token in _KEYWORDS:
            raise fail(f"unexpected {token!r}")
        return lambda s: token in s

    matcher = parse_or()
    if pos != len(tokens):
        raise fail(f"unexpected {tokens[pos]!r}")
    return matcher
