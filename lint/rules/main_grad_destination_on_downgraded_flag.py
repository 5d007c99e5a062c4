"""GMLP001: main_grad chosen as the wgrad destination under a downgraded local flag."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
branches = LazyModule("..analysis.branches", __package__)
flag_origin = LazyModule("..analysis.flag_origin", __package__)

CODE = "GMLP001"
RULE = Rule(
    code=CODE,
    classes=(7,),
    name="main-grad-destination-on-downgraded-flag",
    summary=(
        "main_grad (or a name bound to it) is chosen as the weight-gradient output under a "
        "condition on a local flag that `overwrite_main_grad` can switch off."
    ),
    flags=(
        "main_grad (or a name, view, list or wrapper holding it) chosen as the wgrad destination "
        "under a flag that `overwrite_main_grad` can switch off"
    ),
    explanation="""
        Whether the weight gradient goes into `param.main_grad` is an op-level decision
        (`accumulate_into_main_grad`, Megatron's `fuse_wgrad_accumulation`). A parameter's
        `overwrite_main_grad` (Megatron-FSDP) only decides whether the GEMM accumulates into
        main_grad or overwrites it. Code that copies the op-level setting into a local flag,
        lets `overwrite_main_grad` switch that flag off, and then decides on the same flag
        whether main_grad is the output, writes the gradient into a scratch buffer in
        overwrite mode: main_grad keeps stale values and the gradient is lost
        (Transformer Engine #2936 in the fused grouped MLP, #2923 in GroupedLinear).

        The flag is followed through the function with a reaching-definitions analysis:
        if/else, loops (a reassignment at the bottom of a loop reaches the top), early
        return/continue, conditional expressions and compound tests. A flag that is only
        copied from the op-level setting, or a downgraded flag used only as the GEMM's
        `accumulate=`/`beta=`, is not reported, nor one choosing the accumulator input of a
        call that is handed the same buffer as its output (DeepGEMM's `fp8_gemm_nt(a, b,
        main_grad, c=main_grad if accumulate else None)`); nor is a branch whose two sides
        both write main_grad (`copy_` versus `add_`). Reported: one side of the branch makes
        main_grad (or a name holding it, a view of it, a list of its views, a wrapper built on
        it) the output and the other does not, or one side swaps a name that surely holds
        main_grad for a fresh buffer (`dest = torch.empty_like(dest)`). An `if` whose body ends in
        `return`/`continue` has the code after it as its other side; one whose body raises
        is a guard, not a choice, and is not judged. A choice by indexing counts as a
        branch on the index (`{True: main_grad_out, False: None}[flag]`, `.get(flag)`,
        `(a, b)[flag]`, `analysis/choices.py`), and a conditional expression inside a
        comprehension whose test reads the comprehension's own variable is a branch on the
        sequence that variable walks (`... if a else ... for w, a in zip(weights, flags)`).

        A `match` on the flag is a branch with more sides (since the probes of branch
        h-probes, `analysis/match_arms.py`): `match accumulate: case True: out =
        w.main_grad; case _: out = scratch`. Two arms are sides of one choice when they ask
        different things of the flag (their patterns at the subject's flag, `case (True,
        _)` against `case (False, _)` for `match (accumulate, other)`, or a guard reading it:
        `case "fused" if accumulate:`) and do different things with main_grad; an arm
        reached when an earlier one did not match asks the converse. When no arm surely
        runs (no `case _:`, and the arms do not cover True and False) the subject matching
        none is one more side, doing nothing (or what follows the match, when an arm
        returns). The fix gates the subject's flag on the op-level expression, as for an
        `if`.

        The flag is also followed out of the function that computes it: into a helper of
        the same module that receives it as an argument, from an autograd Function's
        forward to its backward on `ctx`, and entry by entry through a dict literal of GEMM
        arguments (reading its `"ub"` entry is not reading its `"accumulate"` entry). A
        helper that returns a value computed from `overwrite_main_grad` (Transformer
        Engine's `get_accumulate_flag_in_param`) is recognised by its body when it is
        defined in the file or in another file linted in the same run. A branch of a
        helper gated on its parameter is reported at the first caller's argument that hands
        it the downgraded flag: the helper is right given a right argument.

        Transformer Engine's other accumulate-or-overwrite switch counts as
        `overwrite_main_grad` does (since blind corpus 7): on a step's first microbatch the
        GEMM overwrites main_grad, so `accumulate = ctx.fuse_wgrad_accumulation and not
        ctx.is_first_microbatch` may choose the GEMM's `accumulate=` only; `out=weight.main_grad
        if accumulate else None` loses the first microbatch's gradient (ROCm's TE `_Linear`).
        Only the negation `not is_first_microbatch` starts the taint: a plain test on the
        switch guards weight caches and workspace updates.

        As GMLP002 does, a gating local defined from `hasattr(w, "grad_added_to_main_grad")`
        and a downgraded flag is reported at that flag in its definition.

        Not seen: a destination chosen in a helper function of the file that is handed the
        flag as an argument (each function is judged alone; issue #19 mutations); a
        first-microbatch downgrade spelled without `not` (`if is_first_microbatch:
        accumulate = False`); a `match` subject that holds the flag other than as itself or
        an element of a literal tuple (`match ctx.flags:` with `case {"acc": True}:`), and
        a downgrade made by a guard alone (`case _ if overwrite: accumulate = False`).
    """,
    fix="""
        Gate on the op-level expression the flag was derived from (for example
        `fc_op._accumulate_into_main_grad`). Unsafe: the local flag may also have folded in
        other guards (such as `ctx.weight_requires_grad`) that the rewritten test drops, so
        review the result. No fix is offered when the origin is not one expression.
    """,
    fix_summary=("gate on the op-level expression (unsafe)"),
    valid=(
        Example(
            """
            def compute_wgrad(op, weight, x, dy):
                accumulate = False
                if op.accumulate_into_main_grad:
                    out = weight.main_grad
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                else:
                    out = torch.empty_like(weight)
                gemm(x, dy, out=out, accumulate=accumulate)
                return out
            """
        ),
        Example(
            """
            def compute_wgrad(op, weight, x, dy):
                output_into_main_grad = op.accumulate_into_main_grad
                if output_into_main_grad:
                    out = weight.main_grad
                else:
                    out = torch.empty_like(weight)
                gemm(x, dy, out=out)
                return out
            """
        ),
        Example(
            """
            def deliver(weight, wgrad):
                main_grad = weight.main_grad
                if getattr(weight, "overwrite_main_grad", False):
                    main_grad.copy_(wgrad)
                else:
                    main_grad.add_(wgrad)
            """
        ),
        Example(
            """
            def wgrad_outputs(op, params):
                outputs = []
                for p in params:
                    accumulate = op.accumulate_into_main_grad
                    if accumulate:
                        outputs.append(p.main_grad)
                    else:
                        outputs.append(torch.empty_like(p))
                    if getattr(p, "overwrite_main_grad", False):
                        accumulate = False
                        continue
                return outputs
            """
        ),
        Example(
            """
            def deliver(op, weight, x, dy):
                if op.accumulate_into_main_grad:
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                    beta = 1.0 if accumulate else 0.0
                    torch.addmm(weight.main_grad, dy.t(), x, beta=beta, out=weight.main_grad)
            """
        ),
        Example(
            """
            def deliver(ctx, weight, x_fp8, dy_fp8):
                if ctx.accumulate_into_main_grad:
                    main_grad = weight.main_grad
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                    deep_gemm.fp8_gemm_nt(
                        dy_fp8, x_fp8, main_grad, c=main_grad if accumulate else None
                    )
            """
        ),
    ),
    invalid=(
        Example(
            """
            def compute_wgrad(op, weight, x, dy):
                accumulate = False
                out = None
                if op.accumulate_into_main_grad:
                    main_grad = weight.main_grad
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                    if accumulate:
                        out = main_grad
                if out is None:
                    out = torch.empty_like(weight)
                gemm(x, dy, out=out, accumulate=accumulate)
                return out
            """,
            line=7,
            fixed="""
            def compute_wgrad(op, weight, x, dy):
                accumulate = False
                out = None
                if op.accumulate_into_main_grad:
                    main_grad = weight.main_grad
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                    if op.accumulate_into_main_grad:
                        out = main_grad
                if out is None:
                    out = torch.empty_like(weight)
                gemm(x, dy, out=out, accumulate=accumulate)
                return out
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def wgrad_into_main_grad(op, params, wgrads):
                accumulate = op.accumulate_into_main_grad
                outputs = []
                for p, w in zip(params, wgrads):
                    if accumulate:
                        outputs.append(p.main_grad)
                    else:
                        outputs.append(w)
                    accumulate = not getattr(p, "overwrite_main_grad", False)
                return outputs
            """,
            line=5,
            fixed="""
            def wgrad_into_main_grad(op, params, wgrads):
                accumulate = op.accumulate_into_main_grad
                outputs = []
                for p, w in zip(params, wgrads):
                    if op.accumulate_into_main_grad:
                        outputs.append(p.main_grad)
                    else:
                        outputs.append(w)
                    accumulate = not getattr(p, "overwrite_main_grad", False)
                return outputs
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def wgrad_buffer(op, w):
                accumulate = op.accumulate_into_main_grad and not w.overwrite_main_grad
                return w.main_grad if accumulate else torch.empty_like(w)
            """,
            line=3,
            fixed="""
            def wgrad_buffer(op, w):
                accumulate = op.accumulate_into_main_grad and not w.overwrite_main_grad
                return w.main_grad if op.accumulate_into_main_grad else torch.empty_like(w)
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def pick_output(op, weight, scratch):
                output_flag = op.accumulate_into_main_grad
                if getattr(weight, "overwrite_main_grad", False):
                    output_flag = False
                buffer = weight.main_grad
                grouped = buffer.view(-1)
                if output_flag:
                    out = grouped
                else:
                    out = scratch
                return out
            """,
            line=7,
            fixed="""
            def pick_output(op, weight, scratch):
                output_flag = op.accumulate_into_main_grad
                if getattr(weight, "overwrite_main_grad", False):
                    output_flag = False
                buffer = weight.main_grad
                grouped = buffer.view(-1)
                if op.accumulate_into_main_grad:
                    out = grouped
                else:
                    out = scratch
                return out
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def deliver(params, wgrads):
                for p, wgrad in zip(params, wgrads):
                    accumulate = not getattr(p, "overwrite_main_grad", False)
                    dest = p.main_grad
                    if not accumulate:
                        dest = torch.empty_like(dest)
                    gemm(wgrad, out=dest, accumulate=accumulate)
            """,
            line=5,
        ),
        Example(
            """
            def pick_output(weight, scratch):
                if getattr(weight, "overwrite_main_grad", False):
                    return scratch
                return weight.main_grad
            """,
            line=2,
        ),
        Example(
            """
            def wgrad_out(op, weight, ctx):
                accumulate = op.accumulate_into_main_grad
                if getattr(weight, "overwrite_main_grad", False):
                    accumulate = False
                match (accumulate, ctx.weight_requires_grad):
                    case (True, True):
                        return weight.main_grad
                    case (False, True):
                        return torch.empty_like(weight)
                return None
            """,
            line=5,
            fixed="""
            def wgrad_out(op, weight, ctx):
                accumulate = op.accumulate_into_main_grad
                if getattr(weight, "overwrite_main_grad", False):
                    accumulate = False
                match (op.accumulate_into_main_grad, ctx.weight_requires_grad):
                    case (True, True):
                        return weight.main_grad
                    case (False, True):
                        return torch.empty_like(weight)
                return None
            """,
            applicability="unsafe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
PROBLEM = (
    "main_grad is chosen as the weight-gradient destination under {cause}: in overwrite mode "
    "the gradient goes to scratch memory and main_grad keeps stale values; only the GEMM's "
    "accumulate flag may follow overwrite_main_grad"
)


def check(context: ModuleContext, out: Collector) -> None:
    for branch in context.shared(branches.suspect_branches):
        if branch.moves_destination:
            gate = flag_origin.gate_of(branch, out)
            out.report(CODE, gate.anchor, gate.message(PROBLEM.format(cause=gate.cause)), gate.fix)
