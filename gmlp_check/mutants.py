"""The checker proves itself: run the matrix once per injected fault and once without.

A fault is caught when at least one case fails. The un-faulted run must be clean, otherwise
a "caught" fault might only be the backend's own mismatch. ``stop_early`` stops a fault's run
at its first failing case (each fault still starts from the first case of the same matrix),
which is what makes this affordable on CPU; the report says so.

JSON schema ``gmlp-check/mutants/v1``::

    {
      "schema": "gmlp-check/mutants/v1",
      "fused": "triton", "device": "cpu",
      "sizes": {"experts": 4, "hidden": 16, "ffn": 12, "tokens": 20, "seed": 0},
      "matrix_cases": 76,
      "stop_early": true,             # a fault's run stopped at its first failing case
      "clean": {"cases": 76, "passed": 76, "failed": 0, "failures": []},
      "faults": [
        {"name": "empty-expert-skipped", "bug_class": "...", "caught": true,
         "cases_run": 17, "cases_failed": 1,
         "first_case": "mode=overwrite-fsdp,...",
         "observables": {"main_grad.at_hook": 1, "main_grad.after_backward": 1}}
      ],
      "summary": {"faults": 9, "caught": 9, "clean": true},
      "passed": true                  # every fault caught and the clean run clean
    }
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from .harness import Factory
from .runner import CaseResult, resolve_factory, run_cases
from .scenarios import Case, Sizes

SCHEMA = "gmlp-check/mutants/v1"


@dataclass
class FaultResult:
    name: str
    bug_class: str
    cases_run: int = 0
    cases_failed: int = 0
    first_case: str | None = None
    observables: Counter = field(default_factory=Counter)
    duration_s: float = 0.0

    @property
    def caught(self) -> bool:
        return self.cases_failed > 0

    def add(self, result: CaseResult) -> None:
        self.cases_run += 1
        self.duration_s += result.duration_s
        if not result.passed:
            self.cases_failed += 1
            self.first_case = self.first_case or result.case.id
            self.observables.update(result.failed_observables)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "bug_class": self.bug_class,
            "caught": self.caught,
            "cases_run": self.cases_run,
            "cases_failed": self.cases_failed,
            "first_case": self.first_case,
            "observables": dict(self.observables.most_common()),
        }


@dataclass
class MutantsRun:
    clean: list[CaseResult]
    faults: list[FaultResult]
    matrix_cases: int
    stop_early: bool

    @property
    def clean_passed(self) -> bool:
        return all(r.passed for r in self.clean)

    @property
    def passed(self) -> bool:
        return self.clean_passed and all(f.caught for f in self.faults)


def triton_with_fault(fault: str | None) -> Factory:
    return resolve_factory("triton", inject=fault)


def run_mutants(
    faults: Mapping[str, str],
    cases: Sequence[Case],
    sizes: Sizes,
    device: torch.device,
    *,
    stop_early: bool,
    make_factory: Callable[[str | None], Factory] = triton_with_fault,
    on_result: Callable[[str | None, CaseResult], None] | None = None,
) -> MutantsRun:
    """Run ``cases`` without a fault, then once per fault (name -> bug class).

    ``make_factory(fault_or_None)`` gives the fused side; ``on_result(fault_or_None, result)``
    is called after every case, for progress reporting."""

    def progress(fault: str | None) -> Callable[[CaseResult], None] | None:
        if on_result is None:
            return None
        return lambda result: on_result(fault, result)

    clean = run_cases(cases, sizes, device, make_factory(None), progress(None))
    results = []
    for name, bug_class in faults.items():
        fault = FaultResult(name, bug_class)
        factory = make_factory(name)
        for result in run_cases(
            cases, sizes, device, factory, progress(name), stop_at_first_failure=stop_early
        ):
            fault.add(result)
        results.append(fault)
    return MutantsRun(clean, results, len(cases), stop_early)


def mutants_json(run: MutantsRun, device: str, sizes: Sizes) -> dict[str, object]:
    failures = [r.case.id for r in run.clean if not r.passed]
    return {
        "schema": SCHEMA,
        "fused": "triton",
        "device": device,
        "sizes": {
            "experts": sizes.experts,
            "hidden": sizes.hidden,
            "ffn": sizes.ffn,
            "tokens": sizes.tokens,
            "seed": sizes.seed,
        },
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
            "caught": sum(f.caught for f in run.faults),
            "clean": run.clean_passed,
        },
        "passed": run.passed,
    }
