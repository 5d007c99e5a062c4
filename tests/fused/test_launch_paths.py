"""The launchers' fast paths give the same results as the general ones (interpreter, fp16)."""

import torch

from gmlp_check.fused import grouped_ops, operands
from gmlp_check.fused.tiles import tiles_for

SPLITS = [5, 0, 18, 3]
G, IN, OUT = len(SPLITS), 32, 48


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).half()


def splits():
    return torch.tensor(SPLITS, dtype=torch.int32)


def test_tma_and_pointer_loads_agree():
    a, w = randn(sum(SPLITS), IN, seed=0), randn(G, OUT, IN, seed=1)
    tiles = tiles_for("row_gemm", a.device, a.dtype)
    ops = operands.row_operands(
        a,
        operands.expert_pointers(w, a.device),
        transpose=True,
        tiles=tiles,
    )
    assert ops.tma  # 16-bit, aligned, one stacked weight: the descriptor path
    with_tma = grouped_ops.grouped_gemm(a, splits(), w, transpose=True)
    pointers = grouped_ops.grouped_gemm(
        a,
        splits(),
        list(w.unbind(0)),
        transpose=True,
        tiles=tiles.__class__(**{**vars(tiles), "tma": False}),
    )
    torch.testing.assert_close(with_tma, pointers, rtol=0, atol=0)


def test_grouped_tensor_and_list_of_experts_give_the_same_pointers():
    w = randn(G, OUT, IN, seed=2)
    whole = operands.expert_pointers(w, w.device)
    views = operands.expert_pointers(list(w.unbind(0)), w.device)
    assert torch.equal(whole.pointers, views.pointers)
    assert whole.strides == views.strides and whole.rows == views.rows == OUT
    assert whole.stacked.data_ptr() == views.stacked.data_ptr() == w.data_ptr()


def test_wgrad_into_one_grouped_destination_equals_per_expert_regions():
    dy, x = randn(sum(SPLITS), OUT, seed=3), randn(sum(SPLITS), IN, seed=4)
    start = torch.randn(G, OUT, IN)
    whole, regions = start.clone(), start.clone()
    grouped_ops.grouped_wgrad(dy, x, splits(), whole, accumulate=True)
    grouped_ops.grouped_wgrad(dy, x, splits(), list(enumerate(regions.unbind(0))), accumulate=True)
    torch.testing.assert_close(whole, regions, rtol=0, atol=0)
    assert torch.equal(whole[1], start[1])  # the empty expert, untouched
