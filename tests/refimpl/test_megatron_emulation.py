"""The emulated Megatron engines (DDP and Megatron-FSDP) that the contract tests and the
checker rely on: parameter setup, their post-backward hooks and where those hooks fire."""

import pytest
import torch

from gmlp_check.refimpl import GroupedMLP
from gmlp_check.refimpl.megatron import (
    MissingGradError,
    ddp_post_backward_hook,
    fsdp_post_backward_hook,
    install_hooks,
    reset_for_step,
    setup_ddp_param,
    setup_fsdp_param,
    weight_params,
)

from ..harness import nonempty, same_memory


def param_with_grad(grad):
    p = torch.nn.Parameter(torch.zeros(2, 3))
    p.grad = grad
    return p


def test_missing_grad_asserts_under_overlap_grad_reduce():
    p = param_with_grad(None)
    setup_ddp_param(p, torch.zeros(6))
    with pytest.raises(MissingGradError, match=r"param\.grad being None"):
        ddp_post_backward_hook(p)
    ddp_post_backward_hook(p, overlap_grad_reduce=False)  # tolerated without overlap


@pytest.mark.parametrize(
    "grad_added, zero_out, adds",
    [(False, False, True), (True, False, False), (True, True, True)],
)
def test_hook_adds_grad_unless_the_producer_did(grad_added, zero_out, adds):
    grad = torch.randn(2, 3)
    p = param_with_grad(grad.clone())
    main_grad = torch.randn(6)
    before = main_grad.clone()
    setup_ddp_param(p, main_grad, zero_out_wgrad=zero_out)
    p.grad_added_to_main_grad = grad_added
    ddp_post_backward_hook(p)
    expected = before + grad.flatten() if adds else before
    assert torch.equal(main_grad, expected)
    assert p.grad is None


def test_ddp_main_grad_is_a_param_shaped_view_of_the_buffer():
    p = param_with_grad(None)
    buffer = torch.zeros(6)
    setup_ddp_param(p, buffer)
    assert p.main_grad.shape == p.shape and same_memory(p.main_grad, buffer)


def test_fsdp_param_is_lazy_and_fetched_by_the_hook():
    buffer = torch.zeros(6)
    grad = torch.randn(2, 3)
    p = param_with_grad(grad.clone())
    setup_fsdp_param(p, buffer)
    assert p.main_grad is None and same_memory(p.get_main_grad(), buffer)
    assert p.get_main_grad().shape == p.shape
    assert p.overwrite_main_grad is True and p.__fsdp_param__ is True
    fsdp_post_backward_hook(p, sharded=True)
    assert same_memory(p.main_grad, buffer)
    assert torch.equal(buffer, grad.flatten())


def test_unsharded_fsdp_param_does_not_ask_for_overwrite():
    p = param_with_grad(None)
    setup_fsdp_param(p, torch.zeros(6), sharded=False)
    assert not getattr(p, "overwrite_main_grad", False)


# Megatron-FSDP 0.6.1's _grad_acc, one row per branch: (sharded, grad_added, zero_out,
# has_grad) -> main_grad after the hook, from main_grad before (M) and .grad (G).
FSDP_HOOK = {
    "sharded-copies": (True, False, False, True, lambda m, g: g),
    "sharded-zeroes-without-grad": (True, False, False, False, lambda m, g: torch.zeros_like(m)),
    "unsharded-adds": (False, False, False, True, lambda m, g: m + g),
    "unsharded-keeps-without-grad": (False, False, False, False, lambda m, g: m),
    "producer-added-sharded": (True, True, False, True, lambda m, g: m),
    "producer-added-unsharded": (False, True, False, True, lambda m, g: m),
    # Unlike DDP, FSDP ignores zero_out_wgrad: a producer's dummy is never added.
    "zero-out-ignored": (True, True, True, True, lambda m, g: m),
}


@pytest.mark.parametrize(
    "sharded, grad_added, zero_out, has_grad, expected", FSDP_HOOK.values(), ids=FSDP_HOOK.keys()
)
def test_fsdp_hook(sharded, grad_added, zero_out, has_grad, expected):
    grad = torch.randn(2, 3)
    p = param_with_grad(grad.clone() if has_grad else None)
    buffer = torch.randn(6)
    before = buffer.clone()
    setup_fsdp_param(p, buffer, sharded=sharded, zero_out_wgrad=zero_out)
    if grad_added:  # the producer fetched and wrote main_grad itself
        p.main_grad = p.get_main_grad()
        p.grad_added_to_main_grad = True
    fsdp_post_backward_hook(p, sharded=sharded)
    assert torch.equal(buffer, expected(before, grad.flatten()))
    assert p.grad is None
    assert p.grad_added_to_main_grad is False  # reset after every call


def test_reset_for_step_clears_flags_and_grads():
    p = param_with_grad(torch.ones(2, 3))
    setup_ddp_param(p, torch.zeros(6))
    p.grad_added_to_main_grad = True
    reset_for_step([p])
    assert p.grad is None and p.grad_added_to_main_grad is False


def mlp_with_recorded_hooks(delay: bool, mark: tuple[str, ...]):
    """A reference MLP with every parameter's hook recording (phase, name) when it fires;
    ``mark``: the kinds of parameters ("weight", "bias") marked skip_backward_post_hook."""
    torch.manual_seed(0)
    mlp = GroupedMLP(3, 4, 3, bias=True, delay_wgrad_compute=delay)
    names = {id(p): n for n, p in mlp.named_parameters()}
    for name, p in mlp.named_parameters():
        if any(kind in name for kind in mark):
            p.skip_backward_post_hook = True
    fired = []
    phase = {"now": "backward"}
    install_hooks(mlp, mlp.parameters(), lambda p: fired.append((phase["now"], names[id(p)])))
    mlp(torch.randn(5, 4), [2, 0, 3]).sum().backward()
    phase["now"] = "backward_dw"
    mlp.backward_dw()
    return mlp, fired


def phase_of(fired, mlp, kind: str) -> set[str]:
    names = nonempty((n for n, _ in mlp.named_parameters() if kind in n), f"{kind} parameters")
    return {phase for phase, name in fired if name in names}


@pytest.mark.parametrize(
    "delay, mark, weights, biases",
    [
        (False, (), "backward", "backward"),
        (True, (), "backward_dw", "backward"),  # unmarked: the weights are the delayed ones
        (True, ("weight",), "backward_dw", "backward"),  # Transformer Engine's ops
        (True, ("weight", "bias"), "backward_dw", "backward_dw"),  # TE's GroupedLinear module
    ],
    ids=["immediate", "delayed-unmarked", "delayed-weights-marked", "delayed-all-marked"],
)
def test_install_hooks_routes_delayed_parameters_through_backward_dw(delay, mark, weights, biases):
    mlp, fired = mlp_with_recorded_hooks(delay, mark)
    assert sorted(name for _, name in fired) == sorted(n for n, _ in mlp.named_parameters())
    assert phase_of(fired, mlp, "weight") == {weights}
    assert phase_of(fired, mlp, "bias") == {biases}


def test_weight_params_are_the_weights_by_te_names():
    mlp = GroupedMLP(3, 4, 3, bias=True)
    weights = {n for n, p in mlp.named_parameters() if any(p is w for w in weight_params(mlp))}
    assert weights == {f"{layer}.weight{g}" for layer in ("fc1", "fc2") for g in range(3)}
