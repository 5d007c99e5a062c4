"""The checker proves itself: run the matrix once without a fault and once per injected fault.

A fault is caught when at least one case fails. The un-faulted run must be clean, otherwise
a "caught" fault might only be the backend's own mismatch. A fault runs only the cases it
applies to (a surface fault's predicate on the case); ``stop_early`` stops its run at its
first failing case, which is what makes this affordable on CPU; the report says so. A fault
the backend cannot take (a policy fault on a backend without a main_grad policy), or whose
cases are all outside the selection or skipped by the backend, is reported as not
applicable, with the reason, and does not fail the run; but a run where no fault applies has
proven nothing (``proven`` is False, the command exits 2).

JSON schema ``gmlp-check/mutants/v1``::

    {
      "schema": "gmlp-check/mutants/v1",
      "fused": "triton", "device": "cpu",
      "sizes": {"experts": 4, "hidden": 16, "ffn": 12, "tokens": 20, "seed": 0},
      "matrix_cases": 76,
      "stop_early": true,             # a fault's run stopped at its first failing case
      "clean": {"cases": 76, "passed": 76, "failed": 0, "failures": []},
      "faults": [
        {"name": "empty-expert-skipped", "kind": "surface", "bug_class": "...",
         "caught": true, "applicable": true, "reason": null,
         "cases_run": 17, "cases_failed": 1,
         "first_case": "mode=overwrite-fsdp,...",
         "observables": {"main_grad.at_hook": 1, "main_grad.after_backward": 1},
         "diagnoses": {"empty-expert-skipped": 1},  # likely class -> failing cases
         "diagnosed": true, "misdiagnosed": []}      # every failure diagnosed as its class
      ],
      "summary": {"faults": 9, "applicable": 9, "caught": 9, "clean": true},
      "proven": true,                 # at least one fault applied
      "passed": true                  # proven, every applicable fault caught, the clean run clean
    }
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import faults
from .matrix import Case
from .results import CaseResult
from .session import Checker

SCHEMA = "gmlp-check/mutants/v1"


@dataclass
class FaultResult:
    name: str
    kind: str
    bug_class: str
    not_applicable: str | None = None  # why the backend cannot take this fault
    cases_run: int = 0
    cases_skipped: int = 0
    cases_failed: int = 0
    first_case: str | None = None
    observables: Counter = field(default_factory=Counter)
    diagnoses: Counter = field(default_factory=Counter)  # likely class -> failing cases
    misdiagnosed: list[str] = field(default_factory=list)  # failing cases not of its class
    duration_s: float = 0.0

    @property
    def caught(self) -> bool:
        return self.cases_failed > 0

    @property
    def diagnosed(self) -> bool:
        """Every failing case's diagnosis names this fault's class."""
        return self.caught and not self.misdiagnosed

    def add(self, result: CaseResult) -> None:
        self.cases_run += 1
        self.duration_s += result.duration_s
        if result.status == "skipped":
            self.cases_skipped += 1
        if result.status == "failed":
            self.cases_failed += 1
            self.first_case = self.first_case or result.case.id
            self.observables.update(result.failed_observables)
            found = result.diagnosis
            self.diagnoses[found.likely if found else None] += 1
            if found is None or self.bug_class not in found.classes:
                self.misdiagnosed.append(result.case.id)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "bug_class": self.bug_class,
            "caught": self.caught,
            "applicable": self.not_applicable is None,
            "reason": self.not_applicable,
            "cases_run": self.cases_run,
            "cases_failed": self.cases_failed,
            "first_case": self.first_case,
            "observables": dict(self.observables.most_common()),
            "diagnoses": {str(k): n for k, n in self.diagnoses.most_common()},
            "diagnosed": self.diagnosed,
            "misdiagnosed": self.misdiagnosed,
        }


@dataclass
class MutantsRun:
    clean: list[CaseResult]
    faults: list[FaultResult]
    matrix_cases: int
    stop_early: bool

    @property
    def clean_passed(self) -> bool:
        return all(r.ok for r in self.clean)

    @property
    def applicable(self) -> list[FaultResult]:
        return [f for f in self.faults if f.not_applicable is None]

    @property
    def proven(self) -> bool:
        """Whether any fault applied: with none, a pass would mean nothing."""
        return bool(self.applicable)

    @property
    def passed(self) -> bool:
        return self.proven and self.clean_passed and all(f.caught for f in self.applicable)


def run_mutants(
    checker: Checker,
    fault_names: Sequence[str],
    cases: Sequence[Case],
    *,
    stop_early: bool,
    on_result: Callable[[str | None, CaseResult], None] | None = None,
) -> MutantsRun:
    """Run ``cases`` on ``checker`` without a fault, then once per fault.
    ``on_result(fault_or_None, result)`` is called after every case, for progress."""

    def progress(fault: str | None) -> Callable[[CaseResult], None] | None:
        return None if on_result is None else (lambda result: on_result(fault, result))

    clean = checker.run_all(cases, progress(None))
    results = []
    for name in fault_names:
        fault = faults.get(name)
        entry = FaultResult(name, fault.kind, fault.bug_class)
        results.append(entry)
        faulty = checker.with_fault(fault)
        entry.not_applicable = faulty.fault_refusal(cases[0].dtype)
        if entry.not_applicable is not None:
            continue
        applicable = [c for c in cases if fault.applies(c)]
        if not applicable:
            entry.not_applicable = f"no selected case applies (it needs: {fault.applies_doc})"
            continue
        run = faulty.run_all(applicable, progress(name), stop_at_first_failure=stop_early)
        for result in run:
            entry.add(result)
        if entry.cases_skipped == entry.cases_run:
            entry.not_applicable = (
                f"the backend skips all {entry.cases_run} selected cases it applies to "
                f"({fault.applies_doc})"
            )
    return MutantsRun(clean, results, len(cases), stop_early)


def mutants_json(run: MutantsRun, checker: Checker) -> dict[str, object]:
    failures = [r.case.id for r in run.clean if not r.ok]
    return {
        "schema": SCHEMA,
        "fused": checker.backend.spec,
        "device": checker.device.type,
        "sizes": checker.sizes.to_json(),
        "matrix_cases": run.matrix_cases,
        "stop_early": run.stop_early,
        "clean": {
            "cases": len(run.clean),
            "passed": len(run.clean) - len(failures),
            "failed": len(failures),
            "failures": failures,
        },
        "faults": [f.to_json() for f in run.faults],
        "summary": {
            "faults": len(run.faults),
            "applicable": len(run.applicable),
            "caught": sum(f.caught for f in run.faults),
            "clean": run.clean_passed,
        },
        "proven": run.proven,
        "passed": run.passed,
    }
