"""The fused path's performance targets, checked against one benchmark run (each load and weight
layout separately).

A target is only judged on a comparable run (CUDA events, bf16) of the preset shape at its
preset token count; otherwise ``met`` is None and ``note`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import compare
from .flops import phase_flops
from .phases import MODULE_PHASES
from .runner import Result
from .shapes import PRESETS, Shape


@dataclass(frozen=True)
class Target:
    id: str
    text: str
    shape: str
    phase: str
    kind: str  # "speedup" (at least), "tflops" (at least), "time_over_baseline" (at most)
    threshold: float
    reference: str | None = None
    backend: str = "triton"


TARGETS = (
    Target(
        "step-qwen3-vs-torch-grouped-mm",
        "step on qwen3: triton at least 1.3x faster than torch-grouped-mm",
        shape="qwen3",
        phase="step",
        kind="speedup",
        threshold=1.3,
        reference="torch-grouped-mm",
    ),
    Target(
        "step-qwen3-vs-refimpl",
        "step on qwen3: triton at least 5x faster than refimpl",
        shape="qwen3",
        phase="step",
        kind="speedup",
        threshold=5.0,
        reference="refimpl",
    ),
    Target(
        "step-mixtral-tflops",
        "step on mixtral: triton at least 550 TFLOP/s",
        shape="mixtral",
        phase="step",
        kind="tflops",
        threshold=550.0,
    ),
    Target(
        "wgrad-accumulate-qwen3-vs-baseline",
        "wgrad-accumulate on qwen3: triton within 1.25x of the bf16 torch._grouped_mm wgrad",
        shape="qwen3",
        phase="wgrad-accumulate",
        kind="time_over_baseline",
        threshold=1.25,
    ),
    Target(
        "wgrad-overwrite-qwen3-vs-baseline",
        "wgrad-overwrite on qwen3: triton within 1.25x of the bf16 torch._grouped_mm wgrad",
        shape="qwen3",
        phase="wgrad-overwrite",
        kind="time_over_baseline",
        threshold=1.25,
    ),
)


# The fused path at least as fast as Transformer Engine's op fuser on every phase of every
# preset shape (judged where te-ops ran; "not measured" elsewhere).
TARGETS += tuple(
    Target(
        f"{phase}-{shape}-vs-te-ops",
        f"{phase} on {shape}: triton at least as fast as te-ops",
        shape=shape,
        phase=phase,
        kind="speedup",
        threshold=1.0,
        reference="te-ops",
    )
    for shape in PRESETS
    for phase in MODULE_PHASES
)


def evaluate(
    results: list[Result],
    shapes: dict[str, Shape],
    presets: dict[str, Shape],
    loads: list[str],
    *,
    layouts: list[str],
    comparable: bool,
    dtype: torch.dtype,
) -> list[dict]:
    """Every target for each load and weight layout of the run."""
    rows = []
    for target in TARGETS:
        shape = shapes.get(target.shape)
        if shape is None:
            continue
        for load, weights in ((load, weights) for load in loads for weights in layouts):
            value = _value(target, results, shape, load, weights)
            note = _not_judged_because(shape, presets[target.shape], comparable, dtype)
            if note is None and value is None:
                note = "not measured (a backend was skipped, failed or not selected)"
            met = None if note is not None else _met(target, value)
            rows.append(
                {
                    "id": target.id,
                    "text": target.text,
                    "shape": target.shape,
                    "load": load,
                    "weights": weights,
                    "kind": target.kind,
                    "threshold": target.threshold,
                    "value": None if value is None else float(f"{value:.6g}"),
                    "met": met,
                    "note": note,
                }
            )
    return rows


def _value(
    target: Target, results: list[Result], shape: Shape, load: str, weights: str
) -> float | None:
    if target.kind == "speedup":
        return compare.speedup(
            results,
            shape.name,
            load,
            target.phase,
            target.backend,
            target.reference,
            weights=weights,
        )
    if target.kind == "time_over_baseline":
        return compare.time_over_baseline(
            results, shape.name, load, target.phase, target.backend, weights=weights
        )
    ms = compare.median_ms(results, shape.name, load, target.backend, target.phase, weights=weights)
    return None if ms is None else phase_flops(shape, target.phase) / (ms * 1e-3) / 1e12


def _met(target: Target, value: float) -> bool:
    if target.kind == "time_over_baseline":
        return value <= target.threshold
    return value >= target.threshold


def _not_judged_because(
    shape: Shape, preset: Shape, comparable: bool, dtype: torch.dtype
) -> str | None:
    if not comparable:
        return "CPU, not comparable"
    if dtype != torch.bfloat16:
        return f"targets are for bf16, this run is {dtype}"
    if shape.tokens != preset.tokens:
        return f"--tokens {shape.tokens}: targets are for the preset {preset.tokens} tokens"
    return None
