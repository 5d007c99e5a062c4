"""A dummy weight gradient dropped on a flag: ``grad_weight if wgrad_compute else None``.

Code that follows the dummy-gradient convention (it names ``grad_added_to_main_grad``) hands
autograd a dummy tensor for a weight whose gradient went into main_grad, so that the
grad-accumulation hook Megatron's DDP counts the weight by fires. Choosing between that
dummy and None on a flag (in a returned tuple, or in an assignment to the same name) hands
None whenever the flag is off: the hook stays silent for a weight that was, or will be,
accumulated into main_grad (issue #19, class 7: the seed's choice between dummy and real
gradient, in a conditional expression). 021ai/Megatron-LM-FP8FlowMoe's sequence-parallel
return did so on ``wgrad_compute``, a local that a deferral of the wgrad turns off.

A name holds a dummy when the function binds it, somewhere, to a call named for one
(``get_dummy_wgrad``) or to an allocation sized from main_grad (``torch.zeros(
weight.main_grad.shape, ...)``). Left alone: tests about whether the weight wants a
gradient at all (``requires``, ``required``, ``needs_input_grad``) or has one
(``weight is not None``, ``ctx.has_weight``), where None is autograd's own answer, and tests
of the name itself (``G if G is not None else None``). Files that name
``skip_backward_post_hook`` are left out, as in ``deferred_none``: Transformer Engine's
delayed wgrad fires the hooks itself and hands None on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from . import helper_facts, patterns
from .deferred_none import FLAG, SKIPS_HOOKS
from .stand_ins import SIZED_ALLOCATORS

if TYPE_CHECKING:
    from .module import ModuleContext, Unit

# Words of a test about whether the weight wants a gradient at all, or exists.
WANTS_GRAD_WORDS = ("requires", "required", "needs_input_grad", "need_grad", "needs_grad")
EXISTS_PREFIX = "has_"  # ``ctx.has_weight``


def dropped_dummies(context: ModuleContext) -> Iterator[tuple[cst.IfExp, str]]:
    """(the conditional expression, the dummy's name) for each choice between a dummy and
    None that is handed back or kept under the dummy's name."""
    source = context.source
    if FLAG not in source or SKIPS_HOOKS in source:
        return
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        dummies = _dummy_names(unit)
        if not dummies:
            continue
        weights = _main_grad_owners(context, unit)
        for stmt, _ in unit.statements():
            for choice in _choices(stmt):
                name = _dropped(context, choice, dummies, weights)
                if name is not None:
                    yield choice, name


def _main_grad_owners(context: ModuleContext, unit: Unit) -> set[str]:
    """The code of every object whose main_grad the function reads: its weights, whatever
    they are called."""
    return {
        context.code(owner)
        for stmt, _ in unit.statements()
        for sub in patterns.walk(stmt)
        if (owner := patterns.main_grad_owner(sub)) is not None
    }


def _dummy_names(unit: Unit) -> set[str]:
    """Names the function binds to a dummy somewhere (either arm of a conditional
    expression counts)."""
    assigns = [stmt for stmt, _ in unit.statements() if type(stmt) is cst.Assign]
    buffers = {
        t.target.value
        for stmt in assigns
        if patterns.is_main_grad_direct(stmt.value)
        for t in stmt.targets
        if type(t.target) is cst.Name
    }
    found = set()
    for stmt in assigns:
        if any(_makes_dummy(arm, buffers) for arm in _arms(stmt.value)):
            found |= {t.target.value for t in stmt.targets if type(t.target) is cst.Name}
    return found


def _arms(value: cst.CSTNode) -> Iterator[cst.CSTNode]:
    if type(value) is cst.IfExp:
        yield from _arms(value.body)
        yield from _arms(value.orelse)
    else:
        yield value


def _makes_dummy(value: cst.CSTNode, buffers: set[str]) -> bool:
    """A call named for a dummy, or an allocation sized from main_grad (read directly, or
    through a local bound to it: ``mg = w.main_grad; torch.zeros(mg.shape)``)."""
    if type(value) is not cst.Call:
        return False
    callee = patterns.callee_name(value) or ""
    if "dummy" in callee:
        return True
    return callee in SIZED_ALLOCATORS and any(
        patterns.is_main_grad_direct(sub) or (type(sub) is cst.Name and sub.value in buffers)
        for arg in value.args
        for sub in patterns.walk(arg.value)
    )


def _choices(stmt: cst.CSTNode) -> Iterator[cst.IfExp]:
    """The conditional expressions a statement hands back (a returned value or tuple
    element) or binds to a name it also reads in them (``G = G if f else None``)."""
    if type(stmt) is cst.Return and stmt.value is not None:
        value = stmt.value
        parts = [e.value for e in value.elements] if type(value) is cst.Tuple else [value]
        yield from (p for p in parts if type(p) is cst.IfExp)
    elif type(stmt) is cst.Assign and type(stmt.value) is cst.IfExp:
        names = {t.target.value for t in stmt.targets if type(t.target) is cst.Name}
        arms = (stmt.value.body, stmt.value.orelse)
        if any(type(a) is cst.Name and a.value in names for a in arms):
            yield stmt.value


def _dropped(context, choice: cst.IfExp, dummies: set[str], weights: set[str]) -> str | None:
    arms = (choice.body, choice.orelse)
    kept = [a for a in arms if type(a) is cst.Name and a.value in dummies]
    if len(kept) != 1 or not any(patterns.is_none_like(a) for a in arms):
        return None
    name = kept[0].value
    read = {n.value for n in patterns.read_names(choice.test)}
    words = " ".join(
        (sub.value if type(sub) is cst.Name else sub.attr.value).lower()
        for sub in patterns.walk(choice.test)
        if type(sub) in (cst.Name, cst.Attribute)
    )
    if name in read or any(word in words for word in WANTS_GRAD_WORDS):
        return None
    if EXISTS_PREFIX in words or _tests_a_weight_for_none(context, choice.test, weights):
        return None  # no weight, no gradient: None is right
    return name


def _tests_a_weight_for_none(context, test: cst.CSTNode, weights: set[str]) -> bool:
    """``weight is not None``: an object whose main_grad the function reads, or any name
    or attribute spelling a weight."""
    return any(
        type(sub) is cst.Comparison
        and (
            context.code(sub.left) in weights
            or "weight" in helper_facts.last_name(sub.left).lower()
        )
        and any(
            type(c.operator) in (cst.Is, cst.IsNot) and patterns.is_none_like(c.comparator)
            for c in sub.comparisons
        )
        for sub in patterns.walk(test)
    )
