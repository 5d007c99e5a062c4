"""What a comparison of the two sides yields: named checks, and the context they are computed
from. The observables themselves are declared in ``gmlp_check.observables``."""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import asdict, dataclass

import torch

from ..inputs import Sizes, is_weight
from ..matrix import Case
from ..pair import CaseRun
from ..side_observations import HookRecord, Observations
from ..tolerance import Comparison, Precision, Tolerance, tolerance_for


@dataclass(frozen=True)
class Check:
    observable: str
    passed: bool
    max_abs_err: float | None
    tolerance: float | None
    detail: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Context:
    """One case's observations of both sides, and what comparing them needs."""

    case: Case
    sizes: Sizes
    run: CaseRun

    @property
    def ref(self) -> Observations:
        return self.run.reference

    @property
    def fused(self) -> Observations:
        assert self.run.fused is not None
        return self.run.fused

    @property
    def precision(self) -> Precision:
        assert self.run.precision is not None  # set whenever the fused side ran
        return self.run.precision

    def tolerance(self, reduction_length: int) -> Tolerance:
        return tolerance_for(self.precision, reduction_length)

    @property
    def groups(self) -> int:
        """Expert blocks in a parameter: G for a single grouped weight or bias, else 1."""
        return self.sizes.experts if self.case.single else 1

    @property
    def tokens_k(self) -> int:
        return max(self.sizes.tokens, 1)

    @functools.cached_property
    def pairs(self) -> list[tuple[HookRecord, HookRecord | None]]:
        """Each reference hook call with the fused side's call of the same parameter,
        microbatch and phase (n-th with n-th)."""
        pending: dict[tuple[int, str, str], list[HookRecord]] = defaultdict(list)
        for rec in self.fused.hooks:
            pending[(rec.microbatch, rec.phase, rec.param)].append(rec)
        pairs = []
        for rec in self.ref.hooks:
            queue = pending[(rec.microbatch, rec.phase, rec.param)]
            pairs.append((rec, queue.pop(0) if queue else None))
        return pairs

    def param_slack(self, name: str, microbatch: int) -> torch.Tensor | None:
        """Kink slack of one microbatch's gradient of parameter ``name`` (None: none)."""
        slack = self.run.slack
        return None if slack is None else slack.params[microbatch].get(name)

    def cumulative_slack(self, name: str, microbatch: int) -> torch.Tensor | None:
        slack = self.run.slack
        return None if slack is None else slack.cumulative(name, microbatch)

    def input_slack(self, microbatch: int) -> torch.Tensor | None:
        slack = self.run.slack
        return None if slack is None else slack.input_grads[microbatch]


def _ratio(c: Comparison) -> float:
    if c.max_abs_err is None or c.tolerance is None:
        return float("inf")
    if c.tolerance == 0:
        return 0.0 if c.max_abs_err == 0 else float("inf")
    return c.max_abs_err / c.tolerance


def combine(observable: str, parts: list[tuple[str, Comparison]], empty: str = "") -> Check:
    """One check from many comparisons: fails at the first failing part, otherwise reports
    the part closest to its tolerance."""
    if not parts:
        return Check(observable, True, None, None, empty or "nothing to compare")
    failures = [(label, c) for label, c in parts if not c.passed]
    if failures:
        label, c = failures[0]
        detail = f"{label}: {c.detail}{more_suffix(failures)}"
        return Check(observable, False, c.max_abs_err, c.tolerance, detail)
    label, c = max(parts, key=lambda lc: _ratio(lc[1]))
    return Check(observable, True, c.max_abs_err, c.tolerance, f"{label}: {c.detail}")


def more_suffix(items: list) -> str:
    """What follows the first of ``items`` in a detail line: how many more there are."""
    return f" (+{len(items) - 1} more)" if len(items) > 1 else ""


def flag_check(observable: str, mismatches: list[str], compared: int, what: str) -> Check:
    if mismatches:
        return Check(observable, False, None, 0.0, mismatches[0] + more_suffix(mismatches))
    return Check(observable, True, None, 0.0, f"{what}: {compared} observations agree")


__all__ = ["Check", "Context", "combine", "flag_check", "is_weight", "more_suffix"]
