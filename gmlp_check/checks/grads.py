"""Checks of the weight ``.grad`` the post-backward hook finds: present, the weight's shape and
dtype, the real gradient in plain mode, a dummy that aliases no main_grad, zero-filled under
zero_out_wgrad."""

from __future__ import annotations

import torch

from ..tolerance import Comparison, compare_close
from . import Check, Context, combine, flag_check, is_weight


def _label(r) -> str:
    return f"mb {r.microbatch + 1} {r.param} ({r.phase})"


def param_grad(ctx: Context) -> Check:
    case, fused = ctx.case, ctx.fused
    tol = ctx.tolerance(ctx.tokens_k * case.microbatches)
    parts = []
    for r, f in ctx.pairs:
        if f is None or not is_weight(r.param):
            continue  # a missing hook call is reported by ddp_hook
        label = _label(r)
        if not f.grad.present:
            parts.append((label, Comparison(False, None, None, ".grad is None at the hook")))
            continue
        shape, dtype = fused.param_shapes[r.param], fused.param_dtypes[r.param]
        if f.grad.shape != tuple(shape) or f.grad.dtype != dtype:
            why = (
                f".grad is {list(f.grad.shape)} {f.grad.dtype}, expected the weight's "
                f"{list(shape)} {dtype}"
            )
            parts.append((label, Comparison(False, None, None, why)))
        elif case.mode_spec.accumulate_into_main_grad:
            parts.append((label, Comparison(True, None, None, "dummy of the right shape/dtype")))
        else:
            extra = ctx.param_slack(r.param, r.microbatch)
            compared = compare_close(
                f.grad.value, r.grad.value, tol, groups=ctx.groups, extra=extra
            )
            parts.append((label, compared))
    return combine("param.grad", parts)


def param_grad_alias(ctx: Context) -> Check:
    problems = [
        f"{_label(r)}: .grad shares memory with a main_grad buffer"
        for r, f in ctx.pairs
        if f is not None and f.grad.present and f.grad.aliases_main_grad
    ]
    return flag_check("param.grad.alias", problems, len(ctx.pairs), "no .grad aliases main_grad")


def param_grad_zero(ctx: Context) -> Check | None:
    case = ctx.case
    if not (case.mode_spec.accumulate_into_main_grad and case.zero_out):
        return None
    problems, seen = [], 0
    for r, f in ctx.pairs:
        if f is None or not is_weight(r.param) or not f.grad.present:
            continue
        seen += 1
        value = f.grad.value.to(torch.float32)
        nonzero = int((value != 0).sum())  # NaN != 0 too
        if nonzero:
            problems.append(
                f"{_label(r)}: zero_out_wgrad is set but the dummy .grad has {nonzero} of "
                f"{value.numel()} non-zero elements"
            )
    return flag_check("param.grad.zero", problems, seen, "dummies zero-filled")
