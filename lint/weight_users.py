"""The weight users (``RunFacts.weight_users``, see ``project``): top-level functions that
use a parameter as the weight Parameter, and the names that files with an ``origin_`` twin
import, among which they are looked for (GMLP037 across files)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from .function_index import FunctionNode, Functions, callee_name

# What a weight user's text must hold (``main_grad`` covers its flags and getter).
WEIGHT_ATTRIBUTES = (
    "main_grad",
    "get_main_grad",
    "grad_added_to_main_grad",
    "overwrite_main_grad",
    "zero_out_wgrad",
)
_WEIGHT_USE_WORDS = ("main_grad", "zero_out_wgrad", "weakref")
WEIGHT_USE_BYTES = tuple(word.encode() for word in _WEIGHT_USE_WORDS)
ORIGIN_BYTES = (b"origin_", b"orig_", b"original_")  # analysis.provenance.ORIGIN_PREFIXES
_IMPORT_FROM = re.compile(rb"from[ \t]+[\w.]+[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)")


def top_level_defs(data: bytes) -> set[bytes]:
    """The names of the functions ``data`` defines at the top level (``def`` at column 0),
    found with ``bytes.find``."""
    names = set()
    start = 0 if data.startswith(b"def ") else data.find(b"\ndef ")
    while start >= 0:
        begin = data.find(b"def ", start) + 4
        end = data.find(b"(", begin)
        if end < 0:
            break
        names.add(data[begin:end].strip())
        start = data.find(b"\ndef ", end)
    return names


def imported_by(data: bytes) -> set[bytes]:
    """The names ``from ... import`` statements of ``data`` import (before any ``as``)."""
    names = set()
    start = data.find(b"from ")
    while start >= 0:
        # Matched only where ``from `` is (a regular expression scanning the whole file
        # costs ten times more).
        match = _IMPORT_FROM.match(data, start)
        start = data.find(b"from ", start + 5)
        if match is None or (match.start() and data[match.start() - 1 : match.start()].isalnum()):
            continue
        for part in match.group(1).split(b","):
            words = part.split(b"#", 1)[0].strip(b" \t\r\n()\\").split()
            if words and words[0].decode("ascii", "replace").isidentifier():
                names.add(words[0])
    return names


def weight_users_in(text: str, names: set[str] | None = None) -> list[str]:
    """The top-level functions of ``text`` (named in ``names``, when given) that use a
    parameter as the weight Parameter, as ``name:parameter:position``
    (``RunFacts.weight_users``). Only such functions with a line spelling one of
    ``_WEIGHT_USE_WORDS`` are parsed."""
    offsets = sorted(start for word in _WEIGHT_USE_WORDS for start in _find_all(text, word))
    if not offsets:
        return []
    functions = Functions(text)
    if functions.text is not text:
        offsets = sorted(
            start for word in _WEIGHT_USE_WORDS for start in _find_all(functions.text, word)
        )
    found = []
    for function, _ in functions.at_offsets(offsets, top_level_only=True, names=names):
        owners, loops = _weight_owners(function)
        if not owners:
            continue
        args = function.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        for position, name in [*enumerate(positional), *((-1, a.arg) for a in args.kwonlyargs)]:
            if name in owners or loops.get(name, set()) & owners:
                found.append(f"{function.name}:{name}:{position}")
    return found


def _find_all(text: str, word: str) -> Iterable[int]:
    start = text.find(word)
    while start >= 0:
        yield start
        start = text.find(word, start + len(word))


def _weight_owners(function: FunctionNode) -> tuple[set[str], dict[str, set[str]]]:
    """One walk of ``function`` (lambdas included): the names it takes main_grad, a
    main_grad flag or a weakref from (``X``, ``X[i]``), and the loop / comprehension
    variables over each plain name (``for w in X``)."""
    owners: set[str] = set()
    loops: dict[str, set[str]] = {}
    for node in _nodes_with_lambdas(function):
        if isinstance(node, ast.Attribute):
            if node.attr in WEIGHT_ATTRIBUTES and (name := _owner(node.value)) is not None:
                owners.add(name)
        elif isinstance(node, (ast.For, ast.comprehension)):
            if isinstance(node.iter, ast.Name) and isinstance(node.target, ast.Name):
                loops.setdefault(node.iter.id, set()).add(node.target.id)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and _takes_from_first(node)
            and (name := _owner(node.args[0])) is not None
        ):
            owners.add(name)
    return owners, loops


def _takes_from_first(call: ast.Call) -> bool:
    """``weakref.ref(X)`` / ``ref(X)`` / ``proxy(X)``, or ``getattr`` / ``hasattr`` /
    ``setattr`` of a main_grad attribute on X."""
    callee = callee_name(call)
    func = call.func
    if callee in ("ref", "proxy"):
        return isinstance(func, ast.Name) or (
            isinstance(func.value, ast.Name) and func.value.id == "weakref"
        )
    return (
        callee in ("getattr", "hasattr", "setattr")
        and isinstance(func, ast.Name)
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.Constant)
        and call.args[1].value in WEIGHT_ATTRIBUTES
    )


def _nodes_with_lambdas(function: FunctionNode) -> Iterable[ast.AST]:
    """The function's nodes and its lambdas', not those of nested functions or classes."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _owner(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None
