"""GMLP016's findings on the consumer side and on switches handed in: a per-backward consumer
that copies into main_grad and never adds, a write that replaces a destination on a path no
test of the function's own overwrite-or-add choice decides, a switch parameter never read,
and a per-micro-step consumer of a gradient accumulator under another name. The producer
side is ``producer_overwrites`` (which runs these in the same pass over each function); the
rule's module (lint/rules/main_grad_replaced_without_asking.py) holds the documentation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..wgrad_words import names_hook
from . import file_functions, module, overwrite_switch, patterns, step_consumers, tensor_writes
from .write_methods import ACCUMULATE_KEYWORDS

if TYPE_CHECKING:
    from .collector import Collector
    from .module import Unit

CODE = "GMLP016"  # the rule whose findings these are (its page documents them)


# -- the consumer side and the switch handed in ----------------------------------------
# What shows a function runs once per backward (per microbatch), not once per step: it
# reads the per-backward write flag, or a microbatch counter or switch.
PER_BACKWARD_WORD = "microbatch"

CONSUMER_MESSAGE = (
    "this replaces `{target}`'s contents (copy_) in code that runs once per backward (it "
    "reads {evidence}) and never adds into main_grad nor asks overwrite_main_grad: with "
    "gradient accumulation each microbatch erases the ones before it; add_ unless this "
    "microbatch's buffer is fresh"
)
HOOK_MESSAGE = (
    "this replaces `{target}`'s contents (copy_) with `{source}` in a gradient hook, which "
    "runs every backward, and the hook never adds into it: with gradient accumulation each "
    "microbatch erases the ones before it; add_ into the accumulator"
)
SWITCH_MESSAGE = (
    "this replaces `{target}`'s contents ({how}) without asking `{switch}`, which decides "
    "elsewhere in this function (line {line}) whether `{target}` is overwritten or added "
    "to: on this path an accumulate request is ignored and the earlier microbatches' "
    "gradient is lost"
)


def consumes_per_backward(unit: Unit) -> str | None:
    """What shows that the function runs once per backward: the write flag read, or a
    microbatch name (``ctx.is_last_microbatch``); None when nothing does."""
    if unit.survey.spells_grad_added:
        return "grad_added_to_main_grad"
    if PER_BACKWARD_WORD not in unit.context.source:
        return None
    for stmt in unit.body:
        for sub in patterns.walk(stmt):
            name = None
            if type(sub) is cst.Name:
                name = sub.value
            elif type(sub) is cst.Attribute:
                name = sub.attr.value
            if name is not None and PER_BACKWARD_WORD in name.lower():
                return f"`{name}`"
    return None


def _asks_overwrite(unit: Unit) -> bool:
    """The function, or one it is nested in, spells overwrite_main_grad; at the module, only
    its own statements count (until 2026-12-07 the module's survey, which holds every
    top-level function's code, let any function of the file ask for all of them)."""
    current: Unit | None = unit
    while current is not None:
        if current.parent is None:
            return current.own_survey.spells_overwrite
        if current.survey.spells_overwrite:
            return True
        current = current.parent
    return False


def check_consumer(unit: Unit, reported: set[int], out: Collector) -> None:
    """The consumer side (Megatron-FSDP v2's reduction on a fork, before 4a4c5706's fix): a
    function that runs once per backward copies a gradient into main_grad storage
    (``main_grad = param.get_main_grad(); main_grad.copy_(param.grad)``) and never adds into
    it: in accumulate mode only the last microbatch survives. A function that also adds
    into main_grad on some path has made the choice; one that asks overwrite_main_grad
    too."""
    evidence = consumes_per_backward(unit)
    if evidence is None or _asks_overwrite(unit):
        return
    copies = []
    for root, node in unit.expression_roots():
        buffers = tensor_writes.Buffers(unit, node)
        for dest, kind, at, how in tensor_writes.writes(root, buffers):
            if not unit.aliases.expr(dest, node):
                continue
            if kind == "accumulate":
                return
            if how == "copy_" and buffers.main_grad(dest):
                copies.append((dest, at))
    for dest, at in copies:
        if id(at) not in reported:
            reported.add(id(at))
            message = CONSUMER_MESSAGE.format(target=out.text(dest), evidence=evidence)
            out.report(CODE, at, message)


def check_hook_consumer(unit: Unit, reported: set[int], out: Collector) -> None:
    """A gradient hook (NeMo's ``param_hook`` of the main-params optimizer: its name says
    hook, so it fires every backward) that moves the incoming gradient into another
    object's ``.grad`` with ``copy_`` (``main_param.grad.copy_(param.grad.data)``), clears
    the source (``param.grad = None``) and adds into nothing: the accumulator keeps only the
    last microbatch. One that adds on some
    path, or asks overwrite_main_grad, has made the choice."""
    if not names_hook(unit.name) or _asks_overwrite(unit) or _leaves_early(unit):
        return
    cleared = _cleared_grads(unit)
    copies = []
    for root, _node in unit.expression_roots():
        for dest, kind, at, how in tensor_writes.writes(root, None):
            if kind == "accumulate":
                return
            source = _grad_into_other_grad(unit, dest, at) if how == "copy_" else None
            # autograd accumulates into Y.grad across microbatches unless the hook clears it
            # (NeMo's ``param.grad = None``): only then does the copy lose the earlier ones
            if source is not None and _owner_text(unit, source) in cleared:
                copies.append((dest, at, source))
    for dest, at, source in copies:
        if id(at) not in reported:
            reported.add(id(at))
            message = HOOK_MESSAGE.format(target=out.text(dest), source=out.text(source))
            out.report(CODE, at, message)


def _leaves_early(unit: Unit) -> bool:
    """A ``return`` under an ``if`` (``if not engine.is_gradient_accumulation_boundary():
    return``): the hook moves the gradient only on some backwards, and autograd accumulates
    the others into ``.grad`` meanwhile."""
    return any(
        type(stmt) is cst.If
        and any(
            type(s) is cst.Return for s, _ in module.iter_statements(module.suite_body(stmt.body))
        )
        for stmt, _ in unit.statements()
    )


def _owner_text(unit: Unit, grad) -> str:
    """``Y`` of ``Y.grad`` or ``Y.grad.data``, as written."""
    owner = grad.value if patterns.is_attr(grad, "data") else grad
    return unit.context.code(owner.value).strip()


def _cleared_grads(unit: Unit) -> set[str]:
    """The objects whose ``.grad`` the function clears: ``Y.grad = None``, ``del Y.grad``."""
    found = set()
    for stmt, _ in unit.statements():
        targets = []
        if type(stmt) is cst.Assign and patterns.is_false_literal(stmt.value):
            targets = [t.target for t in stmt.targets]
        elif type(stmt) is cst.Del:
            targets = [stmt.target]
        for target in targets:
            if patterns.is_attr(target, "grad"):
                found.add(unit.context.code(target.value).strip())
    return found


def _grad_into_other_grad(unit: Unit, dest, call) -> cst.BaseExpression | None:
    """The copied gradient when ``call`` copies ``Y.grad`` (or ``Y.grad.data``) into
    ``X.grad`` of another object ``X``, or into any ``X.main_grad`` (Megatron-DeepSpeed's DDP
    ``param_hook`` with ``copy_`` for ``add_``); else None."""
    into_main_grad = patterns.is_attr(dest, patterns.MAIN_GRAD)
    if not (into_main_grad or patterns.is_attr(dest, "grad")):
        return None
    if type(call) is not cst.Call or not call.args:
        return None
    source = call.args[0].value
    owner = source.value if patterns.is_attr(source, "data") else source
    if not patterns.is_attr(owner, "grad"):
        return None
    code = unit.context.code
    if into_main_grad:
        return source
    return source if code(owner.value).strip() != code(dest.value).strip() else None


def check_unheeded_switch(
    unit: Unit,
    switches: overwrite_switch.Switches,
    reported: set[int],
    out: Collector,
    tensors_only: bool = False,
) -> None:
    """A switch handed in and heeded on one path only (Megatron-FSDP v2's
    ``reduce_grad(overwrite_grad=...)`` on a fork, before dca96853's fix): an ``if`` chooses
    between replacing and adding to a destination, so the function itself says that
    destination's write mode is decided by that test; another write that replaces the same
    destination on a path no test on the same values decides ignores the switch."""
    if all(choice.by_argument for choice in switches.governed.values()):
        # No ``if`` chooses: a switch parameter may still go unread (a computed switch on
        # one write does not read it).
        _check_switch_never_read(unit, reported, out, tensors_only)
    if not switches.governed:
        return
    code = unit.context.code
    params = None
    for root, node in unit.expression_roots():
        for dest, kind, at, how in tensor_writes.writes(root, tensor_writes.Buffers(unit, node)):
            key = code(dest).strip()
            if kind != "replace" or key not in switches.governed or id(at) in reported:
                continue
            choice = switches.governed[key]
            if switches.under(choice.terms, node) or _masks_a_range(at):
                continue
            if choice.by_argument:
                # A computed switch on storage the function allocated may be a chunked
                # loop's own (``accumulate=i > 0``): only storage handed in is a gradient
                # the caller keeps. A write that reads the destination it masks
                # (``D.masked_fill_(D.isnan(), 0)``) fixes values up, it replaces nothing.
                params = set(file_functions.parameters(unit.owner)) if params is None else params
                if not tensor_writes.handed_in(unit, dest, node, params):
                    continue
                if _reads_its_destination(at, key, code):
                    continue
            reported.add(id(at))
            message = SWITCH_MESSAGE.format(
                target=key,
                how=how,
                switch=code(choice.test).strip(),
                line=unit.context.line_of(choice.node),
            )
            out.report(CODE, at, message)


def _masks_a_range(write) -> bool:
    """``d[a:].fill_(0)`` / ``d[:, a:b].zero_()``: a constant written over a range of the
    destination (the padding past the last sequence, a shard's tail), which sets that range
    whatever was accumulated there before; not the whole buffer replaced by this step's
    values (TE's context-parallel attention backward zeroes dq's and dkv's padding rows after
    its ``i == 0`` copy-or-add loop). A copy into a range still counts: it carries values."""
    if type(write) is not cst.Call:
        return False
    method = patterns.method_call(write)
    if method is None or method[1] not in ("fill_", "zero_"):
        return False
    if method[1] == "fill_":
        value = write.args[0].value if len(write.args) == 1 else None
        if type(value) is cst.UnaryOperation:  # ``fill_(-1)``
            value = value.expression
        if type(value) not in (cst.Integer, cst.Float):
            return False  # a tensor or a name: values, not a constant
    receiver = method[0]
    return type(receiver) is cst.Subscript and any(
        type(element.slice) is cst.Slice
        and (element.slice.lower is not None or element.slice.upper is not None)
        for element in receiver.slice
    )  # ``d[:]`` is the whole buffer


IGNORED_MESSAGE = (
    "this replaces `{target}`'s contents ({how}), but this function never reads its "
    "`{switch}` parameter: a caller asking to accumulate gets an overwrite, and the earlier "
    "microbatches' gradient is lost"
)


def _check_switch_never_read(
    unit: Unit, reported: set[int], out: Collector, tensors_only: bool = False
) -> None:
    """The switch handed in and never read at all (the degenerate form of the above): a
    function with an ``overwrite_*`` / ``accumulate*`` parameter that it never reads, and a
    write that replaces a destination it did not allocate (a parameter, an attribute, a
    buffer fetched from an object)."""
    switches = overwrite_switch.switch_parameters(unit)
    if not switches:
        return
    read = set()
    for stmt in unit.body:
        for sub in patterns.walk(stmt):
            if type(sub) is cst.Name:
                read.add(sub.value)
    ignored = [name for name in switches if name not in read]
    if not ignored or len(ignored) != len(switches):
        return  # one switch read is asking: the others may be passed on under another name
    params = set(file_functions.parameters(unit.owner))
    for root, node in unit.expression_roots():
        for dest, kind, at, how in tensor_writes.writes(root, tensor_writes.Buffers(unit, node)):
            if kind != "replace" or id(at) in reported:
                continue
            if tensors_only and type(at) is cst.Assign:
                continue  # ``d[k] = v`` may fill a dict: only a tensor's own writes count
            if not tensor_writes.handed_in(unit, dest, node, params):
                continue
            reported.add(id(at))
            message = IGNORED_MESSAGE.format(target=out.text(dest), how=how, switch=ignored[0])
            out.report(CODE, _switch_argument(at) or at, message)


def _reads_its_destination(write, key: str, code) -> bool:
    if type(write) is not cst.Call:
        return False
    return any(
        code(sub).strip() == key
        for arg in write.args
        if arg.keyword is None or arg.keyword.value != "out"  # where it writes, not reads
        for sub in patterns.walk(arg.value)
        if type(sub) in (cst.Name, cst.Attribute)
    )


def _switch_argument(write) -> cst.Arg | None:
    """The ``accumulate=False`` argument of a GEMM call, where the ignored switch belongs."""
    if type(write) is not cst.Call:
        return None
    for arg in write.args:
        if arg.keyword is not None and arg.keyword.value.lower() in ACCUMULATE_KEYWORDS:
            return arg
    return None


STEP_MESSAGE = (
    "this replaces `{target}`'s contents (copy_) in code that runs once per micro-step (it "
    "reads `{evidence}`) and adds into nothing: the gradients of the earlier micro-steps "
    "are dropped; accumulate them (add_ after the first micro-step) before this copy"
)


def check_step_consumer(unit: Unit, out: Collector) -> None:
    """The consumer side on a gradient accumulator under another name (an FP32 partition's
    ``.grad``, a view of it): a function that reads the per-micro-step accumulation state
    and copies into gradient storage, and never adds into anything."""
    if unit.survey.spells_overwrite:
        return
    evidence = step_consumers.step_evidence(unit)
    if evidence is None:
        return
    for dest, at in step_consumers.replaced_only(unit):
        out.report(CODE, at, STEP_MESSAGE.format(target=out.text(dest), evidence=evidence))
