"""What a rule needs to know about the other files linted in the same run.

Today one fact: which functions return a flag computed from ``overwrite_main_grad`` (like
Transformer Engine's ``get_accumulate_flag_in_param``, whose body is
``return not getattr(weight_param, "overwrite_main_grad", False)``). A module that imports
such a helper gates on its result without ever spelling the attribute; knowing the helper
by what it does, not by its name, keeps the downgraded-flag rules working when it is renamed
or a project writes its own. Found with CPython's ``ast`` in the few files that spell the
attribute, so it costs next to nothing; a helper defined outside the linted files is known
only by the names in ``analysis.patterns.KNOWN_OVERWRITE_HELPERS``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable

OVERWRITE = "overwrite_main_grad"


def overwrite_helpers(contents: Iterable[bytes]) -> frozenset[str]:
    """Names of the functions, in any of ``contents``, that return a value computed from
    ``overwrite_main_grad``."""
    found: set[str] = set()
    needle = OVERWRITE.encode()
    for data in contents:
        if needle in data and b"return" in data:
            found.update(_helpers_in(data.decode("utf-8", errors="replace")))
    return frozenset(found)


_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)")


def _helpers_in(text: str) -> Iterable[str]:
    """Only the functions whose text spells the attribute are parsed (a file of thousands of
    lines may hold one such three-line helper)."""
    lines = text.splitlines()
    seen: set[int] = set()
    for number, line in enumerate(lines):
        if OVERWRITE not in line:
            continue
        start = _enclosing_def(lines, number)
        if start is None or start in seen:
            continue
        seen.add(start)
        block = textwrap.dedent("\n".join(_block(lines, start)))
        try:
            tree = ast.parse(block)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the file's own lint reports it (too deep included)
        function = tree.body[0] if tree.body else None
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and _returns_overwrite(
            function
        ):
            yield function.name


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _enclosing_def(lines: list[str], number: int) -> int | None:
    """The line of the innermost ``def`` whose body holds line ``number``: walking up, the
    first line indented less than everything passed so far that is a ``def``."""
    limit = _indent(lines[number])
    for i in range(number - 1, -1, -1):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = _indent(lines[i])
        if indent < limit:
            if _DEF.match(lines[i]):
                return i
            limit = indent
    return None


def _block(lines: list[str], start: int) -> list[str]:
    """The ``def`` at ``start`` and the lines of its body."""
    indent = _indent(lines[start])
    block = [lines[start]]
    for line in lines[start + 1 :]:
        stripped = line.strip()
        ends = stripped and _indent(line) <= indent and not stripped.startswith(("#", ")", "]"))
        if ends:
            break
        block.append(line)
    return block


def _returns_overwrite(function: ast.AST) -> bool:
    spelled: set[str] = set()
    returns: list[ast.AST] = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign) and _spells(node.value):
            spelled.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
    return any(
        _spells(value) or any(isinstance(n, ast.Name) and n.id in spelled for n in ast.walk(value))
        for value in returns
    )


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The function's nodes, not those of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _spells(expr: ast.AST) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and node.attr == OVERWRITE:
            return True
        if isinstance(node, ast.Constant) and node.value == OVERWRITE:
            return True
    return False
