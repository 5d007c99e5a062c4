"""GMLP024: a backward defers a weight's gradient and hands autograd None for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

deferred_none = LazyModule("..analysis.deferred_none", __package__)
shadowed_dummy = LazyModule("..analysis.shadowed_dummy", __package__)
dropped_dummy = LazyModule("..analysis.dropped_dummy", __package__)

CODE = "GMLP024"
RULE = Rule(
    code=CODE,
    classes=(5, 7),
    name="deferred-wgrad-handed-back-as-none",
    summary=(
        "A backward hands the weight to a store that computes its gradient into main_grad "
        "later, and returns None as the weight's gradient on that path, in code that "
        "otherwise hands back dummies, or chooses between that dummy and None on a flag: "
        "the grad-accumulation hook never fires for it."
    ),
    flags=(
        "`G = None` reaching the weight's slot of a backward's `return` on a path from a "
        "call that hands the weight to an object (`store.put(x, dy, weight)`), outside any "
        "test of main_grad / `grad_added_to_main_grad`, in a file that names "
        "`grad_added_to_main_grad`; `G if flag else None` handed back, `G` a dummy"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping), found from MindSpeed !908's nanopipe
        linear. When a weight's gradient goes into `main_grad` outside autograd, Megatron's
        DDP still learns that the weight is done from its grad-accumulation hook, which
        fires only when autograd receives a gradient for the weight. The convention is a
        dummy `.grad` (a zeros or empty tensor of main_grad's shape) under
        `hasattr(weight, "grad_added_to_main_grad")`. A split backward (zero-bubble, nano
        pipelines) that hands the weight itself to a store, for a later step to accumulate
        into main_grad, owes the same dummy: returning None leaves the hook silent, so the
        overlapped reduction's bookkeeping never counts the weight (an assertion in
        `overlap_grad_reduce`, or a bucket never reduced).

        Seen: autograd Functions (a class with `forward` and `backward`); the weight is
        `forward`'s parameter, or the `ctx` attribute `forward` stored it in and the name
        `backward` reads it into; a call made as a statement on an object, given the weight
        (directly or in a list / tuple); its gradient slot is the weight's position among
        `forward`'s inputs; `G = None` bindings that reach a `return` placing `G` in that
        slot, on a control-flow path that starts at the hand-off. Only in files that name
        `grad_added_to_main_grad` (the dummy convention is in force there) and do not name
        `skip_backward_post_hook` (TE's delayed wgrad: the module fires the hooks itself in
        `backward_dw`, and None is right).

        Not seen: weights handed on inside other containers or through helpers; stores that
        fire the hook themselves when they run (a None is then right: a false alarm);
        a None handed back from a helper; backwards whose file never names the flag (old
        Megatron, Megatron-DeepSpeed: no dummy convention, not reported).

        The delayed arm asked first (blind corpus 7, Transformer Engine's ops GroupedLinear
        with the two arms swapped): under fused accumulation the dummy is owed whether the
        wgrad runs now or in `backward_dw()`, which fires the hook that reads `.grad`.
        Reported: in an `if` / `elif` chain or a conditional expression, an arm whose test
        names the delay (`delay_wgrad`, `delay_wgrad_compute()`) and has no `not` of the
        fused-accumulation switch hands None to a name (or a returned position) that a later
        arm, tested on that switch (`accumulate_into_main_grad`, `fuse_wgrad_accumulation`,
        `gradient_accumulation_fusion`), hands a dummy (a call named for one): both tests
        hold together and the None wins (analysis/shadowed_dummy.py). Not seen: the two
        choices in separate `if` statements (the later one then overrides: correct), and a
        delay test read into a local named otherwise.

        The dummy dropped on a flag (issue #19, class 7; since the fifteenth session, from
        blind corpus 14's 021ai/Megatron-LM-FP8FlowMoe linear): a conditional expression
        choosing between a name the function binds to a dummy (a call named for one, or a
        `zeros` / `empty` / `full` sized from main_grad) and None, handed back (a returned
        value or tuple element) or bound to that name again: `grad_weight if wgrad_compute
        else None` hands None whenever the flag is off, for a weight whose gradient went
        (or goes, deferred) into main_grad. Left alone: tests of whether the weight wants a
        gradient (`requires`, `required`, `needs_input_grad`) or exists at all (`weight is
        not None` for any object whose main_grad the function reads, `ctx.has_weight`):
        None is autograd's own answer there; tests of the name itself; the same file gating
        as above (analysis/dropped_dummy.py). Not seen: the choice made by separate `if`
        statements, or through a helper.
    """,
    fix="""
        On the deferred path, hand back the dummy the rest of the code uses:
        `if hasattr(weight, "grad_added_to_main_grad"): grad_weight = torch.zeros(
        weight.main_grad.shape, dtype=input.dtype, device=...)` (or the cached empty one),
        else None. No automatic fix.
    """,
    fix_summary="none (hand back a dummy under `hasattr(weight, 'grad_added_to_main_grad')`)",
    valid=(
        Example(
            """
            class _NanoLinear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.weight = weight
                    ctx.save_for_backward(x)
                    return x @ weight.t()

                @staticmethod
                def backward(ctx, dy):
                    (x,) = ctx.saved_tensors
                    weight = ctx.weight
                    if WeightGradStore.is_decoupleBlock:
                        WeightGradStore.put(x, dy, weight)
                        if hasattr(weight, "grad_added_to_main_grad"):
                            grad_weight = torch.zeros(weight.main_grad.shape, dtype=x.dtype)
                        else:
                            grad_weight = None
                    else:
                        grad_weight = dy.t().matmul(x)
                    return dy @ weight, grad_weight
            """
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, weight)
                    return x @ weight.t()

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    grad_weight = None
                    if ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([x, dy], weight)
                    else:
                        grad_weight = dy.t().matmul(x)
                    return dy @ weight, grad_weight


            def mark(weight):
                weight.skip_backward_post_hook = True  # backward_dw fires the hooks
                return hasattr(weight, "grad_added_to_main_grad")
            """
        ),
        Example(
            """
            def backward(ctx, grad_output):
                input, weight = ctx.saved_tensors
                wgrad_compute = True
                if ctx.grad_output_buffer is not None:
                    ctx.grad_output_buffer.append(grad_output)
                    wgrad_compute = False
                if ctx.gradient_accumulation_fusion:
                    if wgrad_compute:
                        wgrad_gemm_accum_fp32(input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        if getattr(weight, "zero_out_wgrad", False):
                            grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype)
                        else:
                            grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(input)
                return grad_output.matmul(weight), grad_weight if ctx.needs_input_grad[1] else None
            """
        ),
        Example(
            """
            def backward(ctx, grad_output):
                input, weight = ctx.saved_tensors
                grad_weight = None
                fused = ctx.gradient_accumulation_fusion
                if weight is not None:
                    if fused and hasattr(weight, "grad_added_to_main_grad"):
                        wgrad_gemm_accum_fp32(input, grad_output, weight.main_grad)
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = grad_output.t().matmul(input)
                return grad_output, grad_weight if weight is not None else None
            """
        ),
        Example(
            """
            def backward(ctx, grad_output):
                input, weight = ctx.saved_tensors
                if ctx.gradient_accumulation_fusion and hasattr(weight, "grad_added_to_main_grad"):
                    wgrad_gemm_accum_fp32(input, grad_output, weight.main_grad)
                    grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = grad_output.t().matmul(input)
                return grad_output.matmul(weight), grad_weight if ctx.wgrad_required else None
            """
        ),
    ),
    invalid=(
        Example(
            """
            class _NanoLinear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.weight = weight
                    ctx.save_for_backward(x)
                    return x @ weight.t()

                @staticmethod
                def backward(ctx, dy):
                    (x,) = ctx.saved_tensors
                    weight = ctx.weight
                    if WeightGradStore.is_decoupleBlock:
                        WeightGradStore.put(x, dy, weight)
                    grad_weight = None
                    if not WeightGradStore.is_decoupleBlock:
                        grad_weight = dy.t().matmul(x)
                    return dy @ weight, grad_weight


            def uses_the_flag(weight):
                return hasattr(weight, "grad_added_to_main_grad")
            """,
            line=14,
        ),
        Example(
            """
            def backward(ctx, grad_output):
                input, weight = ctx.saved_tensors
                wgrad_compute = True
                if ctx.grad_output_buffer is not None:
                    ctx.grad_output_buffer.append(grad_output)
                    wgrad_compute = False
                if ctx.gradient_accumulation_fusion:
                    if wgrad_compute:
                        wgrad_gemm_accum_fp32(input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        if getattr(weight, "zero_out_wgrad", False):
                            grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype)
                        else:
                            grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(input)
                return grad_output.matmul(weight), grad_weight if wgrad_compute else None
            """,
            line=20,
        ),
    ),
)


MESSAGE = (
    "`{weight}`'s gradient is deferred (handed to `{call}`) and this backward hands autograd "
    "None for it: its grad-accumulation hook never fires, so the overlapped reduction never "
    "counts it; hand back a dummy under `hasattr({weight}, 'grad_added_to_main_grad')`"
)


SHADOWED = (
    "this arm hands back no weight gradient when the wgrad is delayed, and its test says "
    "nothing against fused accumulation, so it also wins when the wgrad goes into main_grad: "
    "the dummy a later arm makes for that case is never handed back, and the hook "
    "`backward_dw()` fires sees no `.grad` and no grad_added_to_main_grad; ask the "
    "fused-accumulation test first"
)


DROPPED = (
    "this hands autograd None instead of the dummy `{name}` whenever `{test}` is false: the "
    "weight's gradient goes into main_grad, and without a `.grad` its grad-accumulation hook "
    "never fires, so the overlapped reduction never counts it; hand back `{name}`"
)


def check(context: ModuleContext, out: Collector) -> None:
    for found in context.shared(deferred_none.deferred_nones):
        call = context.code(found.handoff.func)
        out.report(CODE, found.none, MESSAGE.format(weight=found.weight, call=call))
    if shadowed_dummy.DELAY_WORD in context.source and "dummy" in context.source:
        for unit in context.units:
            for test in shadowed_dummy.shadowing_tests(unit):
                out.report(CODE, test, SHADOWED)
    for choice, name in dropped_dummy.dropped_dummies(context):
        test = context.code(choice.test)
        out.report(CODE, choice, DROPPED.format(name=name, test=test))
