"""The reference's forward and gradients against an independent dense formulation."""

import pytest
import torch

from gmlp_check.refimpl import ACTIVATIONS, GroupedMLP

from .dense import dense_gradients

SPLITS = {
    "ragged-empty": [3, 0, 4, 2],
    "one-expert": [0, 9, 0, 0],
    "no-tokens": [0, 0, 0, 0],
}


def make_case(activation, bias, single, splits, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    mlp = GroupedMLP(
        4, 6, 5, activation=activation, bias=bias, single_grouped_weight=single, dtype=dtype
    )
    T = sum(splits)
    x = torch.randn(T, 6, dtype=dtype, requires_grad=True)
    probs = torch.rand(T, dtype=dtype, requires_grad=True) if mlp.activation.uses_probs else None
    return mlp, x, probs


@pytest.mark.parametrize("splits", SPLITS.values(), ids=SPLITS.keys())
@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_matches_dense_formulation(activation, bias, single, splits):
    mlp, x, probs = make_case(activation, bias, single, splits)
    y = mlp(x, splits, probs)
    dy = torch.randn_like(y)
    y.backward(dy)
    expected = dense_gradients(mlp, x, splits, dy, probs)

    torch.testing.assert_close(y, expected["y"])
    torch.testing.assert_close(x.grad, expected["x"])
    if probs is not None:
        torch.testing.assert_close(probs.grad, expected["probs"])
    for name, p in mlp.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], msg=lambda m, n=name: f"{n}: {m}")


def test_split_sizes_as_tensor_equal_list():
    mlp, x, _ = make_case("swiglu", True, False, [3, 0, 4, 2])
    from_list = mlp(x, [3, 0, 4, 2])
    from_tensor = mlp(x, torch.tensor([3, 0, 4, 2]))
    assert torch.equal(from_list, from_tensor)


@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradcheck(activation, single):
    splits = [2, 0, 3]
    torch.manual_seed(1)
    mlp = GroupedMLP(
        3, 4, 3, activation=activation, bias=True, single_grouped_weight=single, dtype=torch.float64
    )
    names = [n for n, _ in mlp.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in mlp.parameters()]
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    probs = torch.rand(5, dtype=torch.float64, requires_grad=True)
    uses_probs = mlp.activation.uses_probs

    def fn(x, probs, *params):
        return torch.func.functional_call(
            mlp, dict(zip(names, params)), (x, splits, probs if uses_probs else None)
        )

    assert torch.autograd.gradcheck(fn, (x, probs, *params))
