"""GMLP030's candidates: every place a function takes main_grad, sets the mark, assigns
``.grad``, takes a weakref or shapes a dummy through some object, which the rule
(lint/rules/main_grad_on_stand_in.py) then asks provenance about: is that object a stand-in
for the Parameter? Kept apart from the rule's module, which holds its documentation,
messages and reporting."""

from __future__ import annotations

import libcst as cst

from .. import wgrad_words
from . import patterns, provenance, stand_ins, store_calls, wgrad
from .module import Unit


def candidates(unit: Unit):
    """(subject, node, root, what, effect) for each main_grad read, flag set, weakref, and
    weight-shaped allocation in a function that marks a weight."""
    marks = unit.survey.spells_grad_added
    for root, node in unit.expression_roots():
        subject = wgrad.marked_subject(root)
        if subject is not None:
            yield subject, node, root, "`grad_added_to_main_grad` is set on", "flag"
        written = assigned_ids(root)
        for owner in _grad_targets(root):
            # ``w.grad = wgrad`` through a copy: the Parameter never gets the gradient
            yield owner, node, root, "the weight gradient is assigned to `.grad` of", "grad"
        for sub in patterns.walk(root):
            if id(sub) in written:
                continue
            if patterns.is_attr(sub, patterns.MAIN_GRAD):
                yield sub.value, node, root, "main_grad is taken from", "main_grad"
            elif type(sub) is cst.Call and patterns.is_getattr_of(sub, patterns.MAIN_GRAD):
                owner = patterns.positional_args(sub)[0].value
                yield owner, node, root, "main_grad is taken from", "main_grad"
            elif (referent := provenance.weakref_referent(sub)) is not None:
                yield referent, node, root, "a weakref is taken of", "weakref"
            elif marks and type(sub) is cst.Call and (model := stand_ins.shape_source(sub)):
                # the dummy handed back in the marked Parameter's place
                yield model, node, root, "the dummy gradient is shaped like", "dummy"
            elif (fired := _hook_fired_on(sub)) is not None:
                # the hook that hands the Parameter's gradient on (Paddle's
                # ``w._apply_backward_hook()``) fired through a copy never reaches the Parameter
                yield fired, node, root, "the weight's gradient hook is fired through", "hook"
            elif store_calls.puts(sub):
                # the W pass delivers the gradient to the weight it was handed
                what = "the deferred weight-gradient work is handed"
                for weight in _store_weights(sub):
                    yield weight, node, root, what, "store"


def _hook_fired_on(node) -> cst.BaseExpression | None:
    """``X`` for ``X.<m>()`` (or ``getattr(X, "<m>")()``) where ``m`` ends in ``hook`` and is
    no registration, removal or query (``_apply_backward_hook``, ``_grad_accum_hook``)."""
    if type(node) is not cst.Call:
        return None
    func = node.func
    if type(func) is cst.Call and patterns.callee_name(func) == "getattr":
        args = patterns.positional_args(func)  # ``getattr(X, "_apply_backward_hook")()``
        if len(args) < 2 or patterns.string_value(args[1].value) is None:
            return None
        method, owner = patterns.string_value(args[1].value).lower(), args[0].value
    elif type(func) is cst.Attribute:
        method, owner = func.attr.value.lower(), func.value
    else:
        return None
    if not method.endswith("hook") or method.lstrip("_").startswith(HOOK_BOOKKEEPING):
        return None
    return owner


# Methods named for a hook that do not fire it (as prefixes: ``setup`` is in ``set``).
HOOK_BOOKKEEPING = wgrad_words.NOT_A_FIRING + wgrad_words.HOOK_QUERIES


def _store_weights(call: cst.Call) -> list[cst.Name]:
    """The names handed to a store's ``put`` that spell a weight (``total_weight``,
    ``weight_fp8``; not the FP8 input or the gathered output gradient, which are the W
    pass's operands), none when one of them spells the Parameter itself (a plain
    ``weight`` beside the gathered one: the store takes both)."""
    names = [a.value for a in call.args if type(a.value) is cst.Name]
    weights = [n for n in names if "weight" in n.value.lower()]
    if any(provenance.by_name(n.value) not in provenance.COPIES for n in weights):
        return []
    return weights


def _grad_targets(root) -> list:
    """The objects whose ``.grad`` an assignment statement sets (``X.grad = ...``)."""
    if not isinstance(root, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        return []
    return [
        t.value
        for t in patterns.assignment_targets(root)
        if type(t) is cst.Attribute and t.attr.value == "grad"
    ]


def may_stand_in(unit: Unit, subject, node) -> bool:
    """A cheap first look: only a name every reaching binding of which is an assignment or
    a loop over a sequence (an element of a list of copies), a ``ctx`` attribute, a field of
    a name (a holder's tensor field: analysis/holders.py), or a call can be a known
    stand-in."""
    if isinstance(subject, cst.Name):
        defs = unit.reaching.reaching(subject.value, node)
        return bool(defs) and all(d.kind in ("assign", "walrus", "for") for d in defs)
    if isinstance(subject, cst.Attribute):
        return provenance.on_ctx(subject) or isinstance(subject.value, cst.Name)
    return isinstance(subject, (cst.Call, cst.Subscript))


def mark_block_ids(unit: Unit) -> set[int]:
    """The statements of blocks that mark a weight (GMLP007 judges the reads there)."""
    found: set[int] = set()
    for mark in wgrad.marks(unit):
        found.update(id(stmt) for stmt in wgrad.block_statements(mark.block))
    return found


def assigned_ids(root) -> set[int]:
    """The targets of an assignment: ``w.main_grad = buffer`` puts a buffer back."""
    if isinstance(root, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        return {id(t) for t in patterns.assignment_targets(root)}
    return set()
