"""tests/harness.py, which the oracle's and the fused path's tests lean on: a helper that
checked less than it says would make every test built on it pass vacuously."""

import pytest
import torch

from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.megatron import ddp_post_backward_hook

from ..harness import (
    MainGrads,
    attach,
    engine_hook,
    main_grad_buffers,
    named_weights,
    nonempty,
    same_bits,
    same_memory,
)


def test_nonempty_fails_on_an_empty_collection():
    assert nonempty(iter([1, 2]), "items") == [1, 2]
    with pytest.raises(AssertionError, match="no weights"):
        nonempty([], "weights")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_same_bits_tells_nan_sentinels_and_signed_zeros(dtype):
    nan = torch.tensor([float("nan"), 1.0], dtype=dtype)
    assert same_bits(nan, nan.clone())
    assert not torch.equal(nan, nan.clone())  # why same_bits exists
    assert not same_bits(torch.zeros(2, dtype=dtype), -torch.zeros(2, dtype=dtype))
    assert not same_bits(nan, nan.double() if dtype != torch.float64 else nan.float())


def test_same_memory_is_the_buffer_or_a_view_of_it_not_a_copy():
    buffer = torch.zeros(6)
    assert same_memory(buffer, buffer) and same_memory(buffer.view(2, 3), buffer)
    assert not same_memory(buffer.clone(), buffer)
    assert not same_memory(buffer[:3], buffer)
    assert not same_memory(None, buffer)


@pytest.mark.parametrize(
    "how",
    [MainGrads(), MainGrads(overwrite=True, fill="nan"), MainGrads(fsdp=True, overwrite=True)],
    ids=["ddp", "ddp-overwrite", "fsdp"],
)
def test_attach_gives_every_weight_a_flat_fp32_buffer_the_same_for_every_module(how):
    first, second = GroupedMLP(3, 4, 3, bias=True), GroupedMLP(3, 4, 3, bias=True)
    buffers = attach(first, how)
    assert list(buffers) == [n for n, _ in named_weights(first)]  # weights only, not biases
    again = main_grad_buffers(second, how)
    for name, p in named_weights(first):
        assert buffers[name].dtype == torch.float32 and buffers[name].shape == (p.numel(),)
        assert same_bits(buffers[name], again[name])
        assert bool(buffers[name].isnan().all()) is (how.fill == "nan")
        main_grad = p.get_main_grad() if how.fsdp else p.main_grad
        assert same_memory(main_grad, buffers[name])
        assert getattr(p, "overwrite_main_grad", False) is how.overwrite


def test_engine_hook_is_the_engine_of_the_setup():
    assert engine_hook(MainGrads()) is ddp_post_backward_hook
    for sharded in (False, True):
        hook = engine_hook(MainGrads(fsdp=True, overwrite=sharded))
        assert hook.keywords == {"sharded": sharded}
