"""The functions of one file's text, found by their lines and parsed one at a time with
CPython's ``ast``: the run's facts (``project``, ``contract_facts``, ``weight_users``) look
for a few words in a whole tree, and a file of thousands of lines may hold one three-line
function worth reading."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable

DEF_LINE = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)")
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class Functions:
    """The functions of one file's text, each parsed alone and only when a line of it
    matches what a kind of helper must hold: a file of thousands of lines may hold one
    three-line helper."""

    def __init__(self, text: str) -> None:
        # Lines as Python counts them: ``\r\n`` and ``\r`` end lines, a form feed does not.
        self.text = text.replace("\r\n", "\n").replace("\r", "\n")
        self.lines = self.text.split("\n")
        self.parsed: dict[int, FunctionNode | None] = {}

    def matching(self, pattern: re.Pattern) -> Iterable[tuple[FunctionNode, bool]]:
        """(function, defined at the top level) for each innermost function with a line
        matching ``pattern``."""
        return self.at_offsets(match.start() for match in pattern.finditer(self.text))

    def at_offsets(
        self, offsets: Iterable[int], top_level_only: bool = False, names=None
    ) -> Iterable[tuple[FunctionNode, bool]]:
        """(function, defined at the top level) for each innermost function holding one of
        ``offsets`` (ascending) of ``self.text``; with ``top_level_only``, or ``names`` (a
        set), the functions not at the top level, or not so named, are not parsed."""
        seen: set[int] = set()
        number, counted = 0, 0
        for offset in offsets:
            number += self.text.count("\n", counted, offset)
            counted = offset
            if number >= len(self.lines):
                break
            line = self.lines[number]
            start = number if DEF_LINE.match(line) else enclosing_def(self.lines, number)
            if start is None or start in seen:
                continue
            seen.add(start)
            top_level = indent(self.lines[start]) == 0
            if top_level_only and not top_level:
                continue
            if names is not None and DEF_LINE.match(self.lines[start]).group(2) not in names:
                continue
            function = self.function_at(start)
            if function is not None:
                yield function, top_level

    def function_at(self, start: int) -> FunctionNode | None:
        if start not in self.parsed:
            body = textwrap.dedent("\n".join(block(self.lines, start)))
            try:
                tree = ast.parse(body)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None  # the file's own lint reports it (too deep included)
            function = tree.body[0] if tree is not None and tree.body else None
            ok = isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
            self.parsed[start] = function if ok else None
        return self.parsed[start]


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def enclosing_def(lines: list[str], number: int) -> int | None:
    """The line of the innermost ``def`` whose body holds line ``number``: walking up, the
    first line indented less than everything passed so far that is a ``def``. A line that
    opens with a closing bracket (``) -> Tensor:`` of a signature split over lines, formatted
    at the ``def``'s indent) is passed over, as ``block`` does."""
    limit = indent(lines[number])
    for i in range(number - 1, -1, -1):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith(("#", ")", "]")):
            continue
        depth = indent(lines[i])
        if depth < limit:
            if DEF_LINE.match(lines[i]):
                return i
            limit = depth
    return None


def block(lines: list[str], start: int) -> list[str]:
    """The ``def`` at ``start`` and the lines of its body."""
    indent_of_def = indent(lines[start])
    found = [lines[start]]
    for line in lines[start + 1 :]:
        stripped = line.strip()
        closing = stripped.startswith(("#", ")", "]"))
        if stripped and indent(line) <= indent_of_def and not closing:
            break
        found.append(line)
    return found


def own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The function's nodes, not those of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def callee_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None
