"""GMLP062: a mode of the backward in which the weight gradient is set to None and
delivered nowhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
dropped_mode_arm = LazyModule("..analysis.dropped_mode_arm", __package__)

CODE = "GMLP062"
RULE = Rule(
    code=CODE,
    classes=(3, 6),
    name="wgrad-dropped-in-mode-arm",
    summary=(
        "A backward chooses per mode between returning the weight gradient it computes and "
        "returning None, and the None arm does nothing else: no store takes the work, no "
        "buffer is written, so in that mode the weight never receives its gradient."
    ),
    flags=(
        "in a `backward` that names no main_grad, assigns no `.grad` and hands no work on, "
        "`g = None` as the only work of an `if T:` arm (or `g = None if T else <product>`), "
        "`g` returned and elsewhere bound to a product of no weight, `T` reading the "
        "split-backward mode"
    ),
    explanation="""
        Issue #19, classes 3 and 6 (a gradient returned as None that nothing delivers; a
        split backward whose deferred part is never queued). A zero-bubble backward hands
        its weight-gradient work to a store in one mode (`if ctx.use_zbv:
        WeightGradStore.put(..., work); grad_weight = None`) and computes it in the other.
        ColossalAI's vocabulary-parallel LM head in blind corpus 17 kept the `None` and lost
        the `put` ("dW is computed in the W pass"): in zero-bubble mode the head's weight
        gets no gradient, silently.

        Seen: functions named `backward` with no other way to deliver a weight gradient
        (no main_grad spelled, no `.grad` attribute, no hand-off as GMLP023 or GMLP036 sees
        it, no string naming a gradient for `getattr`); `g = None` in an `if` arm (`if`,
        `elif` or `else`) that binds only constants and names and may return names (`if
        zbv: g = None; return dx, g`), or `g = None if T else <product>`; `g` one of the
        names the backward returns (not a bias gradient: a name with `bias`, `db`) and
        bound somewhere in it to a product (`@` or a GEMM call) none of whose operands is a
        weight; the test reads the split-backward mode (`zbv`, `zero_bubble`, `split`,
        `delay`, `defer`, `store`, `w_pass`), and is not about whether a gradient is wanted
        at all (words `grad`, `requires`, `need`, `freez`/`frozen`, `train`, `None`); the
        backward puts nothing into a container (`append`, `put`, `push`, ...: a pending list
        drained by a later pass delivers). Files are analysed when they name a trigger
        (`WeightGradStore` among them).

        Not seen: a None arm that calls anything (logging included), a mode named otherwise
        (`if ctx.overlap:`) or with `grad` in it (`defer_wgrad`), the None returned directly
        (`return dx, None` in the arm), backwards that deliver some other weight's
        gradient into a buffer (the whole function is then left alone), files that name no
        trigger.
    """,
    fix="""
        Hand the work on in that arm (`WeightGradStore.put(x, dy, weight, work)`), or
        compute the gradient there. No automatic fix.
    """,
    fix_summary="none (hand the work on, or compute it, in that arm)",
    valid=(
        Example(
            """
            from colossalai.pipeline.weight_grad_store import WeightGradStore


            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_input = grad_output.matmul(weight)
                if ctx.use_zbv:
                    WeightGradStore.put(x, grad_output, weight, execute_w_pass)
                    grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(x)
                return grad_input, grad_weight
            """
        ),
        Example(
            """
            from colossalai.pipeline.weight_grad_store import WeightGradStore


            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                if ctx.needs_input_grad[1]:
                    grad_weight = grad_output.t() @ x
                else:
                    grad_weight = None
                return grad_output @ weight, grad_weight
            """
        ),
        Example(
            """
            from colossalai.pipeline.weight_grad_store import WeightGradStore


            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                if ctx.accumulate_into_grad:
                    wgrad_gemm_accum_fp32(x, grad_output, weight.grad)
                if ctx.accumulate_into_grad:
                    grad_weight = None
                else:
                    grad_weight = grad_output.t() @ x
                return grad_output @ weight, grad_weight
            """
        ),
    ),
    invalid=(
        Example(
            """
            from colossalai.pipeline.weight_grad_store import WeightGradStore


            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_input = grad_output.matmul(weight)
                if ctx.use_zbv:
                    grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(x)
                return grad_input, grad_weight
            """,
            line=8,
        ),
    ),
)


MESSAGE = (
    "in the mode where `{test}` holds, `{name}` is returned as None and nothing else "
    "happens: no store takes the weight-gradient work and no buffer is written, so the "
    "weight gets no gradient; hand the work on (or compute it) in this arm"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "backward" not in context.source:
        return
    for found in dropped_mode_arm.dropped_arms(context):
        test = out.text(found.test).partition("\n")[0]
        out.report(CODE, found.binding, MESSAGE.format(test=test, name=found.name))
