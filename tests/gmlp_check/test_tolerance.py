"""The tolerance model: assert_close as a floor, sqrt(K) growth, exact NaN rules."""

import pytest
import torch

from gmlp_check.tolerance import compare_close, compare_exact, same_values, tolerance_for

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES)
def test_whatever_assert_close_accepts_passes(dtype):
    """assert_close's defaults for the dtype are the floor: a pair it accepts passes here."""
    gen = torch.Generator().manual_seed(0)
    expected = torch.randn(64, 32, generator=gen).to(dtype)
    actual = expected.clone()
    accepted = 0
    for _ in range(8):  # move every element one more ulp away each round
        actual = torch.nextafter(actual, torch.full_like(actual, float("inf")))
        try:
            torch.testing.assert_close(actual, expected)
        except AssertionError:
            break
        accepted += 1
        assert compare_close(actual.float(), expected.float(), tolerance_for(dtype, 1)).passed
    assert accepted >= 1


def fp32_dot_in_two_orders(k, gen):
    a = torch.randn(8, k, generator=gen)
    b = torch.randn(k, 8, generator=gen)
    forward = a @ b
    # The same sum in another order: reversed and in chunks, as a tiled kernel would do it.
    chunks = [a[:, i : i + 16] @ b[i : i + 16] for i in range(0, k, 16)]
    reordered = torch.zeros(8, 8)
    for c in reversed(chunks):
        reordered += c
    return reordered, forward


@pytest.mark.parametrize("k", [16, 1024, 16384])
def test_fp32_reduction_order_stays_within_tolerance(k):
    gen = torch.Generator().manual_seed(k)
    actual, expected = fp32_dot_in_two_orders(k, gen)
    assert compare_close(actual, expected, tolerance_for(torch.float32, k)).passed


def test_tolerance_grows_with_sqrt_of_the_reduction_length():
    small, large = tolerance_for(torch.float32, 100), tolerance_for(torch.float32, 10000)
    eps = torch.finfo(torch.float32).eps
    assert (large.scale_factor - small.scale_factor) == pytest.approx((100 - 10) * eps)
    assert tolerance_for(torch.float32, 0) == tolerance_for(torch.float32, 1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_roundings_pass_and_real_bugs_fail(dtype):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 48, generator=gen).to(dtype)
    w = torch.randn(48, 40, generator=gen).to(dtype)
    exact = x.float() @ w.float()
    # What a kernel returns: fp32 accumulation, stored in the working dtype, then its input to
    # a second GEMM is rounded again.
    stored = (exact.to(dtype).float() @ torch.eye(40)).to(dtype)
    tol = tolerance_for(dtype, 48)
    assert compare_close(stored, exact, tol).passed
    assert not compare_close(2 * exact, exact, tol).passed  # a doubled gradient
    shifted = torch.roll(exact, 1, dims=0)  # a neighbour's rows
    assert not compare_close(shifted, exact, tol).passed


def test_a_surviving_nan_fails_whatever_the_tolerance():
    expected = torch.ones(10)
    actual = expected.clone()
    actual[3] = float("nan")
    loose = tolerance_for(torch.bfloat16, 10**9)
    result = compare_close(actual, expected, loose)
    assert not result.passed and result.max_abs_err is None
    assert "1 NaN where the reference is finite" in result.detail and "[3]" in result.detail


def test_matching_nans_and_infinities_are_equal():
    expected = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_close(expected.clone(), expected, tolerance_for(torch.float32, 1)).passed
    assert not compare_close(
        torch.tensor([1.0, float("nan"), -float("inf")]), expected, tolerance_for(torch.float32, 1)
    ).passed


def test_a_large_before_value_does_not_hide_a_dropped_gradient():
    gen = torch.Generator().manual_seed(2)
    before = 1000 * torch.randn(50, generator=gen)
    wgrad = torch.randn(50, generator=gen)
    expected = before + wgrad
    tol = tolerance_for(torch.bfloat16, 16)
    # Judged against |before + W|, bf16's rtol would admit the loss of W entirely.
    assert compare_close(before, expected, tol).passed
    assert not compare_close(before, expected, tol, base=before).passed
    # And a correct accumulation still passes.
    assert compare_close(before + wgrad.bfloat16().float(), expected, tol, base=before).passed


def test_nan_sentinels_in_the_base_count_as_zero():
    before = torch.full((4, 5), float("nan"))
    wgrad = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    assert compare_close(wgrad.clone(), wgrad, tolerance_for(torch.float32, 4), base=before).passed


def test_each_expert_block_is_judged_against_its_own_scale():
    gen = torch.Generator().manual_seed(4)
    expected = torch.randn(2, 30, generator=gen)
    expected[1] *= 1e-3  # an expert that received few tokens
    actual = expected.clone()
    actual[1] *= 1.5  # 50% wrong, but tiny next to expert 0
    tol = tolerance_for(torch.bfloat16, 8)
    assert compare_close(actual, expected, tol, groups=1).passed
    assert not compare_close(actual, expected, tol, groups=2).passed


def test_shape_mismatch_and_empty_tensors():
    tol = tolerance_for(torch.float32, 1)
    assert not compare_close(torch.zeros(3), torch.zeros(4), tol).passed
    assert compare_close(torch.zeros(0, 4), torch.zeros(0, 4), tol).passed


def test_exact_comparison():
    a = torch.tensor([1.0, float("nan"), 0.0])
    assert same_values(a, torch.tensor([1.0, float("nan"), -0.0])).all()
    assert compare_exact(a, a.clone(), "unchanged").passed
    changed = a.clone()
    changed[0] = 2.0
    result = compare_exact(changed, a, "unchanged")
    assert not result.passed and result.max_abs_err == 1.0 and result.tolerance == 0.0
    assert "1 of 3 elements differ" in result.detail
    nan_written = a.clone()
    nan_written[2] = float("nan")
    assert not compare_exact(nan_written, a, "unchanged").passed


def _round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """Round fp32 values to TF32's 10 explicit mantissa bits (nearest, ties away)."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def test_tf32_gemms_pass_the_derived_tf32_bound_and_not_the_fp32_one():
    from gmlp_check.tolerance import Precision

    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 256, generator=gen), torch.randn(256, 48, generator=gen)
    exact = (a.double() @ b.double()).float()
    tf32 = _round_to_tf32(a) @ _round_to_tf32(b)
    ieee = a @ b
    k = a.shape[1]
    assert compare_close(tf32, exact, tolerance_for(Precision(torch.float32, "tf32"), k)).passed
    assert not compare_close(tf32, exact, tolerance_for(torch.float32, k)).passed
    assert compare_close(ieee, exact, tolerance_for(torch.float32, k)).passed


def test_precision_changes_only_fp32_with_tf32():
    from gmlp_check.tolerance import EPS_TF32, Precision

    assert Precision(torch.float32, "tf32").eps == EPS_TF32
    assert Precision(torch.float32).eps == torch.finfo(torch.float32).eps
    for dtype in (torch.float16, torch.bfloat16):
        assert Precision(dtype, "tf32").eps == Precision(dtype).eps == torch.finfo(dtype).eps
