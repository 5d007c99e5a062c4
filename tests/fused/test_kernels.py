"""Each kernel against plain torch on CPU, through Triton's interpreter (fp32 and fp16).

Shapes: ragged splits with an empty expert and an expert spanning two row tiles; feature
sizes that are not multiples of the interpreter's blocks (BLOCK_M=16, BLOCK_N=32,
BLOCK_K=16); and T=0.
"""

import dataclasses

import pytest
import torch

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.kernels.activations import ACTIVATION_CODES
from gmlp_check.fused.tiles import tiles_for
from gmlp_check.refimpl import ACTIVATIONS

SPLITS = [5, 0, 18, 3]
IN, OUT = 24, 40
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])


def tol(dtype):
    # fp16 outputs round once to 2^-11 relative; values here are O(10): 1e-2 absolute.
    return {"rtol": 2e-3, "atol": 2e-2} if dtype == torch.float16 else {}


def rows(splits, g):
    start = sum(splits[:g])
    return slice(start, start + splits[g])


def device_splits(splits):
    return torch.tensor(splits, dtype=torch.int32)


def randn(*shape, dtype, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@DTYPES
@pytest.mark.parametrize("transpose", [True, False], ids=["x@W.T", "x@W"])
def test_grouped_gemm(dtype, transpose):
    g = len(SPLITS)
    a = randn(sum(SPLITS), IN, dtype=dtype, seed=0)
    mats = [
        randn(OUT, IN, dtype=dtype, seed=1 + e)
        if transpose
        else randn(IN, OUT, dtype=dtype, seed=1 + e)
        for e in range(g)
    ]
    biases = [randn(OUT, dtype=dtype, seed=10 + e) for e in range(g)]
    out = grouped_ops.grouped_gemm(
        a, device_splits(SPLITS), mats, transpose=transpose, biases=biases
    )
    for e in range(g):
        m = mats[e].float().t() if transpose else mats[e].float()
        expected = a[rows(SPLITS, e)].float() @ m + biases[e].float()
        torch.testing.assert_close(out[rows(SPLITS, e)].float(), expected, **tol(dtype))


def test_grouped_gemm_reads_a_single_grouped_weight_and_strided_inputs():
    weight = randn(len(SPLITS), OUT, IN, dtype=torch.float32, seed=3)
    wide = randn(sum(SPLITS), 2 * IN, dtype=torch.float32, seed=4)
    a = wide[:, ::2]  # non-unit stride along k
    out = grouped_ops.grouped_gemm(a, device_splits(SPLITS), list(weight.unbind(0)), transpose=True)
    for e in range(len(SPLITS)):
        torch.testing.assert_close(out[rows(SPLITS, e)], a[rows(SPLITS, e)] @ weight[e].t())


# fc2's dgrad with the derivative in the GEMM's epilogue, or in a kernel of its own after a
# GEMM that stores da in the operands' type (the default for 16-bit: fused.tiles).
APART = pytest.mark.parametrize("apart", [False, True], ids=["epilogue", "apart"])


@DTYPES
@APART
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_fc1_activation_and_fc2_dgrad_activation(dtype, activation, apart):
    act = ACTIVATIONS[activation]
    g, hidden, ffn = len(SPLITS), IN, 20
    fc1_out = act.fc1_out_features(ffn)
    tokens = sum(SPLITS)
    x = randn(tokens, hidden, dtype=dtype, seed=0)
    w1 = [randn(fc1_out, hidden, dtype=dtype, seed=1 + e) * 0.3 for e in range(g)]
    b1 = [randn(fc1_out, dtype=dtype, seed=10 + e) for e in range(g)]
    w2 = [randn(hidden, ffn, dtype=dtype, seed=20 + e) * 0.3 for e in range(g)]
    dy = randn(tokens, hidden, dtype=dtype, seed=30)
    probs = torch.rand(tokens, generator=torch.Generator().manual_seed(40)).to(dtype)
    probs = probs if act.uses_probs else None
    splits = device_splits(SPLITS)
    code = ACTIVATION_CODES[activation]

    h, a = grouped_ops.fc1_forward(x, splits, w1, b1, activation=code, glu=act.glu, probs=probs)
    expected_h = torch.cat(
        [x[rows(SPLITS, e)].float() @ w1[e].float().t() + b1[e].float() for e in range(g)]
    )
    torch.testing.assert_close(h.float(), expected_h, **tol(dtype))

    # The activation and its derivative by autograd of refimpl's formula, from the stored h.
    h_ref = h.float().requires_grad_()
    p_ref = probs.float().requires_grad_() if probs is not None else None
    a_ref = act(h_ref, p_ref)
    torch.testing.assert_close(a.float(), a_ref.detach(), **tol(dtype))

    dh, dprobs = grouped_ops.fc2_dgrad_activation(
        dy, splits, w2, h, activation=code, glu=act.glu, probs=probs, apart=apart
    )
    da = torch.cat([dy[rows(SPLITS, e)].float() @ w2[e].float() for e in range(g)])
    # Apart, da is stored in the operands' type before the derivative, as autograd in that
    # type stores it.
    a_ref.backward(da.to(dtype).float() if apart else da)
    torch.testing.assert_close(dh.float(), h_ref.grad, **tol(dtype))
    if probs is None:
        assert dprobs is None
    else:
        torch.testing.assert_close(dprobs, p_ref.grad, **tol(dtype))


@APART
def test_clamped_qgeglu_derivative_at_the_clamp_limits(apart):
    """Gradients pass at exactly +-7 and vanish beyond, as the reference's clip does, whatever
    the torch version (clamp's derivative at the limit changed in torch 2.14)."""
    act = ACTIVATIONS["clamped_qgeglu"]
    limits = torch.tensor([6.5, 7.0, 7.5, -7.0, -7.5, 0.0])
    h = torch.stack([torch.cat([limits, limits])] * 5)  # gate and linear halves
    ffn = limits.numel()
    w2 = [torch.eye(ffn)[:, :ffn].contiguous()]  # da = dy
    dy = torch.ones(5, ffn)
    splits = device_splits([5])
    dh, _ = grouped_ops.fc2_dgrad_activation(
        dy,
        splits,
        w2,
        h,
        activation=ACTIVATION_CODES["clamped_qgeglu"],
        glu=True,
        probs=None,
        apart=apart,
    )
    h_ref = h.clone().requires_grad_()
    act(h_ref, None).backward(dy)
    torch.testing.assert_close(dh, h_ref.grad)


@DTYPES
@pytest.mark.parametrize("accumulate", [False, True], ids=["overwrite", "accumulate"])
def test_wgrad_writes_each_region_and_nothing_around_it(dtype, accumulate):
    tokens = sum(SPLITS)
    dy = randn(tokens, OUT, dtype=dtype, seed=0)
    x = randn(tokens, IN, dtype=dtype, seed=1)
    # One buffer with a guard band of NaN around and between the expert regions.
    pad = 7
    region = OUT * IN
    buffer = torch.full((pad + len(SPLITS) * (region + pad),), float("nan"))
    start = randn(len(SPLITS), OUT, IN, dtype=torch.float32, seed=2)
    regions = []
    for e in range(len(SPLITS)):
        offset = pad + e * (region + pad)
        view = buffer[offset : offset + region].view(OUT, IN)
        view.copy_(start[e])
        regions.append((e, view))
    before = buffer.clone()
    grouped_ops.grouped_wgrad(dy, x, device_splits(SPLITS), regions, accumulate=accumulate)
    for e, view in regions:
        wgrad = dy[rows(SPLITS, e)].float().t() @ x[rows(SPLITS, e)].float()
        expected = start[e] + wgrad if accumulate else wgrad
        torch.testing.assert_close(view, expected, rtol=1e-5, atol=1e-5)
        if SPLITS[e] == 0 and accumulate:  # untouched, bit for bit
            assert torch.equal(view, start[e])
        if SPLITS[e] == 0 and not accumulate:  # zero-filled
            assert torch.count_nonzero(view) == 0
    guard = torch.ones_like(buffer, dtype=torch.bool)
    for e in range(len(SPLITS)):
        offset = pad + e * (region + pad)
        guard[offset : offset + region] = False
    assert buffer[guard].isnan().all() and before[guard].isnan().all(), "wrote outside a region"


def test_wgrad_launches_only_the_listed_experts_and_strided_regions():
    tokens = sum(SPLITS)
    dy = randn(tokens, OUT, dtype=torch.float32, seed=0)
    x = randn(tokens, IN, dtype=torch.float32, seed=1)
    # Region of expert 2 is a transposed view (strides differ from expert 0's): two layouts.
    r0 = torch.full((OUT, IN), float("nan"))
    r2 = torch.full((IN, OUT), float("nan")).t()
    grouped_ops.grouped_wgrad(dy, x, device_splits(SPLITS), [(0, r0), (2, r2)], accumulate=False)
    for e, view in ((0, r0), (2, r2)):
        expected = dy[rows(SPLITS, e)].t() @ x[rows(SPLITS, e)]
        torch.testing.assert_close(view, expected, rtol=1e-5, atol=1e-5)


def test_wgrad_reads_the_rows_of_each_listed_expert_in_any_listing_order():
    # One launch over experts listed backwards with one left out: each program's row table
    # entry (fused/operands.py, entry_rows) must follow the listing, not the expert numbers.
    tokens = sum(SPLITS)
    dy = randn(tokens, OUT, dtype=torch.float32, seed=0)
    x = randn(tokens, IN, dtype=torch.float32, seed=1)
    listed = [e for e in reversed(range(len(SPLITS))) if e != 1]
    regions = {e: torch.full((OUT, IN), float("nan")) for e in listed}
    grouped_ops.grouped_wgrad(
        dy, x, device_splits(SPLITS), [(e, regions[e]) for e in listed], accumulate=False
    )
    for e in listed:
        expected = dy[rows(SPLITS, e)].t() @ x[rows(SPLITS, e)]
        torch.testing.assert_close(regions[e], expected, rtol=1e-5, atol=1e-5)


@DTYPES
@pytest.mark.parametrize("accumulate", [False, True], ids=["overwrite", "accumulate"])
@pytest.mark.parametrize("splits", [SPLITS, [*SPLITS, 9]], ids=["even", "odd"])
def test_wgrad_in_heavy_light_pairs_writes_what_expert_order_writes(dtype, accumulate, splits):
    # The paired grid reorders the entries by row count and alternates two experts' tiles;
    # every region must get the same sum, bit for bit, and an odd count's last slot nothing.
    tokens = sum(splits)
    dy = randn(tokens, OUT, dtype=dtype, seed=0)
    x = randn(tokens, IN, dtype=dtype, seed=1)
    start = randn(len(splits), OUT, IN, dtype=torch.float32, seed=2)
    results = {}
    for paired in (False, True):
        tiles = dataclasses.replace(tiles_for("wgrad", x.device, dtype), paired=paired)
        regions = start.clone() if accumulate else torch.full_like(start, float("nan"))
        grouped_ops.grouped_wgrad(
            dy, x, device_splits(splits), regions, accumulate=accumulate, tiles=tiles
        )
        results[paired] = regions
    assert torch.equal(results[True], results[False])
    for e in range(len(splits)):
        wgrad = dy[rows(splits, e)].float().t() @ x[rows(splits, e)].float()
        expected = start[e] + wgrad if accumulate else wgrad
        torch.testing.assert_close(results[True][e], expected, rtol=1e-5, atol=1e-5)


@DTYPES
def test_bias_grad(dtype):
    dy = randn(sum(SPLITS), OUT, dtype=dtype, seed=0)
    sums = grouped_ops.grouped_bias_grad(dy, device_splits(SPLITS))
    assert sums.dtype == torch.float32
    for e in range(len(SPLITS)):
        torch.testing.assert_close(sums[e], dy[rows(SPLITS, e)].float().sum(0), **tol(dtype))


def test_zero_tokens_everywhere():
    splits = device_splits([0, 0, 0, 0])
    x = torch.zeros(0, IN)
    w = [randn(OUT, IN, dtype=torch.float32, seed=e) for e in range(4)]
    assert grouped_ops.grouped_gemm(x, splits, w, transpose=True).shape == (0, OUT)
    h, a = grouped_ops.fc1_forward(
        x, splits, w, None, activation=ACTIVATION_CODES["swiglu"], glu=True, probs=None
    )
    assert h.shape == (0, OUT) and a.shape == (0, OUT // 2)
    regions = [(e, torch.full((OUT, IN), float("nan"))) for e in range(4)]
    grouped_ops.grouped_wgrad(torch.zeros(0, OUT), x, splits, regions, accumulate=False)
    assert all(torch.count_nonzero(r) == 0 for _, r in regions)
    assert torch.count_nonzero(grouped_ops.grouped_bias_grad(torch.zeros(0, OUT), splits)) == 0


@pytest.mark.parametrize("grouped", [False, True], ids=["regions", "grouped"])
def test_wgrad_refuses_an_expert_without_a_split_size(grouped):
    # The rows are looked up by expert id; an id past the split sizes has none to look up.
    tokens = sum(SPLITS)
    dy = randn(tokens, OUT, dtype=torch.float32, seed=0)
    x = randn(tokens, IN, dtype=torch.float32, seed=1)
    count = len(SPLITS) + 1
    if grouped:
        destinations = torch.zeros(count, OUT, IN)
    else:
        destinations = [(e, torch.zeros(OUT, IN)) for e in range(count)]
    with pytest.raises(ValueError, match=r"destinations: expert ids must lie in \[0, 4\)"):
        grouped_ops.grouped_wgrad(dy, x, device_splits(SPLITS), destinations, accumulate=False)
