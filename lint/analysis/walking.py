"""Walking libcst trees fast: the child nodes that carry code (``children``), and ``walk``,
which does not enter nested functions or classes; while ``children_kept`` holds (one
analysed file), both remember what they found. Every analysis walks the same code several
times; these are their hot loops."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import libcst as cst

# Fields that hold only tokens and whitespace, or names that are not reads (an attribute's
# name, a keyword argument's name): never worth visiting.
_SKIPPED_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "equal",
        "semicolon",
        "leading_lines",
        "lines_after_decorators",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "dot",
        "colon",
        "asynchronous",
        "header",
        "footer",
        "trailing_whitespace",
        "operator",
        "keyword",
        "attr",
        "star",
        "newline",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


# While a file is analysed (``children_kept``): each node's children as first found, with
# the node itself (so that its id is not reused while the entry lives). The analyses walk
# the same code several times (unit surveys, graphs, the rules' own walks).
_KEPT: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] | None = None
# Likewise each walk that ran to its end, by the node it started from: a second walk of the
# same code is a list's iteration (units, statements and expressions are walked three
# times on average by the surveys, graphs and rules).
_WALKED: dict[int, tuple[cst.CSTNode, list[cst.CSTNode]]] | None = None


@contextmanager
def children_kept() -> Iterator[None]:
    """``children`` and ``walk`` remember what they found until the block ends (one file's
    analysis: its tree does not change)."""
    global _KEPT, _WALKED
    outer = _KEPT, _WALKED
    _KEPT, _WALKED = {}, {}
    try:
        yield
    finally:
        _KEPT, _WALKED = outer


def children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The child nodes that carry code, in source order; much cheaper than libcst's
    ``children``, which rebuilds the node to find them."""
    kept = _KEPT
    if kept is None:
        return _children(node)
    entry = kept.get(id(node))
    if entry is not None and entry[0] is node:
        return entry[1]
    found = _children(node)
    kept[id(node)] = (node, found)
    return found


def _children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """(The hot loop of every walk: plain dictionary look-ups instead of function calls.)"""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(
            f.name
            for f in dataclasses.fields(node)
            if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace")
        )
    found: list[cst.CSTNode] = []
    is_node = _NODE_TYPES
    for name in names:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                flag = is_node.get(type(item))
                if flag is None:
                    flag = _classify(type(item))
                if flag:
                    found.append(item)
        else:
            flag = is_node.get(kind)
            if flag is None:
                flag = _classify(kind)
            if flag:
                found.append(value)
    return tuple(found)


# Whether a type is a libcst node class. libcst's node classes are ABCs, whose isinstance
# checks are slow: the hot paths below compare exact types instead (the concrete node
# classes they name have no subclasses).
_NODE_TYPES: dict[type, bool] = {}
SCOPES = (cst.FunctionDef, cst.ClassDef)


def _classify(kind: type) -> bool:
    _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return _NODE_TYPES[kind]


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node of an expression or statement, not entering nested functions or classes,
    in the order of a depth-first walk (a node, then each child's walk in source order)."""
    walked = _WALKED
    if walked is None:
        return _walk(node)
    entry = walked.get(id(node))
    if entry is not None and entry[0] is node:
        return iter(entry[1])
    return _walk_kept(node, walked)


def _walk_kept(node: cst.CSTNode, walked: dict) -> Iterator[cst.CSTNode]:
    """``_walk``, remembered once it has run to its end (a walk its caller stops early is
    not: most of its nodes may never be needed)."""
    seen: list[cst.CSTNode] = []
    append = seen.append
    for current in _walk(node):
        append(current)
        yield current
    walked[id(node)] = (node, seen)


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """(``children``'s look-up inlined: this runs once for every node walked.)"""
    kept = _KEPT
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        yield current
        if type(current) in SCOPES and current is not node:
            continue
        entry = kept.get(id(current)) if kept is not None else None
        found = entry[1] if entry is not None and entry[0] is current else children(current)
        if found:
            stack.extend(reversed(found))
