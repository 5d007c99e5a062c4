"""GMLP012: a GEMM writes into main_grad with an output dtype that is not main_grad's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import UNSAFE, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.cfg import Node
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
file_functions = LazyModule("..analysis.file_functions", __package__)
copyable = LazyModule("..analysis.copyable", __package__)

CODE = "GMLP012"
RULE = Rule(
    code=CODE,
    classes=(),
    name="main-grad-gemm-out-dtype",
    summary=(
        "A GEMM whose `out` is main_grad is given an `out_dtype` that is not main_grad's "
        "dtype (typically the activation dtype)."
    ),
    flags="`out_dtype` of a GEMM whose `out` is (conditionally) main_grad that is not its dtype",
    explanation="""
        main_grad is an fp32 buffer; a GEMM told to produce `out_dtype=ctx.activation_dtype`
        (bf16) while writing into it either fails, or casts and accumulates in the lower
        precision, depending on the library (Transformer Engine #1618 in LayerNormMLP's
        wgrad GEMMs). The output dtype must follow the destination: `main_grad.dtype` when
        the output is main_grad.

        Checked in calls and in dict literals of GEMM arguments: when `out` is main_grad (a
        `p.main_grad`, a local bound to it, or a conditional expression choosing it),
        `out_dtype` must mention main_grad, be fp32, or be the output's own dtype
        (`out=mg, out_dtype=mg.dtype`). A call of a function of the file given both is a
        wrapper, not the GEMM, and is left alone: what it does with the dtype is its own
        (Primus-Turbo's wgrad wrappers accumulate into `out` and type the dummy they hand
        back with `out_dtype`).

        Not seen: `out` and `out_dtype` given in different places (`out` in a `**kwargs` dict,
        `out_dtype` in the call); an output passed positionally or under another keyword
        (`D=w.main_grad`); a view of main_grad (`out=w.main_grad.view(-1)`); a choice whose other
        arm is not None (`out=w.main_grad if fuse else buf`); a dtype whose text merely contains an
        fp32 spelling (`torch.float16` passes for `torch.float`, as does
        `torch.float32 if c else ctx.activation_dtype`).
    """,
    fix="""
        `out_dtype=(M.dtype if M is not None else <old>)` when `out=M` (a buffer kept on
        `ctx` or in a local may be None on the unfused path; no fix when `M` is not a plain
        name or attribute, which would be evaluated twice), and
        `out_dtype=(M.dtype if C else <old>)` when `out=M if C else None` (unsafe: the GEMM
        must support fp32 output).
    """,
    fix_summary="take the dtype from main_grad (unsafe)",
    valid=(
        Example(
            """
            def fc2_wgrad(ctx, fc2_weight, act_out, grad_output):
                return general_gemm(
                    act_out,
                    grad_output,
                    out_dtype=(
                        fc2_weight.main_grad.dtype
                        if ctx.fuse_wgrad_accumulation
                        else ctx.activation_dtype
                    ),
                    out=fc2_weight.main_grad if ctx.fuse_wgrad_accumulation else None,
                )
            """
        ),
        Example(
            """
            def _wgrad(x, dy, out_dtype, accumulate=False, out=None):
                if not accumulate:
                    return gemm(x, dy, out_dtype=out_dtype)
                gemm_accum(x, dy, out=out)
                return make_dummy_wgrad(out)


            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                wgrad = _wgrad(x, dy, out_dtype=ctx.out_dtype, accumulate=True, out=ctx.main_grad)
                return dy @ weight, wgrad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def fc2_wgrad(ctx, w, fuse, act_out, grad_output):
                return general_gemm(
                    act_out,
                    grad_output,
                    out_dtype=ctx.dtype,
                    out=w.main_grad if fuse else None,
                )
            """,
            line=5,
            fixed="""
            def fc2_wgrad(ctx, w, fuse, act_out, grad_output):
                return general_gemm(
                    act_out,
                    grad_output,
                    out_dtype=(w.main_grad.dtype if fuse else ctx.dtype),
                    out=w.main_grad if fuse else None,
                )
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def grouped_wgrad(ctx, a, grad_out):
                return grouped_gemm(
                    a,
                    grad_out,
                    out_dtype=ctx.out_dtype,
                    out=ctx.main_grad,
                )
            """,
            line=5,
            fixed="""
            def grouped_wgrad(ctx, a, grad_out):
                return grouped_gemm(
                    a,
                    grad_out,
                    out_dtype=(ctx.main_grad.dtype if ctx.main_grad is not None else ctx.out_dtype),
                    out=ctx.main_grad,
                )
            """,
            applicability="unsafe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "this GEMM writes into main_grad (`out={out}`) but is told `out_dtype={dtype}`: main_grad "
    "is fp32, so the output dtype must be main_grad's dtype when main_grad is the output"
)
FP32 = ("float32", "torch.float", "fp32")


def check(context: ModuleContext, out: Collector) -> None:
    if "out_dtype" not in context.source:
        return
    for unit in context.units:
        if not unit.survey.spells_main_grad:
            continue
        for root, node in unit.expression_roots():
            for sub in patterns.walk(root):
                if isinstance(sub, (cst.Call, cst.Dict)):
                    _check_arguments(unit, sub, node, out)


def _check_arguments(unit: Unit, call, node: Node, out: Collector) -> None:
    found = dict(patterns.argument_pairs(call))
    target, dtype = found.get("out"), found.get("out_dtype")
    if target is None or dtype is None:
        return
    if type(call) is cst.Call and file_functions.resolved(unit.context, call) is not None:
        # a wrapper of the file, not the GEMM: what it does with the dtype is its own
        # (Primus-Turbo's wgrad wrappers type the dummy they hand back with it)
        return
    chosen = _main_grad_choice(unit, target, node)
    if chosen is None:
        return
    dtype_text = out.context.code(dtype)
    if "main_grad" in dtype_text or any(word in dtype_text for word in FP32):
        return
    if patterns.is_none_like(dtype):
        return
    # The output's own dtype (``out=mg, out_dtype=mg.dtype`` with ``mg`` bound to main_grad):
    # right whatever the output holds; also the shape this rule's own fix writes
    # (``buf.dtype if buf is not None else ...``), which would otherwise be reported and
    # rewritten again on every pass. Any other test around the output's dtype is judged
    # (``buf.dtype if buf is None else ctx.dtype`` picks the activation dtype for main_grad).
    if _follows_output(out.context, dtype, target, chosen):
        return
    buffer, condition = chosen
    fix = None
    # The replacement evaluates the buffer and the condition once more, before ``out=`` does
    # when it comes first: ``next(ws).main_grad if fuse() else None`` copied read another
    # weight's buffer and called fuse() twice.
    bound_here = copyable.walrus_targets(call)  # ``(w := next(ws))`` in the same call
    copied = (
        copyable.is_plain_path(buffer)
        and (condition is None or copyable.calls_nothing(condition))
        and not any(
            name.value in bound_here
            for part in (buffer, condition)
            if part is not None
            for name in patterns.read_names(part)
        )
    )
    if not copied:
        replacement = None
    elif condition is not None:
        replacement = f"({out.text(buffer)}.dtype if {out.text(condition)} else {dtype_text})"
    else:
        # The buffer may be None where it is only set under fusion (``ctx.main_grad``):
        # reading its dtype there would break the path the finding is not about.
        text = out.text(buffer)
        replacement = f"({text}.dtype if {text} is not None else {dtype_text})"
    if replacement is not None:
        if dtype.lpar:
            replacement = replacement[1:-1]  # the dtype's own parentheses stay around the edit
        fix = Fix(f"Use `{replacement}`", (out.replace(dtype, replacement),), UNSAFE)
    message = MESSAGE.format(out=out.text(target), dtype=dtype_text)
    out.report(CODE, dtype, message, fix)


def _follows_output(context, dtype, target, chosen) -> bool:
    """``dtype`` is the output's own dtype, or the fix's ``(M.dtype if <test> else ...)``
    with the test that chooses ``M`` (``M is not None`` for a bare buffer)."""
    buffer, condition = chosen
    if _dtype_of(context, dtype, (target, buffer)):
        return True
    if type(dtype) is not cst.IfExp or not _dtype_of(context, dtype.body, (buffer,)):
        return False
    if condition is not None:
        return context.code(dtype.test) == context.code(condition)
    test = dtype.test
    return (
        type(test) is cst.Comparison
        and context.code(test.left) == context.code(buffer)
        and len(test.comparisons) == 1
        and type(test.comparisons[0].operator) is cst.IsNot
        and patterns.is_none_like(test.comparisons[0].comparator)
    )


def _dtype_of(context, expr, owners) -> bool:
    return (
        type(expr) is cst.Attribute
        and expr.attr.value == "dtype"
        and context.code(expr.value) in {context.code(o) for o in owners}
    )


def _main_grad_choice(unit: Unit, target, node: Node):
    """(the main_grad expression, the condition choosing it or None) when ``target`` is
    main_grad, a local holding it, or ``M if C else None``; None otherwise."""
    if isinstance(target, cst.IfExp) and patterns.is_none_like(target.orelse):
        if _holds(unit, target.body, node):
            return target.body, target.test
        return None
    if _holds(unit, target, node):
        return target, None
    return None


def _holds(unit: Unit, expr, node: Node) -> bool:
    if patterns.is_main_grad_direct(expr):
        return True
    return isinstance(expr, cst.Name) and unit.aliases.surely(expr.value, node)
