"""The checks of one engine configuration on one rank: what the fused side computed and what the
real engine holds after each step, against the reference's data-parallel result.

Values are compared under ``tolerance.py``'s model, as in the emulated run; the reduced
gradient with reduction length K = N * k * tokens (N ranks, k microbatches). A reduced
gradient that misses the promise but matches the last microbatch's value alone is diagnosed as
the Megatron-LM #6357 class.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from gmlp_check.refimpl import ACTIVATIONS

from ..checks import Check, combine, flag_check
from ..inputs import Sizes, is_weight
from ..matrix import Case
from ..tolerance import Comparison, Precision, Tolerance, compare_close, tolerance_for
from .configs import LAST_MICROBATCH_ONLY
from .reference import Promised, ReferenceStep
from .step import GradAtHook, StepRecord
from .wrapped import Reading


@dataclass
class ConfigRun:
    """Everything one configuration produced on this rank, step by step."""

    records: list[StepRecord]
    readings: list[dict[str, Reading]]
    grads_at_hook: list[GradAtHook]


@dataclass
class Judge:
    case: Case
    sizes: Sizes
    precision: Precision
    world: int
    shapes: dict[str, torch.Size]
    dtypes: dict[str, torch.dtype]
    reference: list[ReferenceStep]
    promises: list[Promised]

    @property
    def groups(self) -> int:
        return self.sizes.experts if self.case.single else 1

    def tolerance(self, reduction_length: int) -> Tolerance:
        return tolerance_for(self.precision, reduction_length)

    def checks(self, run: ConfigRun) -> tuple[list[Check], bool]:
        """The checks, and whether every failing part of main_grad.synced is the
        last-microbatch-only signature (what the upstream deviations predict)."""
        synced, last_only = self.main_grad_synced(run)
        checks = [self.output(run), self.input_grad(run)]
        if ACTIVATIONS[self.case.activation].uses_probs:
            checks.append(self.probs_grad(run))
        checks += [self.param_grad(run), self.grad_added(run), synced]
        return checks, last_only

    # -- what the fused side computed ----------------------------------------------------------
    def _per_microbatch(self, observable, fused, reference, tol, slack=None) -> Check:
        parts = []
        for s, (f_step, r_step) in enumerate(zip(fused, reference)):
            for m, (f, r) in enumerate(zip(f_step, r_step)):
                label = f"step {s + 1} mb {m + 1}"
                extra = None if slack is None else slack(r_step, s, m)
                if f is None:
                    parts.append((label, Comparison(False, None, None, "gradient is None")))
                else:
                    parts.append((label, compare_close(f, r, tol, extra=extra)))
        return combine(observable, parts)

    def output(self, run: ConfigRun) -> Check:
        tol = self.tolerance(max(self.sizes.hidden, self.sizes.ffn))
        fused = [r.outputs for r in run.records]
        return self._per_microbatch("output", fused, [r.outputs for r in self.reference], tol)

    def _fc1_tolerance(self) -> Tolerance:
        fc1_out = ACTIVATIONS[self.case.activation].fc1_out_features(self.sizes.ffn)
        return self.tolerance(max(self.sizes.hidden, fc1_out))

    def input_grad(self, run: ConfigRun) -> Check:
        def slack(r_step, s, m):
            return (
                None
                if r_step is None or self.reference[s].slack is None
                else (self.reference[s].slack.input_grads[m])
            )

        fused = [r.input_grads for r in run.records]
        ref = [r.input_grads for r in self.reference]
        return self._per_microbatch("grad.input", fused, ref, self._fc1_tolerance(), slack)

    def probs_grad(self, run: ConfigRun) -> Check:
        fused = [r.probs_grads for r in run.records]
        ref = [r.probs_grads for r in self.reference]
        return self._per_microbatch("grad.probs", fused, ref, self._fc1_tolerance())

    def param_grad(self, run: ConfigRun) -> Check:
        """``.grad`` of each weight where the engine's hook looks at it, once per microbatch: a
        dummy of the weight's shape and dtype when the gradient went into main_grad (the DDP
        hook adds it under zero_out_wgrad, and asserts it exists under overlap_grad_reduce),
        the exact gradient in plain mode."""
        accumulate_into_main_grad = self.case.mode_spec.accumulate_into_main_grad
        tol = self.tolerance(max(self.sizes.tokens, 1))
        seen = Counter((g.step, g.microbatch, g.param) for g in run.grads_at_hook)
        parts: list[tuple[str, Comparison]] = []
        for s in range(len(run.records)):
            for m in range(self.case.microbatches):
                for name in self.shapes:
                    if is_weight(name) and seen[(s, m, name)] != 1:
                        why = f"the engine's hook saw it {seen[(s, m, name)]} times, expected once"
                        parts.append(
                            (f"step {s + 1} mb {m + 1} {name}", Comparison(False, None, None, why))
                        )
        for g in run.grads_at_hook:
            if not is_weight(g.param):
                continue
            label = f"step {g.step + 1} mb {g.microbatch + 1} {g.param}"
            shape, dtype = tuple(self.shapes[g.param]), self.dtypes[g.param]
            if not g.present:
                parts.append((label, Comparison(False, None, None, ".grad is None at the hook")))
            elif g.shape != shape or g.dtype != dtype:
                why = (
                    f".grad is {list(g.shape)} {g.dtype}, expected the weight's "
                    f"{list(shape)} {dtype}"
                )
                parts.append((label, Comparison(False, None, None, why)))
            elif accumulate_into_main_grad or g.value is None:
                parts.append(
                    (label, Comparison(True, None, None, "dummy of the right shape/dtype"))
                )
            else:
                ref = self.reference[g.step]
                exact = ref.grads[g.microbatch][g.param]
                slack = None if ref.slack is None else ref.slack.params[g.microbatch].get(g.param)
                compared = compare_close(g.value, exact, tol, groups=self.groups, extra=slack)
                parts.append((label, compared))
        return combine("param.grad", parts)

    def grad_added(self, run: ConfigRun) -> Check:
        """``grad_added_to_main_grad`` of each weight where the engine's hook reads it: True
        where the fused side wrote main_grad (output into main_grad), so that DDP does not add
        the dummy and Megatron-FSDP does not copy it over the gradient; False otherwise. Under
        sharded Megatron-FSDP a fused side that leaves it False but returns the real gradient
        as ``.grad`` gets the right main_grad anyway (the hook copies ``.grad``), so only the
        flag shows that bug class (TE #2936) there."""
        want = self.case.mode_spec.accumulate_into_main_grad
        problems = [
            f"step {g.step + 1} mb {g.microbatch + 1} {g.param}: grad_added_to_main_grad is "
            f"{g.grad_added} at the engine's hook, expected {want}"
            for g in run.grads_at_hook
            if is_weight(g.param) and g.grad_added is not want
        ]
        compared = sum(1 for g in run.grads_at_hook if is_weight(g.param))
        return flag_check("grad_added_to_main_grad", problems, compared, "at the engine's hook")

    # -- what the engine holds -------------------------------------------------------------
    def main_grad_synced(self, run: ConfigRun) -> tuple[Check, bool]:
        """Every parameter's reduced gradient after each step. The flag says whether every
        failing part equals the last microbatch's gradient alone (the upstream deviations'
        signature). The diagnosis goes into the detail, failing parts that carry it first,
        where the step shows evidence of it: a failing parameter holding its non-zero
        last-microbatch gradient. (An expert without tokens in the last microbatch has a zero
        gradient there, which a buffer nobody wrote matches too.)"""
        tol = self.tolerance(self.world * self.case.microbatches * max(self.sizes.tokens, 1))
        diagnosed: list[tuple[str, Comparison]] = []
        others: list[tuple[str, Comparison]] = []
        all_last_only = True
        for s, readings in enumerate(run.readings):
            promise = self.promises[s]
            failing: list[tuple[str, Comparison, bool]] = []
            evidence = False
            for name, reading in readings.items():
                label = f"step {s + 1} {name}{_region(reading)}"
                compared = self._compare_reading(reading, promise.synced[name], promise, name, tol)
                if compared.passed:
                    others.append((label, compared))
                    continue
                last = self._last_microbatch_only(reading, promise, name, tol)
                evidence = evidence or (last and bool(promise.last_only[name].any()))
                failing.append((label, compared, last))
                all_last_only = all_last_only and last
            for label, compared, last in failing:
                if last and evidence:
                    detail = f"{compared.detail}: {LAST_MICROBATCH_ONLY}"
                    compared = Comparison(False, compared.max_abs_err, compared.tolerance, detail)
                    diagnosed.append((label, compared))
                else:
                    others.append((label, compared))
        check = combine("main_grad.synced", diagnosed + others, "no parameter")
        return check, all_last_only

    def _last_microbatch_only(self, reading, promise, name, tol) -> bool:
        """Whether the reading equals the last microbatch's gradient alone (k >= 2)."""
        if self.case.microbatches < 2:
            return False
        return self._compare_reading(reading, promise.last_only[name], promise, name, tol).passed

    def _compare_reading(self, reading, expected, promise, name, tol) -> Comparison:
        """The reading in place inside the expected full parameter (elements outside this
        rank's region equal the expectation), so the per-expert scale and the element indices
        are the whole parameter's."""
        full = expected.detach().float().reshape(-1).clone()
        full[reading.lo : reading.hi] = reading.values.to(full.device)
        shape = self.shapes[name]
        return compare_close(
            full.view(shape),
            expected.float().view(shape),
            tol,
            groups=self.groups,
            extra=promise.slack.get(name),
        )


def _region(reading: Reading) -> str:
    if reading.lo == 0 and reading.hi == reading.numel:
        return ""
    return f" [{reading.lo}:{reading.hi}] of {reading.numel}"
