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

    def fail(why: str) -> SelectionError:
        return SelectionError(f"-k {expression!r}: {why}")

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def parse_or() -> Matcher:
        left = parse_and()
        while peek() == "or":
            take()
            right = parse_and()
            left = (lambda a, b: lambda s: a(s) or b(s))(left, right)
        return left

    def parse_and() -> Matcher:
        left = parse_not()
        while peek() == "and":
            take()
            right = parse_not()
            left = (lambda a, b: lambda s: a(s) and b(s))(left, right)
        return left

    def parse_not() -> Matcher:
        if peek() == "not":
            take()
            inner = parse_not()
            return lambda s: not inner(s)
        return parse_atom()

    def parse_atom() -> Matcher:
        token = peek()
        if token is None:
            raise fail("expression ends early")
        take()
        if token == "(":
            inner = parse_or()
            if peek() != ")":
                raise fail("missing ')'")
            take()
            return inner
        if token == ")" or token in _KEYWORDS:
            raise fail(f"unexpected {token!r}")
        return lambda s: token in s

    matcher = parse_or()
    if pos != len(tokens):
        raise fail(f"unexpected {tokens[pos]!r}")
    return matcher
