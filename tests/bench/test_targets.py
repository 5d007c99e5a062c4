"""The fused path's performance targets and the ratios behind them, judged from a set of
measured medians."""

import pytest
import torch

from gmlp_check.bench import compare, targets
from gmlp_check.bench.flops import phase_flops
from gmlp_check.bench.phases import BASELINE_BACKEND, BASELINE_PHASE
from gmlp_check.bench.runner import Result
from gmlp_check.bench.shapes import PRESETS
from gmlp_check.bench.timing import Samples


def result(shape, backend, phase, ms, load="uniform"):
    samples = Samples(times_ms=[ms * 0.9, ms, ms * 1.5], warmup=1, warmup_s=0.0)
    return Result(shape, load, backend, phase, "ok", samples=samples)


def mixtral_ms_for(tflops: float) -> float:
    return phase_flops(PRESETS["mixtral"], "step") / (tflops * 1e12) * 1e3


def judged(results, *, comparable=True, dtype=torch.bfloat16, shapes=None):
    shapes = shapes or {n: PRESETS[n] for n in ("mixtral", "qwen3")}
    rows = targets.evaluate(results, shapes, PRESETS, ["uniform"], comparable=comparable,
                            dtype=dtype)  # fmt: skip
    return {row["id"]: row for row in rows}


def test_targets_met_and_missed_in_the_right_direction():
    results = [
        result("qwen3", "triton", "step", 10.0),
        result("qwen3", "torch-grouped-mm", "step", 12.0),  # 1.2x: below 1.3
        result("qwen3", "refimpl", "step", 60.0),  # 6x: above 5
        result("mixtral", "triton", "step", mixtral_ms_for(560.0)),
        result("qwen3", BASELINE_BACKEND, BASELINE_PHASE, 4.0),
        result("qwen3", "triton", "wgrad-accumulate", 4.8),  # 1.2x the baseline: within 1.25
        result("qwen3", "triton", "wgrad-overwrite", 5.2),  # 1.3x: not within
    ]
    rows = judged(results)
    assert rows["step-qwen3-vs-torch-grouped-mm"]["value"] == pytest.approx(1.2)
    assert rows["step-qwen3-vs-torch-grouped-mm"]["met"] is False
    assert rows["step-qwen3-vs-refimpl"]["value"] == pytest.approx(6.0)
    assert rows["step-qwen3-vs-refimpl"]["met"] is True
    assert rows["step-mixtral-tflops"]["value"] == pytest.approx(560.0)
    assert rows["step-mixtral-tflops"]["met"] is True
    assert rows["wgrad-accumulate-qwen3-vs-baseline"]["value"] == pytest.approx(1.2)
    assert rows["wgrad-accumulate-qwen3-vs-baseline"]["met"] is True
    assert rows["wgrad-overwrite-qwen3-vs-baseline"]["met"] is False


def test_targets_use_the_median_not_the_mean():
    results = [result("qwen3", "triton", "step", 10.0), result("qwen3", "refimpl", "step", 50.0)]
    # medians 10 and 50 (the samples' means are 11.33 and 56.67): exactly 5x
    assert judged(results)["step-qwen3-vs-refimpl"]["value"] == pytest.approx(5.0)


@pytest.mark.parametrize(
    "kwargs, note",
    [
        ({"comparable": False}, "CPU, not comparable"),
        ({"dtype": torch.float32}, "targets are for bf16"),
        ({"shapes": {"qwen3": PRESETS["qwen3"].with_tokens(64)}}, "--tokens 64"),
    ],
)
def test_targets_are_not_judged_outside_their_conditions(kwargs, note):
    results = [result("qwen3", "triton", "step", 1.0), result("qwen3", "refimpl", "step", 9.0)]
    row = judged(results, **kwargs)["step-qwen3-vs-refimpl"]
    assert row["met"] is None
    assert note in row["note"]


def test_a_missing_measurement_is_reported_not_judged():
    failed = Result("qwen3", "uniform", "triton", "step", "error", reason="boom")
    row = judged([failed, result("qwen3", "refimpl", "step", 9.0)])["step-qwen3-vs-refimpl"]
    assert row["met"] is None and row["value"] is None
    assert "not measured" in row["note"]


def test_ratio_rows_cover_the_pairs_present():
    results = [
        result("qwen3", "triton", "step", 2.0),
        result("qwen3", "torch-grouped-mm", "step", 3.0),
        result("qwen3", "refimpl", "step", 8.0),
    ]
    rows = {(r["impl"], r["reference"]): r["value"] for r in compare.ratio_rows(results)}
    # the document keeps six significant digits
    assert rows == pytest.approx(
        {
            ("triton", "torch-grouped-mm"): 1.5,
            ("triton", "refimpl"): 4.0,
            ("torch-grouped-mm", "refimpl"): 8.0 / 3.0,
        },
        rel=1e-5,
    )
