"""The torch-grouped-mm backend: where it refuses to run, and every row of CONTRACT.md against
refimpl on CPU (torch._grouped_mm's CPU fallback, the sm90 gate lifted)."""

import pytest
import torch

from gmlp_check.fused.grouped_mm import TorchGroupedMMMLP

from ..harness import MainGrads, nonempty
from .harness import (
    GMM_CASE,
    Case,
    allow_grouped_mm_on_cpu,
    assert_outputs_match,
    run_pair,
    tolerance,
)


def test_torch_grouped_mm_refuses_what_it_cannot_run():
    with pytest.raises(NotImplementedError) as err:
        TorchGroupedMMMLP(**Case(dtype=torch.float32, device="cpu").kwargs())
    message = str(err.value)
    for part in ("torch-grouped-mm", "torch.bfloat16", "CUDA", "9.0", "torch.float32", "cpu"):
        assert part in message


@pytest.fixture
def grouped_mm_on_cpu(monkeypatch):
    allow_grouped_mm_on_cpu(monkeypatch)


def test_torch_grouped_mm_needs_aligned_sizes(grouped_mm_on_cpu):
    with pytest.raises(NotImplementedError, match="hidden and ffn to be multiples of 8"):
        TorchGroupedMMMLP(**GMM_CASE.with_(hidden=20).kwargs())
    TorchGroupedMMMLP(**GMM_CASE.kwargs())  # the gate lifted, aligned sizes build


@pytest.mark.parametrize(
    ("how", "delay", "single"),
    [
        (None, False, False),
        (MainGrads(), False, True),
        (MainGrads(overwrite=True, fill="nan"), False, False),
        (MainGrads(fsdp=True, overwrite=True, fill="nan"), True, True),
        (MainGrads(zero_out=True), True, False),
    ],
    ids=["plain", "accumulate", "overwrite", "fsdp-delayed", "zero-out-delayed"],
)
def test_torch_grouped_mm_contract(grouped_mm_on_cpu, how, delay, single):
    case = GMM_CASE.with_(
        activation="scaled_swiglu",
        accumulate_into_main_grad=how is not None,
        delay=delay,
        single=single,
    )
    ref, fused = run_pair(case, how, backend="torch-grouped-mm")
    assert_outputs_match(ref, fused, case.dtype)
    assert fused.wgrad_hook_calls == ref.wgrad_hook_calls
    for name, r in nonempty(ref.grads.items(), "parameters"):
        if "bias" in name or how is None:
            torch.testing.assert_close(fused.grads[name], r, **tolerance(case.dtype), msg=name)
        else:
            assert fused.grads[name].shape == r.shape and fused.grads[name].dtype == r.dtype
            if how.zero_out:
                assert torch.count_nonzero(fused.grads[name]) == 0
    if how is None:
        return
    for name, r in nonempty(ref.main_grads.items(), "main_grads"):
        assert not fused.main_grads[name].isnan().any(), name
        torch.testing.assert_close(fused.main_grads[name], r, **tolerance(case.dtype), msg=name)
        assert fused.grad_added[name] == ref.grad_added[name]
    if how.overwrite:
        empty = (
            fused.main_grads["fc1.weight"].view(3, -1)[1]
            if single
            else fused.main_grads["fc1.weight1"]
        )
        assert torch.count_nonzero(empty) == 0


def test_torch_grouped_mm_zero_tokens(grouped_mm_on_cpu):
    case = GMM_CASE.with_(accumulate_into_main_grad=True, splits=(0, 0, 0))
    ref, fused = run_pair(case, MainGrads(overwrite=True, fill="nan"), backend="torch-grouped-mm")
    assert fused.y[0].shape == (0, case.hidden)
    for name in nonempty(ref.main_grads, "main_grads"):
        assert torch.count_nonzero(fused.main_grads[name]) == 0
