"""Marks of ``grad_added_to_main_grad`` that no test of the weight's requires-grad switch
guards, in a function that reads such a switch (GMLP057).

A switch is a name or attribute saying that a weight takes a gradient, as autograd
Functions keep it on ``ctx``: ``fc1_weight_requires_grad``, ``weights_requires_grad``,
``requires_wgrad``. ``X.requires_grad`` of the weight itself is not one: Megatron's linear
reads it into ``wgrad_compute`` and marks the weight whatever it says, as the deferral
(``grad_output_buffer``) computes the wgrad later. A mark is guarded when an ``if`` around it
requires the switch on (its body with the switch read unnegated, its ``else`` with it
negated), or when an ``if`` that leaves with the switch off (``if not ctx.requires_wgrad:
return``) comes before it on every path; as a guard, a local holding a switch, one item of
it (``ctx.weights_requires_grad[i]``) and the weight's own ``requires_grad`` count too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .helper_facts import last_name
from .module import Unit
from .paths import Dominators
from .polarity import polarities

REQUIRES_GRAD = "requires_grad"
GET = "get_main_grad"  # Megatron-FSDP's fetch: the dummy sized from ``w.get_main_grad()``
JUMPS = (cst.Return, cst.Raise, cst.Continue, cst.Break)


@dataclass(frozen=True)
class UnguardedMark:
    anchor: cst.CSTNode  # the innermost test around the mark, or the mark
    weight: cst.BaseExpression  # the marked object
    switch: str  # a switch the function reads, for the message


def unguarded_marks(unit: Unit) -> Iterator[UnguardedMark]:
    named = _switch_reads(unit)
    if not named:
        return
    held = _switch_locals(unit)

    def guard(expr: cst.CSTNode) -> bool:
        """A test term that says the weight takes a gradient: a switch, a local holding
        one, or the weight's own ``requires_grad`` (Transformer Engine 1.x's guard)."""
        if type(expr) is cst.Name and expr.value in held:
            return True
        return _is_switch(expr) or (
            type(expr) is cst.Attribute and expr.attr.value == REQUIRES_GRAD
        )

    dominators: Dominators | None = None
    for stmt, _ in unit.statements():
        found = patterns.attribute_set(stmt, patterns.GRAD_ADDED)
        if found is None or not patterns.is_true_literal(found[1]):
            continue
        node = unit.node_for(stmt)
        if node is None:
            continue
        if any(_requires(if_stmt.test, arm, guard) for if_stmt, arm in node.enclosing_ifs):
            continue
        if dominators is None:
            dominators = Dominators(unit.graph)
        if _early_exit_before(unit, node, dominators, guard):
            continue
        if not _reads_main_grad(node.enclosing_ifs[0] if node.enclosing_ifs else None, unit):
            continue
        anchor = node.enclosing_ifs[0][0].test if node.enclosing_ifs else stmt
        yield UnguardedMark(anchor, found[0], sorted(named)[0])


def _reads_main_grad(arm: tuple[cst.If, str] | None, unit: Unit) -> bool:
    """The block that marks also reads main_grad (a dummy sized from it: ``torch.zeros(
    fc1_weight_main_grad.shape, ...)``), which a weight that takes no gradient does not have
    (Megatron allocates none): that read fails. A dummy sized from the weight itself, as
    Transformer Engine's ops make it, does not, and marking a frozen weight is then
    harmless."""
    if arm is None:
        block: cst.CSTNode = unit.owner
    else:
        if_stmt, side = arm
        block = if_stmt.body if side == "body" else if_stmt.orelse
    for sub in patterns.walk(block):
        if isinstance(sub, cst.Attribute) and sub.attr.value in (patterns.MAIN_GRAD, GET):
            return True
        if isinstance(sub, cst.Name) and patterns.MAIN_GRAD in sub.value:
            return True
    return False


def _switch_reads(unit: Unit) -> set[str]:
    """The switches the unit's own statements read, as written."""
    named: set[str] = set()
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.BaseCompoundStatement):
            roots = [getattr(stmt, "test", None), getattr(stmt, "iter", None)]
        else:
            roots = [stmt]
        for root in roots:
            for sub in patterns.walk(root) if root is not None else ():
                if _is_switch(sub):
                    named.add(unit.context.code(sub).strip())
    return named


def _switch_locals(unit: Unit) -> frozenset[str]:
    """Locals assigned a value that reads a switch (``wgrad_needed = ctx.requires_wgrad``)."""
    found = set()
    for stmt, _ in unit.statements():
        if type(stmt) is cst.Assign and len(stmt.targets) == 1:
            target = stmt.targets[0].target
            if type(target) is cst.Name and any(_is_switch(s) for s in patterns.walk(stmt.value)):
                found.add(target.value)
    return frozenset(found)


def _is_switch(expr: cst.CSTNode) -> bool:
    # ``ctx.weights_requires_grad[i]``: one expert's item counts as the switch
    lowered = last_name(expr).lower()
    if "requires_wgrad" in lowered:
        return True
    return REQUIRES_GRAD in lowered and ("weight" in lowered or "wgrad" in lowered)


def _requires(test: cst.BaseExpression, arm: str, guard) -> bool:
    """The arm runs only with the switch on: an ``and`` of terms one of which is the switch
    (body), or a negated switch ``or``-ed (else). Any read of the right polarity counts."""
    wanted = arm == "body"
    return any(p == wanted for p in polarities(test, guard))


def _early_exit_before(unit: Unit, node, dominators: Dominators, guard) -> bool:
    for stmt, _ in unit.statements():
        if not isinstance(stmt, cst.If):
            continue
        body = stmt.body.body
        if not body or not isinstance(body[-1], cst.SimpleStatementLine):
            continue
        if not any(isinstance(s, JUMPS) for s in body[-1].body):
            continue
        if not any(p is False for p in polarities(stmt.test, guard)):
            continue
        guard = unit.node_for(stmt)
        if guard is not None and dominators.dominates(guard, node):
            return True
    return False
