"""The emulated Megatron DDP hook that the contract tests and the checker rely on."""

import pytest
import torch

from gmlp_check.megatron import (
    MissingGradError,
    ddp_post_backward_hook,
    reset_for_step,
    setup_ddp_param,
    setup_fsdp_param,
)


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


def test_fsdp_param_is_lazy_and_fetched_by_the_hook():
    buffer = torch.zeros(6)
    grad = torch.randn(2, 3)
    p = param_with_grad(grad.clone())
    setup_fsdp_param(p, buffer)
    assert p.main_grad is None and p.get_main_grad() is buffer
    assert p.overwrite_main_grad is True and p.__fsdp_param__ is True
    ddp_post_backward_hook(p)
    assert p.main_grad is buffer
    assert torch.equal(buffer, grad.flatten())


def test_reset_for_step_clears_flags_and_grads():
    p = param_with_grad(torch.ones(2, 3))
    setup_ddp_param(p, torch.zeros(6))
    p.grad_added_to_main_grad = True
    reset_for_step([p])
    assert p.grad is None and p.grad_added_to_main_grad is False
