"""Where a weight gradient goes: the main_grad contract (CONTRACT.md), one parameter at a time.

Two decisions, kept apart on purpose because conflating them is the bug this project exists for:
  * output into main_grad or not (aliasing, grad_added_to_main_grad, the dummy gradient) follows
    the op-level ``accumulate_into_main_grad`` setting alone;
  * accumulate or overwrite follows the parameter's ``overwrite_main_grad`` alone.
"""

from __future__ import annotations

import torch

from .validation import check_main_grad_source, main_grad_view


def fetch_main_grad(name: str, param: torch.Tensor) -> torch.Tensor:
    """The parameter's main_grad viewed as its shape; fetched through get_main_grad() when
    Megatron-FSDP has not exposed it yet (Megatron #5209)."""
    buffer = getattr(param, "main_grad", None)
    if buffer is None:
        check_main_grad_source(name, param)  # raises without a get_main_grad() either
        buffer = param.get_main_grad()
        # Expose it as Megatron's own wgrad paths do, so later readers see the same buffer.
        param.main_grad = buffer
    return main_grad_view(name, param, buffer)


def overwrites_main_grad(param: torch.Tensor) -> bool:
    return bool(getattr(param, "overwrite_main_grad", False))


def mark_grad_added(param: torch.Tensor) -> None:
    if hasattr(param, "grad_added_to_main_grad"):
        param.grad_added_to_main_grad = True


def dummy_wgrad(param: torch.Tensor) -> torch.Tensor:
    """The placeholder handed to autograd when the real gradient went into main_grad.

    DDP hooks assert that a gradient arrived (TE #2097) and, under zero_out_wgrad, add it to
    main_grad anyway (Megatron #6565), so it must exist, must not alias main_grad, and must be
    zero when zero_out_wgrad is set."""
    if dummy_is_zeroed(param):
        return torch.zeros_like(param)
    return torch.empty_like(param)


def dummy_is_zeroed(param: torch.Tensor) -> bool:
    """Whether the dummy handed to autograd must be zero: under zero_out_wgrad the hook adds
    it to main_grad anyway (Megatron #6565)."""
    return bool(getattr(param, "zero_out_wgrad", False))
