"""Which weight gradients go to cuBLAS per expert (fused.tiles.wgrad_by_cublas): the choice
is made on the host from the split sizes, and only where cuBLAS can run it. The GEMMs
themselves run in tests/fused/test_gpu.py::test_weight_gradients_by_cublas; what the route
does without a GEMM is checked here."""

from types import SimpleNamespace

import pytest
import torch

from gmlp_check.fused.cublas_wgrad import has_fp32_output_gemms, per_expert_wgrad
from gmlp_check.fused.main_grad import ExpertRegion
from gmlp_check.fused.tiles import CUBLAS_WGRAD_MIN_MACS_PER_EXPERT, wgrad_by_cublas

CUDA = torch.device("cuda")
N, K = 4096, 4096
# The fewest mean rows per expert that reach the threshold for an N x K gradient.
ROWS = -(-CUBLAS_WGRAD_MIN_MACS_PER_EXPERT // (N * K))

needs_fp32_output_gemms = pytest.mark.skipif(
    not has_fp32_output_gemms(), reason="this torch has no out_dtype addmm / mm"
)


@needs_fp32_output_gemms
def test_the_choice_turns_at_the_threshold_on_the_mean_rows():
    assert wgrad_by_cublas([ROWS, ROWS], N, K, CUDA, torch.bfloat16)
    assert wgrad_by_cublas([2 * ROWS, 0], N, K, CUDA, torch.float16)  # the mean, not the least
    assert not wgrad_by_cublas([ROWS - 1, ROWS - 1], N, K, CUDA, torch.bfloat16)
    assert not wgrad_by_cublas([2 * ROWS - 1, 0], N, K, CUDA, torch.bfloat16)


@needs_fp32_output_gemms
@pytest.mark.parametrize(
    ("device", "dtype"),
    [(torch.device("cpu"), torch.bfloat16), (CUDA, torch.float32)],
    ids=["cpu-interpreter", "fp32"],
)
def test_never_where_the_triton_kernel_must_run(device, dtype):
    # CPU: the out_dtype GEMMs run on CUDA only; fp32: cuBLAS would round to TF32 or differ
    # from the IEEE dots the fp32 path promises.
    assert not wgrad_by_cublas([100 * ROWS] * 2, N, K, device, dtype)


def test_no_experts_no_choice():
    assert not wgrad_by_cublas([], N, K, CUDA, torch.bfloat16)


def test_torch_older_than_the_route_ran_on_takes_triton(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.10.0")
    has_fp32_output_gemms.cache_clear()
    try:
        assert not has_fp32_output_gemms()
        assert not wgrad_by_cublas([100 * ROWS] * 2, N, K, CUDA, torch.bfloat16)
    finally:
        has_fp32_output_gemms.cache_clear()


def test_an_expert_without_rows_is_not_touched_when_accumulating():
    # Nothing to add: no GEMM at all (on the CPU, where the out_dtype GEMMs do not exist, a
    # call would raise), and the region keeps its contents bit for bit.
    region = torch.full((4, 3), 1.5)
    plan = SimpleNamespace(experts=[ExpertRegion(0, region, accumulate=True)])
    dy, x = torch.randn(5, 4).half(), torch.randn(5, 3).half()
    per_expert_wgrad(dy, x, (0, 5), plan)
    assert torch.equal(region, torch.full((4, 3), 1.5))
