"""Ratios between implementations measured on the same workload and phase.

speedup             median_ms(reference) / median_ms(impl): how many times faster ``impl`` is
                    (above 1: faster). Pairs: triton over torch-grouped-mm and over refimpl,
                    torch-grouped-mm over refimpl.
time_over_baseline  median_ms(impl, wgrad-*) / median_ms(torch._grouped_mm, wgrad-baseline):
                    what writing into main_grad costs over a bare bf16 weight-gradient GEMM
                    (1.0: nothing; the target is at most 1.25 on the Qwen3-like shape).
"""

from __future__ import annotations

from .phases import BASELINE_IMPL, BASELINE_PHASE
from .runner import Result

SPEEDUP_PAIRS = (
    ("triton", "torch-grouped-mm"),
    ("triton", "refimpl"),
    ("torch-grouped-mm", "refimpl"),
)
MAIN_GRAD_WGRAD_PHASES = ("wgrad-accumulate", "wgrad-overwrite")


def median_ms(results: list[Result], shape: str, load: str, impl: str, phase: str) -> float | None:
    for r in results:
        if (r.shape, r.load, r.impl, r.phase) == (shape, load, impl, phase) and r.status == "ok":
            return r.samples.median_ms
    return None


def _ratio(num: float | None, den: float | None) -> float | None:
    """num / den; None when either was not measured or den is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


def speedup(
    results: list[Result], shape: str, load: str, phase: str, impl: str, reference: str
) -> float | None:
    mine = median_ms(results, shape, load, impl, phase)
    theirs = median_ms(results, shape, load, reference, phase)
    return _ratio(theirs, mine)


def time_over_baseline(
    results: list[Result], shape: str, load: str, phase: str, impl: str
) -> float | None:
    mine = median_ms(results, shape, load, impl, phase)
    baseline = median_ms(results, shape, load, BASELINE_IMPL, BASELINE_PHASE)
    return _ratio(mine, baseline)


def ratio_rows(results: list[Result]) -> list[dict]:
    rows = []
    cells = dict.fromkeys((r.shape, r.load, r.phase) for r in results if r.phase != BASELINE_PHASE)
    impls = list(dict.fromkeys(r.impl for r in results if r.phase != BASELINE_PHASE))
    for shape, load, phase in cells:
        for impl, reference in SPEEDUP_PAIRS:
            value = speedup(results, shape, load, phase, impl, reference)
            if value is not None:
                rows.append(_row(shape, load, phase, impl, reference, "speedup", value))
        if phase in MAIN_GRAD_WGRAD_PHASES:
            for impl in impls:
                value = time_over_baseline(results, shape, load, phase, impl)
                if value is not None:
                    rows.append(
                        _row(shape, load, phase, impl, BASELINE_IMPL, "time_over_baseline", value)
                    )
    return rows


def _row(shape, load, phase, impl, reference, kind, value) -> dict:
    return {
        "shape": shape,
        "load": load,
        "phase": phase,
        "impl": impl,
        "reference": reference,
        "kind": kind,
        "value": float(f"{value:.6g}"),
    }
