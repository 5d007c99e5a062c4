"""Checks of computed values: the forward output and the data and bias gradients."""

from __future__ import annotations

import torch

from gmlp_check.refimpl import ACTIVATIONS

from ..tolerance import Comparison, Tolerance, compare_close
from . import Check, Context, combine, is_weight


def _fc1_out(ctx: Context) -> int:
    return ACTIVATIONS[ctx.case.activation].fc1_out_features(ctx.sizes.ffn)


def _grad_pair(
    m: int,
    fused_list: list[torch.Tensor | None],
    ref_list: list[torch.Tensor | None],
    tol: Tolerance,
    extra: torch.Tensor | None = None,
) -> tuple[str, Comparison]:
    f, r = fused_list[m], ref_list[m]
    if r is None:
        return (f"mb {m + 1}", Comparison(f is None, None, None, "no gradient expected"))
    if f is None:
        return (f"mb {m + 1}", Comparison(False, None, None, "gradient is None"))
    return (f"mb {m + 1}", compare_close(f, r, tol, extra=extra))


def output(ctx: Context) -> Check:
    tol = ctx.tolerance(max(ctx.sizes.hidden, ctx.sizes.ffn))
    ref, fused = ctx.ref, ctx.fused
    parts = [
        (f"mb {m + 1}", compare_close(fused.outputs[m], ref.outputs[m], tol))
        for m in range(ctx.case.microbatches)
    ]
    return combine("output", parts)


def input_grad(ctx: Context) -> Check:
    tol = ctx.tolerance(max(ctx.sizes.hidden, _fc1_out(ctx)))
    ref, fused = ctx.ref, ctx.fused
    parts = [
        _grad_pair(m, fused.input_grads, ref.input_grads, tol, ctx.input_slack(m))
        for m in range(ctx.case.microbatches)
    ]
    return combine("grad.input", parts)


def probs_grad(ctx: Context) -> Check | None:
    if not ACTIVATIONS[ctx.case.activation].uses_probs:
        return None
    tol = ctx.tolerance(max(ctx.sizes.hidden, _fc1_out(ctx)))
    ref, fused = ctx.ref, ctx.fused
    parts = [
        _grad_pair(m, fused.probs_grads, ref.probs_grads, tol) for m in range(ctx.case.microbatches)
    ]
    return combine("grad.probs", parts)


def bias_grad(ctx: Context) -> Check | None:
    """Bias gradients as the post-backward hook found them in ``.grad``."""
    if not ctx.case.bias:
        return None
    tol = ctx.tolerance(ctx.tokens_k)
    parts = []
    for r, f in ctx.pairs:
        if is_weight(r.param):
            continue
        label = f"mb {r.microbatch + 1} {r.param}"
        if f is None or not f.grad.present:
            parts.append((label, Comparison(False, None, None, ".grad missing at the hook")))
            continue
        extra = ctx.param_slack(r.param, r.microbatch)
        compared = compare_close(f.grad.value, r.grad.value, tol, groups=ctx.groups, extra=extra)
        parts.append((label, compared))
    return combine("grad.bias", parts)
