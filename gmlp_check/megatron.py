"""Parameters set up the way Megatron-LM's DDP and Megatron-FSDP set them up.

The differential checker and the tests use these to give a grouped MLP's weights the same
attributes, lazy buffers and post-backward hook that they meet in training. The hook is
an emulation of Megatron DDP's ``_make_backward_post_hook``: it adds ``param.grad`` into
``main_grad`` unless the producer already wrote main_grad (``grad_added_to_main_grad``),
and adds it anyway under ``zero_out_wgrad``; with overlapped grad reduce it insists that a
gradient arrived at all (TE #2097).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class MissingGradError(AssertionError):
    """The emulated DDP hook found param.grad None under overlap_grad_reduce (TE #2097)."""


def ddp_post_backward_hook(param: torch.Tensor, *, overlap_grad_reduce: bool = True) -> None:
    if overlap_grad_reduce and param.grad is None:
        raise MissingGradError(
            "param.grad being None is not safe when overlap_grad_reduce is True "
            "(a fused op must return a dummy gradient)"
        )
    if param.grad is not None and (
        not getattr(param, "grad_added_to_main_grad", False)
        or getattr(param, "zero_out_wgrad", False)
    ):
        main_grad = param.main_grad
        if main_grad is None:  # Megatron-FSDP: not fetched by the producer
            main_grad = param.main_grad = param.get_main_grad()
        main_grad.view(param.shape).add_(param.grad.data)
    param.grad = None


def setup_ddp_param(
    param: torch.Tensor, main_grad: torch.Tensor, *, zero_out_wgrad: bool = False
) -> None:
    """Megatron DDP: main_grad exists from the start; grad_added_to_main_grad is reset per step."""
    param.main_grad = main_grad
    param.grad_added_to_main_grad = False
    if zero_out_wgrad:
        param.zero_out_wgrad = True


def setup_fsdp_param(
    param: torch.Tensor,
    main_grad: torch.Tensor,
    *,
    overwrite_main_grad: bool = True,
    zero_out_wgrad: bool = False,
) -> None:
    """Megatron-FSDP: main_grad is None until fetched through get_main_grad()."""
    param.main_grad = None
    param.get_main_grad = lambda: main_grad
    param.__fsdp_param__ = True
    param.overwrite_main_grad = overwrite_main_grad
    param.grad_added_to_main_grad = False
    if zero_out_wgrad:
        param.zero_out_wgrad = True


def reset_for_step(params: Iterable[torch.Tensor]) -> None:
    """What DDP does before each step: no gradient added yet, no .grad held."""
    for p in params:
        if hasattr(p, "grad_added_to_main_grad"):
            p.grad_added_to_main_grad = False
        p.grad = None


def weight_params(module: torch.nn.Module) -> list[torch.Tensor]:
    """The weight parameters, by Transformer Engine's names (weight, weight0, weight1, ...)."""
    return [p for n, p in module.named_parameters() if n.rsplit(".", 1)[-1].startswith("weight")]


def install_ddp_hooks(
    module: torch.nn.Module,
    params: Iterable[torch.Tensor],
    *,
    overlap_grad_reduce: bool = True,
    on_hook: Callable[[torch.Tensor], None] | None = None,
    delay_wgrad_compute: bool | None = None,
) -> list:
    """Register the emulated DDP hook on each parameter.

    It fires when autograd accumulates a gradient, and, for modules with delayed weight
    gradients, from ``backward_dw()`` through the module's
    ``register_wgrad_accumulation_and_reduce_hooks`` (as Megatron does with Transformer Engine).
    ``on_hook(param)`` is called just before the hook runs, to let a checker observe
    ``param.grad`` before the hook clears it. ``delay_wgrad_compute`` says whether the module
    defers weight gradients; None (the default) reads the module's ``delay_wgrad_compute``
    attribute, which a third-party module may not have. Returns the handles of the autograd
    hooks.
    """
    params = list(params)

    def run(param: torch.Tensor) -> None:
        if on_hook is not None:
            on_hook(param)
        ddp_post_backward_hook(param, overlap_grad_reduce=overlap_grad_reduce)

    delayed: list[torch.Tensor] = []
    if delay_wgrad_compute is None:
        delay_wgrad_compute = bool(getattr(module, "delay_wgrad_compute", False))
    if delay_wgrad_compute:
        # Delayed weight gradients bypass autograd, so Megatron marks those weights
        # skip_backward_post_hook and reduces them from backward_dw() instead; biases still go
        # through autograd.
        delayed = [p for p in weight_params(module) if any(p is q for q in params)]

        def after_backward_dw() -> None:
            for p in delayed:
                run(p)

        module.register_wgrad_accumulation_and_reduce_hooks(after_backward_dw)
    return [
        p.register_post_accumulate_grad_hook(run)
        for p in params
        if not any(p is d for d in delayed)
    ]
