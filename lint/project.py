"""What a rule needs to know about the functions of the files linted in the same run.

Today: which functions return a value computed from a per-parameter flag, for each flag a
rule gates on (``FLAGS``). Transformer Engine's ``get_accumulate_flag_in_param`` is
``return not getattr(weight_param, "overwrite_main_grad", False)``; a module that imports
such a helper (or defines it next to its caller) gates on its result without ever spelling
the attribute. Knowing the helper by what it does, not by its name, keeps the rules working
when it is renamed or a project writes its own, in the same file or another. Found with
CPython's ``ast`` in the few functions that spell the attribute, so it costs next to
nothing; a helper defined outside the linted files is known only by the names in
``analysis.patterns.KNOWN_OVERWRITE_HELPERS``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

# The per-parameter flags whose helpers are looked for, by the name ``FlagHelpers`` gives
# their helpers.
FLAGS = {"overwrite": "overwrite_main_grad", "zero_out": "zero_out_wgrad"}


@dataclass(frozen=True)
class FlagHelpers:
    """For each flag of ``FLAGS``, the names of the functions that return a value computed
    from it. Sorted tuples, not sets: the cache key is built from the repr."""

    overwrite: tuple[str, ...] = ()
    zero_out: tuple[str, ...] = ()

    def __or__(self, other: FlagHelpers) -> FlagHelpers:
        return FlagHelpers(
            **{
                kind: tuple(sorted(set(getattr(self, kind)) | set(getattr(other, kind))))
                for kind in FLAGS
            }
        )

    def __bool__(self) -> bool:
        return any(getattr(self, kind) for kind in FLAGS)


NO_FLAG_HELPERS = FlagHelpers()


def flag_helpers(contents: Iterable[bytes]) -> FlagHelpers:
    """The functions, in any of ``contents``, that return a value computed from a flag."""
    found = FlagHelpers()
    for data in contents:
        if b"return" in data and any(attribute.encode() in data for attribute in FLAGS.values()):
            found = found | flag_helpers_in(data.decode("utf-8", errors="replace"))
    return found


def flag_helpers_in(text: str) -> FlagHelpers:
    """The functions of one file's text that return a value computed from a flag."""
    return FlagHelpers(
        **{
            kind: tuple(sorted(set(_helpers_in(text, attribute))))
            for kind, attribute in FLAGS.items()
            if attribute in text
        }
    )


_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)")


def _helpers_in(text: str, attribute: str) -> Iterable[str]:
    """Only the functions whose text spells the attribute are parsed (a file of thousands of
    lines may hold one such three-line helper)."""
    lines = text.splitlines()
    seen: set[int] = set()
    for number, line in enumerate(lines):
        if attribute not in line:
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
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and _returns_flag(
            function, attribute
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


def _returns_flag(function: ast.AST, attribute: str) -> bool:
    spelled: set[str] = set()
    returns: list[ast.AST] = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign) and _spells(node.value, attribute):
            spelled.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
    return any(
        _spells(value, attribute)
        or any(isinstance(n, ast.Name) and n.id in spelled for n in ast.walk(value))
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


def _spells(expr: ast.AST, attribute: str) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and node.attr == attribute:
            return True
        if isinstance(node, ast.Constant) and node.value == attribute:
            return True
    return False
