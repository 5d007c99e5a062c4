"""Bad input is rejected with an error naming the argument, before anything is written."""

import pytest
import torch

from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.megatron import setup_ddp_param


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return GroupedMLP(3, 8, 4, activation="scaled_swiglu")


@pytest.mark.parametrize(
    "splits, error, pattern",
    [
        ([2, 2, 2], ValueError, r"split_sizes: expected sizes summing to the 5 rows of x"),
        ([2, 3], ValueError, r"split_sizes: expected 3 sizes \(one per expert\), got 2"),
        ([6, -1, 0], ValueError, r"split_sizes: expected non-negative sizes"),
        ([2.0, 3.0, 0.0], TypeError, r"split_sizes: expected 3 ints"),
        (torch.tensor([2.0, 3.0, 0.0]), TypeError, r"split_sizes: expected a 1-D integer tensor"),
        (torch.tensor([[2, 3, 0]]), TypeError, r"split_sizes: expected a 1-D integer tensor"),
        (5, TypeError, r"split_sizes: expected a list of 3 ints"),
    ],
)
def test_bad_split_sizes(mlp, splits, error, pattern):
    x = torch.randn(5, 8)
    with pytest.raises(error, match=pattern):
        mlp(x, splits, torch.rand(5))


@pytest.mark.parametrize(
    "x, pattern",
    [
        (torch.randn(5, 7), r"x: expected shape \[T, hidden=8\], got \(5, 7\)"),
        (torch.randn(1, 5, 8), r"x: expected shape \[T, hidden=8\]"),
        (torch.randn(5, 8, dtype=torch.float64), r"x: expected dtype torch.float32"),
    ],
)
def test_bad_input(mlp, x, pattern):
    with pytest.raises(ValueError, match=pattern):
        mlp(x, [2, 3, 0], torch.rand(5))


def test_probs_required_and_shaped(mlp):
    x = torch.randn(5, 8)
    with pytest.raises(
        ValueError, match=r"probs: activation='scaled_swiglu' expects a tensor \[T=5\]"
    ):
        mlp(x, [2, 3, 0])
    with pytest.raises(ValueError, match=r"probs: expected shape \[T=5\], got \(5, 1\)"):
        mlp(x, [2, 3, 0], torch.rand(5, 1))


def test_probs_rejected_where_unused():
    mlp = GroupedMLP(3, 8, 4, activation="swiglu")
    with pytest.raises(ValueError, match=r"probs: only activation='scaled_swiglu' takes probs"):
        mlp(torch.randn(5, 8), [2, 3, 0], torch.rand(5))


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"activation": "tanh"}, r"activation: expected one of swiglu, .*got 'tanh'"),
        ({"num_experts": 0}, r"num_experts: expected a positive int, got 0"),
    ],
)
def test_bad_constructor_arguments(kwargs, pattern):
    args = {"num_experts": 3, "hidden": 8, "ffn": 4} | kwargs
    with pytest.raises(ValueError, match=pattern):
        GroupedMLP(**args)


def non_viewable(numel: int) -> torch.Tensor:
    """A buffer with the right element count that cannot be viewed as [.., out, in]."""
    return torch.zeros(numel // 2, 2).t()


@pytest.mark.parametrize(
    "bad_buffer, pattern",
    [
        (lambda n: torch.zeros(n + 1), r"fc1\.weight\.main_grad: expected 192 elements"),
        (
            lambda n: torch.zeros(n, dtype=torch.bfloat16),
            r"fc1\.weight.main_grad: expected dtype torch.float32",
        ),
        (
            non_viewable,
            r"fc1\.weight.main_grad: expected a buffer viewable as \[3, 8, 8\] without a copy",
        ),
    ],
    ids=["numel", "dtype", "not-viewable"],
)
def test_bad_main_grad_is_rejected_before_any_write(bad_buffer, pattern):
    torch.manual_seed(0)
    mlp = GroupedMLP(3, 8, 4, single_grouped_weight=True, accumulate_into_main_grad=True)
    fc2_buffer = torch.full((mlp.fc2.weight.numel(),), float("nan"))
    setup_ddp_param(mlp.fc2.weight, fc2_buffer)
    # Megatron's engines shape main_grad like the parameter; a bad buffer comes from a caller
    # that set param.main_grad itself.
    setup_ddp_param(mlp.fc1.weight, torch.zeros(mlp.fc1.weight.numel()))
    mlp.fc1.weight.main_grad = bad_buffer(mlp.fc1.weight.numel())
    with pytest.raises((ValueError, TypeError), match=pattern):
        mlp(torch.randn(5, 8), [2, 3, 0]).sum().backward()
    assert fc2_buffer.isnan().all(), "fc2's main_grad was written although fc1's was rejected"
