"""A helper that computes delayed weight gradients, which nothing calls (issue #19, class 6).

A class that defers its layers' weight gradients often splits its ``backward_dw`` into one
private helper per group of layers (Megatron-core's ``MLASelfAttention``: ``_backward_kv_proj``,
``_backward_q_proj``, ``_backward_output_proj``), each running ``self.X.backward_dw()``. When
a group is added (an indexer's projections) and its helper is written but ``backward_dw`` is
not taught to call it, or a call is dropped in an edit, the helper is dead code: its layers'
deferred gradients are never computed. The missing call goes in ``backward_dw``, so the
finding is on its last statement.

A helper counts as dead only where this file gives no way to reach it: its name occurs once
in the whole file (its ``def``: no call, no reference stored, no string naming it for
``getattr``), it has no decorator (one may register it) and the file reaches no method by
a computed name anywhere (``getattr(obj, <not a string literal>)``, ``self`` included,
``vars(...)``, ``__dict__``, ``dir(...)``: the class, a scheduler, a wrapper or a mixin
may). Only private helpers (``_name``, not dunders) are judged: a public method may be
called from another file. The same test finds other dead
bookkeeping helpers (``dead_private_methods``): GMLP046 asks it for a helper that fetches
Megatron-FSDP's main_grad (``_expose_main_grads``) which nothing calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from . import patterns

PIECE = "backward_dw"


def dead_flush_helpers(
    cls: cst.ClassDef, source: str
) -> Iterator[tuple[cst.FunctionDef, cst.CSTNode]]:
    """(dead helper, last statement of the class's own ``backward_dw``) for each private
    method of ``cls`` that calls ``backward_dw()`` on something and is named nowhere else
    in ``source``."""
    methods = [s for s in cls.body.body if type(s) is cst.FunctionDef]
    own = next((m for m in methods if m.name.value == PIECE), None)
    if own is None or not own.body.body:
        return
    for method in dead_private_methods(cls, source, PIECE):
        yield method, own.body.body[-1]


def dead_private_methods(cls: cst.ClassDef, source: str, callee: str) -> Iterator[cst.FunctionDef]:
    """The private methods of ``cls`` (``_name``, not dunders) that call ``callee`` (a
    method of something: ``backward_dw``, ``get_main_grad``) and whose name occurs once in
    ``source`` (their ``def``), in a class that reaches no method by a computed name."""
    if _reaches_by_name_anywhere(source):
        return
    for method in (s for s in cls.body.body if type(s) is cst.FunctionDef):
        name = method.name.value
        if not name.startswith("_") or name.startswith("__") or not _calls(method, callee):
            continue
        if method.decorators:
            continue  # a decorator may register it (``@dw_step``)
        if not named_elsewhere(name, source):
            yield method


def named_elsewhere(name: str, source: str) -> bool:
    """``name`` occurs in ``source`` besides its own ``def`` (a call, a reference, a string)."""
    return len(re.findall(rf"\b{re.escape(name)}\b", source)) > 1


def flushed_attributes(method: cst.FunctionDef) -> list[str]:
    """``A`` for each ``self.A.backward_dw()`` in the method, in order, once each."""
    found: list[str] = []
    for sub in patterns.walk(method.body):
        if type(sub) is cst.Call and patterns.is_attr(sub.func, PIECE):
            attr = patterns.attribute_of(sub.func.value, "self")
            if attr is not None and attr not in found:
                found.append(attr)
    return found


def _calls(method: cst.FunctionDef, callee: str) -> bool:
    return any(
        type(sub) is cst.Call and patterns.is_attr(sub.func, callee)
        for sub in patterns.walk(method.body)
    )


# ``vars(...)``, ``__dict__``, ``dir(...)``: the file may reach a method by a name it computes,
# from anywhere (a scheduler, a wrapper, a mixin); so may ``getattr(obj, <not a literal>)``.
_BY_NAME = re.compile(r"\bvars\(|__dict__|\bdir\(")
_GETATTR = re.compile(r"\bgetattr\(")
_LITERAL = re.compile(r"""\s*(['"])[^'"]*\1\s*""")


def _reaches_by_name_anywhere(source: str) -> bool:
    if _BY_NAME.search(source):
        return True
    for match in _GETATTR.finditer(source):
        args = _arguments(source, match.end())
        if len(args) >= 2 and not _LITERAL.fullmatch(args[1]):
            return True
    return False


def _arguments(source: str, start: int) -> list[str]:
    """The top-level comma-separated texts of a call's arguments starting at ``start``."""
    depth, parts, current = 0, [], []
    for char in source[start : start + 400]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    return [*parts, "".join(current)]
