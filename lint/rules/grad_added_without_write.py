"""GMLP032: `grad_added_to_main_grad = True` on a path where nothing wrote that main_grad."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit
    from ..analysis.unwritten_paths import MissingWrite
    from ..analysis.wgrad import Mark

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
wgrad = LazyModule("..analysis.wgrad", __package__)
deliveries = LazyModule("..analysis.deliveries", __package__)
marking_wrappers = LazyModule("..analysis.marking_wrappers", __package__)
marking_helpers = LazyModule("..analysis.marking_helpers", __package__)
dropped_gradients = LazyModule("..analysis.dropped_gradients", __package__)
identity_erasure = LazyModule("..analysis.identity_erasure", __package__)
unwritten_marks = LazyModule("..analysis.unwritten_marks", __package__)
unwritten_paths = LazyModule("..analysis.unwritten_paths", __package__)
marked_real_returns = LazyModule("..analysis.marked_real_returns", __package__)
marked_product_returns = LazyModule("..analysis.marked_product_returns", __package__)
forward_marks = LazyModule("..analysis.forward_marks", __package__)

CODE = "GMLP032"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="grad-added-without-write",
    summary=(
        "`grad_added_to_main_grad = True` is reached on a path where nothing wrote the "
        "weight's main_grad, or after the weight gradient computed here was dropped."
    ),
    flags=(
        "a `grad_added_to_main_grad = True` mark reached on a path through the function that "
        "hands no main_grad to a GEMM, kernel, in-place op or store, in a function that does "
        "so on other paths; or reached after a locally computed GEMM result that never went "
        "anywhere; or, on the consumer side, a main-grad buffer erased (`zero_`) or kept on "
        "a test of where main_grad points (`data_ptr()`, `is`) instead of on the flag; or a "
        "marking decorator or wrapper applied to a function that returns the gradient it "
        "computes; or a mark in an autograd Function's `forward(ctx, ...)` that touches no "
        "main_grad"
    ),
    explanation="""
        Issue #19, class 3 (flags without writes). `grad_added_to_main_grad = True` tells
        Megatron's hook that the weight gradient is already in main_grad, so the `.grad`
        handed back (a dummy) is ignored. Set on a path where nothing wrote main_grad, the
        gradient of that microbatch is lost silently.

        A mark in an autograd Function's `forward(ctx, ...)` (its first parameter `ctx`)
        that neither reads nor fetches main_grad is reported wherever it stands (blind corpus
        25, a DeepGEMM linear marking its weight as it saves it): no weight gradient exists
        before the backward, so the hook drops the real one the backward returns.

        Three shapes are reported, over the function's control-flow graph:

        * the function hands main_grad storage on somewhere (a GEMM `out=`, an in-place op,
          a kernel or helper given the buffer or the weight, a store on `ctx`), but a path
          from its entry through the mark to its exit passes none of that, and the mark is
          guarded by nothing but loops and `hasattr` tests (a mark under another condition
          may be correlated with the write's condition, which a path-insensitive graph
          cannot tell). A test is no such condition when the mark runs on one side of it and every
          write on the other, and the mark's side hands back a product (`@`, a GEMM) it
          computed: `if fused: <write, mark, return dummy>`, then a mark and `return dy.t()
          @ x` (one evaluation of one test; the gradient goes to `.grad`, which the mark
          tells the hook to ignore); or a local named for the weight gradient that a
          product was unpacked into (`dx, dw, db = npu_gmm_backward([dy], [x], [w], ...)`,
          then `return dx[0], dw[0]`: blind corpus 23). Such a kernel, handed the weight
          and no main_grad, returning its gradient into a local named for it (`dw`,
          `wgrad`, `dweight`, `d_weight`), writes nothing; keywords that say how to compute
          (`group_list=`) leave it so, keywords that may name an output (`out`, `output`,
          `dest`, `result`, `main_grad`, `accum...`, `buffer`, `c`, `d`) and `*` / `**`
          arguments do not. When every hand-off of the weight in the function is such a
          kernel or a dgrad product and a return after a mark written out hands a product
          back, the mark is reported without a fused branch elsewhere (the review of
          2026-12-07: the kernel's backward written straight). A mark whose side hands
          back a dummy may follow a write made elsewhere (a fused kernel) and is left
          alone;

        * a weight gradient computed here by a GEMM or `@` into a fresh tensor (or by a
          gradient helper: a function of this file, or at the top level of another file of
          the run, that returns such a product and can write no main_grad) reaches the
          mark on a path where it was used by nothing, and after the mark it is never given
          to main_grad (typically it is replaced by the dummy). Giving the weight to a
          gradient helper writes nothing.

        * the function works with main_grad (fetches it, puts it back on the weight with
          `p.main_grad = p.get_main_grad()`, tests or reads it) and runs a GEMM, yet no node
          of it hands main_grad on (a put-back makes the buffer reachable and writes no
          gradient): the GEMM wrote its result elsewhere and the mark claims a write that
          never happened (Transformer Engine #2622's PR branch). A local named for main_grad
          that says it is a switch (`accumulate_into_main_grad`) holds no buffer. A call
          of a function of the file that only looks at what it is handed (its shape, dtype
          or device, or its main_grad's: `assert w.main_grad.dtype == torch.float32`),
          returns nothing and spells main_grad nowhere else hands nothing on, whatever its
          name (since 2026-12-07: `_check_main_grad(weight)` had counted as a write;
          analysis/inspecting_helpers.py). Not seen: such a checker in another file, or
          one that also logs the tensor.

        * the consumer side (a fork's Megatron-FSDP v2 reduction, Autumn1998/Megatron-LM
          7a9e39ee): whether a parameter's main-grad buffer holds a write is decided by
          where main_grad points (`param.main_grad.data_ptr() != main_grad.data_ptr()`,
          `untyped_storage().data_ptr()`, `id(...)`, `a is b` between two main-grad
          buffers) and the buffer is erased (`zero_`, `fill_`) only on one side of that
          test. Binding main_grad to a buffer says where a fused kernel would write, not
          that it wrote: an unwritten buffer keeps stale values and they are reduced. A
          test that also reads `grad_added_to_main_grad` is left alone. Reported in any
          function that names main_grad (the file need not name the flag). Not seen: the
          identity compared in a helper, or kept in a local flag computed before the test.

        * a wrapper that marks (a decorator or wrapper factory of the file whose inner
          function calls the wrapped one and marks one of its own parameters) applied to a
          gradient helper (`@marks_main_grad` on a function that returns `(dy.t() @ x)` and
          writes no main_grad): the mark claims a write the wrapped function never makes
          (analysis/marking_wrappers.py). Not seen: wrappers of other files, class-based
          decorators.

        * a mark names its weights one by one (`for w in (w1, w2): w.grad_added_... = True`
          marks `w1` and `w2`): a marked weight whose main_grad the function never names
          (not even through a loop variable over a display holding it), while it names
          other locals' main_grads (itself, or through a helper of the file that writes
          the main_grad of a weight it is handed), and that is only read here (a GEMM
          operand with no `out=`, its `dtype` / `shape`, `getattr`) after being bound
          from a field of an object no call is handed and no method of which is called
          (analysis/unwritten_marks.py). Not seen: weights reached through attributes
          (`ctx.fc1_weight.main_grad`), kept in lists, or handed to any other call.
        * every write of the weight's main_grad chooses it as a GEMM's output on one side of
          one test (`out=w.main_grad if ctx.fuse else None`), and a run through an `if` on
          that test, on the side where the output is None (`if not ctx.fuse: w.grad =
          wgrad`), goes on to the mark, taking repeated tests the same way (blind corpus
          20: a fork of Transformer Engine's linear whose mark lost its `ctx.fuse and`).
          Reported at the mark. Not seen: the test spelled differently at the two places.

        A call of a helper of the file that marks the weight it is handed (MindSpeed's
        `_create_grad_weight_placeholder(weight_param)`, which sets the flag and returns the
        dummy; also through a helper of its own) is judged as a mark of that argument where
        the call is made (analysis/marking_helpers.py; blind corpus 9). Not seen: helpers of
        other files, and helpers reached through `self.` attributes holding functions.

        A product of the weight (`dx = general_gemm(weight_fp8, dy)[0]`, `dy @ w`) is the
        input gradient, handed back beside the dummy: it is never taken for a dropped
        weight gradient.

        A weight gradient computed here and replaced, unused, by another value on the way
        to the mark is dropped too (blind corpus 14: a linear's flag-and-dummy block moved
        out of `if ctx.gradient_accumulation_fusion:` to below the non-fused GEMM, so that
        `grad_weight = torch.empty(weight.main_grad.shape, ...)` replaces the gradient just
        computed and the mark follows). The run must be one the tests allow: `else: gw =
        gemm(...)` then `if fuse: gw = dummy` asks one test twice and is no such run
        (analysis/consistent_paths.py); a read of the gradient (a cast, a view) on the way
        is a use. Not judged in a function with a `match` statement (a `case` is not
        related to a later test of the same value), nor through a starred unpacking.

        A mark may be spelled `w.grad_added_to_main_grad = hasattr(w,
        "grad_added_to_main_grad")`: True on every parameter Megatron's DDP set up (blind
        corpus 16: PaddleFleet's FP8 weight-gradient path marking so while it hands back the
        real gradient). This holds for every rule that reads marks (`wgrad.marked_subject`).

        Exception paths are paths: a handler is entered from before any statement of its
        `try` body (the GEMM that writes main_grad may be the one that raised), and a
        `return` inside a `try` runs its `finally` on the way out, so a mark in `finally`
        also follows a handler that computed the gradient the plain way and returned it
        (an exception is not a condition correlated with the write's).

        A captured graph's replay (`graph.replay()`) counts as a write: the captured
        kernels may have written main_grad. Giving a weight to a list (`append`,
        `extend`, `insert`) queues it and writes nothing.

        A helper that finishes the bookkeeping for its caller, handed the weight gradient
        (a parameter named for one: `grad_weight`, `wgrad`, `dw`, not `dummy`, never
        rebound) and no main_grad of its own, and returning a dummy it allocates on another
        path, must not mark on a path that returns that gradient (blind
        corpus 19: fastmoe's `_finish_wgrad(weight, grad_weight, written)` with its mark
        moved above `if not written: return grad_weight`): the hook then skips `.grad`
        (analysis/marked_real_returns.py). Not seen: the gradient returned under another
        name, or through a container.

        Not seen: a function that never touches main_grad at all (the write may have
        happened in a captured graph, a hook or another function: Megatron's CUDA-graph
        replay marks exactly so); writes in helpers of other files that are not handed the
        weight or its buffer; marks under conditions correlated with the write's.

        Since blind corpus 26: a `for` (or `while`) loop whose body writes the weight's
        main_grad on every iteration (a statement of the body itself, no jump before it, no
        erasure, the loop over no filtering comprehension: `for e, g in pending:
        w.main_grad[e].add_(g)`) counts as a write on the way through it, since a run that
        leaves it before the first iteration had no gradient to write
        (analysis/writing_loops.py); so does an `if` on `overwrite_main_grad` (or on a local
        bound to it) whose only writes erase main_grad (`zero_()`, `fill_(0)`: a weight that
        took no tokens adds zero in accumulate mode), in a function that computes no product
        outside its returns (analysis/overwrite_erasures.py). Reported besides: in a function
        not named `backward` that writes the marked weight's main_grad on some path, a run from
        the entry through the mark to a `return` whose whole value is a product whose first
        operand is transposed and no operand a weight (`return gemm(dout.T, x)`, a fallback path
        for no main_grad or no fusion), passing no write, writing loop, overwrite-only erasure
        or skip for nothing to write: the hook skips the gradient handed back
        (analysis/marked_product_returns.py). Not seen: the product bound to a local first, or
        returned inside a tuple.
    """,
    fix="""
        Write the gradient into main_grad on that path (or mark only where it was written).
        No automatic fix.
    """,
    fix_summary="none (write main_grad on that path, or do not mark)",
    valid=(
        Example(
            """
            def replay_backward(self, params):
                self.graph.replay()
                for p in params:
                    p.grad_added_to_main_grad = True
                    for cb in self.callbacks:
                        cb(p)
            """
        ),
        Example(
            """
            def fuser_backward(self, ctx, dy, x, accumulate_into_main_grad):
                weight = self.weight
                weight.main_grad = weight.get_main_grad()
                grads = [weight.main_grad] if accumulate_into_main_grad else [None]
                grouped_gemm(x, dy, grads, accumulate=accumulate_into_main_grad)
                weight.grad_added_to_main_grad = True
                return make_dummy_wgrad(weight)
            """
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                if ctx.use_grouped:
                    grouped_wgrad(x, dy, weight.main_grad)
                else:
                    weight.main_grad.add_(dy.t() @ x)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """
        ),
        Example(
            """
            def after_replay(params):
                for p in params:
                    p.grad_added_to_main_grad = True
            """
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = torch.matmul(dy.t(), x)
                if ctx.fuse_wgrad_accumulation:
                    weight.main_grad.add_(wgrad)
                    weight.grad_added_to_main_grad = True
                    wgrad = make_dummy_wgrad(weight)
                return None, wgrad
            """
        ),
        Example(
            """
            def reduce_grads(params):
                for param in params:
                    if param.grad is None and not param.grad_added_to_main_grad:
                        param.get_main_grad().zero_()
            """
        ),
        Example(
            """
            def accumulate_wgrad(weight, x, dy):
                weight.main_grad.add_(dy.t() @ x)
                return dy.t() @ x


            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = accumulate_wgrad(weight, x, dy)
                if ctx.fuse_wgrad_accumulation:
                    weight.grad_added_to_main_grad = True
                    wgrad = make_dummy_wgrad(weight)
                return None, wgrad
            """
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                else:
                    grad_weight = dy.t().matmul(x)
                if ctx.gradient_accumulation_fusion:
                    grad_weight = make_dummy_wgrad(weight)
                    weight.grad_added_to_main_grad = True
                return None, grad_weight
            """
        ),
        Example(
            """
            import torch


            def finish_wgrad(weight, grad_weight, written_to_main_grad):
                if not written_to_main_grad:
                    return grad_weight
                weight.grad_added_to_main_grad = True
                return torch.zeros_like(weight)
            """
        ),
        Example(
            """
            def backward(ctx, dy, x, weight):
                fuse = ctx.fuse_wgrad_accumulation
                wgrad = gemm(x, dy, accumulate=True, out=weight.main_grad if fuse else None)
                if not fuse:
                    weight.grad = wgrad if weight.grad is None else weight.grad + wgrad
                if fuse and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    wgrad = torch.zeros_like(weight)
                return wgrad
            """
        ),
        Example(
            """
            def _check_main_grad(weight, *tensors):
                assert weight.main_grad.dtype == torch.float32
                for t in tensors:
                    fused_wgrad_kernel(t)


            class RowParallelLinearFn(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    x, weight = ctx.saved_tensors
                    grad_input = grad_output.matmul(weight)
                    if ctx.gradient_accumulation_fusion:
                        _check_main_grad(weight, x, grad_output, weight.main_grad)
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=x.dtype)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = grad_output.t().matmul(x)
                    return grad_input, grad_weight
            """
        ),
        Example(
            """
            class GMMFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    x, weight, original_weight = ctx.saved_tensors
                    dx, dw = npu_gmm_backward([dy], [x], [weight], ctx.group_list)
                    return dx[0], dw[0], None
            """,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, w = ctx.saved_tensors
                grads = [dy[i].t() @ x[i] for i in range(ctx.n)]
                for e, g in enumerate(grads):
                    w.main_grad[e].add_(g)
                w.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(w)
            """
        ),
        Example(
            """
            def skip_backward(self):
                for weight in (self.weight1, self.weight2):
                    if getattr(weight, "overwrite_main_grad", False):
                        weight.main_grad.zero_()
                    weight.grad_added_to_main_grad = True
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                if ctx.use_grouped:
                    grouped_wgrad(x, dy, weight.main_grad)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = torch.matmul(dy.t(), x)
                if ctx.fuse_wgrad_accumulation:
                    weight.grad_added_to_main_grad = True
                    wgrad = make_dummy_wgrad(weight)
                return None, wgrad
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                main_grad = weight.main_grad
                wgrad = torch.matmul(dy.t(), x)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """,
            line=5,
        ),
        Example(
            """
            def weight_gradient(x, dy):
                return dy.t().float() @ x.float()


            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = weight_gradient(x, dy)
                if ctx.fuse_wgrad_accumulation:
                    weight.grad_added_to_main_grad = True
                    wgrad = make_dummy_wgrad(weight)
                return None, wgrad
            """,
            line=9,
        ),
        Example(
            """
            def expert_wgrad(param, x, dy):
                try:
                    general_gemm(x, dy, out=param.main_grad, accumulate=True)
                except NotImplementedError:
                    return dy.t() @ x
                finally:
                    param.grad_added_to_main_grad = True
                return make_dummy_wgrad(param)
            """,
            line=7,
        ),
        Example(
            """
            def reduce_grads(params):
                for param in params:
                    if param.grad is None:
                        main_grad = param.get_main_grad()
                        if param.main_grad.data_ptr() != main_grad.data_ptr():
                            main_grad.zero_()
            """,
            line=5,
        ),
        Example(
            """
            def expert_wgrad(w, x, dy, fused):
                if fused:
                    general_gemm(x, dy, out=w.main_grad, accumulate=True)
                    w.grad_added_to_main_grad = True
                    return make_dummy_wgrad(w)
                w.grad_added_to_main_grad = True
                return dy.t() @ x
            """,
            line=6,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    grad_weight = None
                else:
                    grad_weight = dy.t().matmul(x)
                if hasattr(weight, "grad_added_to_main_grad"):
                    grad_weight = make_dummy_wgrad(weight)
                    weight.grad_added_to_main_grad = True
                return None, grad_weight
            """,
            line=10,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                if ctx.fp8_wgrad:
                    grad_weight = general_gemm(x.t(), dy)[0]
                    weight.grad_added_to_main_grad = hasattr(weight, "grad_added_to_main_grad")
                elif ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    grad_weight = make_dummy_wgrad(weight)
                    weight.grad_added_to_main_grad = True
                return None, grad_weight
            """,
            line=5,
        ),
        Example(
            """
            import torch


            def finish_wgrad(weight, grad_weight, written_to_main_grad):
                weight.grad_added_to_main_grad = True
                if not written_to_main_grad:
                    return grad_weight
                return torch.zeros_like(weight)
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy, x, weight):
                fuse = ctx.fuse_wgrad_accumulation
                wgrad = gemm(x, dy, accumulate=True, out=weight.main_grad if fuse else None)
                if not fuse:
                    weight.grad = wgrad if weight.grad is None else weight.grad + wgrad
                if hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    wgrad = torch.zeros_like(weight)
                return wgrad
            """,
            line=7,
        ),
        Example(
            """
            class GMMFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    x, weight, original_weight = ctx.saved_tensors
                    if ctx.gemm_fusion:
                        dx = npu_gmm_dx(dy, weight)
                        npu_groupmatmul_add_fp32(x, dy, ctx.groups, original_weight.main_grad)
                        original_weight.grad_added_to_main_grad = True
                        return dx, torch.zeros_like(weight)
                    dx, dw = npu_gmm_backward([dy], [x], [weight], ctx.groups)
                    original_weight.grad_added_to_main_grad = True
                    return dx[0], dw[0]
            """,
            line=11,
        ),
        Example(
            """
            class GMMFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    x, weight, original_weight = ctx.saved_tensors
                    if ctx.gemm_fusion:
                        dx = npu_gmm_dx(dy, weight)
                        npu_groupmatmul_add_fp32(x, dy, ctx.groups, original_weight.main_grad)
                        original_weight.grad_added_to_main_grad = True
                        return dx, torch.zeros_like(weight)
                    dx, dweight = npu_gmm_backward([dy], [x], [weight], group_list=ctx.groups)
                    original_weight.grad_added_to_main_grad = True
                    return dx[0], dweight[0]
            """,
            line=11,
        ),
        Example(
            """
            class GMMFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    x, weight, original_weight = ctx.saved_tensors
                    dx, dw = npu_gmm_backward([dy], [x], [weight], ctx.group_list)
                    original_weight.grad_added_to_main_grad = True
                    return dx[0], dw[0], None
            """,
            line=6,
        ),
        Example(
            """
            class LinearFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, weight)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                    return x @ weight.t()
            """,
            line=6,
        ),
        Example(
            """
            def compute_weight_grad(ctx, dout, x, weight):
                main_grad = getattr(weight, "main_grad", None)
                if not ctx.fuse or main_grad is None:
                    weight.grad_added_to_main_grad = True
                    return gemm(dout.T, x)
                over = getattr(weight, "overwrite_main_grad", False)
                gemm(dout.T, x, out=main_grad, accumulate=not over)
                weight.grad_added_to_main_grad = True
                return make_dummy_wgrad(weight)
            """,
            line=4,
        ),
    ),
)


# -- the check: the paths to a mark that wrote nothing are found by
# analysis/unwritten_paths.py, the weights a mark names that nothing writes by
# analysis/unwritten_marks.py ------------------------------------------------------------
UNWRITTEN = (
    "`{name}` is marked grad_added_to_main_grad, but this function, which writes other "
    "weights' main_grad, never writes `{name}`'s: Megatron's hook then drops its gradient"
)
NO_WRITE = (
    "`{subject}` is marked grad_added_to_main_grad on a path where nothing wrote its main_grad "
    "(this function writes it on other paths): Megatron's hook then drops the gradient"
)
EMPTY_ARM = (
    "this arm writes nothing into `{subject}`'s main_grad, where its sibling arm does, and goes "
    "on to the grad_added_to_main_grad mark at line {line}: Megatron's hook then drops the "
    "gradient of this microbatch"
)
RETURNED = (
    "`{subject}` is marked grad_added_to_main_grad here, and the path goes on to return the "
    "real weight gradient `{name}` this function was handed (line {line}): Megatron's hook "
    "trusts the mark and skips `.grad`, so that gradient never reaches main_grad (or, where "
    "the caller wrote it, autograd gets it twice); mark only where the dummy is returned"
)
PRODUCT = (
    "`{subject}` is marked grad_added_to_main_grad here, and the path goes on to return the "
    "weight gradient this function computes (line {line}) with no main_grad written on the "
    "way: Megatron's hook trusts the mark and skips `.grad`, so that gradient is lost; mark "
    "only where main_grad was written"
)
DROPPED = (
    "`{subject}` is marked grad_added_to_main_grad, but the weight gradient `{name}` computed "
    "at line {line} went nowhere on the way here and never reaches main_grad: the gradient of "
    "this microbatch is lost"
)

NEVER_HANDED = (
    "`{subject}` is marked grad_added_to_main_grad, but this function hands main_grad to "
    "nothing: the weight gradient its GEMMs (the first at line {line}) compute goes "
    "elsewhere, and Megatron's hook then drops it"
)

WRAPPED = (
    "`{wrapper}` marks `{parameter}` grad_added_to_main_grad after `{helper}`, which writes no "
    "main_grad: it returns the weight gradient it computes, and Megatron's hook then drops it"
)


IN_FORWARD = (
    "`{subject}` is marked grad_added_to_main_grad in the forward, before any weight gradient "
    "exists: main_grad holds nothing of this microbatch yet, and Megatron's hook drops the "
    "real gradient the backward returns"
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" in source and any(w in source for w in identity_erasure.IDENTITY_WORDS):
        for test, target, how in identity_erasure.erased_by_identity(context):
            out.report(CODE, test, FROM_IDENTITY.format(target=target, how=how))
    if "grad_added_to_main_grad" not in source:
        return
    for found in context.shared(marking_wrappers.marked_helpers):
        out.report(CODE, found.site, WRAPPED.format(**found.__dict__))
    helpers = marking_helpers.MarkingHelpers(context)
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            marks = wgrad.marks(unit) if unit.survey.spells_grad_added else []
            if marks:
                for mark in forward_marks.premature_marks(unit):
                    subject = context.code(mark.subject).strip()
                    out.report(CODE, mark.stmt, IN_FORWARD.format(subject=subject))
            # a helper of the file that marks the weight it is handed marks it here too
            marks += marking_helpers.helper_marks(unit, helpers)
            if marks:
                facts = deliveries.Deliveries(unit)
                gradients = dropped_gradients.Gradients(unit, facts)
                for mark in marks:
                    found = unwritten_paths.missing_write(unit, facts, gradients, mark)
                    if found is not None:
                        _report_missing_write(unit, mark, found, out)
                for mark, name in unwritten_marks.unwritten(unit, marks):
                    out.report(CODE, mark.stmt, UNWRITTEN.format(name=name))
                for found in marked_product_returns.marked_products(unit, facts, marks):
                    subject = context.code(found.mark.subject).strip()
                    line = context.line_of(found.returned)
                    out.report(CODE, found.mark.stmt, PRODUCT.format(subject=subject, line=line))
                for found in marked_real_returns.marked_returns(unit):
                    subject = context.code(found.mark.subject).strip()
                    line = context.line_of(found.returned)
                    message = RETURNED.format(subject=subject, name=found.name, line=line)
                    out.report(CODE, found.mark.stmt, message)


def _report_missing_write(unit: Unit, mark: Mark, found: MissingWrite, out: Collector) -> None:
    subject = unit.context.code(mark.subject).strip()
    if found.kind == unwritten_paths.NO_WRITE and found.arm is not None:
        line = unit.context.line_of(mark.stmt)
        out.report(CODE, found.arm, EMPTY_ARM.format(subject=subject, line=line))
        return
    if found.kind == unwritten_paths.NO_WRITE:
        message = NO_WRITE.format(subject=subject)
    elif found.kind == unwritten_paths.DROPPED:
        dropped = found.gradient
        message = DROPPED.format(
            subject=subject, name=dropped.name, line=unit.context.line_of(dropped.node.owner)
        )
    else:
        line = unit.context.line_of(found.gemm)
        message = NEVER_HANDED.format(subject=subject, line=line)
    out.report(CODE, mark.stmt, message)


# -- the consumer side: a write inferred from where main_grad points ---------------------
FROM_IDENTITY = (
    "whether `{target}` is erased here is decided by where main_grad points ({how}), not by "
    "grad_added_to_main_grad: binding main_grad to a buffer says where a fused kernel would "
    "write, not that it wrote; an unwritten buffer keeps stale values and they are reduced as "
    "this microbatch's gradient"
)
