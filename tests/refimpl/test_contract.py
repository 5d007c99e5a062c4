"""Each row of CONTRACT.md, checked on the reference with sentinels and exact outcomes."""

import pytest
import torch

from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.megatron import (
    ddp_post_backward_hook,
    install_hooks,
    setup_ddp_param,
    weight_params,
)

from ..harness import MainGrads, attach, nonempty, same_bits, same_memory
from .dense import dense_gradients

SPLITS = [3, 0, 4, 2]  # expert 1 receives no tokens


def build(single=False, delay=False, accumulate_into_main_grad=True, activation="swiglu", seed=0):
    torch.manual_seed(seed)
    mlp = GroupedMLP(
        4,
        6,
        5,
        activation=activation,
        bias=True,
        single_grouped_weight=single,
        accumulate_into_main_grad=accumulate_into_main_grad,
        delay_wgrad_compute=delay,
        dtype=torch.float64,
    )
    x = torch.randn(sum(SPLITS), 6, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(sum(SPLITS), 6, dtype=torch.float64)
    return mlp, x, dy


def attached(mlp, buffers):
    """(name, parameter) of every weight that has a main_grad buffer; never empty."""
    return nonempty(
        [(n, p) for n, p in mlp.named_parameters() if n in buffers], "weights with a main_grad"
    )


def expected_wgrads(mlp, x, dy):
    grads = dense_gradients(mlp, x, SPLITS, dy)
    return {name: grads[name].float() for name, _ in mlp.named_parameters() if "weight" in name}


def run(mlp, x, dy, microbatches=1):
    for _ in range(microbatches):
        mlp(x, SPLITS).backward(dy)


@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
def test_plain_mode_leaves_main_grad_alone_and_returns_wgrad(single):
    mlp, x, dy = build(single=single, accumulate_into_main_grad=False)
    buffers = attach(mlp, MainGrads(fill="nan"))
    before = {n: b.clone() for n, b in buffers.items()}
    run(mlp, x, dy)
    expected = expected_wgrads(mlp, x, dy)
    for name, p in attached(mlp, buffers):
        assert same_bits(buffers[name], before[name]), name
        assert p.grad_added_to_main_grad is False
        assert p.grad.dtype == p.dtype
        torch.testing.assert_close(p.grad.float(), expected[name])


@pytest.mark.parametrize("zero_out", [False, True], ids=["dummy", "zero-dummy"])
@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
def test_accumulate_adds_into_every_element(single, zero_out):
    mlp, x, dy = build(single=single)
    buffers = attach(mlp, MainGrads(zero_out=zero_out))
    before = {n: b.clone() for n, b in buffers.items()}
    run(mlp, x, dy)
    expected = expected_wgrads(mlp, x, dy)
    for name, p in attached(mlp, buffers):
        torch.testing.assert_close(
            buffers[name].view(p.shape), before[name].view(p.shape) + expected[name]
        )
        assert p.grad_added_to_main_grad is True
        assert p.grad.shape == p.shape and p.grad.dtype == p.dtype
        assert p.grad.data_ptr() != p.main_grad.data_ptr()
        if zero_out:
            assert torch.count_nonzero(p.grad) == 0


@pytest.mark.parametrize("fsdp", [False, True], ids=["ddp", "fsdp"])
@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
def test_overwrite_writes_every_element_including_empty_experts(single, fsdp):
    mlp, x, dy = build(single=single)
    buffers = attach(mlp, MainGrads(fsdp=fsdp, overwrite=True, fill="nan"))
    run(mlp, x, dy)
    expected = expected_wgrads(mlp, x, dy)
    for name, p in attached(mlp, buffers):
        assert not buffers[name].isnan().any(), f"{name}: a NaN sentinel survived"
        torch.testing.assert_close(buffers[name].view(p.shape), expected[name])
        assert p.grad_added_to_main_grad is True
    # Expert 1 had no tokens: its gradient, and so its main_grad, is exactly zero.
    empty_expert = buffers["fc1.weight"].view(4, -1)[1] if single else buffers["fc1.weight1"]
    assert torch.count_nonzero(empty_expert) == 0


def test_fsdp_main_grad_is_fetched_and_exposed():
    mlp, x, dy = build()
    buffers = attach(mlp, MainGrads(fsdp=True, overwrite=False))
    before = {n: b.clone() for n, b in buffers.items()}
    for _, p in attached(mlp, buffers):
        assert p.main_grad is None
    run(mlp, x, dy)
    expected = expected_wgrads(mlp, x, dy)
    for name, p in attached(mlp, buffers):
        assert same_memory(p.main_grad, buffers[name]), name
        torch.testing.assert_close(
            buffers[name].view(p.shape), before[name].view(p.shape) + expected[name]
        )


def test_missing_main_grad_is_a_clear_error_at_forward():
    mlp, x, _ = build()
    with pytest.raises(
        ValueError, match=r"fc1\.weight0: accumulate_into_main_grad=True .* neither"
    ):
        mlp(x, SPLITS)


@pytest.mark.parametrize("overwrite", [False, True], ids=["accumulate", "overwrite"])
@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
def test_delayed_wgrad_lands_only_in_backward_dw(single, overwrite):
    mlp, x, dy = build(single=single, delay=True)
    buffers = attach(mlp, MainGrads(overwrite=overwrite, fill="nan" if overwrite else "random"))
    before = {n: b.clone() for n, b in buffers.items()}
    calls = []
    mlp.register_wgrad_accumulation_and_reduce_hooks(lambda: calls.append(1))
    y = mlp(x, SPLITS)
    y.backward(dy)
    for name, p in attached(mlp, buffers):
        assert same_bits(buffers[name], before[name]), f"{name} written before backward_dw"
        assert p.grad is None and p.grad_added_to_main_grad is False
    assert calls == []
    mlp.backward_dw()
    assert calls == [1]
    expected = expected_wgrads(mlp, x, dy)
    for name, p in attached(mlp, buffers):
        start = torch.zeros_like(expected[name]) if overwrite else before[name].view(p.shape)
        torch.testing.assert_close(buffers[name].view(p.shape), start + expected[name])
        assert p.grad_added_to_main_grad is True
        assert p.grad is not None and p.grad.data_ptr() != p.main_grad.data_ptr()
    mlp.backward_dw()  # nothing pending: a no-op, hooks do not fire again
    assert calls == [1]


def test_delay_does_not_change_output_or_dgrad():
    results = []
    for delay in (False, True):
        mlp, x, dy = build(delay=delay, accumulate_into_main_grad=False)
        y = mlp(x, SPLITS)
        y.backward(dy)
        results.append((y.detach(), x.grad))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])


def test_delayed_plain_mode_sets_grad_in_backward_dw():
    mlp, x, dy = build(delay=True, accumulate_into_main_grad=False)
    run(mlp, x, dy)
    weights = nonempty(weight_params(mlp), "weights")
    assert all(p.grad is None for p in weights)
    mlp.backward_dw()
    expected = expected_wgrads(mlp, x, dy)
    for name in nonempty(expected, "weights"):
        p = mlp.get_parameter(name)
        torch.testing.assert_close(p.grad.float(), expected[name])


@pytest.mark.parametrize("overwrite", [False, True], ids=["accumulate", "overwrite"])
def test_microbatches_accumulate_or_keep_the_last(overwrite):
    mlp, x, dy = build()
    buffers = attach(mlp, MainGrads(overwrite=overwrite))
    before = {n: b.clone() for n, b in buffers.items()}
    inputs = [(torch.randn_like(x).requires_grad_(), torch.randn_like(dy)) for _ in range(3)]
    total = {n: torch.zeros_like(b) for n, b in buffers.items()}
    for xi, dyi in inputs:
        mlp(xi, SPLITS).backward(dyi)
        for name, w in expected_wgrads(mlp, xi, dyi).items():
            total[name] = w.flatten() if overwrite else total[name] + w.flatten()
    for name, _ in attached(mlp, buffers):
        start = 0 if overwrite else before[name]
        torch.testing.assert_close(buffers[name], start + total[name])


@pytest.mark.parametrize("accumulate_into_main_grad", [False, True], ids=["plain", "main-grad"])
@pytest.mark.parametrize("delay", [False, True], ids=["now", "delayed"])
def test_ddp_hook_sees_each_gradient_once(accumulate_into_main_grad, delay):
    mlp, x, dy = build(delay=delay, accumulate_into_main_grad=accumulate_into_main_grad)
    buffers = attach(mlp, MainGrads())
    for name, p in mlp.named_parameters():
        if name not in buffers:
            setup_ddp_param(p, torch.zeros(p.numel()))
    before = {n: b.clone() for n, b in buffers.items()}
    install_hooks(mlp, list(mlp.parameters()), ddp_post_backward_hook)
    run(mlp, x, dy)
    mlp.backward_dw()
    expected = expected_wgrads(mlp, x, dy)
    for name, p in nonempty(mlp.named_parameters(), "parameters"):
        assert p.grad is None, f"{name}: the hook clears .grad"
    for name, p in attached(mlp, buffers):
        torch.testing.assert_close(
            buffers[name].view(p.shape), before[name].view(p.shape) + expected[name]
        )


def test_zero_out_wgrad_dummy_adds_nothing_through_the_hook():
    mlp, x, dy = build()
    buffers = attach(mlp, MainGrads(zero_out=True))
    before = {n: b.clone() for n, b in buffers.items()}
    install_hooks(mlp, weight_params(mlp), ddp_post_backward_hook)
    run(mlp, x, dy)
    expected = expected_wgrads(mlp, x, dy)
    for name, p in attached(mlp, buffers):
        torch.testing.assert_close(
            buffers[name].view(p.shape), before[name].view(p.shape) + expected[name]
        )
