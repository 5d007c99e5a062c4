"""Symptoms of a failing case, declared once: patterns in which buffers, stages, flags, dummies
and hooks went wrong, read from both sides' observations. A diagnosis (``rules.py``) maps a
set of symptoms to a bug class.

main_grad symptoms are read where the engine's hook found it (what the fused side delivered),
per expert block of each weight: a block is *unwritten* when the fused side left it bit for
bit as it was while the reference wrote it, *delta only* when it holds just this step's
gradient where it had to accumulate, *stale kept* when it holds the old value plus the
gradient where it had to overwrite, *neighbour's* when it holds another expert's gradient.
Everything else about values is the observables' business, not the diagnosis'.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..checks import Context, is_weight
from ..inputs import split_sizes
from ..tolerance import same_values

_EXPERT = re.compile(r"weight(\d+)$")
# Classification only needs to tell gradients apart, not to judge them: a loose relative bound.
_RTOL = 2e-2


def _close(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    if actual.shape != expected.shape or actual.numel() == 0:
        return False
    if bool((actual.isnan() | expected.isnan()).any()):
        return False
    scale = max(1.0, float(expected.abs().max()))
    return float((actual - expected).abs().max()) <= _RTOL * scale


@dataclass(frozen=True)
class Block:
    """One expert's block of one weight's main_grad at one hook call."""

    expert: int
    tokens: int
    step: tuple[int, str]  # (microbatch, phase) of the hook call
    fused: torch.Tensor
    fused_before: torch.Tensor
    ref: torch.Tensor
    ref_before: torch.Tensor
    overwrite: bool

    @property
    def ref_wrote(self) -> bool:
        return not bool(same_values(self.ref, self.ref_before).all())

    @property
    def wgrad(self) -> torch.Tensor:
        return self.ref if self.overwrite else self.ref - self.ref_before

    @property
    def wrong(self) -> bool:
        return not (bool(same_values(self.fused, self.ref).all()) or _close(self.fused, self.ref))

    @property
    def unwritten(self) -> bool:
        return self.ref_wrote and bool(same_values(self.fused, self.fused_before).all())


def _blocks(ctx: Context) -> list[list[Block]]:
    """The expert blocks of each weight at each hook call the fused side made."""
    sizes, case = ctx.sizes, ctx.case
    calls = []
    for r, f in ctx.pairs:
        if f is None or not is_weight(r.param):
            continue
        splits = split_sizes(case.splits, sizes.experts, sizes.tokens, r.microbatch)
        match = _EXPERT.search(r.param)
        experts = [int(match.group(1))] if match else list(range(sizes.experts))
        tensors = (
            f.main_grad,
            ctx.fused.state_before(r.microbatch, r.phase)[r.param],
            r.main_grad,
            ctx.ref.state_before(r.microbatch, r.phase)[r.param],
        )
        parts = [t if match else t.reshape(len(experts), -1) for t in tensors]
        calls.append(
            [
                Block(
                    g,
                    splits[g],
                    (r.microbatch, r.phase),
                    *(p if match else p[i] for p in parts),
                    overwrite=case.mode_spec.overwrite,
                )
                for i, g in enumerate(experts)
            ]
        )
    return calls


@dataclass
class Evidence:
    """What the symptoms are computed from: the context and its failing observables."""

    ctx: Context
    failed: frozenset[str]

    def __post_init__(self) -> None:
        self.calls = _blocks(self.ctx)
        self.wrong = [b for call in self.calls for b in call if b.wrong]
        self.error = self.ctx.fused.error


def _hook_counts(ev: Evidence) -> tuple[Counter, Counter]:
    ref = Counter((h.microbatch, h.phase, h.param) for h in ev.ctx.ref.hooks)
    fused = Counter((h.microbatch, h.phase, h.param) for h in ev.ctx.fused.hooks)
    return ref, fused


def _hooks_extra(ev: Evidence) -> bool:
    ref, fused = _hook_counts(ev)
    return any(fused[k] > ref[k] for k in fused)


def _hooks_missing(ev: Evidence) -> bool:
    if ev.error is not None:  # the run stopped: later hooks could not be seen
        return False
    ref, fused = _hook_counts(ev)
    return any(fused[k] < ref[k] for k in ref)


def _grad_left_set(ev: Evidence) -> bool:
    pairs = zip(ev.ctx.ref.after_backward_dw, ev.ctx.fused.after_backward_dw)
    return any(
        f.grad_present[n] and not present for r, f in pairs for n, present in r.grad_present.items()
    )


def _flag(ev: Evidence, fused_value: bool) -> bool:
    return any(
        f is not None and f.grad_added is fused_value and r.grad_added is (not fused_value)
        for r, f in ev.ctx.pairs
    )


def _dummy_is_wgrad(ev: Evidence) -> bool:
    found = False
    weight_pairs = [(r, f) for r, f in ev.ctx.pairs if f is not None and is_weight(r.param)]
    for (_r, f), call in zip(weight_pairs, ev.calls):
        if not f.grad.present or f.grad.value is None:
            continue
        wgrad = torch.stack([b.wgrad for b in call]).reshape(f.grad.value.shape)
        if bool(wgrad.abs().max() > 0) if wgrad.numel() else False:
            found = found or _close(f.grad.value.float(), wgrad)
    return found


def _unwritten_all(ev: Evidence) -> bool:
    written = [b for call in ev.calls for b in call if b.ref_wrote]
    return bool(written) and all(b.unwritten for b in written)


def _unwritten_some(ev: Evidence) -> bool:
    return any(b.unwritten for b in ev.wrong)


def _unwritten_empty_only(ev: Evidence) -> bool:
    unwritten = [b for b in ev.wrong if b.unwritten]
    return bool(unwritten) and all(b.tokens == 0 for b in unwritten)


def _delta_only(ev: Evidence) -> bool:
    return any(not b.overwrite and _close(b.fused, b.wgrad) for b in ev.wrong)


def _stale_kept(ev: Evidence) -> bool:
    return any(b.overwrite and _close(b.fused, b.fused_before + b.wgrad) for b in ev.wrong)


def _neighbour(ev: Evidence) -> bool:
    """A wrong block holds another expert's gradient of the same step (of the same weight
    or, for discrete weights, of a same-shaped weight)."""
    blocks = [b for call in ev.calls for b in call]
    for b in blocks:
        if not b.wrong:
            continue
        base = torch.zeros_like(b.fused) if b.overwrite else b.fused_before
        others = [o for o in blocks if o.step == b.step and o.expert != b.expert and o.ref_wrote]
        # A zero gradient (an expert without tokens) tells no neighbour apart.
        if any(o.wgrad.any() and _close(b.fused - base, o.wgrad) for o in others):
            return True
    return False


def _no_write_expected(ev: Evidence) -> bool:
    """The reference wrote no main_grad before its hooks (plain mode, or no tokens)."""
    return not any(b.ref_wrote for call in ev.calls for b in call)


def _final_ok(ev: Evidence) -> bool:
    return ev.error is None and not ev.failed & {
        "main_grad.after_backward",
        "main_grad.after_backward_dw",
    }


@dataclass(frozen=True)
class Symptom:
    name: str
    doc: str
    present: Callable[[Evidence], bool]


SYMPTOMS: tuple[Symptom, ...] = (
    Symptom("hook.extra", "a post-backward hook ran more often than the reference's", _hooks_extra),
    Symptom(
        "hook.missing", "a post-backward hook ran less often (the run completed)", _hooks_missing
    ),
    Symptom(
        "hook.grad_none",
        "DDP's hook found `.grad` None",
        lambda ev: ev.error is not None and ev.error.missing_grad,
    ),
    Symptom(
        "hook.in_backward_dw",
        "the run stopped in backward_dw()",
        lambda ev: ev.error is not None and ev.error.phase == "backward_dw",
    ),
    Symptom(
        "error.main_grad",
        "the fused side raised on a missing or None main_grad",
        lambda ev: ev.error is not None and "main_grad" in ev.error.message,
    ),
    Symptom(
        "at_hook.no_write_expected",
        "the reference wrote no main_grad before its hooks",
        _no_write_expected,
    ),
    Symptom(
        "grad.left_set", "`.grad` still set after backward_dw (no hook consumed it)", _grad_left_set
    ),
    Symptom(
        "grad.alias",
        "`.grad` shares memory with main_grad",
        lambda ev: "param.grad.alias" in ev.failed,
    ),
    Symptom(
        "dummy.nonzero",
        "a non-zero dummy under zero_out_wgrad",
        lambda ev: "param.grad.zero" in ev.failed,
    ),
    Symptom(
        "dummy.is_wgrad", "the `.grad` handed back is the weight gradient itself", _dummy_is_wgrad
    ),
    Symptom(
        "flag.unset",
        "grad_added_to_main_grad False where the reference set it",
        lambda ev: _flag(ev, False),
    ),
    Symptom(
        "flag.spurious",
        "grad_added_to_main_grad True where the reference left it",
        lambda ev: _flag(ev, True),
    ),
    Symptom(
        "fetch.missing",
        "under FSDP, main_grad is not the fetched buffer",
        lambda ev: "main_grad.fetched" in ev.failed,
    ),
    Symptom(
        "at_hook.unwritten.all",
        "every block the reference wrote is unwritten at the hook",
        _unwritten_all,
    ),
    Symptom("at_hook.unwritten.some", "some block is unwritten at the hook", _unwritten_some),
    Symptom(
        "at_hook.unwritten.empty_only",
        "the unwritten blocks are all of experts without tokens",
        _unwritten_empty_only,
    ),
    Symptom(
        "at_hook.delta_only",
        "a block holds only this step's gradient where it had to accumulate",
        _delta_only,
    ),
    Symptom(
        "at_hook.stale_kept",
        "a block holds old value + gradient where it had to overwrite",
        _stale_kept,
    ),
    Symptom("at_hook.neighbour", "a block holds another expert's gradient", _neighbour),
    Symptom("final.ok", "main_grad is right after backward and backward_dw", _final_ok),
)


def symptoms(ctx: Context, failed: frozenset[str]) -> frozenset[str]:
    """The names of the symptoms present in a case's observations."""
    evidence = Evidence(ctx, failed)
    return frozenset(s.name for s in SYMPTOMS if s.present(evidence))
