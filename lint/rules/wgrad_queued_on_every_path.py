"""GMLP023: a backward that queues its weight-gradient work on every path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

deferral = LazyModule("..analysis.deferral", __package__)
double_delivery = LazyModule("..analysis.double_delivery", __package__)

CODE = "GMLP023"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="wgrad-queued-on-every-path",
    summary=(
        "A backward hands its weight-gradient work (a callable that writes main_grad) to a "
        "store on every path: when the step does not split the backward pass (pipeline "
        "warm-up, a layer built without delayed wgrad) nobody computes it at once."
    ),
    flags=(
        "in a `backward`, a method call (`store.put(...)`, `queue.append(...)`) given a "
        "callable whose work spells main_grad or assigns `.grad` (a lambda, "
        "`partial(f, ...)`, a function of the file or of the backward) with no other "
        "path that does the work: no enclosing "
        "`if`/`else` branch (or arm of a conditional expression) that calls something "
        "instead, no earlier `if` that calls something and returns; and a hand-off made only "
        "where the receiving store's own switch says it is off (`compute() if store.enabled "
        "else store.put(work)`)"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad). A split backward (zero-bubble pipelines, TE's
        and Megatron-LM's `delay_wgrad_compute`) computes the input gradient now and queues
        the weight gradient for a later step. Queueing is a mode: in a zero-bubble
        schedule's warm-up and cool-down steps, and in a layer built without delayed wgrad,
        backward is not split and the weight gradient must be computed at once. A backward
        that queues on every path either trips the store's own check (Primus #287: the
        store asserts it is splitting) or leaves the work queued for a `backward_dw` that is
        never called, and main_grad never receives that microbatch's gradient. The correct
        shape tests the mode: `if store.delay_wgrad_compute(): store.put(...)` with an
        `else` that computes it, or an early `if not splitting: compute; return`.

        Seen: functions named `backward` (an autograd Function's, or a module's), the
        method calls they make as statements, the callables among the arguments (a lambda,
        `partial(f, ...)`, the name of a function nested in the backward or defined at the
        top of the file, or a local bound to a lambda / `partial`) whose work spells an
        identifier holding `main_grad`, following local bindings and functions called by
        name a few levels deep; the enclosing `if` / `elif` / `else` branches and earlier
        `if ...: return` blocks of the backward.

        The work may also assign a tensor's `.grad` (`w.grad = ...`, `w.grad += ...`):
        a store whose immediate path writes `.grad` outside autograd while the backward
        returns `None` for the weight bypasses the gradient hooks of ZeRO / DDP, which see
        `None` (Megatron-DeepSpeed #428: the store was used on every path, not only under
        the zero-bubble schedule).

        A statement that is a conditional expression (`work() if mode else
        store.put(work)`) is an `if` of two arms. The arms swapped (blind corpus 16, Paddle's
        zero-bubble `SplitBWMatmul.backward` queuing when `WeightGradStore.enabled` is
        false): a hand-off whose path passes a test of the receiving store's own switch (an
        attribute or method of the same object with enable(d), delay(ed), split or
        defer(red) as a whole segment of its name, `not` counted: not
        `deferral_limit_reached`) on the side where it is off queues exactly when no step pops
        the store, and computes at once when one would. Not seen: the switch read through a
        local or on another object (`if ctx.delay: ... else: store.put(...)`), and arms
        swapped in an `if` / `elif` chain past its first test.

        Not seen: which test is the delay mode (any other branch that calls something
        counts as computing the gradient at once: a test of an unrelated switch hides the
        bug), work that writes the weight gradient without spelling main_grad (a `.grad`
        returned later), hand-offs made in helpers of the backward, a `put` into a store
        named for weight gradients whose callable cannot be read (an import: such a hand-off
        is left to GMLP036 and GMLP062, its work and alternatives being unknown). A store
        whose `put` itself computes at once when not splitting would make a correct
        backward look like this one (a false alarm); the stores of TE, Megatron-LM and
        Primus all assert the mode in `put` instead.
    """,
    fix="""
        Queue only when the step splits the backward pass and compute the weight gradient
        at once otherwise: `if store.delay_wgrad_compute(): store.put(args, work)` /
        `else: work(*args)`. No automatic fix.
    """,
    fix_summary="none (test the delay mode, compute at once otherwise)",
    valid=(
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    work = functools.partial(process_wgrad, weight)
                    if WeightGradStore.split_bw():
                        WeightGradStore.put(weight, functools.partial(pre, grad_output, x), work)
                    else:
                        work(*pre(grad_output, x))
                    return grad_output @ weight, None


            def process_wgrad(weight, grad_output, x, handle=None):
                wgrad_gemm_accum_fp32(x, grad_output, weight.main_grad)
            """
        ),
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    if not ctx.wgrad_store.delay_wgrad_compute():
                        weight.main_grad.addmm_(grad_output.t(), x)
                        return grad_output @ weight, None
                    ctx.wgrad_store.put([x, grad_output], lambda x, g: accumulate(weight, x, g))
                    return grad_output @ weight, None


            def accumulate(weight, x, g):
                weight.main_grad.addmm_(g.t(), x)
            """
        ),
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    ctx.pending.put([x, grad_output], functools.partial(print, "done"))
                    return grad_output @ weight, None
            """
        ),
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    work = functools.partial(accumulate, weight, x, grad_output)
                    WeightGradStore.put(work) if WeightGradStore.enabled else work()
                    return grad_output @ weight, None


            def accumulate(weight, x, g):
                weight.main_grad.addmm_(g.t(), x)
            """
        ),
    ),
    invalid=(
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors

                    def process_wgrad(weight, grad_output, x, handle=None):
                        wgrad_gemm_accum_fp32(x, grad_output, weight.main_grad)

                    WeightGradStore.put(
                        weight,
                        functools.partial(pre, grad_output, x),
                        functools.partial(process_wgrad, weight),
                    )
                    return grad_output @ weight, None
            """,
            line=9,
        ),
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    if ctx.requires_wgrad:
                        ctx.wgrad_store.put([x, grad_output], lambda x, g: accumulate(weight, x, g))
                    else:
                        wgrad = None
                    return grad_output @ weight, None


            def accumulate(weight, x, g):
                weight.main_grad.addmm_(g.t(), x)
            """,
            line=6,
        ),
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    work = functools.partial(accumulate, weight, x, grad_output)
                    work() if WeightGradStore.enabled else WeightGradStore.put(work)
                    return grad_output @ weight, None


            def accumulate(weight, x, g):
                weight.main_grad.addmm_(g.t(), x)
            """,
            line=6,
        ),
        Example(
            """
            class _LinearWithSplit(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    if not ctx.store.delay_wgrad_compute():
                        ctx.store.put(lambda: weight.main_grad.add_(grad_output.t() @ x))
                    else:
                        weight.main_grad.add_(grad_output.t() @ x)
                    return grad_output @ weight, None
            """,
            line=6,
        ),
    ),
)


MESSAGE = (
    "the weight-gradient work (it writes main_grad or `.grad`) is queued on every path of this "
    "backward: when the step does not split the backward pass (warm-up, no delayed wgrad) "
    "it is never computed at once; test the delay mode and compute it otherwise"
)


OFF_MESSAGE = (
    "the weight-gradient work is queued only where `{test}` says this store is off, and "
    "computed at once where it is on: the two arms are swapped, so the queued work is never "
    "popped and the split step computes it too early; queue where the store is on"
)


def check(context: ModuleContext, out: Collector) -> None:
    # A hand-off followed on some path by the gradient computed again is GMLP036's (the work
    # is done twice there, not never).
    twice = {id(d.call) for d in context.shared(double_delivery.double_deliveries)}
    for handoff in context.shared(deferral.handoffs):
        if handoff.off is not None:
            out.report(CODE, handoff.call, OFF_MESSAGE.format(test=out.text(handoff.off)))
        elif not (handoff.alternative or id(handoff.call) in twice) and handoff.work_seen:
            out.report(CODE, handoff.call, MESSAGE)
