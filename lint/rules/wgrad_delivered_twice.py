"""GMLP036: a weight gradient handed to a store and also returned to autograd."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

double_delivery = LazyModule("..analysis.double_delivery", __package__)
decided_tests = LazyModule("..analysis.decided_tests", __package__)

CODE = "GMLP036"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="wgrad-delivered-twice",
    summary=(
        "A backward hands its weight-gradient work to a store, sets the returned weight "
        "gradient to `None`, and then, on the same path, computes the gradient again and "
        "returns it: the weight receives it twice."
    ),
    flags=(
        "in a `backward`, a hand-off of wgrad work (as GMLP023 sees it: a method call given "
        "a callable that writes main_grad or `.grad`) from which a path reaches `g = None` "
        "for a name `g` the backward returns, and then `g = <call or product>`"
    ),
    explanation="""
        Issue #19, class 3 (flags and writes that disagree), found from
        Megatron-DeepSpeed #415. A split backward either hands the weight-gradient work to a
        store (which runs it now or in a later step: it writes main_grad, or `.grad` outside
        autograd) and returns `None` for the weight, or computes the gradient and returns
        it. When both happen on one path, the gradient is delivered twice: the store's work
        adds it and autograd accumulates the returned copy again (or a second closure is
        queued), so that weight's gradient is doubled for the microbatch. The usual cause
        is an `if` where an `elif` was meant, after a merge put two hand-off branches one
        after the other.

        Seen: functions named `backward`, the hand-offs GMLP023 sees (and the same
        callables: lambdas, `partial`, functions of the file, a few bindings deep); on the
        function's control-flow graph, a path from the hand-off through an assignment of
        `None` to a returned name and on to an assignment of a call or arithmetic product
        to that name. The hand-off is reported here and not by GMLP023.

        Also reported, at the returned product: a `return` reached from the hand-off whose
        element chooses between `None` and a product (`None if wgrad_now else x.t() @ dy`)
        on a test that the hand-off's own `if`s decide for the product, directly or through
        boolean locals bound once (ColossalAI, blind corpus 17: `wgrad_now = accum and not
        use_zbv`, the `put` under `if use_zbv:`). A `put` (`append`, `push`, `enqueue`) into
        a store named for weight gradients (`WeightGradStore`, `wgrad_store`) is a hand-off
        whatever its callable (ColossalAI imports it); files naming `WeightGradStore` are
        analysed without main_grad.

        Not seen: files that name none of the linter's triggers (`main_grad`,
        `WeightGradStore`, ...; a work function that writes only `.grad` in such a file is
        never analysed), a second delivery returned directly (`return dx, dy.t() @ x` with
        no name set to `None` first, no choice), deliveries in helpers of the backward,
        whether the two branches' conditions exclude each other (two `if`s on conditions
        that never hold together are reported).
    """,
    fix="""
        Make the branches exclusive (`if ...: put; g = None` / `elif ...: put; g = None` /
        `else: g = product`), so that each path delivers the gradient once. No automatic
        fix.
    """,
    fix_summary="none (one delivery per path: make the branches exclusive)",
    valid=(
        Example(
            """
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                if ctx.bwd_stream is not None:
                    WeightGradStore.put(x, grad_output, weight, update_grad)
                    grad_weight = None
                elif ctx.zero_bubble:
                    WeightGradStore.put(x, grad_output, weight, update_grad)
                    grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(x)
                return grad_output @ weight, grad_weight
            """,
            others=(),
        ),
        Example(
            """
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors

                def wgrad_gemm(x, dy):
                    return general_gemm(x, dy, out=weight.main_grad, accumulate=True)

                if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                    ctx.wgrad_store.put([x, grad_output], wgrad_gemm)
                    grad_weight = None
                else:
                    grad_weight = wgrad_gemm(x, grad_output)
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    grad_weight = torch.zeros_like(weight)
                return grad_output @ weight, grad_weight
            """,
            others=(),
        ),
        Example(
            """
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                use_zbv = ctx.use_zbv
                accum = fusion_available and weight.grad is not None
                wgrad_now = accum and not use_zbv
                if use_zbv:
                    WeightGradStore.put(x, grad_output, weight, execute_w_pass)
                if wgrad_now:
                    wgrad_gemm_accum_fp32(x, grad_output, weight.grad)
                return grad_output @ weight, (None if use_zbv or accum else x.t() @ grad_output)
            """,
            others=(),
        ),
    ),
    invalid=(
        Example(
            """
            def update_grad(x, grad_output, weight):
                if hasattr(weight, "main_grad"):
                    weight.main_grad.add_(grad_output.t().matmul(x))
                else:
                    weight.grad = grad_output.t().matmul(x)


            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                if ctx.bwd_stream is not None:
                    WeightGradStore.put(x, grad_output, weight, update_grad)
                    grad_weight = None
                if ctx.zero_bubble:
                    WeightGradStore.put(x, grad_output, weight, update_grad)
                    grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(x)
                return grad_output @ weight, grad_weight
            """,
            line=11,
        ),
        Example(
            """
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                use_zbv = ctx.use_zbv
                accum = fusion_available and weight.grad is not None
                wgrad_now = accum and not use_zbv
                if use_zbv:
                    WeightGradStore.put(x, grad_output, weight, execute_w_pass)
                if wgrad_now:
                    wgrad_gemm_accum_fp32(x, grad_output, weight.grad)
                return grad_output @ weight, (None if wgrad_now else x.t().matmul(grad_output))
            """,
            line=10,
        ),
    ),
)


MESSAGE = (
    "the weight-gradient work handed on here delivers the gradient, yet on a path from here "
    "`{slot}` is set to None and then computed again (line {line}) and returned: the weight "
    "receives it twice; make the branches exclusive"
)


MESSAGE_RETURNED = (
    "this weight gradient is returned on a path where the work handed on at line {line} "
    "delivers it too: under that hand-off's tests `{test}` chooses the computed gradient; "
    "return None wherever the work was handed on"
)


def check(context: ModuleContext, out: Collector) -> None:
    for found in context.shared(double_delivery.double_deliveries):
        out.report(CODE, found.call, MESSAGE.format(slot=found.slot, line=found.product_line))
    for choice in context.shared(double_delivery.returned_choices):
        test = decided_tests.text_of(choice.test).partition("\n")[0]
        line = context.line_of(choice.call)
        out.report(CODE, choice.product, MESSAGE_RETURNED.format(line=line, test=test))
