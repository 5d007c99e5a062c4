"""Run cases: resolve the device and the fused side, run each case, collect its checks.

This is the one place that knows about ``fused.backends``; everything below it takes a plain
factory (a callable with ``refimpl.GroupedMLP``'s keyword arguments returning a module).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from .compare import Check, compare_case
from .harness import Factory, run_both, uninitialized_memory_as_nan
from .scenarios import Case, Sizes


class UsageError(Exception):
    """Bad options or environment: the CLI exits 2 with this message."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(
                "--device cuda: no CUDA GPU is available here (torch.cuda.is_available() is "
                "False); use --device cpu (Triton's interpreter, small shapes) or --device auto"
            )
        return torch.device("cuda")
    if name == "cpu":
        return torch.device("cpu")
    raise UsageError(f"--device: expected auto, cuda or cpu, got {name!r}")


def fault_names() -> list[str]:
    from fused.faults import FAULTS

    return list(FAULTS)


def resolve_factory(spec: str, inject: str | None = None) -> Factory:
    """The fused side's factory for a --fused spec (and an optional --inject fault)."""
    from fused import backends

    if inject is not None:
        names = fault_names()
        if inject not in names:
            raise UsageError(f"--inject: expected one of {', '.join(names)}, got {inject!r}")
        if spec != "triton":
            raise UsageError(
                f"--inject: faults are built into the triton backend only, got --fused {spec!r}"
            )
    try:
        factory = backends.load_factory(spec)
    except backends.BackendError as exc:
        raise UsageError(f"--fused: {exc}") from None
    if inject is not None:
        return functools.partial(backends.create, spec, fault=inject)
    return factory


@dataclass
class CaseResult:
    case: Case
    checks: list[Check]
    duration_s: float

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed_observables(self) -> list[str]:
        return [c.observable for c in self.checks if not c.passed]

    def worst(self) -> Check | None:
        """The failing check, or the passing one closest to its tolerance."""
        failing = [c for c in self.checks if not c.passed]
        if failing:
            return failing[0]
        rated = [c for c in self.checks if c.max_abs_err is not None and c.tolerance]
        return max(rated, key=lambda c: c.max_abs_err / c.tolerance, default=None)


def run_case(case: Case, sizes: Sizes, device: torch.device, factory: Factory) -> CaseResult:
    start = time.perf_counter()
    try:
        with uninitialized_memory_as_nan():
            run = run_both(case, sizes, device, factory)
            checks = compare_case(case, sizes, run)
    except Exception as exc:  # a harness failure must not hide the other cases
        detail = f"the checker failed on this case: {type(exc).__name__}: {exc}"
        checks = [Check("reference", False, None, None, detail)]
    return CaseResult(case, checks, time.perf_counter() - start)


def run_cases(
    cases: Iterable[Case],
    sizes: Sizes,
    device: torch.device,
    factory: Factory,
    on_result: Callable[[CaseResult], None] | None = None,
    stop_at_first_failure: bool = False,
) -> list[CaseResult]:
    results = []
    for case in cases:
        result = run_case(case, sizes, device, factory)
        results.append(result)
        if on_result is not None:
            on_result(result)
        if stop_at_first_failure and not result.passed:
            break
    return results


def check_dtypes(spec: str, device: torch.device, dtypes: Iterable[str]) -> None:
    """Refuse dtypes the fused side cannot run on this device, before running anything."""
    if device.type == "cpu" and spec == "triton" and "bf16" in set(dtypes):
        raise UsageError(
            "--dtype bf16: on CPU the triton backend runs through Triton's interpreter, whose "
            "bf16 dot products are wrong; use fp32 or fp16 on CPU and bf16 on a GPU"
        )


def refused_dtypes(
    factory: Factory, sizes: Sizes, device: torch.device, dtypes: Iterable[str]
) -> dict[str, str]:
    """Dtypes the fused side refuses outright: its constructor raises fused.backends'
    BackendError (torch-grouped-mm is bf16-only on sm90+, for example). Other construction
    errors are not a refusal; they fail the cases that meet them."""
    from fused.backends import BackendError

    from .scenarios import DTYPES

    refused = {}
    for name in dtypes:
        try:
            factory(
                num_experts=sizes.experts,
                hidden=sizes.hidden,
                ffn=sizes.ffn,
                dtype=DTYPES[name],
                device=device,
            )
        except BackendError as exc:
            refused[name] = str(exc)
    return refused
