"""GMLP016's findings in a file that spells main_grad: a write that replaces main_grad's
contents (a GEMM with accumulate off, ``matmul(out=main_grad)``, ``copy_`` into it, a slice
assignment, main_grad rebound to a product) in producer code that never asks
overwrite_main_grad or the sharding strategy, and main_grad zeroed before a product is
added into it, whatever the function's name. Producer code is a function named for the
weight gradient or marking grad_added_to_main_grad, or a helper of the file such a function
calls (one level). The same walk over the file's functions runs overwrite_findings' consumer
and switch checks, which share the sites reported here: a site is reported once. Kept apart
from the rule's module (lint/rules/main_grad_replaced_without_asking.py), which holds the
documentation and chooses the checks a file gets."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .. import wgrad_words
from . import (
    asking,
    copied_values,
    dead_flush_helpers,
    handed_main_grads,
    overwrite_findings,
    overwrite_switch,
    patterns,
    tensor_writes,
    wgrad,
    zeroed_accumulation,
)
from .helper_facts import last_name

if TYPE_CHECKING:
    from .collector import Collector
    from .module import ModuleContext, Unit

CODE = "GMLP016"  # the rule whose findings these are (its page documents them)
# The producer side: a write counts only in a function (or one it is nested in) whose name
# says it computes the weight gradient (wgrad_words.names_producer). Consumers (grad buffers,
# optimizers, examples that consolidate .grad) copy into main_grad on purpose, once per step.

MESSAGE = (
    "this replaces `{target}`'s contents ({how}) in code that never asks overwrite_main_grad "
    "or the sharding strategy: in accumulate mode only the last microbatch's gradient survives"
)

PATH_MESSAGE = (
    "this replaces `{target}`'s contents ({how}) on a path that no test of "
    "overwrite_main_grad, FSDP or the sharding strategy guards (this function's code asks "
    "them on other paths): in accumulate mode only the last microbatch's gradient survives"
)

ZEROED = (
    "`{target}` is zeroed and then the weight gradient is added into it, in code that never "
    "asks overwrite_main_grad or the sharding strategy: the pair replaces main_grad, so in "
    "accumulate mode only the last microbatch's gradient survives; drop the reset"
)


def check(context: ModuleContext, out: Collector) -> None:
    """The findings of a file that spells main_grad."""
    source = context.source
    # every replacing write spells one of these (``beta``: ``main_grad.addmm_(a, b, beta=0)``)
    # (``accumulate``: a kernel handed main_grad positionally, its switch spelled in any case)
    if not (
        "out" in source
        or "copy_" in source
        or "scatter_" in source
        or "put_" in source
        or "main_grad =" in source
        or ".data =" in source
        or "[" in source
        or "beta" in source
        or "accumulate" in source.lower()
        or "zero_" in source
        or "fill_" in source
    ):
        return
    callers = _callers(context)
    handed = context.shared(handed_main_grads.handed_main_grads)
    file_asks = asking.file_asks(context)
    asked: dict[int, bool] = {}

    def asks(unit: Unit) -> bool:
        """The function's code, or that of a function it is nested in, asks (names or
        strings: not comments, not docstrings); module-level code asks with the file."""
        top = unit
        while top.parent is not None and top.parent.parent is not None:
            top = top.parent  # up to the outermost function (a method's parent is the module)
        if top.parent is None:
            return file_asks
        if id(top) not in asked:
            asked[id(top)] = file_asks and asking.code_asks(top)  # its words are the file's
        return asked[id(top)]

    reported: set[int] = set()
    built: dict[int, overwrite_switch.Switches] = {}

    def switches_of(unit: Unit) -> overwrite_switch.Switches:
        if id(unit) not in built:
            built[id(unit)] = overwrite_switch.Switches(unit)
        return built[id(unit)]

    for unit in context.units:
        function = isinstance(unit.owner, cst.FunctionDef)
        if unit.survey.spells_main_grad:
            # A helper of the file judged with the functions that call it (one level): the
            # write moved out of a producer is still the producer's, and a caller that asks
            # overwrite_main_grad decides for it.
            around = [unit, *callers.get(unit.name, ())]
            producer = any(map(_in_producer, around))
            if not producer and not any(map(asks, around)):
                # Whatever the function's name, copying a value named for the weight
                # gradient into main_grad delivers it (a drain of reduce-scattered wgrads).
                for root, node in unit.expression_roots():
                    buffers = tensor_writes.Buffers(unit, node)
                    for sub in patterns.walk(root):
                        if _copies_wgrad(sub, buffers, out):
                            reported.add(id(sub))
                # Likewise a product computed into main_grad (``matmul(dy.t(), x,
                # out=w.main_grad)`` in a wgrad store's drain): no consumer does that. (In
                # a file that asks somewhere, a function it names elsewhere, called or
                # handed on, is left to its callers: one further up may ask.)
                if function and not (
                    file_asks and dead_flush_helpers.named_elsewhere(unit.name, source)
                ):
                    _check_writes(unit, switches_of(unit), frozenset(), out, reported, file_asks,
                                  products_only=True)  # fmt: skip
            switches = switches_of(unit) if function else None
            if producer and not file_asks:
                _check_writes(unit, switches, frozenset(), out, reported, False)
            elif function and overwrite_findings.consumes_per_backward(unit):
                overwrite_findings.check_consumer(unit, reported, out)
            if file_asks and _in_producer(unit) and not any(map(asks, around)):
                # a file that asks elsewhere: a write under a test of the sharding strategy
                # (``if gbuf.is_data_distributed:``) is that strategy's choice. (A helper
                # of a producer is not judged here: its callers' tests may ask for it.)
                _check_writes(unit, switches, frozenset(), out, reported, True)
            if producer and function and asking.code_asks(unit) and not any(map(asks, around[1:])):
                _check_unasked_paths(unit, switches_of(unit), reported, out)
            if function and not any(map(asks, around)):
                # Whatever its name, a function that zeroes main_grad and then adds a
                # product into it replaces it: a producer overwriting without asking.
                for call, dest in zeroed_accumulation.resets_before_adds(unit):
                    if id(call) not in reported:
                        reported.add(id(call))
                        target = out.context.code(dest).strip()
                        out.report(CODE, call, ZEROED.format(target=target))
        elif function and id(unit.owner) in handed:
            # a wrapper handed main_grad by every call (``out=ctx.main_grad``), judged with
            # its callers: a producer's write moved into it
            around = [unit, *callers.get(unit.name, ())]
            params = handed[id(unit.owner)] - handed_main_grads.contents_read(unit.owner)
            if (
                params
                and len(around) > 1
                and all(map(_in_producer, around[1:]))
                and not any(map(asks, around))
            ):
                _check_writes(unit, None, params, out, reported, file_asks)
        if function:
            overwrite_findings.check_unheeded_switch(unit, switches_of(unit), reported, out)
            overwrite_findings.check_hook_consumer(unit, reported, out)


def _check_writes(
    unit: Unit,
    switches,
    handed: frozenset[str],
    out,
    reported: set[int],
    tests_ask: bool,
    products_only: bool = False,
) -> None:
    """Report the replacing writes into main_grad (or into the parameters ``handed`` it by
    every call) outside the function's own overwrite-or-add choice (``switches``) and, when
    ``tests_ask``, outside every test that asks; ``products_only``: only calls named for a
    product (``wgrad_words.names_product``), no copies."""
    for root, node in unit.expression_roots():
        if switches is not None and switches.decides(node):
            continue  # under the function's own overwrite-or-add choice
        if tests_ask and asking.asked_at(root, node, unit):
            continue
        buffers = tensor_writes.Buffers(unit, node, handed)
        if isinstance(root, cst.Assign) and not handed and not products_only:
            # (a wrapper's item assignments into what it is handed are not judged)
            _check_slice_assignment(root, buffers, out)
        for sub in patterns.walk(root):
            if products_only and not (
                type(sub) is cst.Call and wgrad_words.names_product(patterns.callee_name(sub) or "")
            ):
                continue
            if id(sub) not in reported and _check_call(sub, buffers, out):
                reported.add(id(sub))


def _callers(context: ModuleContext) -> dict[str, list[Unit]]:
    """function name -> the functions of the file that call a function of that name."""
    found: dict[str, list[Unit]] = {}
    names = {u.name for u in context.units if isinstance(u.owner, cst.FunctionDef)}
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            for name in unit.survey.calls & names:
                if name != unit.name:
                    found.setdefault(name, []).append(unit)
    return found


def _in_producer(unit: Unit) -> bool:
    """The unit, or one it is nested in, is named for computing the weight gradient, or it
    marks ``grad_added_to_main_grad`` (it delivers a weight gradient, whatever its name)."""
    current: Unit | None = unit
    while current is not None:
        if wgrad_words.names_producer(current.name):
            return True
        if current.survey.spells_grad_added and isinstance(current.owner, cst.FunctionDef):
            return True
        current = current.parent
    return False


def _copies_wgrad(node, buffers: tensor_writes.Buffers, out: Collector) -> bool:
    """``p.main_grad.copy_(wgrad_rs)``: a replacing copy into main_grad of a value whose
    name says weight gradient (``wgrad``, ``grad_weight``, ``weight_grad``, a ``dw``
    part). Consumers that consolidate once per step copy ``.grad`` or a bucket, not that."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    copying = tensor_writes.copying_method(node)
    if copying is None or not copying[2] or not buffers.main_grad(copying[0]):
        return False
    source = copied_values.reshaped_from(copying[2][-1].value)
    if not wgrad_words.names_weight_gradient(last_name(source)):
        return False
    if copied_values.from_main_grad(source, buffers):
        return False  # a value made from main_grad itself written back (all-reduced, upcast)
    if copied_values.restoring(source, buffers):
        return False  # main_grad put back from a copy kept earlier (a skipped step, a load)
    how = copying[1]
    out.report(CODE, node, MESSAGE.format(target=out.text(copying[0]), how=how))
    return True


def _check_unasked_paths(
    unit: Unit, switches: overwrite_switch.Switches, reported: set[int], out: Collector
) -> None:
    """A producer that asks (it names overwrite_main_grad, FSDP or the sharding strategy)
    but replaces main_grad by a hard-coded write outside every test that asks: blind corpus
    8's HYGON backward, whose replacing ``te_general_gemm(out=weight.main_grad)`` moved out
    of the ``if hasattr(weight, "__fsdp_param__"):`` branch. A function that leaves early
    on an asking test (``if not overwrite: return``), matches on one, or allocates main_grad
    itself (``w.main_grad = torch.empty(...)``) is left alone."""
    for stmt, _ in unit.statements():
        if type(stmt) is cst.If and asking.asks_in(stmt.test, unit) and _exits(stmt.body):
            return
        if type(stmt) is cst.Match and asking.asks_in(stmt.subject, unit):
            return  # a ``match`` on the flag: its arms are its choice
        if (
            type(stmt) is cst.Assign
            and any(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in stmt.targets)
            and patterns.callee_name(stmt.value) in patterns.ALLOCATORS
        ):
            return  # it allocates main_grad itself: a fresh buffer, nothing to keep
    for root, node in unit.expression_roots():
        if switches.decides(node) or asking.asked_at(root, node, unit):
            continue
        buffers = tensor_writes.Buffers(unit, node)
        for sub in patterns.walk(root):
            if id(sub) not in reported and _check_call(sub, buffers, out, PATH_MESSAGE):
                reported.add(id(sub))


def _exits(body) -> bool:
    """The suite ends by leaving the function (``return`` / ``raise``)."""
    statements = getattr(body, "body", ())
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, (cst.Return, cst.Raise))


def _check_call(
    node, buffers: tensor_writes.Buffers, out: Collector, message: str = MESSAGE
) -> bool:
    if not isinstance(node, cst.Call):
        return False
    name = patterns.callee_name(node)
    copying = tensor_writes.copying_method(node) if isinstance(node.func, cst.Attribute) else None
    if copying is not None:  # ``copy_``, ``index_copy_``...; also torch.Tensor.copy_(buffer, v)
        if copying[2] and copied_values.reads_destination(
            copying[2][-1].value, copying[0], buffers
        ):
            return False  # ``grad.copy_(grad.float() + wgrad)``: an add, staged in fp32
        if copying[2] and copied_values.from_main_grad(copying[2][-1].value, buffers):
            return False  # ``main_grad.copy_(backup)``, ``backup = main_grad.clone()``: put back
        if buffers.main_grad(copying[0]) or buffers.main_grad_receiver(copying[0]):
            how = copying[1]
            out.report(CODE, node, message.format(target=out.text(copying[0]), how=how))
            return True
        return False
    functional = tensor_writes.functional_write(node, buffers.off)
    if functional is not None:
        # a kernel handed its destination: ``torch._foreach_copy_(main_grads, grads)``,
        # ``torch._foreach_zero_(main_grads)``, ``triton_copy(g, p.main_grad)``
        dest, kind, how = functional
        if kind != "replace" or not buffers.main_grad(dest):
            return False
        out.report(CODE, node, message.format(target=out.context.code(dest).strip(), how=how))
        return True
    target, given = tensor_writes.switched_destination(node, buffers.arguments(node), buffers)
    if target is None or not buffers.main_grad(target):
        return False
    if given:
        replacing = all(buffers.off(value) for value in given)
        how = "accumulate=False / beta=0"
    else:
        replacing = tensor_writes.replaces_out(node)
        how = f"{name}(out=...) overwrites"
    if replacing:
        # At the switch when the call spells it (a launch over many lines), else the call.
        own = [arg for arg in node.args if any(arg.value is value for value in given)]
        where = own[0] if own else node
        out.report(CODE, where, message.format(target=out.context.code(target).strip(), how=how))
    return replacing


def _check_slice_assignment(stmt, buffers: tensor_writes.Buffers, out: Collector) -> None:
    """``p.main_grad[...] = value`` (or into a view of it, or a local bound to it): the
    slice's old contents are dropped. ``p.main_grad = <a product>`` (or its ``.data``)
    drops the whole buffer: main_grad no longer is the grad buffer's view."""
    for target in stmt.targets:
        sub = target.target
        rebound = sub.value if patterns.is_attr(sub, "data") else sub
        if patterns.is_attr(rebound, patterns.MAIN_GRAD) and _computed(stmt.value, buffers):
            how = "rebinding it to a tensor computed here"
            out.report(CODE, stmt, MESSAGE.format(target=out.text(sub), how=how))
            continue
        if isinstance(sub, cst.Subscript) and (
            buffers.main_grad(sub.value) or buffers.main_grad_receiver(sub.value)
        ):
            how = "an assignment into it"
            out.report(CODE, stmt, MESSAGE.format(target=out.text(sub.value), how=how))


def _computed(value, buffers: tensor_writes.Buffers, depth: int = 3) -> bool:
    """A product computed here (``@``, a GEMM call), directly or through locals every
    reaching binding of which is one (``depth`` bindings deep). A GEMM given main_grad as
    its ``out`` returns that buffer (``wgrad, _ = gemm(..., out=weight.main_grad if fuse
    else None)``, then ``weight.main_grad = wgrad``: Transformer Engine's Paddle linear):
    binding main_grad to it keeps the buffer."""
    if _writes_main_grad_out(value):
        return False
    if wgrad.has_product(value):
        return True
    if type(value) is cst.Name and depth > 0:
        defs = buffers.unit.reaching.reaching(value.value, buffers.node)
        return bool(defs) and all(
            d.value is not None and _computed(d.value, buffers, depth - 1) for d in defs
        )
    return False


def _writes_main_grad_out(value) -> bool:
    """Some call in ``value`` is handed ``out=`` an expression that spells main_grad."""
    for sub in patterns.walk(value):
        if type(sub) is cst.Call:
            out = patterns.keyword_arg(sub, "out")
            if out is not None and any(
                patterns.is_attr(n, patterns.MAIN_GRAD) for n in patterns.walk(out)
            ):
                return True
    return False
