"""Tests that erase main_grad only when asked to overwrite it (GMLP032's paths; blind corpus
26).

A weight that took no tokens has a zero gradient. Its bookkeeping then marks the weight and
writes main_grad only in overwrite mode, where the stale contents must go:

    if getattr(weight, "overwrite_main_grad", False):
        weight.main_grad.zero_()
    weight.grad_added_to_main_grad = True

In accumulate mode adding zero is writing nothing, so the run that skips the erasure and
marks loses no gradient: such a test skips a write for nothing to write, as an ``is None``
test does (deliveries.skipping_tests). Only a test that spells ``overwrite_main_grad``
(itself, or through a local bound to it) and all of whose writes are erasures (``zero_()``,
``fill_(0)``) counts, in a function that computes no product (``@``, a GEMM) but in a
``return``: a GEMM or an add under it is a gradient, and a gradient computed beside the
erasure is one to write, whose skipping is still followed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns, wgrad

if TYPE_CHECKING:
    from .module import Unit


def erasure_tests(unit: Unit, writes: set[int]) -> frozenset[int]:
    """The ``if`` nodes of ``unit`` testing ``overwrite_main_grad`` whose writes (of
    ``writes``) are all erasures, with at least one."""
    nodes = unit.graph.nodes
    found: set[int] = set()
    # A function that computes a product has a gradient to write: erasing it only in
    # overwrite mode drops it in accumulate mode (review 29). A product it returns is
    # another weight's, handed to autograd (a router's, beside experts that took no tokens).
    if any(
        type(stmt) is not cst.Return and wgrad.has_product(stmt) for stmt, _ in unit.statements()
    ):
        return frozenset()
    for branch in nodes:
        if branch.kind != "if" or branch.test is None or type(branch.owner) is not cst.If:
            continue
        if not _asks_overwrite(unit, branch):
            continue
        # (a local bound to main_grad there, ``mg = w.main_grad``, writes nothing itself)
        inside = [
            nodes[i]
            for i in writes
            if any(statement is branch.owner for statement, _ in nodes[i].enclosing_ifs)
            and not _binds_only(nodes[i].owner)
        ]
        if inside and all(erases(node.owner) for node in inside):
            found.add(branch.index)
    return frozenset(found)


def _asks_overwrite(unit: Unit, branch) -> bool:
    """The test spells ``overwrite_main_grad``, or is a local every binding of which reaching
    it does (``overwrite = getattr(w, "overwrite_main_grad", False)``, then ``if overwrite:``;
    review 29)."""
    test = branch.test
    if any(patterns.spells(sub, patterns.OVERWRITE) for sub in patterns.walk(test)):
        return True
    if type(test) is not cst.Name:
        return False
    defs = unit.reaching.reaching(test.value, branch)
    return bool(defs) and all(
        d.value is not None
        and any(patterns.spells(s, patterns.OVERWRITE) for s in patterns.walk(d.value))
        for d in defs
    )


def _binds_only(statement: cst.CSTNode | None) -> bool:
    """``name = <no call>``: a binding, no write."""
    return (
        type(statement) is cst.Assign
        and all(type(t.target) is cst.Name for t in statement.targets)
        and not any(type(sub) is cst.Call for sub in patterns.walk(statement.value))
    )


def erases(statement: cst.CSTNode | None) -> bool:
    """``X.zero_()`` or ``X.fill_(0)`` as a statement of its own."""
    if type(statement) is not cst.Expr or type(statement.value) is not cst.Call:
        return False
    call = statement.value
    name = patterns.callee_name(call)
    if name == "zero_":
        return not call.args
    if name == "fill_" and len(call.args) == 1:
        value = call.args[0].value
        if type(value) not in (cst.Integer, cst.Float):
            return False
        try:
            return float(value.value) == 0.0
        except ValueError:  # ``0x0``, ``0o0``: not worth telling apart
            return False
    return False
