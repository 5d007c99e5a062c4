"""Delayed-wgrad pieces of a class that do nothing (issue #19, class 6).

A class that builds submodules and splits its backward pass hands a schedule the pieces
that compute its weight gradients later: ``backward_dw`` itself, or per-submodule pieces a
fine-grained schedule calls one by one (``_submodule_mlp_dw``, ``attention_wgrad``). A
piece whose body is empty (``pass``, ``...``, a docstring, a bare ``return``) computes
nothing, silently: the weights of the submodules it stands for never get a gradient
(lhb8125/Megatron-LM #30's merge left two such pieces). A piece that raises says so
loudly and is not one of these; nor is a piece of an interface (a ``Protocol`` or ``ABC``,
an ``@abstractmethod``) or of a class that builds no submodule in ``__init__``.

A piece called for its effect (``backward_dw``, ``*_dw``) whose own body yields is a
generator function: the schedule's call (``layer.backward_dw()``) makes a generator and runs
none of its body, whatever the class builds. ``*wgrad*`` methods may be generators on
purpose (walking buffers) and are not judged so.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .module import ModuleContext, suite_body

# Method names of delayed-wgrad pieces: ``backward_dw``, ``*_dw``, ``*wgrad*``.
PIECE_SUFFIX = "_dw"
PIECE_WORD = "wgrad"
INTERFACE_BASES = frozenset({"Protocol", "ABC", "ABCMeta", "Generic"})
ABSTRACT = frozenset({"abstractmethod", "abstractproperty"})
# Submodules whose weights a piece computes: built from a spec, or a class of such a layer.
SPEC_BUILDERS = frozenset({"build_module"})
MODULE_WORDS = ("Linear", "MLP", "Attention", "Experts", "Layer", "Proj")


@dataclass(frozen=True)
class EmptyPiece:
    method: cst.FunctionDef
    class_name: str
    submodules: tuple[str, ...]  # the ``self`` attributes ``__init__`` builds
    # the first ``yield`` of a piece that is a generator function (None: an empty body)
    generator_yield: cst.CSTNode | None = None


def empty_pieces(context: ModuleContext) -> list[EmptyPiece]:
    found: list[EmptyPiece] = []
    for node in patterns.walk(context.module):
        if not isinstance(node, cst.ClassDef) or _is_interface(node):
            continue
        methods = [s for s in suite_body(node.body) if isinstance(s, cst.FunctionDef)]
        init = next((m for m in methods if m.name.value == "__init__"), None)
        submodules = tuple(_built_submodules(init)) if init is not None else ()
        for method in methods:
            if not _is_piece(method.name.value) or is_abstract(method):
                continue
            if submodules and is_empty(method):
                found.append(EmptyPiece(method, node.name.value, submodules))
            elif method.name.value.endswith(PIECE_SUFFIX):
                first = first_yield(method)
                if first is not None:
                    found.append(EmptyPiece(method, node.name.value, submodules, first))
    return found


def first_yield(function: cst.FunctionDef) -> cst.CSTNode | None:
    """The first ``yield`` of the function's own body (not of functions, lambdas or
    classes nested in it): the function is then a generator function."""
    stack = [function.body]
    while stack:
        node = stack.pop()
        if type(node) is cst.Yield:
            return node
        if type(node) in (cst.FunctionDef, cst.Lambda, cst.ClassDef):
            continue
        stack.extend(reversed(patterns.children(node)))
    return None


def _is_interface(node: cst.ClassDef) -> bool:
    return any(_last_name(base.value) in INTERFACE_BASES for base in node.bases)


def _is_piece(name: str) -> bool:
    return name.endswith(PIECE_SUFFIX) or PIECE_WORD in name.lower()


def is_abstract(method: cst.FunctionDef) -> bool:
    return any(_last_name(d.decorator) in ABSTRACT for d in method.decorators)


def is_empty(method: cst.FunctionDef) -> bool:
    """Only ``pass``, ``...``, strings (a docstring) or a bare / ``None`` return."""
    for stmt in suite_body(method.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(
                small.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)
            ):
                continue
            if isinstance(small, cst.Return) and (
                small.value is None or patterns.is_none_like(small.value)
            ):
                continue
            return False
    return True


def _built_submodules(init: cst.FunctionDef) -> Iterator[str]:
    """``self.X`` attributes ``__init__`` assigns a built submodule."""
    for node in patterns.walk(init.body):
        if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
            continue
        callee = _last_name(node.value.func) or ""
        if callee in SPEC_BUILDERS or any(word in callee for word in MODULE_WORDS):
            for target in node.targets:
                attr = target.target
                if (
                    isinstance(attr, cst.Attribute)
                    and isinstance(attr.value, cst.Name)
                    and attr.value.value == "self"
                ):
                    yield attr.attr.value


def _last_name(expr: cst.CSTNode) -> str | None:
    if isinstance(expr, cst.Call):
        expr = expr.func
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None
