"""Expressions a fix may copy or drop without changing what the code does.

A fix that writes an expression a second time (GMLP008's fetch names the owner three times)
or deletes a statement (GMLP010) evaluates that expression more or fewer times. That is
harmless only for an expression whose evaluation calls nothing: ``next(weights).main_grad``
copied advances the iterator again, ``log(mark_offload(w.main_grad))`` deleted no longer
logs. Properties and ``__getitem__`` may run code too; like the rules, this takes a plain
path for a plain read.
"""

from __future__ import annotations

import libcst as cst


def is_plain_path(expr: cst.CSTNode | None) -> bool:
    """A name, or attributes and literal or name subscripts of one (``w``, ``self.fc1.weight``,
    ``weights[0]``, ``weights[i]``)."""
    while type(expr) is cst.Attribute or (
        type(expr) is cst.Subscript
        and all(type(e.slice) is cst.Index and is_inert(e.slice.value) for e in expr.slice)
    ):
        expr = expr.value
    return type(expr) is cst.Name


def is_inert(expr: cst.CSTNode | None) -> bool:
    """A number, a plain string or a plain path."""
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)) or is_plain_path(expr)


# What evaluates more than a read: a call, a binding, a suspension, a generator's step.
_EFFECTS = (cst.Call, cst.NamedExpr, cst.Await, cst.Yield)


def calls_nothing(expr: cst.CSTNode) -> bool:
    """No call, walrus, await or yield anywhere in ``expr`` (``fuse and not ctx.fp8``): a
    test a fix may evaluate once more."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, _EFFECTS):
            return False
        stack.extend(node.children)
    return True


def walrus_targets(expr: cst.CSTNode) -> set[str]:
    """Names a walrus anywhere in ``expr`` binds (``(w := next(ws)).layout``): a fix that
    copies a read of one of them ahead of the walrus, or before the statement, reads another
    object (or none)."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.NamedExpr and type(node.target) is cst.Name:
            found.add(node.target.value)
        stack.extend(node.children)
    return found
