"""Top-level functions of the run that fire gradient hooks or run delayed wgrad work
(``RunFacts.hook_firing`` / ``RunFacts.wgrad_work``, issue #19 class 5 across files).

``analysis.delayed_work`` follows the helpers of one file; a finalizer often calls one of
another module (``from .wgrad_utils import flush_expert_wgrads``) that pops the wgrad store
or fires ``_grad_accum_hook`` on what it is given. Such a helper is known here by what its
body does, read with CPython's ``ast`` (the same words as the per-file analysis,
``wgrad_words``):

* it runs delayed wgrad work: ``<store>.pop()`` / ``.popleft()`` or ``<graph>.replay()`` on
  a name that says deferred weight gradients (``wgrad_store``, ``bwd_dw_graphs[i]``), or a
  ``for`` loop over such a store whose body names a main_grad;
* it fires a gradient hook: a call of a name that says hook or callback beside grad,
  accum or reduce (``_grad_accum_hook``, ``_trigger_wgrad_accumulation_and_reduce_hooks``)
  and not a registrar or maker of one, or of a local bound to one (``for fn in
  <grad hooks>``, ``fn = p.<grad hook>``, ``fn = getattr(p, "<grad hook>", None)``).
  Stricter than within a file, where any hook a function doing the work calls counts:
  across files a function's whole job is taken for its callers', and ``checkpoint`` or
  ``make_graphed_callables`` call hooks of other kinds.

Only functions that another file of the run imports are looked at (``imported_names``):
what a caller can name, and so a name that the helper's own file may leave to its callers.
Methods are left out, as for the other run facts (a method's name is shared by unrelated
classes). Not followed: a helper that does the work only through another helper, and
callables a file registers as hooks (the per-file analysis sees those in the file itself).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable

from .function_index import Functions, callee_name, own_nodes
from .weight_users import imported_by, top_level_defs
from .wgrad_words import (
    CALLBACK_WORDS,
    names_grad_hook,
    names_protocol_callables,
    says_deferred_wgrad,
)

# Bytes a caller's file must hold to be worth following: the linter analyses only files that
# name the contract (``triggers.TRIGGERS``); these two are where delayed work is finished
# (a ``backward_dw``, a finalizer handling main_grad).
CALLER_BYTES = (b"main_grad", b"backward_dw")
# What a helper's own text must hold to be parsed (a superset of what ``_does_work`` and
# ``_fires_hook`` look for): a take or replay of a store or graph named for deferred
# wgrads, a loop over one with main_grad in the text, a gradient hook or callback named.
_TAKES = (b".pop", b".replay(")
_LOOP = re.compile(
    rb"^[ \t]*for[ \t][^\n]*?[ \t]in[ \t]+[\w.]*?(\w+)(?:\[[^\]\n]*\])?[ \t]*:", re.M
)
_GRAD_BYTES = tuple(w.encode() for w in CALLBACK_WORDS)
_HOOKS = (b"hook", b"callback")
# ``import a.b.c as m`` / ``import a`` after ``import ``.
_IMPORT = re.compile(rb"([\w.]+)(?:[ \t]+as[ \t]+(\w+))?")
_NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# Where a top-level function's text ends: the next line starting at column 0 with code (a
# signature's closing parenthesis, a comment or a blank line does not end it).
_TOP_LEVEL_LINE = re.compile(rb"\n(?=[^ \t\r\n#)\]])")
TAKE_METHODS = frozenset({"pop", "popleft"})
MAIN_GRAD = "main_grad"


def imported_names(data: bytes, modules: set[bytes]) -> set[bytes]:
    """The names ``data`` imports with ``from ... import`` (before any ``as``) and the
    attributes it calls on a module of the run it imports (``modules``: the run's module
    names): ``from pkg import m`` or ``import a.m [as x]``, then ``m.f(...)`` / ``x.f(...)``.
    A superset: the names are then looked for among the run's top-level functions."""
    names = imported_by(data) if b"from " in data else set()
    bound = names & modules
    at = data.find(b"import ")
    while at >= 0:
        # an ``import`` statement: the keyword starts its line (``from x import y`` is
        # ``imported_by``'s)
        line_start = data.rfind(b"\n", 0, at) + 1
        match = _IMPORT.match(data, at + 7) if not data[line_start:at].strip() else None
        # ``import a.m`` is called as ``a.m.f()``: ``m`` stands before ``.f``.
        if match is not None and match.group(1).rsplit(b".", 1)[-1] in modules:
            bound.add(match.group(2) or match.group(1).rsplit(b".", 1)[-1])
        at = data.find(b"import ", at + 7)
    for alias in bound:
        names.update(_called_on(data, alias))
    return names


_CALL_TAIL = re.compile(rb"(\w+)[ \t]*\(")


def _called_on(data: bytes, alias: bytes) -> Iterable[bytes]:
    """``f`` of each ``alias.f(`` in ``data`` (found with ``bytes.find``: a pattern that
    starts with a look-behind scans the whole file slowly)."""
    needle = alias + b"."
    at = data.find(needle)
    while at >= 0:
        before = data[at - 1 : at]
        if not at or not (before.isalnum() or before == b"_"):
            match = _CALL_TAIL.match(data, at + len(needle))
            if match is not None:
                yield match.group(1)
        at = data.find(needle, at + len(needle))


def helpers_in(text: str, names: set[str]) -> tuple[list[str], list[str]]:
    """(the functions of ``names`` that run delayed wgrad work, those that fire a gradient
    hook), among the top-level functions of ``text``."""
    work: list[str] = []
    fires: list[str] = []
    functions = Functions(text)
    offsets = sorted(
        m.start() for name in names for m in re.finditer(rf"^def[ \t]+{name}\b", text, re.M)
    )
    for function, _ in functions.at_offsets(offsets, top_level_only=True):
        nodes = list(own_nodes(function))
        if _does_work(nodes):
            work.append(function.name)
        if _fires_hook(nodes):
            fires.append(function.name)
    return work, fires


def _worth_parsing(data: bytes, names: set[bytes]) -> set[bytes]:
    """Those of ``names`` whose top-level ``def`` text holds the words a helper needs."""
    kept = set()
    for name in names:
        start = data.find(b"def " + name)
        while start > 0 and data[start - 1 : start] != b"\n":
            start = data.find(b"def " + name, start + 4)
        if start < 0:
            continue
        end = _TOP_LEVEL_LINE.search(data, start + 4)
        body = data[start : end.start() if end else len(data)]
        if _may_help(body):
            kept.add(name)
    return kept


def _may_help(body: bytes) -> bool:
    def says(word: bytes) -> bool:
        return says_deferred_wgrad(word.decode("ascii", "replace"))

    # The patterns run only where their literal part is (a pattern that starts with ``\w+``
    # tries every position of the text).
    if any(says(_name_before(body, at)) for take in _TAKES for at in _find_all(body, take)):
        return True
    if b"main_grad" in body and any(says(m.group(1)) for m in _LOOP.finditer(body)):
        return True
    lowered = body.lower()
    if not any(w in lowered for w in _GRAD_BYTES):
        return False
    return any(
        names_grad_hook(_name_around(lowered, at).decode("ascii", "replace"))
        for hook in _HOOKS
        for at in _find_all(lowered, hook)
    )


def _find_all(data: bytes, word: bytes) -> Iterable[int]:
    at = data.find(word)
    while at >= 0:
        yield at
        at = data.find(word, at + len(word))


def _name_before(data: bytes, at: int) -> bytes:
    """The name ending at ``at``, past one subscript (``bwd_dw_graphs[i]``)."""
    end = at
    if data[end - 1 : end] == b"]":
        end = data.rfind(b"[", 0, end)
    start = end
    while start > 0 and data[start - 1] in _NAME_CHARS:
        start -= 1
    return data[start:end]


def _name_around(data: bytes, at: int) -> bytes:
    """The whole name ``at`` is in."""
    start, end = at, at
    while start > 0 and data[start - 1] in _NAME_CHARS:
        start -= 1
    while end < len(data) and data[end] in _NAME_CHARS:
        end += 1
    return data[start:end]


def _word(expr: ast.AST) -> str:
    """The last name of ``a.b.c`` or ``a.b[i]`` (``c``, ``b``)."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return ""


def _does_work(nodes: list[ast.AST]) -> bool:
    # ``store.pop()()`` runs a stored callable (a layer's own backward_dw, which announces
    # itself), not the store's raw work.
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if id(node) in called or not says_deferred_wgrad(_word(node.func.value)):
                continue
            if node.func.attr in TAKE_METHODS:
                if not names_protocol_callables(_word(node.func.value)):
                    return True
            elif node.func.attr == "replay" and not node.args:
                return True
        elif (
            isinstance(node, ast.For)
            and says_deferred_wgrad(_word(node.iter))
            and any(_spells_main_grad(n) for stmt in node.body for n in ast.walk(stmt))
        ):
            return True
    return False


def _spells_main_grad(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == MAIN_GRAD
    if isinstance(node, ast.Name):
        return node.id == MAIN_GRAD
    return isinstance(node, ast.Constant) and node.value == MAIN_GRAD


def _fires_hook(nodes: list[ast.AST]) -> bool:
    bound = set(_hook_locals(nodes))
    for node in nodes:
        if isinstance(node, ast.Call):
            name = callee_name(node) or ""
            if names_grad_hook(name) or (isinstance(node.func, ast.Name) and name in bound):
                return True
    return False


def _hook_locals(nodes: Iterable[ast.AST]) -> Iterable[str]:
    """Locals holding a hook under a name of their own (``for fn in <hooks>``, ``fn =
    p.<hook>``, ``fn = getattr(p, "<hook>", None)``, ``fn = <hooks>[i]``)."""
    for node in nodes:
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            if names_grad_hook(_word(node.iter)):
                yield node.target.id
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and names_grad_hook(_hook_word(node.value)):
                yield target.id


def _hook_word(value: ast.AST) -> str:
    if isinstance(value, ast.IfExp):
        value = value.body
    if isinstance(value, ast.Call) and callee_name(value) == "getattr" and len(value.args) >= 2:
        name = value.args[1]
        return name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else ""
    return _word(value)


def run_helpers(contents: list[tuple[str, bytes]]) -> tuple[list[str], list[str]]:
    """(work helpers, hook-firing helpers) of ``contents`` (a run's files, as path and
    bytes) that another of them imports (see the module docstring)."""
    modules = {_module_name(path) for path, _ in contents}
    wanted: set[bytes] = set()
    for _, data in contents:
        if any(word in data for word in CALLER_BYTES):
            wanted |= imported_names(data, modules)
    work: set[str] = set()
    fires: set[str] = set()
    for _, data in contents if wanted else ():
        defined = top_level_defs(data) & wanted
        kept = _worth_parsing(data, defined) if defined else None
        if kept:
            text = data.decode("utf-8", errors="replace")
            found_work, found_fires = helpers_in(text, {name.decode() for name in kept})
            work.update(found_work)
            fires.update(found_fires)
    return sorted(work), sorted(fires)


def _module_name(path: str) -> bytes:
    """The name a file is imported under (``a/b/m.py``: ``m``; ``a/m/__init__.py``: ``m``)."""
    parts = path.replace("\\", "/").rsplit("/", 2)
    stem = parts[-1].rsplit(".", 1)[0]
    if stem == "__init__" and len(parts) > 1:
        stem = parts[-2]
    # The file system's bytes: a name that is not UTF-8 (surrogate escapes here) has no
    # .encode(), and names no module an import could spell anyway.
    return os.fsencode(stem)
