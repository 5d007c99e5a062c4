"""GMLP006's second shape: a weight's mark set where its main_grad is first allocated (issue
#19, class 7), the write into main_grad standing after the allocation's ``if``: the write runs
on every microbatch, the mark on the first alone (blind corpus 22)."""

from __future__ import annotations

import libcst as cst

from . import patterns, wgrad


def under_allocation(unit, subject, innermost) -> bool:
    """The mark of ``subject`` stands in the body of an ``if`` that asks whether its main_grad
    is missing (``X.main_grad is None``, ``not hasattr(X, "main_grad")``, ``getattr(X,
    "main_grad", None) is None``) and only allocates it there (``X.main_grad =
    zeros(...)``, nothing else touching X's main_grad in that body), while the function
    marks X nowhere else: the write that follows the allocation runs every microbatch, the
    mark only on the first. (A body that writes the first gradient into the fresh buffer,
    or binds main_grad to the gradient itself, marks rightly; so does a redundant mark
    beside one after the write.)"""
    guard, side = innermost
    if side != "body":
        return False
    word = wgrad.stem(subject)
    owner = _missing_main_grad_of(guard.test)
    if owner is None or wgrad.stem(owner) != word:
        return False
    allocations = [
        sub
        for sub in patterns.walk(guard.body)
        if type(sub) is cst.Assign
        and any(
            patterns.is_attr(t.target, patterns.MAIN_GRAD) and wgrad.stem(t.target.value) == word
            for t in sub.targets
        )
    ]
    if not allocations or not all(_allocates(a.value) for a in allocations):
        return False
    inside = {id(sub) for sub in patterns.walk(guard.body)}
    allocated = {id(sub) for a in allocations for sub in patterns.walk(a)}
    for sub in patterns.walk(guard.body):
        touches = id(sub) not in allocated and patterns.is_attr(sub, patterns.MAIN_GRAD)
        if touches and wgrad.stem(sub.value) == word:
            return False  # the body writes (or reads) the fresh buffer: its first write
    for stmt, _ in unit.statements():
        marked = wgrad.marked_subject(stmt)
        if marked is not None and wgrad.stem(marked) == word and id(stmt) not in inside:
            return False
    return True


def _allocates(value) -> bool:
    return patterns.callee_name(value) in patterns.ALLOCATORS


def _missing_main_grad_of(test) -> cst.BaseExpression | None:
    """X for a test that X's main_grad is missing, else None; in an ``or`` of such tests
    (``not hasattr(w, "main_grad") or w.main_grad is None``), the X they all name."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.Or:
        left, right = _missing_main_grad_of(test.left), _missing_main_grad_of(test.right)
        if left is None or right is None or wgrad.stem(left) != wgrad.stem(right):
            return None
        return left
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = test.expression
        if type(inner) is cst.Call and patterns.callee_name(inner) == "hasattr":
            args = patterns.positional_args(inner)
            if len(args) == 2 and patterns.string_value(args[1].value) == patterns.MAIN_GRAD:
                return args[0].value
        return None
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if type(target.operator) is not cst.Is or not patterns.is_none_like(target.comparator):
        return None
    return patterns.main_grad_owner(test.left)
