"""GMLP007: a weight's main_grad bookkeeping reads a flag from a different weight."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import UNSAFE, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.marked_block_reads import BlockRead
    from ..analysis.module import ModuleContext, Unit
    from ..analysis.overwrite_flag_reads import ArgumentRead

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
module_provenance = LazyModule("..analysis.module_provenance", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)
local_aliases = LazyModule("..analysis.local_aliases", __package__)
marked_block_reads = LazyModule("..analysis.marked_block_reads", __package__)
overwrite_flag_reads = LazyModule("..analysis.overwrite_flag_reads", __package__)
pasted_names = LazyModule("..analysis.pasted_names", __package__)

CODE = "GMLP007"
RULE = Rule(
    code=CODE,
    classes=(1, 3),
    name="main-grad-flag-from-other-weight",
    summary=(
        "Where one weight's main_grad is written or marked, `zero_out_wgrad`, "
        "`overwrite_main_grad`, `grad_added_to_main_grad` or main_grad is read from a "
        "different weight."
    ),
    flags=(
        "`zero_out_wgrad` / `overwrite_main_grad` / main_grad read from another weight in the "
        "block that marks one weight, or in the GEMM call or kwargs dict whose `out` is one "
        "weight's main_grad; `overwrite_main_grad` read from `w` where the Parameter is "
        "`origin_w`"
    ),
    explanation="""
        The per-parameter attributes belong to one parameter: `zero_out_wgrad` says whether
        *its* dummy must be zeros, `overwrite_main_grad` whether *its* main_grad is
        overwritten. Reading them from another weight mixes two parameters' settings:

        * Transformer Engine #548: the FC1 and FC2 bookkeeping blocks of LayerNormMLP marked
          `fc1_weight` / `fc2_weight` but read `getattr(weight, "zero_out_wgrad")`;
        * Transformer Engine #2549: FC2's wgrad GEMM arguments had
          `"out": fc2_weight.main_grad` but `"accumulate"` computed from
          `getattr(fc1_weight, "overwrite_main_grad")`, and FC1's the reverse.

        Checked: the block that sets `X.grad_added_to_main_grad = True` (with the `hasattr`
        test guarding it) must read `zero_out_wgrad`, `grad_added_to_main_grad` and main_grad
        only from X (or another weight it marks too); a call or dict literal whose `out` is
        `A.main_grad` must read `overwrite_main_grad` only from A. Names are compared by the
        weight they name: `origin_fc1_weight`, `fc1_weight_param` and `ctx.fc1_weight` all
        name `fc1_weight`. The call's arguments are followed into the locals they read, two
        deep, through every binding that reaches the call (an assignment or a walrus: `if
        (o := getattr(wq, "overwrite_main_grad", False)): ...` then `general_gemm(...,
        out=param.main_grad, accumulate=not o)`; per expert, `wq` the copy zipped beside
        `param`); such a read is reported once, with no fix (the local may feed other calls).

        Which object (issue #19, class 1): two names of one weight are still two objects
        when one is the Parameter and the other stands in for it. The provenance analysis
        (analysis/provenance.py) classifies names as the Parameter (`origin_*`, `*_param`,
        `Parameter(...)`, a weakref of those), saved (`ctx` attributes, `ctx.saved_tensors`,
        `restore_from_saved`), quantized (`*_fp8`, results of quantize/cast calls) or
        materialized (all-gather results, `full_weight`), following assignments; a plain
        name whose `origin_` twin is in scope is a stand-in. Reading a flag or main_grad
        from the stand-in of the weight the block marks is reported. So is any read of
        `overwrite_main_grad` from `w` (or `w[i]`) in a function that also names the
        Parameter `origin_w`, unless the function copies `origin_w = w` (then `w` is the
        Parameter until rebound): the FP8 or FP4 copy of the weight does not carry the flag,
        so `getattr(w, "overwrite_main_grad", False)` answers False and the GEMM accumulates
        where it should overwrite. Anywhere in a function, `overwrite_main_grad` read from a
        name known to be a quantized or gathered copy (by its producer, a helper of the
        module that returns such copies, a `ctx` attribute forward stores a copy in, or its
        spelling) is reported too, with no fix (the Parameter's name is not known there);
        so is a read from a name that is a quantized copy on one path only (`wm = weight`,
        then `if fp8: wm, ws = quantize_weight(weight)`): the FP8 path reads the default.
        And from a local bound only to a cast of another name (`weight_c =
        weight.to(accum_dtype)`, `.float()`, `.half()`, `.bfloat16()`, `.type(...)`,
        `cast_if_needed(weight, dtype)`; blind corpus 26): a cast hands back the Parameter
        itself when the dtype matches and a copy without its flags when it differs, so the
        read is right only where the cast does nothing.

        The mark on a stand-in beside its Parameter (blind corpus 26, quack's linear: the
        GEMM writes `weight_og.main_grad` and the block marks `weight`, the tensor converted
        for autocast, where `weight_og` spells the Parameter as `origin_weight` and
        `weight_param` do): the block reads the Parameter's main_grad and marks the copy, so
        the mark is reported, with the fix `mark weight_og`.

        Left alone: `zero_out_wgrad` read from another object in a function that runs a
        grouped (per-expert) GEMM. Megatron sets that flag only on the shared embedding /
        output weight, never on an expert's weight, so there the stand-in and the Parameter
        answer alike (four such reads at MindSpeed's head, judged harmless).

        Not seen: objects passed through helpers in other files, containers of weights,
        and stand-ins whose names and producers say nothing (a plain `weight` with no
        `origin_weight` beside it is taken to be the Parameter).

        A GEMM moved into a helper function of the file that writes the main_grad of one
        weight it is handed (`_accumulate(x, dy, p, over)`, analysis/writing_helpers.py) is
        read as that weight's write at the call: the call's other arguments are asked, as a
        GEMM's are, whether they read `overwrite_main_grad` from another weight. Not seen:
        a GEMM into a stand-in's main_grad moved into such a helper (the helper is judged
        alone; GMLP037 reports the copy handed to it).

        The mark itself on the wrong weight (class 3, blind corpus 7: MindSpeed-LLM's fused
        MLP backward marking `weight_down` in `weight_up`'s block): when every read of the
        block (its `hasattr` guard, the dummy shaped from main_grad, `zero_out_wgrad`), at
        least two, names one weight W and none names the marked X, the block is W's
        (analysis/block_weight.py) and the mark is reported, once, with the fix `mark W`:
        W's main_grad was written and W hands back a dummy, but W stays unmarked and the DDP
        hook adds the dummy into its main_grad. A block that reads X too keeps the report on
        the foreign read (Transformer Engine #548). Not seen: a block with a single read, and
        a mark in a block that reads nothing.
    """,
    fix="""
        Read the attribute from the weight being marked or written (unsafe: review that this
        is the parameter object, not a restored copy).
    """,
    fix_summary="read it from the weight being marked or written (unsafe)",
    valid=(
        Example(
            """
            def backward(ctx, grad_outputs):
                x, weight, original_weight = ctx.saved_tensors
                npu_groupmatmul_add_fp32(x, grad_outputs, ctx.group_list, original_weight.main_grad)
                if hasattr(original_weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = torch.zeros(weight.shape, dtype=x.dtype)
                    else:
                        grad_weight = torch.empty(weight.shape, dtype=x.dtype)
                    original_weight.grad_added_to_main_grad = True
                return None, grad_weight
            """
        ),
        Example(
            """
            def forward(ctx, weight, fp8):
                origin_weight = weight
                if fp8:
                    weightmat = quantize(weight)
                ctx.overwrites = getattr(weight, "overwrite_main_grad", False)
            """
        ),
        Example(
            """
            def finish(ctx, fc1_weight, origin_fc1_weight):
                if ctx.fuse and hasattr(origin_fc1_weight, "grad_added_to_main_grad"):
                    origin_fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(origin_fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """
        ),
        Example(
            """
            def finish(ctx, fc1_weight):
                if ctx.fuse and hasattr(fc1_weight, "grad_added_to_main_grad"):
                    fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """
        ),
        Example(
            """
            def fc2_kwargs(fuse, fc2_weight, accumulate):
                return {
                    "accumulate": accumulate and not getattr(fc2_weight, "overwrite_main_grad", 0),
                    "out": fc2_weight.main_grad if fuse else None,
                }
            """
        ),
        Example(
            """
            def forward(ctx, weight, fp8, quantizer):
                weightmat = weight
                if fp8:
                    weightmat, workspace = quantize_weight(tensor=weight, quantizer=quantizer)
                ctx.weight_ref = weakref.ref(weight)
                ctx.overwrites_main_grad = getattr(weight, "overwrite_main_grad", False)
                return weightmat
            """
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                weight_c = weight.to(ctx.accum_dtype)
                wgrad = dy.t().to(weight_c.dtype) @ x.to(weight_c.dtype)
                if getattr(weight, "overwrite_main_grad", False):
                    weight.main_grad.copy_(wgrad)
                else:
                    weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, grad_output, main_grad):
                weight, inputmat = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.origin_weight_ref()
                kwargs = {
                    "accumulate": not getattr(weight, "overwrite_main_grad", False),
                    "out": main_grad,
                }
                return general_gemm(inputmat, grad_output, **kwargs)
            """,
            line=5,
            fixed="""
            def backward(ctx, grad_output, main_grad):
                weight, inputmat = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.origin_weight_ref()
                kwargs = {
                    "accumulate": not getattr(origin_weight, "overwrite_main_grad", False),
                    "out": main_grad,
                }
                return general_gemm(inputmat, grad_output, **kwargs)
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def finish(ctx, weight, fc1_weight):
                if ctx.fuse and hasattr(fc1_weight, "grad_added_to_main_grad"):
                    fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            line=4,
            fixed="""
            def finish(ctx, weight, fc1_weight):
                if ctx.fuse and hasattr(fc1_weight, "grad_added_to_main_grad"):
                    fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def fc2_kwargs(fuse, fc1_weight, fc2_weight, accumulate):
                return {
                    "accumulate": accumulate and not getattr(fc1_weight, "overwrite_main_grad", 0),
                    "out": fc2_weight.main_grad if fuse else None,
                }
            """,
            line=3,
            fixed="""
            def fc2_kwargs(fuse, fc1_weight, fc2_weight, accumulate):
                return {
                    "accumulate": accumulate and not getattr(fc2_weight, "overwrite_main_grad", 0),
                    "out": fc2_weight.main_grad if fuse else None,
                }
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def finish(ctx, fc1_weight, origin_fc1_weight):
                if ctx.fuse and hasattr(origin_fc1_weight, "grad_added_to_main_grad"):
                    origin_fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            line=4,
            fixed="""
            def finish(ctx, fc1_weight, origin_fc1_weight):
                if ctx.fuse and hasattr(origin_fc1_weight, "grad_added_to_main_grad"):
                    origin_fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(origin_fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def wgrad_kwargs(ctx, weight, accumulate):
                weight_fp8 = quantize(weight)
                return {
                    "accumulate": accumulate and not getattr(weight_fp8, "overwrite_main_grad", 0),
                    "out": weight.main_grad,
                }
            """,
            line=4,
            fixed="""
            def wgrad_kwargs(ctx, weight, accumulate):
                weight_fp8 = quantize(weight)
                return {
                    "accumulate": accumulate and not getattr(weight, "overwrite_main_grad", 0),
                    "out": weight.main_grad,
                }
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def backward(ctx, dy, x):
                origin_weight = ctx.origin_weight
                full_weight = all_gather_along_first_dim(origin_weight)
                accumulate = not getattr(full_weight, "overwrite_main_grad", False)
                general_gemm(x, dy, out=origin_weight.main_grad, accumulate=accumulate)
                return full_weight
            """,
            line=4,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.weight_object
                origin_weight.main_grad.add_(dy.t() @ x)
                if hasattr(origin_weight, "grad_added_to_main_grad"):
                    origin_weight.grad_added_to_main_grad = True
                    z = getattr(origin_weight, "zero_out_wgrad", False)
                    return None, get_dummy_wgrad(list(weight.main_grad.shape), dy.dtype, z)
                return None, None
            """,
            line=8,
            fixed="""
            def backward(ctx, dy):
                x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.weight_object
                origin_weight.main_grad.add_(dy.t() @ x)
                if hasattr(origin_weight, "grad_added_to_main_grad"):
                    origin_weight.grad_added_to_main_grad = True
                    z = getattr(origin_weight, "zero_out_wgrad", False)
                    return None, get_dummy_wgrad(list(origin_weight.main_grad.shape), dy.dtype, z)
                return None, None
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def wgrad(params, casts, xs, dys):
                for p, c, x, dy in zip(params, casts, xs, dys):
                    if over := getattr(c, "overwrite_main_grad", False):
                        log_once("main_grad is overwritten")
                    general_gemm(x, dy, out=p.main_grad, accumulate=not over)
            """,
            line=3,
        ),
        Example(
            """
            def forward(ctx, weight, fp8, quantizer):
                weightmat = weight
                if fp8:
                    weightmat, workspace = quantize_weight(tensor=weight, quantizer=quantizer)
                ctx.weight_ref = weakref.ref(weight)
                ctx.overwrites_main_grad = getattr(weightmat, "overwrite_main_grad", False)
                return weightmat
            """,
            line=6,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                weight_c = weight.to(ctx.accum_dtype)
                wgrad = dy.t().to(weight_c.dtype) @ x.to(weight_c.dtype)
                if getattr(weight_c, "overwrite_main_grad", False):
                    weight.main_grad.copy_(wgrad)
                else:
                    weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """,
            line=5,
        ),
        Example(
            """
            def compute_weight_grad(ctx, dout, x, weight, weight_og):
                main_grad = weight_og.main_grad
                over = getattr(weight_og, "overwrite_main_grad", False)
                gemm(dout.T, x, out=main_grad, accumulate=not over)
                weight.grad_added_to_main_grad = True
                return make_dummy_wgrad(weight_og)
            """,
            line=5,
            fixed="""
            def compute_weight_grad(ctx, dout, x, weight, weight_og):
                main_grad = weight_og.main_grad
                over = getattr(weight_og, "overwrite_main_grad", False)
                gemm(dout.T, x, out=main_grad, accumulate=not over)
                weight_og.grad_added_to_main_grad = True
                return make_dummy_wgrad(weight_og)
            """,
            applicability="unsafe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
IN_BLOCK = (
    "this block marks `{subject}` with grad_added_to_main_grad but reads {what} from "
    "`{other}`, another weight: the bookkeeping mixes two parameters' settings; read it from "
    "`{subject}`"
)
MISPLACED_MARK = (
    "this block is `{other}`'s (its guard, its dummy and its flags all name `{other}`) but "
    "marks `{subject}` with grad_added_to_main_grad: `{other}` keeps its dummy unmarked and "
    "the DDP hook adds it into `{other}.main_grad`; mark `{other}`"
)
MARK_FIX = "Mark `{}`"
STAND_IN_BLOCK = (
    "this block marks the Parameter `{subject}` with grad_added_to_main_grad but reads {what} "
    "from `{other}`, a tensor standing in for it (restored, quantized or gathered): "
    "per-parameter attributes live on the Parameter only; read it from `{subject}`"
)
STAND_IN_CALL = (
    "`{other}.overwrite_main_grad` is read from a tensor standing in for `{subject}` "
    "(restored, quantized or gathered), which does not carry the Parameter's flag; read it "
    "from `{subject}`"
)
STAND_IN_COPY = (
    "`overwrite_main_grad` is read from `{other}`, a quantized, gathered or cast copy of the "
    "weight on at least one path, which never carries the Parameter's flag: the read answers its "
    "default; read it from the Parameter"
)
IN_CALL = (
    "`{other}.overwrite_main_grad` decides how `{subject}.main_grad` is written: the GEMM "
    "accumulates or overwrites by another weight's setting; read it from `{subject}`"
)


# -- the check: the reads are found by analysis/marked_block_reads.py (in a marking block)
# and analysis/overwrite_flag_reads.py (overwrite_main_grad, anywhere) ----------------------
def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" not in source:
        return
    look_at_calls = "overwrite_main_grad" in source and "out" in source
    for unit in context.units:
        survey = unit.survey
        if survey.spells_grad_added:
            experts = marked_block_reads.grouped_gemm_code(unit)
            marks = wgrad.marks(unit)
            aliases = (
                local_aliases.Aliases(unit.owner)
                if marks and isinstance(unit.owner, cst.FunctionDef)
                else None
            )
            for mark in marks:
                objects = module_provenance.of_unit(unit)
                for found in marked_block_reads.wrong_reads(mark, objects, experts, aliases):
                    _report_block_read(found, out, unit)
        if (
            look_at_calls
            and survey.spells_overwrite
            and (survey.spells_main_grad or overwrite_flag_reads.calls_a_writer(unit))
        ):
            for found in overwrite_flag_reads.argument_reads(unit):
                _report_argument_read(found, out, unit)
        if survey.spells_overwrite and "origin" in source:
            objects = module_provenance.of_unit(unit)
            for owner, twin, base in overwrite_flag_reads.twin_reads(unit, objects):
                message = STAND_IN_CALL.format(subject=twin, other=out.text(owner))
                fix = None
                if pasted_names.hold_at(unit.context, unit.owner, twin, base):
                    fix = Fix(f"Read it from `{twin}`", (out.replace(base, twin),), UNSAFE)
                out.report(CODE, owner, message, fix)
        if survey.spells_overwrite:
            objects = module_provenance.of_unit(unit)
            for owner in overwrite_flag_reads.copy_reads(unit, objects):
                message = STAND_IN_COPY.format(other=out.text(owner))
                out.report(CODE, owner, message)


def _report_block_read(found: BlockRead, out: Collector, unit: Unit) -> None:
    subject, owner = found.subject, found.owner
    if found.kind == marked_block_reads.MISPLACED:
        message = MISPLACED_MARK.format(subject=out.text(subject), other=out.text(owner))
        out.report(CODE, subject, message, _fix(out, unit, subject, owner, MARK_FIX))
        return
    template = IN_BLOCK if found.kind == marked_block_reads.OTHER_WEIGHT else STAND_IN_BLOCK
    message = template.format(subject=out.text(subject), what=found.what, other=out.text(owner))
    out.report(CODE, owner, message, _fix(out, unit, owner, subject))


def _report_argument_read(found: ArgumentRead, out: Collector, unit: Unit) -> None:
    subject, other = found.subject, found.owner
    template = STAND_IN_CALL if found.stand_in else IN_CALL
    message = template.format(subject=out.text(subject), other=out.text(other))
    # a local may feed other calls too: its read is rewritten by hand only
    out.report(CODE, other, message, _fix(out, unit, other, subject) if found.direct else None)


def _fix(out: Collector, unit: Unit, wrong, right, title: str = "Read it from `{}`"):
    """``wrong`` rewritten as ``right``'s text, when the names of that text mean at
    ``wrong`` what they mean at ``right`` (analysis/pasted_names.py); else no fix."""
    text = out.text(right)
    if not pasted_names.hold_at(unit.context, unit.owner, text, wrong, (right,)):
        return None
    return Fix(title.format(text), (out.replace(wrong, text),), UNSAFE)
