"""The launchers' fast paths give the same results as the general ones (interpreter, fp16)."""

import pytest
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


def discrete(shape, seed):
    """G matrices of ``shape`` that do not lie back to back (each expert its own slice of a
    padded buffer), as discrete weights are: no one descriptor covers them."""
    rows, cols = shape
    padded = randn(G, rows + 8, cols, seed=seed)
    return [padded[g, :rows] for g in range(G)]


def without_tma(tiles):
    return tiles.__class__(**{**vars(tiles), "tma": False})


def test_discrete_weights_take_a_descriptor_per_expert():
    a = randn(sum(SPLITS), IN, seed=5)
    tiles = tiles_for("row_gemm", a.device, a.dtype)
    mats = operands.expert_pointers(discrete((OUT, IN), seed=6), a.device)
    assert mats.stacked is None
    ops = operands.row_operands(a, mats, transpose=True, tiles=tiles)
    assert ops.tma and ops.per_expert_desc
    # An unaligned expert (one element in) cannot have a descriptor: pointers then.
    shifted = [w.view(-1)[1 : 1 + OUT * IN // 2].view(OUT // 2, IN) for w in mats.tensors]
    assert not operands.row_operands(
        a, operands.expert_pointers(shifted, a.device), transpose=True, tiles=tiles
    ).tma


def test_descriptors_per_expert_agree_with_pointer_loads_in_every_row_kernel():
    """grouped_gemm both ways round (K along the stored rows not a multiple of BLOCK_K, where
    the stacked descriptor is refused), fc1 forward with GLU and fc2 dgrad with its
    activation: discrete weights through per-expert descriptors give the pointer path's
    results exactly."""
    from gmlp_check.fused.kernels.activations import ACTIVATION_CODES

    swiglu = ACTIVATION_CODES["swiglu"]
    s = splits()
    odd_k = 40  # BLOCK_K is 16 in the interpreter's tiles
    x, a_odd = randn(sum(SPLITS), IN, seed=7), randn(sum(SPLITS), odd_k, seed=8)
    w_t, w_n = discrete((OUT, IN), seed=9), discrete((odd_k, OUT), seed=10)
    w1, w2 = discrete((2 * OUT, IN), seed=11), discrete((IN, OUT), seed=12)
    dy, probs = randn(sum(SPLITS), IN, seed=13), randn(sum(SPLITS), seed=14).abs()
    row, act = (tiles_for(k, x.device, x.dtype) for k in ("row_gemm", "activation_gemm"))
    h, _ = grouped_ops.fc1_forward(
        x, s, w1, None, activation=swiglu, glu=True, probs=probs, tiles=without_tma(act)
    )
    runs = {
        "gemm, W^T": lambda t: grouped_ops.grouped_gemm(x, s, w_t, transpose=True, tiles=t(row)),
        "gemm, B": lambda t: grouped_ops.grouped_gemm(a_odd, s, w_n, transpose=False, tiles=t(row)),
        "fc1 forward": lambda t: grouped_ops.fc1_forward(
            x, s, w1, None, activation=swiglu, glu=True, probs=probs, tiles=t(act)
        ),
        "fc2 dgrad": lambda t: grouped_ops.fc2_dgrad_activation(
            dy, s, w2, h, activation=swiglu, glu=True, probs=probs, tiles=t(act)
        ),
    }
    for name, run in runs.items():
        per_expert, pointers = run(lambda t: t), run(without_tma)
        for got, want in zip(_flat(per_expert), _flat(pointers)):
            torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)


def _flat(result):
    return [result] if isinstance(result, torch.Tensor) else [r for r in result if r is not None]


def padded_regions(start, row_pad, offset):
    """Each expert's [OUT, IN] region inside its own NaN-filled buffer: rows ``IN + row_pad``
    long, the region ``offset`` elements in. Returns (buffers, (expert, region) pairs)."""
    buffers, regions = [], []
    for g in range(G):
        buffer = torch.full((offset + OUT * (IN + row_pad),), float("nan"))
        region = buffer[offset:].view(OUT, IN + row_pad)[:, :IN]
        region.copy_(start[g])
        buffers.append(buffer)
        regions.append((g, region))
    return buffers, regions


def with_option(tiles, option, on):
    return tiles.__class__(**{**vars(tiles), option: on})


# Launch options of the weight-gradient kernel that change how main_grad's tile is read and
# written, never what: (Tiles field, what it changes).
DEST_OPTIONS = [
    ("tma_dest", "the fp32 tiles read and written through per-expert descriptors"),
    ("evict_first_dest", "the fp32 tiles stored with an evict-first cache hint"),
]


@pytest.mark.parametrize("option", [name for name, _ in DEST_OPTIONS])
def test_wgrad_destination_options_write_what_pointers_write(option):
    """Each option on: the same bits as off, in both modes, with tiles clipped at the
    region's edges (OUT and IN are not multiples of the interpreter's tile) and nothing
    written past them."""
    dy, x = randn(sum(SPLITS), OUT, seed=15), randn(sum(SPLITS), IN, seed=16)
    start = torch.randn(G, OUT, IN, generator=torch.Generator().manual_seed(17))
    tiles = tiles_for("wgrad", dy.device, dy.dtype)
    assert OUT % tiles.block_n  # a clipped tile along N
    for accumulate in (True, False):
        results = {}
        for on in (False, True):
            buffers, regions = padded_regions(start, row_pad=4, offset=4)
            launches = operands.region_layouts(regions, dy.device)
            assert [operands.region_tma_ready(launch) for launch in launches] == [True]
            tried = with_option(tiles, option, on)
            grouped_ops.grouped_wgrad(dy, x, splits(), regions, accumulate=accumulate, tiles=tried)
            for buffer in buffers:
                outside = torch.ones_like(buffer, dtype=torch.bool)
                outside[4:].view(OUT, IN + 4)[:, :IN] = False
                assert buffer[outside].isnan().all(), "wrote outside a region"
            results[on] = torch.stack([region for _, region in regions])
        torch.testing.assert_close(results[True], results[False], rtol=0, atol=0)
        assert torch.equal(results[True][1], start[1] if accumulate else torch.zeros(OUT, IN))


def test_regions_no_descriptor_can_describe_take_pointers():
    start = torch.zeros(G, OUT, IN)
    for row_pad, offset in ((4, 1), (3, 4)):  # a base off 16 bytes; a row stride off 16 bytes
        _, regions = padded_regions(start, row_pad=row_pad, offset=offset)
        launches = operands.region_layouts(regions, torch.device("cpu"))
        assert not any(operands.region_tma_ready(launch) for launch in launches)
