"""What a rule needs to know about the functions of the files linted in the same run.

Functions known by what they do, not by their names, so the rules keep working when a
helper is renamed, a project writes its own, or it sits in another module than its caller:

* for each per-parameter flag a rule gates on (``FLAGS``), the functions that return a
  value computed from it. Transformer Engine's ``get_accumulate_flag_in_param`` is
  ``return not getattr(weight_param, "overwrite_main_grad", False)``; a module that calls
  such a helper gates on its result without ever spelling the attribute;
* the bookkeeping helpers: functions that mark ``grad_added_to_main_grad = True`` on what
  they are given or make a dummy weight gradient for their caller. A function calling one
  has done the bookkeeping; a dummy one returns must reach autograd.

Found with CPython's ``ast`` in the few functions that spell the words, so it costs next to
nothing. From other files only functions defined at the top level count as bookkeeping
helpers: they are what a caller imports, while a method's name (``backward``) is shared by
unrelated classes. A helper defined outside the linted files is known only by the names in
``analysis.patterns.KNOWN_OVERWRITE_HELPERS``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

# The per-parameter flags whose helpers are looked for, by the field of ``Helpers`` that
# holds their helpers.
FLAGS = {"overwrite": "overwrite_main_grad", "zero_out": "zero_out_wgrad"}
GRAD_ADDED = "grad_added_to_main_grad"
DUMMY = "dummy"
KINDS = (*FLAGS, "bookkeeping")


@dataclass(frozen=True)
class Helpers:
    """Function names by what the functions do (see the module docstring). Sorted tuples,
    not sets: the cache key is built from the repr."""

    overwrite: tuple[str, ...] = ()
    zero_out: tuple[str, ...] = ()
    bookkeeping: tuple[str, ...] = ()

    def __or__(self, other: Helpers) -> Helpers:
        return Helpers(
            **{
                kind: tuple(sorted(set(getattr(self, kind)) | set(getattr(other, kind))))
                for kind in KINDS
            }
        )

    def __bool__(self) -> bool:
        return any(getattr(self, kind) for kind in KINDS)


NO_HELPERS = Helpers()
_WORDS = (*FLAGS.values(), GRAD_ADDED, DUMMY)


def run_helpers(contents: Iterable[bytes]) -> Helpers:
    """The helpers other files may import from ``contents`` (the files of a run)."""
    found = NO_HELPERS
    for data in contents:
        if any(word.encode() in data for word in _WORDS):
            found = found | helpers_in(data.decode("utf-8", errors="replace"), imported=True)
    return found


def helpers_in(text: str, imported: bool = False) -> Helpers:
    """The helpers of one file's text; with ``imported``, only those another file can
    import by name."""
    flags = {
        kind: tuple(
            sorted({f.name for f, _ in _functions_spelling(text, attr) if _returns_flag(f, attr)})
        )
        for kind, attr in FLAGS.items()
        if attr in text and "return" in text
    }
    bookkeeping = {
        f.name
        for word, line in _BOOKKEEPING_LINES.items()
        if word in text
        for f, top_level in _functions_spelling(text, word, line)
        if (top_level or not imported) and _does_bookkeeping(f)
    }
    return Helpers(**flags, bookkeeping=tuple(sorted(bookkeeping)))


_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)")
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


# The lines that can make a function a bookkeeping helper, by the word they must hold: a
# mark set to True, a dummy maker defined or called. Lines that merely mention the words
# (tests comparing the flag, ``dummy`` tensors) are not worth parsing a function for.
_BOOKKEEPING_LINES = {
    GRAD_ADDED: re.compile(GRAD_ADDED + r".*\bTrue\b"),
    DUMMY: re.compile(DUMMY + r"\w*\s*\("),
}


def _functions_spelling(
    text: str, word: str, line_pattern: re.Pattern | None = None
) -> Iterable[tuple[FunctionNode, bool]]:
    """(function, defined at the top level) for each innermost function with a line that
    spells ``word`` (and matches ``line_pattern``), parsed alone: a file of thousands of
    lines may hold one three-line helper."""
    lines = text.splitlines()
    seen: set[int] = set()
    for number, line in enumerate(lines):
        if word not in line or (line_pattern is not None and not line_pattern.search(line)):
            continue
        start = number if _DEF.match(line) else _enclosing_def(lines, number)
        if start is None or start in seen:
            continue
        seen.add(start)
        block = textwrap.dedent("\n".join(_block(lines, start)))
        try:
            tree = ast.parse(block)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the file's own lint reports it (too deep included)
        function = tree.body[0] if tree.body else None
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield function, _indent(lines[start]) == 0


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


def _does_bookkeeping(function: FunctionNode) -> bool:
    """Named for dummies, calls a dummy maker, or marks ``grad_added_to_main_grad = True`` on
    something other than ``ctx`` (where forward records whether a parameter has it)."""
    if DUMMY in function.name:
        return True
    for node in _own_nodes(function):
        if isinstance(node, ast.Call) and DUMMY in (_callee_name(node) or ""):
            return True
        subject = _marked_subject(node)
        if subject is not None and not (isinstance(subject, ast.Name) and subject.id == "ctx"):
            return True
    return False


def _marked_subject(node: ast.AST) -> ast.AST | None:
    """X of ``X.grad_added_to_main_grad = True`` or ``setattr(X, "grad_added...", True)``."""
    if isinstance(node, ast.Assign) and _is_true(node.value):
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr == GRAD_ADDED:
                return target.value
    if (
        isinstance(node, ast.Call)
        and _callee_name(node) == "setattr"
        and len(node.args) == 3
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == GRAD_ADDED
        and _is_true(node.args[2])
    ):
        return node.args[0]
    return None


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _callee_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None
