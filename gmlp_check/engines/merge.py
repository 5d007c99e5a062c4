"""From every rank's outcome of every engine configuration to one case result.

Each rank judges what it holds; the outcomes are gathered (all_gather_object) and merged the
same way on every rank, so every rank knows the verdict and exits with the same code, while
only rank 0 reports. A check fails if it fails on any rank (the detail names the rank); the
ranks' regions of a sharded gradient must tile each parameter exactly once. Then the
configurations: each is a labelled part of the case's checks, and the case passes when every
configuration passes. A configuration the engine refused (or one no rank could run) is skipped
with its reason; a case none of whose configurations ran is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..checks import Check, more_suffix
from ..deviations import Deviation
from ..matrix import Case
from ..observables import OBSERVABLES, REAL
from ..results import CaseResult
from .configs import CONFIGS, upstream_deviation

# The order of a real-engine case's checks: the registry's, as the emulated reports have it.
ORDER = tuple(o.name for o in OBSERVABLES if REAL in o.engines)


@dataclass
class ConfigOutcome:
    """One configuration on one rank."""

    config: str  # its name in configs.CONFIGS
    checks: list[Check] = field(default_factory=list)
    skip_reason: str | None = None
    coverage: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    # name -> (lo, hi, numel) of each step's reading
    last_only: bool = True  # every failing part of main_grad.synced is the #6357 signature


@dataclass
class RankOutcome:
    """One case on one rank: either a case-level result (skip, or failed checks before any
    configuration ran) or the outcome of each configuration."""

    configs: list[ConfigOutcome] = field(default_factory=list)
    skip_reason: str | None = None
    checks: list[Check] = field(default_factory=list)  # case-level failures (construct, ...)


def _ratio(check: Check) -> float:
    if check.max_abs_err is None or not check.tolerance:
        return 0.0
    return check.max_abs_err / check.tolerance


def _worst(observable: str, parts: Sequence[tuple[str, str, Check]], also: str) -> Check:
    """One check from the parts (prefix of its detail, name, check) of several ranks or
    configurations: the first failing part, naming the others that fail too ("also fails
    {also} ..."), else the passing part closest to its tolerance."""
    failing = [(prefix, name, c) for prefix, name, c in parts if not c.passed]
    if failing:
        prefix, _, c = failing[0]
        others = ", ".join(name for _, name, _ in failing[1:])
        more = f" (also fails {also} {others})" if others else ""
        return Check(observable, False, c.max_abs_err, c.tolerance, f"{prefix}{c.detail}{more}")
    prefix, _, c = max(parts, key=lambda part: _ratio(part[2]))
    return Check(observable, True, c.max_abs_err, c.tolerance, f"{prefix}{c.detail}")


def _merge_ranks(observable: str, per_rank: Sequence[Check | None], world: int) -> Check:
    parts = [
        (f"rank {r}: " if world > 1 else "", str(r), c)
        for r, c in enumerate(per_rank)
        if c is not None
    ]
    return _worst(observable, parts, "on rank")


def _merge_checks(per_rank: Sequence[Sequence[Check]], world: int) -> list[Check]:
    """Each observable any rank checked, merged over the ranks, in ORDER."""
    present = {c.observable for checks in per_rank for c in checks}
    return [
        _merge_ranks(
            observable,
            [next((c for c in checks if c.observable == observable), None) for checks in per_rank],
            world,
        )
        for observable in ORDER
        if observable in present
    ]


def _first_skip(reasons: Sequence[str | None], world: int) -> str | None:
    """The first rank's skip reason, naming the rank where there are several."""
    rank, reason = next(((r, x) for r, x in enumerate(reasons) if x is not None), (0, None))
    if reason is None or world == 1:
        return reason
    return f"rank {rank}: {reason}"


def coverage_problems(per_rank: Sequence[ConfigOutcome], sharded: bool) -> list[str]:
    """Where the ranks' regions do not cover a parameter as the engine promises (per step):
    each rank all of it (all-reduce), or all ranks together each element once (shards)."""
    problems = []
    first = per_rank[0].coverage
    for name, steps in first.items():
        for s in range(len(steps)):
            numel = steps[s][2]
            if not sharded:
                for rank, o in enumerate(per_rank):
                    lo, hi, _ = o.coverage[name][s]
                    if (lo, hi) != (0, numel):
                        problems.append(
                            f"step {s + 1} {name}: rank {rank} holds [{lo}:{hi}] of {numel}, "
                            "expected all of it"
                        )
                continue
            spans = sorted(
                (o.coverage[name][s][0], o.coverage[name][s][1], r)
                for r, o in enumerate(per_rank)
                if o.coverage.get(name) and o.coverage[name][s][1] > o.coverage[name][s][0]
            )
            position = 0
            for lo, hi, rank in spans:
                if lo != position:
                    what = "read by no rank" if lo > position else f"read twice (rank {rank})"
                    span = f"[{min(lo, position)}:{max(lo, position)}]"
                    problems.append(f"step {s + 1} {name}: elements {span} {what}")
                position = max(position, hi)
            if position != numel:
                problems.append(
                    f"step {s + 1} {name}: elements [{position}:{numel}] read by no rank"
                )
    return problems


def merge_config(per_rank: Sequence[ConfigOutcome], world: int) -> ConfigOutcome:
    """One configuration's outcome over all ranks."""
    name = per_rank[0].config
    skip = _first_skip([o.skip_reason for o in per_rank], world)
    if skip is not None:
        return ConfigOutcome(name, skip_reason=skip)
    checks = _merge_checks([o.checks for o in per_rank], world)
    problems = coverage_problems(per_rank, CONFIGS[name].sharded_result)
    if problems:
        detail = (
            f"the ranks' regions do not cover the parameter: {problems[0]}{more_suffix(problems)}"
        )
        checks = [c for c in checks if c.observable != "main_grad.synced"]
        checks.append(Check("main_grad.synced", False, None, None, detail))
    last_only = all(o.last_only for o in per_rank)
    return ConfigOutcome(name, checks, None, per_rank[0].coverage, last_only)


def case_result(
    case: Case, gathered: Sequence[RankOutcome], steps: int, duration_s: float
) -> CaseResult:
    """The case's result from every rank's outcome (the same on every rank)."""
    world = len(gathered)
    skip = _first_skip([o.skip_reason for o in gathered], world)
    if skip is not None:
        return CaseResult(case, [], duration_s, skip)
    if any(o.checks for o in gathered):
        return CaseResult(case, _merge_checks([o.checks for o in gathered], world), duration_s)
    merged = [
        merge_config([o.configs[i] for o in gathered], world)
        for i in range(len(gathered[0].configs))
    ]
    ran = [m for m in merged if m.skip_reason is None]
    skipped_configs = [
        f"{CONFIGS[m.config].label} ({m.skip_reason})" for m in merged if m.skip_reason
    ]
    if not ran:
        return CaseResult(case, [], duration_s, "; ".join(skipped_configs) or "no engine config")
    checks = []
    for observable in ORDER:
        parts = [
            (f"{CONFIGS[m.config].label}: ", CONFIGS[m.config].label, c)
            for m in ran
            for c in m.checks
            if c.observable == observable
        ]
        if parts:
            checks.append(_worst(observable, parts, "under"))
    if not any(c.observable == "run" for c in checks):
        labels = ", ".join(CONFIGS[m.config].label for m in ran)
        ranks = f" on {world} ranks" if world > 1 else ""
        skipped_text = f"; skipped: {'; '.join(skipped_configs)}" if skipped_configs else ""
        detail = f"{steps} steps each under {labels}{ranks}{skipped_text}"
        checks.insert(0, Check("run", True, None, None, detail))
    return CaseResult(case, checks, duration_s, None, _deviation(case, ran, world))


def _deviation(case: Case, ran: Sequence[ConfigOutcome], world: int) -> Deviation | None:
    """The known upstream deviation the case is expected to show, under strict-xfail rules:
    attached when every failure belongs to configurations an upstream deviation applies to and
    is exactly its signature (then the case is xfailed), or when those configurations passed
    and nothing else failed (then it is xpassed: the table is stale). Any other failure is the
    fused side's: no deviation, the case fails."""
    expected = {
        m.config: upstream_deviation(
            CONFIGS[m.config], world, case.microbatches, tokens=case.splits != "t0"
        )
        for m in ran
    }
    deviating = [m for m in ran if expected[m.config] is not None]
    if not deviating:
        return None
    for m in ran:
        failing = sorted(c.observable for c in m.checks if not c.passed)
        dev = expected[m.config]
        if dev is None and failing:
            return None
        if dev is not None and failing and (failing != sorted(dev.observables) or not m.last_only):
            return None
    devs = {expected[m.config].id: expected[m.config] for m in deviating}

    def labels(dev_id: str) -> str:
        return ", ".join(
            CONFIGS[m.config].label for m in deviating if expected[m.config].id == dev_id
        )

    unseen = " (read from the source, not yet seen on a GPU)"
    reason = "; ".join(
        f"{labels(d.id)}: {d.reason}{'' if d.verified else unseen}" for d in devs.values()
    )
    upstream = "; ".join(d.upstream for d in devs.values())
    observables = tuple(sorted({o for d in devs.values() for o in d.observables}))
    kind = "bug" if any(d.kind == "bug" for d in devs.values()) else "deviation"
    return Deviation(case.id, observables, reason, upstream, kind)
