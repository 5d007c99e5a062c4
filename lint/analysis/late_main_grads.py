"""main_grad set up for a module after the backward that needs it, or under a test that no
run passes (GMLP058; issue #19, class 8).

A training or benchmark loop that runs modules with ``accumulate_into_main_grad`` /
``fuse_wgrad_accumulation`` outside Megatron's DDP must give each parameter its fp32
``main_grad`` before the first backward: the fused wgrad GEMM writes into it. The set-up is
a call of a helper that binds ``p.main_grad`` (a function of the file doing so, or one named
for initialising main_grad: ``init_main_grads``), or such a binding in the function itself.
Two ways to lose it, both judged over the runs ``consistent_paths`` allows: no run reaches
the set-up at all (its test repeats one that already sent every run elsewhere: ``if fwd_only:
return`` before ``if accumulate and fwd_only: init_main_grads(m)``), or no run passes it
before some backward.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .cfg import Node
from .consistent_paths import passes_in_order
from .module import ModuleContext, Unit

SETUP_WORDS = ("init", "alloc", "setup", "set_up", "create", "make", "prepare", "reset")
BACKWARD = "backward"


@dataclass(frozen=True)
class LateSetup:
    anchor: cst.CSTNode  # the set-up call, or the test that keeps every run from it
    call: str  # the set-up, as written
    dead: bool  # no run reaches the set-up (else: every run reaches it after a backward)


def binders(context: ModuleContext) -> frozenset[str]:
    """Functions of the file that bind ``X.main_grad`` (an assignment or ``setattr``)."""
    found = set()
    for unit in context.units:
        if (
            isinstance(unit.owner, cst.FunctionDef)
            and unit.survey.spells_main_grad
            and any(_binds_main_grad(stmt) for stmt, _ in unit.statements())
        ):
            found.add(unit.name)
    return frozenset(found)


def _binds_main_grad(stmt: cst.CSTNode) -> bool:
    return patterns.attribute_set(stmt, patterns.MAIN_GRAD) is not None


def _is_setup(stmt: cst.CSTNode, helpers: frozenset[str]) -> cst.CSTNode | None:
    if _binds_main_grad(stmt):
        return stmt
    for sub in patterns.walk(stmt):
        if type(sub) is not cst.Call:
            continue
        name = patterns.callee_name(sub) or ""
        lowered = name.lower()
        if name in helpers or (
            "main_grad" in lowered and any(word in lowered for word in SETUP_WORDS)
        ):
            return sub
    return None


def _is_backward(stmt: cst.CSTNode) -> bool:
    """``out.backward(...)`` / ``torch.autograd.backward(...)``; not a Function's own
    ``backward``, ``super().backward`` or ``self.backward``."""
    for sub in patterns.walk(stmt):
        if type(sub) is not cst.Call or type(sub.func) is not cst.Attribute:
            continue
        if sub.func.attr.value != BACKWARD:
            continue
        receiver = sub.func.value
        if type(receiver) is cst.Name and (
            receiver.value in ("self", "ctx", "cls") or receiver.value[:1].isupper()
        ):
            continue
        if type(receiver) is cst.Call:
            continue  # ``super().backward(...)``
        return True
    return False


def late_setups(unit: Unit, helpers: frozenset[str]) -> Iterator[LateSetup]:
    setups: list[tuple[cst.CSTNode, Node, cst.CSTNode]] = []
    backwards: list[Node] = []
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.BaseCompoundStatement):
            continue
        node = unit.node_for(stmt)
        if node is None:
            continue
        found = _is_setup(stmt, helpers)
        if found is not None:
            setups.append((stmt, node, found))
        elif _is_backward(stmt):
            backwards.append(node)
    if not setups or not backwards:
        return
    graph = unit.graph
    if not any(passes_in_order(graph, [b], []) for b in backwards):
        return
    reached = [s for s in setups if passes_in_order(graph, [s[1]], [])]
    if not reached:
        stmt, node, found = setups[0]
        anchor = node.enclosing_ifs[0][0].test if node.enclosing_ifs else found
        yield LateSetup(anchor, _text(unit, found), True)
        return
    before = any(
        passes_in_order(graph, [s[1], b], [frozenset()]) for s in reached for b in backwards
    )
    if not before:
        _, _, found = reached[0]
        yield LateSetup(found, _text(unit, found), False)


def _text(unit: Unit, node: cst.CSTNode) -> str:
    text = unit.context.code(node).strip()
    return text.splitlines()[0] if text else text
