"""GMLP002: main_grad bookkeeping gated on a downgraded local flag."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
branches = LazyModule("..analysis.branches", __package__)
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
LITERALS = ("True", "False", "None")
flag_origin = LazyModule("..analysis.flag_origin", __package__)
delay_gated_dummy = LazyModule("..analysis.delay_gated_dummy", __package__)

CODE = "GMLP002"
RULE = Rule(
    code=CODE,
    classes=(7,),
    name="main-grad-bookkeeping-on-downgraded-flag",
    summary=(
        "`grad_added_to_main_grad = True`, a dummy wgrad, or None weight gradients are gated "
        "on a local flag that `overwrite_main_grad` can switch off (or the dummy on the "
        "split / delay mode)."
    ),
    flags=(
        "`grad_added_to_main_grad = True`, a dummy wgrad, or None/empty returned gradients gated "
        "on such a flag; a dummy-versus-computed weight gradient chosen on the split or delay "
        "mode, or a dummy made only under it over a returned name holding main_grad"
    ),
    explanation="""
        When the weight gradient went into main_grad, the producer must tell Megatron's DDP
        hook so (`param.grad_added_to_main_grad = True`) and hand autograd a dummy gradient
        (or None with delayed wgrad) instead of the real one. That depends on the op-level
        output-into-main-grad setting alone. Gated on a local accumulate flag that
        `overwrite_main_grad` has switched off, overwrite mode skips the bookkeeping: the
        real gradient is returned and the DDP hook adds it into main_grad a second time
        (the other half of Transformer Engine #2936).

        Reported when one side of the branch does bookkeeping the other side does not;
        calling a function of the module that marks `grad_added_to_main_grad` or makes the
        dummy counts as bookkeeping, whatever its name. The flag is followed with the same
        dataflow analysis as GMLP001 (into helpers, across forward/backward on `ctx`,
        through dicts of GEMM arguments entry by entry). When the gate is a helper's
        parameter that a caller of the module hands a downgraded flag
        (`_grad_for_autograd(weight, wgrad, accumulate)`), the finding points at that
        caller's argument (the first such caller in the file): the helper is right given a
        right argument, and the argument is what to change.

        Branches in any syntax count (issue #19, class 7, the seed shape in other syntax):
        `if` statements, conditional expressions (`dummy if accumulate else wgrad`, also
        inside a `return` or an argument), the older `accumulate and None or wgrad`, and a
        `match` on the flag (`case True:` / `case False:` / `case _:`, a literal tuple
        subject holding it, or a guard reading it; as GMLP001 reads it).
        The flag assigned the downgraded value itself (`w.grad_added_to_main_grad =
        accumulate`, or a `setattr` of it) is the same choice without a branch and is
        reported too (no fix: the right value depends on what was written).

        A side counts by what a name on it holds as well (since blind corpus 6): `return dx,
        (dummy if accumulate else wgrad)` or `if accumulate: wgrad = dummy`, where every
        definition of `dummy` reaching the branch made a dummy wgrad (a call named for it,
        or a function of the module that makes or marks one).

        Choices by indexing are branches on the index: `{True: dummy, False:
        wgrad}[accumulate]`, `{...}.get(accumulate)`, `(wgrad, dummy)[accumulate]` (a bool
        indexes as 0 or 1). A conditional expression in a comprehension whose test reads the
        comprehension's variable is a branch on the sequence it walks: `*(dummy(w) if a else
        g for w, a, g in zip(weights, acc, grads))` is gated on the elements of `acc`, and
        reported when `acc` was computed from `overwrite_main_grad`.

        A flag downgraded by `not is_first_microbatch` counts as one downgraded by
        `overwrite_main_grad` (GMLP001 says why): Transformer Engine's GroupedLinear with
        its custom-DDP block gated on `accumulate_wgrad_into_param_main_grad` hands back no
        dummy on each step's first microbatch.

        Where the gating local is the bookkeeping decision itself, defined from the
        protocol test and a downgraded flag (`use_dummy = hasattr(w, "grad_added_to_main_
        grad") and accumulate_wgrad_into_param_main_grad`), the finding is on the
        downgraded flag in that definition (blind corpus 12's ROCm `_Linear`): the wrong
        flag was chosen there, and every test reading the local only follows it.

        The split or delay mode is not the gate either (blind corpus 17, the zero-bubble
        Megatron fork: `grad_weight = _dummy_wgrad(weight, dtype) if wgrad_compute else
        grad_output.t().matmul(total_input)` with `wgrad_compute = not
        WeightGradStore.split_bw()`; analysis/delay_gated_dummy.py): a choice between a
        dummy (a call named for it, or a bookkeeping helper of the file) and a computed
        weight gradient, as a conditional expression or an `if` / `else` binding one name,
        whose test reads the mode (`delay_wgrad`, `split_bw`, `zero_bubble` in its
        text, or a local every binding of which does) hands back the real gradient on a
        deferred step, which the store also adds into main_grad, and a dummy on an
        immediate step without fusion. Dummy against None on that mode is right (the
        deferred work finishes the job) and left alone. Not seen: the mode read through a
        helper's return, and a dummy held by a local.

        The same gate without an `else` (blind corpus 24, a Transformer Engine fork's
        grouped-MLP backward): `if fc_op._accumulate_into_main_grad and delay_wgrad: w_list
        = get_dummy_wgrads_for_params(weights)`, where `w_list` is returned and a binding of
        it reaching the `if` holds main_grad (`w_list = [get_main_grad_from_param(w) for w
        in weights]`, or `.main_grad` itself) or a computed product: an immediate step
        keeps that binding and hands main_grad (or the real gradient) back as `.grad`,
        unmarked, after the GEMM wrote main_grad. Reported at the test. Not seen: the
        fall-through value bound in a helper.

        Not seen: the choice made inside a helper of another file; a first-microbatch
        downgrade spelled without `not`; an index that is an
        arithmetic of the flag (`grads[int(accumulate) * 2]`); a dict display keyed by
        anything but `True`/`False` (`0`/`1`).
    """,
    fix="""
        Gate on the op-level expression the flag was derived from, as Transformer Engine's
        fix did (`if fc_op._accumulate_into_main_grad and hasattr(...)`). Unsafe, for the
        same reason as GMLP001: guards folded into the local flag may be dropped.
    """,
    fix_summary=("gate on the op-level expression (unsafe)"),
    valid=(
        Example(
            """
            def finish_wgrad(op, weight, wgrad):
                accumulate = False
                if op.accumulate_into_main_grad:
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                gemm(wgrad, accumulate=accumulate)
                if op.accumulate_into_main_grad and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    zero = getattr(weight, "zero_out_wgrad", False)
                    wgrad = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
                return wgrad
            """
        ),
        Example(
            """
            def wgrad_list(op, params, delay_wgrad):
                accumulate = op.accumulate_into_main_grad
                if getattr(params[0], "overwrite_main_grad", False):
                    accumulate = False
                grads = [p.grad for p in params]
                if delay_wgrad:
                    grads = [None] * len(params)
                launch(grads, accumulate=accumulate)
                return grads
            """
        ),
        Example(
            """
            def deliver(weight, wgrad, dummy):
                if getattr(weight, "overwrite_main_grad", False):
                    weight.main_grad.copy_(wgrad)
                    weight.grad_added_to_main_grad = True
                else:
                    weight.main_grad.add_(wgrad)
                    weight.grad_added_to_main_grad = True
                return dummy
            """
        ),
        Example(
            """
            def backward(ctx, weight, x, dy):
                delay = WeightGradStore.split_bw()
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    weight.grad_added_to_main_grad = True
                grad_weight = None if delay else make_dummy_wgrad(weight)
                return grad_weight
            """
        ),
        Example(
            """
            def compute_grad_params(fc_op, ctx, weights, grouped_x, grouped_dy):
                w_list = [None] * len(weights)
                if ctx.weight_requires_grad:
                    if fc_op._accumulate_into_main_grad:
                        w_list = [get_main_grad_from_param(w) for w in weights]
                    else:
                        w_list = [torch.empty_like(w) for w in weights]
                    output = w_list
                    delay_wgrad = fc_op.wgrad_store.delay_wgrad_compute()
                    if delay_wgrad:
                        fc_op.wgrad_store.put([grouped_x, grouped_dy, output], gemm)
                    else:
                        gemm(grouped_x, grouped_dy, output)
                    if fc_op._accumulate_into_main_grad:
                        w_list = get_dummy_wgrads_for_params(weights)
                    elif delay_wgrad:
                        w_list = [None] * len(weights)
                return w_list
            """,
        ),
    ),
    invalid=(
        Example(
            """
            def finish_wgrad(op, weight, wgrad):
                accumulate = False
                if op.accumulate_into_main_grad:
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                gemm(wgrad, accumulate=accumulate)
                if accumulate and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    zero = getattr(weight, "zero_out_wgrad", False)
                    wgrad = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
                return wgrad
            """,
            line=6,
            fixed="""
            def finish_wgrad(op, weight, wgrad):
                accumulate = False
                if op.accumulate_into_main_grad:
                    accumulate = not getattr(weight, "overwrite_main_grad", False)
                gemm(wgrad, accumulate=accumulate)
                if op.accumulate_into_main_grad and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    zero = getattr(weight, "zero_out_wgrad", False)
                    wgrad = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
                return wgrad
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def wgrad_list(op, params, delay_wgrad):
                accumulate = op.accumulate_into_main_grad
                if getattr(params[0], "overwrite_main_grad", False):
                    accumulate = False
                grads = [p.grad for p in params]
                if delay_wgrad or accumulate:
                    grads = [None] * len(params)
                launch(grads, accumulate=accumulate)
                return grads
            """,
            line=6,
            fixed="""
            def wgrad_list(op, params, delay_wgrad):
                accumulate = op.accumulate_into_main_grad
                if getattr(params[0], "overwrite_main_grad", False):
                    accumulate = False
                grads = [p.grad for p in params]
                if delay_wgrad or op.accumulate_into_main_grad:
                    grads = [None] * len(params)
                launch(grads, accumulate=accumulate)
                return grads
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def dummies(op, params):
                grads = []
                for p in params:
                    accumulate = op.accumulate_into_main_grad
                    accumulate &= not getattr(p, "overwrite_main_grad", False)
                    grads.append(make_dummy_wgrad(p) if accumulate else p.grad)
                return grads
            """,
            line=6,
            fixed="""
            def dummies(op, params):
                grads = []
                for p in params:
                    accumulate = op.accumulate_into_main_grad
                    accumulate &= not getattr(p, "overwrite_main_grad", False)
                    grads.append(make_dummy_wgrad(p) if op.accumulate_into_main_grad else p.grad)
                return grads
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def weight_grads(op, params):
                accumulate = op.accumulate_into_main_grad and not params[0].overwrite_main_grad
                if accumulate:
                    return []
                return [p.grad for p in params]
            """,
            line=3,
            fixed="""
            def weight_grads(op, params):
                accumulate = op.accumulate_into_main_grad and not params[0].overwrite_main_grad
                if op.accumulate_into_main_grad:
                    return []
                return [p.grad for p in params]
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def finish(op, weight, wgrad, dgrad):
                accumulate = op.accumulate_into_main_grad and not weight.overwrite_main_grad
                gemm(wgrad, out=weight.main_grad, accumulate=accumulate)
                return dgrad, accumulate and None or wgrad
            """,
            line=4,
            fixed="""
            def finish(op, weight, wgrad, dgrad):
                accumulate = op.accumulate_into_main_grad and not weight.overwrite_main_grad
                gemm(wgrad, out=weight.main_grad, accumulate=accumulate)
                return dgrad, op.accumulate_into_main_grad and None or wgrad
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def mark(weight):
                if not getattr(weight, "overwrite_main_grad", False):
                    weight.grad_added_to_main_grad = True
            """,
            line=2,
        ),
        Example(
            """
            def finish(ctx, weight, wgrad):
                accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
                gemm(wgrad, out=weight.main_grad, accumulate=accumulate)
                weight.grad_added_to_main_grad = accumulate
                return make_dummy_wgrad(weight)
            """,
            line=4,
        ),
        Example(
            """
            def backward(ctx, grads, ws):
                acc = [ctx.fuse and not w.overwrite_main_grad for w in ws]
                return (None, *(make_dummy_wgrad(w) if a else g for w, a, g in zip(ws, acc, grads)))
            """,
            line=3,
        ),
        Example(
            """
            def backward(ctx, weight, x, dy):
                wgrad_compute = not WeightGradStore.split_bw()
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    weight.grad_added_to_main_grad = True
                grad_weight = make_dummy_wgrad(weight) if wgrad_compute else dy.t().matmul(x)
                return grad_weight
            """,
            line=6,
        ),
        Example(
            """
            def compute_grad_params(fc_op, ctx, weights, grouped_x, grouped_dy):
                w_list = [None] * len(weights)
                if ctx.weight_requires_grad:
                    if fc_op._accumulate_into_main_grad:
                        w_list = [get_main_grad_from_param(w) for w in weights]
                    else:
                        w_list = [torch.empty_like(w) for w in weights]
                    output = w_list
                    delay_wgrad = fc_op.wgrad_store.delay_wgrad_compute()
                    if delay_wgrad:
                        fc_op.wgrad_store.put([grouped_x, grouped_dy, output], gemm)
                    else:
                        gemm(grouped_x, grouped_dy, output)
                    if fc_op._accumulate_into_main_grad and delay_wgrad:
                        w_list = get_dummy_wgrads_for_params(weights)
                    elif delay_wgrad:
                        w_list = [None] * len(weights)
                return w_list
            """,
            line=14,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
PROBLEM = (
    "main_grad bookkeeping ({kinds}) is gated on {cause}: in overwrite mode the hook sees no "
    "grad_added_to_main_grad and adds the real gradient again"
)


FLAG_IS_LOCAL = (
    "grad_added_to_main_grad is set to {cause}: in overwrite mode it says False although "
    "main_grad was written, and the hook adds the real gradient again; set it from the "
    "op-level setting"
)


DELAY_GATED = (
    "the dummy-versus-real weight gradient is chosen on `{test}` ({cause}), the step's split "
    "or delay mode, not on where the gradient goes: a deferred step hands back the real "
    "gradient while the store also adds it into main_grad, and an immediate step without "
    "fusion hands back a dummy for a gradient written nowhere; choose on the op-level "
    "fusion setting"
)

DELAY_GATED_KEPT = (
    "the dummy for `{name}` is made only `if {test}`, a test that reads the step's split or "
    "delay mode ({cause}): whether autograd gets a dummy depends on where the gradient goes, "
    "not on when it is computed; on the runs that take the test the other way `{name}` "
    "keeps main_grad or the computed gradient, or a dummy stands for a gradient that goes "
    "nowhere; choose on the op-level fusion setting"
)


def check(context: ModuleContext, out: Collector) -> None:
    for unit in context.units:
        survey = unit.survey
        if survey.spells_main_grad or survey.spells_grad_added:
            for test, cause, kept in delay_gated_dummy.delay_gated_choices(unit):
                template = DELAY_GATED if kept is None else DELAY_GATED_KEPT
                text = out.text(test)
                out.report(CODE, test, template.format(test=text, cause=cause, name=kept))
    if "grad_added_to_main_grad" in context.source and "overwrite" in context.source:
        for unit in context.units_touching_overwrite():
            if unit.survey.spells_grad_added:
                _check_flag_values(unit, out)
    for branch in context.shared(branches.suspect_branches):
        # A branch that also moves the destination is GMLP001's (one finding per branch).
        kinds = branch.uneven_bookkeeping
        if kinds and not branch.moves_destination:
            gate = flag_origin.gate_of(branch, out)
            problem = PROBLEM.format(kinds=", ".join(kinds), cause=gate.cause)
            out.report(CODE, gate.anchor, gate.message(problem), gate.fix)


def _check_flag_values(unit, out: Collector) -> None:
    """``w.grad_added_to_main_grad = <value overwrite_main_grad can switch off>``."""
    for stmt, _ in unit.statements():
        found = patterns.attribute_set(stmt, patterns.GRAD_ADDED)
        if found is None or (isinstance(found[1], cst.Name) and found[1].value in LITERALS):
            continue
        node = unit.node_for(stmt)
        if node is not None and unit.overwrite.expr(found[1], node):
            cause = f"`{out.text(found[1])}`, a value `overwrite_main_grad` can switch off"
            out.report(CODE, found[1], FLAG_IS_LOCAL.format(cause=cause))
