"""Ratios between backends measured on the same workload and phase.

speedup             median_ms(reference) / median_ms(backend): how many times faster ``backend`` is
                    (above 1: faster). Pairs: triton over torch-grouped-mm, te-ops and
                    refimpl, torch-grouped-mm over refimpl.
time_over_baseline  median_ms(backend, wgrad-*) / median_ms(torch._grouped_mm, wgrad-baseline):
                    what writing into main_grad costs over a bare bf16 weight-gradient GEMM
                    (1.0: nothing; the target is at most 1.25 on the Qwen3-like shape).
"""

from __future__ import annotations

from .phases import BASELINE_BACKEND, BASELINE_PHASE
from .runner import Result

SPEEDUP_PAIRS = (
    ("triton", "torch-grouped-mm"),
    ("triton", "te-ops"),
    ("triton", "refimpl"),
    ("torch-grouped-mm", "refimpl"),
)
MAIN_GRAD_WGRAD_PHASES = ("wgrad-accumulate", "wgrad-overwrite")


def median_ms(
    results: list[Result], shape: str, load: str, backend: str, phase: str, *, weights: str
) -> float | None:
    cell = (shape, load, weights, backend, phase)
    for r in results:
        if (r.shape, r.load, r.weights, r.backend, r.phase) == cell and r.status == "ok":
            return r.samples.median_ms
    return None


def _ratio(num: float | None, den: float | None) -> float | None:
    """num / den; None when either was not measured or den is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


def speedup(
    results: list[Result],
    shape: str,
    load: str,
    phase: str,
    backend: str,
    reference: str,
    *,
    weights: str,
) -> float | None:
    mine = median_ms(results, shape, load, backend, phase, weights=weights)
    theirs = median_ms(results, shape, load, reference, phase, weights=weights)
    return _ratio(theirs, mine)


def time_over_baseline(
    results: list[Result], shape: str, load: str, phase: str, backend: str, *, weights: str
) -> float | None:
    mine = median_ms(results, shape, load, backend, phase, weights=weights)
    baseline = median_ms(results, shape, load, BASELINE_BACKEND, BASELINE_PHASE, weights=weights)
    return _ratio(mine, baseline)


def ratio_rows(results: list[Result]) -> list[dict]:
    rows = []
    cells = dict.fromkeys(
        (r.shape, r.load, r.weights, r.phase) for r in results if r.phase != BASELINE_PHASE
    )
    backends = list(dict.fromkeys(r.backend for r in results if r.phase != BASELINE_PHASE))
    for shape, load, weights, phase in cells:
        where = {"shape": shape, "load": load, "weights": weights, "phase": phase}
        for backend, reference in SPEEDUP_PAIRS:
            value = speedup(results, shape, load, phase, backend, reference, weights=weights)
            if value is not None:
                rows.append(_row(where, backend, reference, "speedup", value))
        if phase in MAIN_GRAD_WGRAD_PHASES:
            for backend in backends:
                value = time_over_baseline(results, shape, load, phase, backend, weights=weights)
                if value is not None:
                    rows.append(_row(where, backend, BASELINE_BACKEND, "time_over_baseline", value))
    return rows


def _row(where: dict, backend: str, reference: str, kind: str, value: float) -> dict:
    return {
        **where,
        "impl": backend,
        "reference": reference,
        "kind": kind,
        "value": float(f"{value:.6g}"),
    }
