"""Heavy-light pairs in the weight-gradient grid (fused.tiles.wgrad_tiles, Tiles.paired): the
choice is made on the host from the split sizes, and a layer that takes them still writes
what the contract asks. The kernel's pairs against its expert order, bit for bit:
tests/fused/test_kernels.py::test_wgrad_in_heavy_light_pairs_writes_what_expert_order_writes."""

import pytest
import torch

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.tiles import PAIRED_MAX_MEAN_ROWS, PAIRED_MIN_SKEW, wgrad_tiles

from ..harness import MainGrads
from .harness import Case, run_pair

CPU = torch.device("cpu")
EXPERTS = 4 * PAIRED_MIN_SKEW
# Mean rows 4 (every expert short), the heaviest PAIRED_MIN_SKEW times that, a few empty.
SKEWED = (PAIRED_MIN_SKEW * 4, *[1] * (EXPERTS - 8), *[0] * 7)
SKEWED = (SKEWED[0] + 4 * EXPERTS - sum(SKEWED), *SKEWED[1:])


def tiles(sizes, accumulate=True, dtype=torch.float16, known=True):
    return wgrad_tiles(
        CPU,
        dtype,
        rows=sum(sizes),
        experts=len(sizes),
        heaviest=max(sizes) if known else None,
        accumulate=accumulate,
    )


def test_pairs_need_accumulation_short_experts_and_a_heavy_one():
    assert sum(SKEWED) == 4 * EXPERTS and max(SKEWED) >= PAIRED_MIN_SKEW * 4
    assert tiles(SKEWED).paired
    assert not tiles(SKEWED, accumulate=False).paired  # overwriting: measured mixed
    assert not tiles(SKEWED, known=False).paired  # sizes on the device only
    assert not tiles([4] * EXPERTS).paired  # even loads
    long = [size * (PAIRED_MAX_MEAN_ROWS // 4 + 1) for size in SKEWED]
    assert not tiles(long).paired  # mean above PAIRED_MAX_MEAN_ROWS
    assert not tiles(SKEWED, dtype=torch.float32).paired  # fp32 takes pointer loads
    assert not tiles([0] * EXPERTS).paired


@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
def test_a_skewed_layer_accumulates_through_pairs_what_the_reference_does(single, monkeypatch):
    launched = []
    wgrad = grouped_ops.grouped_wgrad

    def recording(*args, **kwargs):
        launched.append((kwargs["accumulate"], kwargs["tiles"].paired))
        return wgrad(*args, **kwargs)

    monkeypatch.setattr(grouped_ops, "grouped_wgrad", recording)
    case = Case(single=single, accumulate_into_main_grad=True, dtype=torch.float16, splits=SKEWED)
    ref, fused = run_pair(case, MainGrads())
    assert (True, True) in launched and all(paired == acc for acc, paired in launched)
    names = [n for n in ref.grads if "weight" in n]
    assert names
    for name in names:
        torch.testing.assert_close(
            fused.main_grads[name], ref.main_grads[name], rtol=2e-3, atol=2e-2, msg=name
        )
        assert fused.grad_added[name] is True
