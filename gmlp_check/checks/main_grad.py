"""Checks of main_grad itself, expert block by expert block, at three moments (as the hook found
it, when backward() returned, when backward_dw() returned), and of the guard bands around it.

Where the reference left a block bit for bit as it was, the fused side must leave it exactly
as it was too (a NaN sentinel stays, a random 'before' value stays); where the reference
wrote, the values must match within tolerance, and a NaN that survives fails whatever the
tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..tolerance import (
    ASSERT_CLOSE_DEFAULTS,
    OWN_RUN_RTOL,
    Comparison,
    Tolerance,
    compare_close,
    compare_exact,
    same_values,
)
from . import Check, Context, combine, more_suffix


@dataclass(frozen=True)
class RegionStates:
    """One parameter's main_grad as both sides hold it now and held it when the phase began,
    and its contents before the step."""

    fused_now: torch.Tensor
    fused_prev: torch.Tensor
    ref_now: torch.Tensor
    ref_prev: torch.Tensor
    before: torch.Tensor


def compare_region(
    label: str,
    states: RegionStates,
    tol: Tolerance,
    groups: int,
    extra: torch.Tensor | None = None,
    suffix: str = "",
) -> list[tuple[str, Comparison]]:
    """Per expert block (the G blocks of a single grouped parameter, else the whole region):
    exact where the reference did not write, close where it did. ``extra`` is the kink slack
    of the region, if any."""
    if groups > 1:
        labels = [f"{label} expert {g}{suffix}" for g in range(groups)]
    else:
        labels = [f"{label}{suffix}"]
    tensors = (states.fused_now, states.fused_prev, states.ref_now, states.ref_prev, states.before)
    shape = states.ref_now.shape
    block_shape = shape[1:] if groups > 1 else shape
    views = [t.reshape(groups, *block_shape) for t in tensors]
    extras = None if extra is None else extra.reshape(groups, *block_shape)
    parts = []
    for g, block_label in enumerate(labels):
        f1, f0, r1, r0, b = (v[g] for v in views)
        if bool(same_values(r1, r0).all()):
            what = "unchanged (the reference did not write it)"
            parts.append((block_label, compare_exact(f1, f0, what)))
        else:
            slack = None if extras is None else extras[g]
            parts.append((block_label, compare_close(f1, r1, tol, base=b, extra=slack)))
    return parts


def _at_hook(ctx: Context) -> list[tuple[str, Comparison]]:
    ref, fused = ctx.ref, ctx.fused
    parts = []
    for r, f in ctx.pairs:
        if f is None:
            continue
        m = r.microbatch
        states = RegionStates(
            f.main_grad,
            fused.state_before(m, r.phase)[r.param],
            r.main_grad,
            ref.state_before(m, r.phase)[r.param],
            ref.before[r.param],
        )
        tol = ctx.tolerance(ctx.sizes.tokens * (m + 1))
        slack = ctx.cumulative_slack(r.param, m)
        label, suffix = f"mb {m + 1} {r.param}", f" ({r.phase})"
        parts += compare_region(label, states, tol, ctx.groups, slack, suffix)
    return parts


def _snapshots(ctx: Context, phase: str) -> list[tuple[str, Comparison]]:
    """main_grad when ``phase`` ("backward" or "backward_dw") returned, against its state when
    the phase began."""
    ref, fused = ctx.ref, ctx.fused
    parts = []
    for m in range(ctx.case.microbatches):
        if phase == "backward":
            f_now, r_now = fused.after_backward[m], ref.after_backward[m]
            f_prev, r_prev = fused.state_at_start(m), ref.state_at_start(m)
        else:
            f_now, r_now = fused.after_backward_dw[m], ref.after_backward_dw[m]
            f_prev, r_prev = fused.after_backward[m].main_grad, ref.after_backward[m].main_grad
        tol = ctx.tolerance(ctx.sizes.tokens * (m + 1))
        for name in ref.before:
            states = RegionStates(
                f_now.main_grad[name],
                f_prev[name],
                r_now.main_grad[name],
                r_prev[name],
                ref.before[name],
            )
            slack = ctx.cumulative_slack(name, m)
            parts += compare_region(f"mb {m + 1} {name}", states, tol, ctx.groups, slack)
    return parts


def at_hook(ctx: Context) -> Check:
    return combine("main_grad.at_hook", _at_hook(ctx))


def after_backward(ctx: Context) -> Check:
    return combine("main_grad.after_backward", _snapshots(ctx, "backward"))


def after_backward_dw(ctx: Context) -> Check:
    return combine("main_grad.after_backward_dw", _snapshots(ctx, "backward_dw"))


def guard_bands(ctx: Context) -> Check:
    violations = ctx.fused.guard_violations
    if violations:
        return Check("guard_bands", False, None, 0.0, violations[0] + more_suffix(violations))
    return Check("guard_bands", True, None, 0.0, "every canary intact")


def own_run(ctx: Context) -> Check | None:
    """FP8 cases: main_grad when backward_dw() returned, against what the mode asks of it
    given the backend's own weight gradients of the same recipe (gmlp_check.own_run): the
    previous contents plus the gradient when accumulating, the gradient alone when
    overwriting. A tight bound (tolerance.OWN_RUN_RTOL): the numerics are the same."""
    own = ctx.run.own_grads
    if own is None:
        return None
    fused = ctx.fused
    atol = ASSERT_CLOSE_DEFAULTS[torch.float32][1]
    tol = Tolerance(rtol=OWN_RUN_RTOL, atol_floor=atol, scale_factor=0.0)
    overwrite = ctx.case.mode_spec.overwrite
    parts = []
    for m, grads in enumerate(own):
        prev = fused.state_at_start(m)
        for name, grad in grads.items():
            now = fused.after_backward_dw[m].main_grad[name]
            base = torch.zeros_like(now) if overwrite else torch.nan_to_num(prev[name], nan=0.0)
            expected = base + grad.reshape(now.shape).to(now.device)
            parts.append((f"mb {m + 1} {name}", compare_close(now, expected, tol, base=base)))
    return combine("main_grad.own_run", parts)
