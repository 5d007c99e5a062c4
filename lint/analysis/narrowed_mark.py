"""GMLP005's narrowed guard: the bookkeeping of a weight whose main_grad was written (the mark
and the dummy) is gated on a test that also asks something else about the weight, and that
test's ``else`` hands the weight back None (blind corpus 16, PaddleFleet's linear backward
with ``if hasattr(weight, "grad_added_to_main_grad") and not getattr(weight,
"is_expert_param", False):``): for the weights the extra condition excludes, the gradient
is in main_grad, the flag stays unset and no ``.grad`` arrives, so the hook that reduces
main_grad never fires for them (issue #19 class 5).

``if hasattr(w, "grad_added_to_main_grad"): <mark; dummy> else: wgrad = None`` is right: the
``else`` runs only for a weight without that bookkeeping. A conjunct that restates when the
write happened (a term of a test around the write: ``wgrad_compute``, the op-level switch),
names the op-level setting, delayed wgrad or whether the weight takes a gradient
(``requires_grad``, ``needs_input_grad``, Paddle's ``stop_gradient`` / ``trainable``), or only
asks whether something is None, narrows nothing the write did not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from . import patterns, wgrad, writing_helpers
from .overwrite_switch import switch_terms

if TYPE_CHECKING:
    from .module import Unit
    from .wgrad import Mark

# Conjuncts naming one of these restate the write's own condition or a reason no gradient
# is owed (the op-level setting, delayed wgrad, a weight that takes no gradient).
_RESTATING_WORDS = (
    "main_grad",
    "accumulat",
    "fuse_wgrad",
    "gradient_accumulation_fusion",
    "delay",
    "requires_grad",
    "stop_gradient",
    "needs_input_grad",  # torch's requires_grad of each input, on ctx
    "trainable",  # Paddle's
)
# Builtins a conjunct calls to read the weight (and the constants it hands them): they say
# nothing about when it was written.
_READERS = frozenset({"hasattr", "getattr", "isinstance", "callable", "True", "False", "None"})


def nones_past_narrowed_guard(
    unit: Unit, mark: Mark
) -> Iterator[tuple[cst.BaseExpression, cst.Assign]]:
    """(the narrowing conjunct, ``name = None`` in the guard's ``else``) for a mark
    whose guard is ``flag test and other`` where ``other`` neither restates the write's
    condition nor names a reason no gradient is owed, the body binds ``name`` (a gradient
    the function hands back) to a tensor and a GEMM of the function wrote the weight's
    main_grad."""
    found = _guard_and_other_side(mark)
    if found is None:
        return
    test, other = found
    if type(test) is not cst.BooleanOperation or type(test.operator) is not cst.And:
        return
    conjuncts = list(_conjuncts(test))
    code = unit.context.code
    if not any(patterns.GRAD_ADDED in code(c) for c in conjuncts):
        return  # the guard does not ask for the flag's bookkeeping at all
    writes = list(_main_grad_writes(unit, wgrad.stem(mark.subject)))
    if not writes:
        return
    around = set()
    for node in writes:
        for stmt_if, _ in node.enclosing_ifs:
            around |= switch_terms(stmt_if.test, code)
    owner = code(mark.subject).strip().split(".")[0]
    narrowing = [
        c
        for c in conjuncts
        if patterns.GRAD_ADDED not in code(c)
        and not any(w in code(c) for w in _RESTATING_WORDS)
        and not _asks_none(c)
        and not (switch_terms(c, code) - _READERS - {owner}) & around
    ]
    if not narrowing:
        return
    back = wgrad.handed_back(unit)
    bound = {
        wgrad.assigned_name(s)
        for s in wgrad.block_statements(mark.block)
        if wgrad.assigned_name(s) and not patterns.is_none_like(s.value)
    }
    for stmt in wgrad.block_statements(wgrad.suite_body(other)):
        name = wgrad.assigned_name(stmt)
        if name in back and name in bound and patterns.is_none_like(stmt.value):
            yield narrowing[0], stmt


def _guard_and_other_side(mark: Mark):
    """(the test under which the mark's block runs, the suite that runs otherwise) for a mark
    opening the body of ``if T: ... else: ...`` or the ``else`` of ``if not (T): ...``."""
    if not mark.node.enclosing_ifs:
        return None
    stmt_if, side = mark.node.enclosing_ifs[0]
    if type(stmt_if.orelse) is not cst.Else:
        return None
    if side == "body" and mark.guard is stmt_if:
        return stmt_if.test, stmt_if.orelse.body
    test = stmt_if.test
    negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
    if negated and side == "orelse" and mark.block is wgrad.suite_body(stmt_if.orelse.body):
        return test.expression, stmt_if.body
    return None


def _main_grad_writes(unit: Unit, word: str | None):
    """The graph nodes of the statements writing the main_grad of the weight ``word`` names,
    also through a local the function binds to it (``mg = w.main_grad; gemm(x, dy, mg)``)."""
    aliases = frozenset(
        wgrad.assigned_name(stmt)
        for stmt, _ in unit.statements()
        if isinstance(stmt, cst.Assign)
        and wgrad.assigned_name(stmt)
        and (owner := patterns.main_grad_owner(stmt.value)) is not None
        and wgrad.stem(owner) == word
    )
    writers = unit.context.shared(writing_helpers.WritingHelpers)
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.BaseCompoundStatement):
            continue
        # written here, or by a helper of the file the weight is handed to
        if wgrad.writes_main_grad_of(stmt, word, aliases) or any(
            type(call) is cst.Call
            and any(wgrad.stem(arg) == word for arg in writers.surely_written_arguments(call))
            for call in patterns.walk(stmt)
        ):
            node = unit.node_for(stmt)
            if node is not None:
                yield node


def _asks_none(test: cst.BaseExpression) -> bool:
    """``x is None`` / ``x is not None``: whether something exists, not which weights."""
    return type(test) is cst.Comparison and any(
        type(c.operator) in (cst.Is, cst.IsNot) and patterns.is_none_like(c.comparator)
        for c in test.comparisons
    )


def _conjuncts(test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        yield from _conjuncts(test.left)
        yield from _conjuncts(test.right)
    else:
        yield test
