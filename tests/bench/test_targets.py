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
    rows = targets.evaluate(results, shapes, PRESETS, ["uniform"], layouts=["single"],
                            comparable=comparable, dtype=dtype)  # fmt: skip
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


def test_each_weight_layout_is_judged_from_its_own_medians():
    """A run of both layouts: the single-weight target reads the single-weight medians only,
    and the discrete one the discrete medians, although shape, load and phase are the same."""

    def timed(backend, ms, weights):
        samples = Samples(times_ms=[ms], warmup=1, warmup_s=0.0)
        return Result("qwen3", "uniform", backend, "step", "ok", samples=samples, weights=weights)

    results = [
        timed("triton", 10.0, "single"),
        timed("torch-grouped-mm", 14.0, "single"),  # 1.4x: met
        timed("triton", 10.0, "discrete"),
        timed("torch-grouped-mm", 11.0, "discrete"),  # 1.1x: not met
    ]
    rows = targets.evaluate(
        results, {"qwen3": PRESETS["qwen3"]}, PRESETS, ["uniform"],
        layouts=["single", "discrete"], comparable=True, dtype=torch.bfloat16,
    )  # fmt: skip
    judged_rows = {r["weights"]: r for r in rows if r["id"] == "step-qwen3-vs-torch-grouped-mm"}
    assert judged_rows["single"]["value"] == pytest.approx(1.4)
    assert judged_rows["single"]["met"] is True
    assert judged_rows["discrete"]["value"] == pytest.approx(1.1)
    assert judged_rows["discrete"]["met"] is False
    ratios = {
        r["weights"]: r["value"]
        for r in compare.ratio_rows(results)
        if (r["impl"], r["reference"]) == ("triton", "torch-grouped-mm")
    }
    assert ratios == pytest.approx({"single": 1.4, "discrete": 1.1})
