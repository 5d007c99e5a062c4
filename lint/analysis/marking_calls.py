"""Calls that mark the weights they are handed (``grad_added_to_main_grad = True`` set by the
callee), and whether what a call is handed is the Parameter the function writes through
(issue #19, class 1: the mark spelled through a helper, on the wrong object).

Two kinds of marking calls: helpers of the file that mark a parameter
(``marking_helpers``), and ``KNOWN_MARKERS``, functions of the frameworks whose contract is
to mark what they are given. Transformer Engine's ``get_dummy_wgrads_for_params(params)``
(transformer_engine/pytorch/ops/_common.py) sets the flag on each element that has it and
returns the dummies. Handed a tensor restored from the saved tensors while the same function
takes main_grad from the Parameter under another name (``linear_op.weight``), it marks the
saved tensor, which lacks the flag: the Parameter stays unmarked although main_grad was
written."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import marking_helpers, parameter_attributes, patterns, provenance, stand_in_uses
from .module import Unit
from .saved import SAVE_CALLS
from .wgrad import names_weight

# Framework functions that mark the elements of their first argument (a list display).
KNOWN_MARKERS = frozenset({"get_dummy_wgrads_for_params"})
# Calls that fetch a Parameter's main_grad (Transformer Engine's ops and Megatron-FSDP).
MAIN_GRAD_FETCHES = frozenset({"get_main_grad_from_param", "get_main_grad"})


def marked_by_calls(
    unit: Unit, helpers: marking_helpers.MarkingHelpers
) -> Iterator[tuple[cst.BaseExpression, cst.Call, object]]:
    """(subject, call, graph node) for each weight a call in ``unit`` marks."""
    for root, node in unit.expression_roots():
        for sub in patterns.walk(root):
            if type(sub) is not cst.Call:
                continue
            if patterns.callee_name(sub) in KNOWN_MARKERS:
                args = patterns.positional_args(sub)
                given = args[0].value if args else None
                # ``dist_dgrad_weights if is_dist_weight else weights``: each arm is a list
                # the call marks on some run (a name of one: its elements, by provenance)
                for arm in (given.body, given.orelse) if type(given) is cst.IfExp else (given,):
                    if type(arm) in (cst.List, cst.Tuple):
                        for element in arm.elements:
                            if not isinstance(element, cst.StarredElement):
                                yield element.value, sub, node
                    elif type(arm) is cst.Name and (
                        type(given) is cst.IfExp or not _saves_weights(unit.context)
                    ):
                        # a list handed by name (blind corpus 24): where the file saves
                        # weights, what comes back may be the Parameters themselves
                        yield arm, sub, node
                continue
            for subject in helpers.marked_arguments(sub):
                yield subject, sub, node


def parameter_beside_restored(unit: Unit, subject, node) -> str | None:
    """The Parameter, as written, when ``subject`` is a name every reaching binding of which
    is unpacked from saved tensors (``(x, w) = op_ctx.saved_tensors``) while the function
    takes main_grad from another expression (``get_main_grad_from_param(weight_param)``,
    ``linear_op.weight.main_grad``): the code names the Parameter separately, so the
    restored tensor is not it. None otherwise."""
    if type(subject) is not cst.Name:
        return None
    if not _restored(unit, subject, node):
        return None
    code = unit.context.code
    owners = {code(owner).strip() for owner in _main_grad_owners(unit)} - {subject.value}
    # one weight's Parameter named beside it; with several, which is whose is not known
    return owners.pop() if len(owners) == 1 else None


def parameter_before_rebinding(unit: Unit, subject, node) -> tuple[str, cst.CSTNode] | None:
    """(the Parameter as written, the rebinding's target) when ``subject`` is a name that
    held the Parameter where the function took main_grad through it and has since been
    rebound to a tensor restored from the saved tensors (``weight_param = self.weight``,
    ``weight_param.main_grad`` into the GEMM, then ``weight_param = w`` of ``(x, w) =
    ctx.saved_tensors`` before the mark): one name, two objects, and the mark lands on the
    saved one. None otherwise, and when the function takes main_grad from more than one
    object."""
    if type(subject) is not cst.Name or not _restored(unit, subject, node):
        return None
    rebindings = [d.target for d in unit.reaching.reaching(subject.value, node) if d.target]
    code = unit.context.code
    held = set()
    through_name = False  # main_grad was taken through the marked name at least once
    for owner, at in _main_grad_owners_at(unit):
        if type(owner) is cst.Name and owner.value == subject.value:
            defs = unit.reaching.reaching(owner.value, at)
            values = {
                code(d.value).strip() if d.kind == "assign" and d.value else None for d in defs
            }
            if len(values) != 1 or None in values or _restored(unit, owner, at):
                return None  # a parameter, an unknown binding, or the saved tensor itself
            held |= values
            through_name = True
        else:
            held.add(code(owner).strip())
    # the name took main_grad from exactly one other object, spelled apart from the saved one
    if len(held) != 1 or not rebindings or not through_name:
        return None
    return held.pop(), rebindings[0]


# Transformer Engine's helpers that read a Parameter's per-parameter state for its ops.
PARAMETER_STATE_READS = MAIN_GRAD_FETCHES | frozenset(parameter_attributes.STATE_READERS)


def fetched_from_restored(
    unit: Unit, helpers: marking_helpers.MarkingHelpers
) -> Iterator[tuple[cst.Name, str]]:
    """The converse of ``parameter_beside_restored``: (the argument, the marked Parameter as
    written) for each fetch of main_grad or its flags handed a name restored from the saved
    tensors (``get_main_grad_from_param(w)``, ``w.main_grad``) while the function marks one
    other expression (``get_dummy_wgrads_for_params([linear_op.weight])``): the buffer is
    looked up on the saved operand, not on the Parameter the bookkeeping names."""
    code = unit.context.code
    subjects = [(subject, node) for subject, _, node in marked_by_calls(unit, helpers)]
    for stmt, _ in unit.statements():
        found = patterns.attribute_set(stmt, patterns.GRAD_ADDED)
        if found is not None:
            subjects.append((found[0], unit.node_for(stmt)))
    marked = {code(subject).strip() for subject, _ in subjects}
    if len(marked) != 1:
        return  # none, or several weights: which is whose is not known
    # The marked object must be named apart from the saved tensors (``linear_op.weight``):
    # a weight saved and restored itself is the Parameter (autograd hands back the object
    # it was given), and Megatron's linear layers mark it so.
    if any(type(s) is cst.Name and n is not None and _restored(unit, s, n) for s, n in subjects):
        return
    (param,) = marked
    if param in unit.context.shared(_saved_expressions):
        return  # the file saves the Parameter itself: what comes back may be it
    for root, node in unit.expression_roots():
        for sub in patterns.walk(root):
            owner = None
            if type(sub) is cst.Call and patterns.callee_name(sub) in PARAMETER_STATE_READS:
                args = patterns.positional_args(sub)
                owner = args[0].value if args else None
            elif patterns.is_attr(sub, patterns.MAIN_GRAD):
                owner = sub.value
            if type(owner) is cst.Name and owner.value != param and _restored(unit, owner, node):
                yield owner, param


def _saved_expressions(context) -> frozenset[str]:
    """Every argument of a ``save_for_backward`` / ``prepare_for_saving`` call of the file,
    as written (``self.weight`` in ``ctx.save_for_backward(input_, self.weight)``)."""
    found = set()
    for unit in context.units:
        if not unit.survey.calls & SAVE_CALLS:
            continue
        for root, _ in unit.expression_roots():
            for sub in patterns.walk(root):
                if type(sub) is cst.Call and patterns.callee_name(sub) in SAVE_CALLS:
                    found.update(context.code(arg.value).strip() for arg in sub.args)
    return frozenset(found)


def _saves_weights(context) -> bool:
    """The file saves something named for a weight (``ctx.save_for_backward(*weights)``)."""
    return any(names_weight(text) for text in context.shared(_saved_expressions))


def _restored(unit: Unit, name: cst.Name, node, depth: int = 4) -> bool:
    """Every binding of ``name`` reaching ``node`` takes it from saved tensors: unpacked
    (``(x, w) = ctx.saved_tensors``), indexed (``w = ctx.saved_tensors[1]``), an item of
    a local so bound (``saved = ctx.saved_tensors; w = saved[1]``), or a copy of a name so
    bound (``weight_param = w``). Four steps deep: TE's grouped ops peel the saved tuple
    off in slices (``saved = saved[3:]; xs, saved = saved[:n], saved[n:]; ws, saved =
    ...``)."""
    defs = unit.reaching.reaching(name.value, node)
    if not defs:
        return False
    for d in defs:
        value = d.value
        if d.kind != "assign" or value is None:
            return False
        if type(value) is cst.Subscript:
            value = value.value
            if type(value) is cst.Name and depth > 0:
                if _restored(unit, value, d.node, depth - 1):
                    continue
                return False
        elif type(value) is cst.Name and depth > 0:
            # ``weight_param = w``: a copy of a name so bound
            if _restored(unit, value, d.node, depth - 1):
                continue
            return False
        if not provenance.is_saved_tensors(value):
            return False
    return True


def _main_grad_owners(unit: Unit) -> Iterator[cst.BaseExpression]:
    for owner, _node in _main_grad_owners_at(unit, stores=True):
        yield owner


def _main_grad_owners_at(
    unit: Unit, stores: bool = False
) -> Iterator[tuple[cst.BaseExpression, object]]:
    """(the object main_grad is taken from, its graph node), for every read and fetch, and
    with ``stores`` every assignment to a main_grad too (``w.main_grad = buf`` hangs a buffer
    on ``w`` without taking one from it)."""
    for root, node in unit.expression_roots():
        stored = set() if stores else stand_in_uses.assigned_ids(root)
        for sub in patterns.walk(root):
            owner = patterns.main_grad_owner(sub)  # ``w.main_grad``, ``getattr(w, "main_grad")``
            if owner is not None:
                if id(sub) not in stored:
                    yield owner, node
            elif type(sub) is cst.Call and patterns.callee_name(sub) in MAIN_GRAD_FETCHES:
                args = patterns.positional_args(sub)
                if args:
                    yield args[0].value, node
                elif isinstance(sub.func, cst.Attribute):
                    yield sub.func.value, node  # ``param.get_main_grad()``


def offload_stand_in(unit: Unit, stmt) -> tuple[cst.Name, cst.If] | None:
    """(the name, the offload test) when ``stmt`` hangs a buffer on a restored name as its
    main_grad under a test of CPU offload (``if ctx.cpu_offloading ...: weight.main_grad =
    main_grad``), the function marks that name, and no binding of it reads the Parameter
    back from ``ctx`` (``weight = ctx.weight_object``). Offload hands backward a plain tensor
    in the Parameter's place (which is why main_grad is hung on it): the mark lands on that
    tensor and the Parameter stays unmarked."""
    found = patterns.attribute_set(stmt, patterns.MAIN_GRAD)
    if found is None or type(found[0]) is not cst.Name:
        return None
    name, value = found
    if type(value) is cst.Call and "get_main_grad" in (patterns.callee_name(value) or ""):
        return None  # Megatron-FSDP's fetch on the Parameter itself
    node = unit.node_for(stmt)
    code = unit.context.code
    test = next(
        (
            branch_if
            for branch_if, branch in node.enclosing_ifs
            if branch == "body" and "offload" in code(branch_if.test)
        ),
        None,
    )
    if test is None:
        return None
    defs = unit.reaching.reaching(name.value, node)
    if not defs or any(d.value is None or "saved" not in code(d.value) for d in defs):
        return None  # not (only) restored from the saved tensors here
    for d in unit.graph.defs:
        if d.name == name.value and d.value is not None and _on_ctx(d.value):
            return None  # the Parameter read back from ctx on some path
    for other, _ in unit.statements():
        marked = patterns.attribute_set(other, patterns.GRAD_ADDED)
        if marked is not None and type(marked[0]) is cst.Name and marked[0].value == name.value:
            return name, test
    return None


def _on_ctx(value: cst.CSTNode) -> bool:
    root = value
    while type(root) in (cst.Attribute, cst.Call, cst.Subscript):
        root = root.func if type(root) is cst.Call else root.value
    return type(root) is cst.Name and root.value == "ctx"
