"""The result of one case: its checks and its status.

Statuses, after pytest: ``passed``; ``failed``; ``skipped`` (the fused side does not support
the case: its factory raised NotImplementedError); ``xfailed`` (a known deviation failed
exactly as listed); ``xpassed`` (a known deviation did not fail as listed: the table is stale,
which fails the run like a mismatch). A known upstream *bug* never xfails: it keeps failing,
with the write-up in its explanation, until upstream fixes it (then it xpasses).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .checks import Check
from .deviations import Deviation
from .diagnosis import Diagnosis
from .matrix import Case

STATUSES = ("passed", "failed", "skipped", "xfailed", "xpassed")
OK_STATUSES = ("passed", "skipped", "xfailed")


@dataclass
class CaseResult:
    case: Case
    checks: list[Check]
    duration_s: float
    skip_reason: str | None = None
    deviation: Deviation | None = None
    diagnosis: Diagnosis | None = None  # the likely bug class of a failing case
    source: list[str] = field(default_factory=list)  # where it shows in the backend's source

    @property
    def failed_observables(self) -> list[str]:
        return [c.observable for c in self.checks if not c.passed]

    @property
    def status(self) -> str:
        if self.skip_reason is not None:
            return "skipped"
        failing = self.failed_observables
        if self.deviation is None:
            return "failed" if failing else "passed"
        if not failing:
            return "xpassed"
        as_listed = sorted(set(failing)) == sorted(self.deviation.observables)
        return "xfailed" if as_listed and self.deviation.kind == "deviation" else "failed"

    @property
    def ok(self) -> bool:
        """Whether the case leaves the run green."""
        return self.status in OK_STATUSES

    @property
    def passed(self) -> bool:
        """Every check passed (a skipped case ran no check)."""
        return self.skip_reason is None and not self.failed_observables

    def worst(self) -> Check | None:
        """The failing check, or the passing one closest to its tolerance."""
        failing = [c for c in self.checks if not c.passed]
        if failing:
            return failing[0]
        rated = [c for c in self.checks if c.max_abs_err is not None and c.tolerance]
        return max(rated, key=lambda c: c.max_abs_err / c.tolerance, default=None)

    def explanation(self) -> list[str]:
        """Lines saying why the status is what it is (for failures and deviations)."""
        lines = [f"{c.observable}: {c.detail}" for c in self.checks if not c.passed]
        if self.diagnosis is not None:
            lines.append(f"diagnosis: {self.diagnosis.describe()}")
        lines += self.source
        d = self.deviation
        if d is not None:
            listed = ", ".join(d.observables)
            as_listed = sorted(set(self.failed_observables)) == sorted(d.observables)
            if self.status == "xpassed":
                lines.append(f"known {d.kind} did not show (listed: {listed}): {d.reason}")
            elif not as_listed:
                lines.append(f"fails beyond the known {d.kind} (listed: {listed})")
            else:
                lines.append(f"known {d.kind}: {d.reason} [{d.upstream}]")
        return lines
