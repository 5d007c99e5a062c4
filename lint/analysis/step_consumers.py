"""Gradient accumulators under other names than main_grad, on the consumer side: a function
that runs once per micro-step (it reads the accumulation state: a micro-step or microbatch
counter, the accumulation boundary) and hands a gradient on into gradient storage (``X.grad``
of a master or partition tensor, or a view of it: ``narrow``, ``view``, a slice), and
whether it ever adds. Such a function that only replaces keeps the last micro-step's
gradient: the earlier ones are dropped (issue #19, class 4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns
from .tensor_writes import Buffers, writes

if TYPE_CHECKING:
    from .module import Unit

# Names of the per-micro-step accumulation state: a function reading one runs once per
# backward, not once per optimizer step (``accumulation_boundary`` is also a trigger).
STEP_WORDS = ("microbatch", "micro_step", "accumulation_boundary")
# Methods that give a view of a tensor's storage: a write into the view writes the tensor.
VIEW_METHODS = frozenset({"narrow", "view", "view_as", "reshape", "flatten", "chunk"})


def step_evidence(unit: Unit) -> str | None:
    """The first name or attribute the function reads that names the per-micro-step
    accumulation state, or None."""
    source = unit.context.source
    if not any(word in source for word in STEP_WORDS):
        return None
    for stmt in unit.body:
        for sub in patterns.walk(stmt):
            kind = type(sub)
            if kind is cst.Name:
                name = sub.value
            elif kind is cst.Attribute:
                name = sub.attr.value
            else:
                continue
            if any(word in name.lower() for word in STEP_WORDS):
                return name
    return None


def grad_storage(unit: Unit, expr, node, follow: bool = True) -> bool:
    """``expr`` is a tensor's ``.grad`` (of any object), a view or slice of one, or a local
    every binding of which reaching ``node`` is one."""
    while True:
        kind = type(expr)
        if kind is cst.Subscript:
            expr = expr.value
        elif kind is cst.Call and type(expr.func) is cst.Attribute:
            if expr.func.attr.value not in VIEW_METHODS:
                return False
            expr = expr.func.value
        elif kind is cst.Attribute and expr.attr.value == "data":
            expr = expr.value
        else:
            break
    if type(expr) is cst.Attribute:
        return expr.attr.value == "grad"
    if type(expr) is not cst.Name or not follow:
        return False
    defs = unit.reaching.reaching(expr.value, node)
    return bool(defs) and all(
        d.kind == "assign" and d.value is not None and grad_storage(unit, d.value, node, False)
        for d in defs
    )


def replaced_only(unit: Unit) -> list[tuple[object, object]]:
    """(destination, call) for every ``copy_`` into gradient storage in a function that never
    adds into anything (no ``add_``, ``+=``, accumulating ``out=``): empty when it adds
    somewhere, which is its own accumulation (a partition buffer added to, then copied
    over the FP32 gradient at the boundary, is right)."""
    found = []
    for root, node in unit.expression_roots():
        buffers = Buffers(unit, node)
        for dest, kind, at, how in writes(root, buffers):
            if kind == "accumulate":
                if type(at) is cst.AugAssign and type(at.value) in (cst.Integer, cst.Float):
                    continue  # ``self.pending += 1``: a counter, not a gradient
                return []
            if how == "copy_" and grad_storage(unit, dest, node):
                found.append((dest, at))
    return found
