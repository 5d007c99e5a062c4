"""Input checks shared by every implementation of the grouped MLP.

Each error names the argument and the form that was expected, so that a user reading a
traceback from deep inside backward knows which buffer to fix. They are raised before
anything is written, so a rejected call leaves every main_grad as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def normalize_split_sizes(
    split_sizes: Sequence[int] | torch.Tensor, num_experts: int, num_tokens: int
) -> list[int]:
    """Return split_sizes as a list of G Python ints, or raise ValueError/TypeError."""
    if isinstance(split_sizes, torch.Tensor):
        if (
            split_sizes.dim() != 1
            or split_sizes.dtype.is_floating_point
            or split_sizes.is_complex()
        ):
            raise TypeError(
                f"split_sizes: expected a 1-D integer tensor or a list of {num_experts} ints, "
                f"got a tensor of shape {tuple(split_sizes.shape)} and dtype {split_sizes.dtype}"
            )
        sizes = [int(s) for s in split_sizes.tolist()]
    else:
        try:
            sizes = list(split_sizes)
        except TypeError:
            raise TypeError(
                f"split_sizes: expected a list of {num_experts} ints or an integer tensor, "
                f"got {type(split_sizes).__name__}"
            ) from None
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
            raise TypeError(f"split_sizes: expected {num_experts} ints, got {sizes!r}")
    if len(sizes) != num_experts:
        raise ValueError(
            f"split_sizes: expected {num_experts} sizes (one per expert), got {len(sizes)}: {sizes}"
        )
    if any(s < 0 for s in sizes):
        raise ValueError(f"split_sizes: expected non-negative sizes, got {sizes}")
    if sum(sizes) != num_tokens:
        raise ValueError(
            f"split_sizes: expected sizes summing to the {num_tokens} rows of x, "
            f"got {sizes} (sum {sum(sizes)})"
        )
    return sizes


def check_input(x: torch.Tensor, hidden: int, dtype: torch.dtype, device: torch.device) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a tensor [T, {hidden}], got {type(x).__name__}")
    if x.dim() != 2 or x.shape[1] != hidden:
        raise ValueError(f"x: expected shape [T, hidden={hidden}], got {tuple(x.shape)}")
    if x.dtype != dtype:
        raise ValueError(f"x: expected dtype {dtype} (the module's dtype), got {x.dtype}")
    if x.device != device:
        raise ValueError(f"x: expected a tensor on {device} (the module's device), got {x.device}")


def check_probs(
    probs: torch.Tensor | None, num_tokens: int, uses_probs: bool, activation: str
) -> None:
    if not uses_probs:
        if probs is not None:
            raise ValueError(
                f"probs: only activation='scaled_swiglu' takes probs; "
                f"activation={activation!r} expects probs=None"
            )
        return
    if probs is None:
        raise ValueError(f"probs: activation={activation!r} expects a tensor [T={num_tokens}]")
    if not isinstance(probs, torch.Tensor) or probs.dim() != 1 or probs.shape[0] != num_tokens:
        shape = tuple(probs.shape) if isinstance(probs, torch.Tensor) else type(probs).__name__
        raise ValueError(f"probs: expected shape [T={num_tokens}], got {shape}")


def main_grad_view(name: str, param: torch.Tensor, main_grad: object) -> torch.Tensor:
    """Check a main_grad buffer and return it viewed as the parameter's shape, without a copy."""
    if not isinstance(main_grad, torch.Tensor):
        raise TypeError(
            f"{name}.main_grad: expected a torch.float32 tensor with {param.numel()} elements, "
            f"got {type(main_grad).__name__}"
        )
    if main_grad.dtype != torch.float32:
        raise ValueError(f"{name}.main_grad: expected dtype torch.float32, got {main_grad.dtype}")
    if main_grad.numel() != param.numel():
        raise ValueError(
            f"{name}.main_grad: expected {param.numel()} elements (shape {list(param.shape)}), "
            f"got shape {list(main_grad.shape)} ({main_grad.numel()} elements)"
        )
    if main_grad.device != param.device:
        raise ValueError(
            f"{name}.main_grad: expected a buffer on {param.device}, got one on {main_grad.device}"
        )
    if main_grad.shape == param.shape:
        return main_grad  # already the parameter's shape, as Megatron's buffers are
    try:
        return main_grad.view(param.shape)
    except RuntimeError:
        raise ValueError(
            f"{name}.main_grad: expected a buffer viewable as {list(param.shape)} without a copy, "
            f"got shape {list(main_grad.shape)} with strides {list(main_grad.stride())}"
        ) from None


def check_main_grad_source(name: str, param: torch.Tensor) -> None:
    """Output-into-main-grad needs a valid buffer now or a way to fetch one (Megatron-FSDP).

    Called at forward so that a bad buffer is reported before backward writes any other."""
    buffer = getattr(param, "main_grad", None)
    if buffer is not None:
        main_grad_view(name, param, buffer)
    elif not callable(getattr(param, "get_main_grad", None)):
        raise ValueError(
            f"{name}: accumulate_into_main_grad=True but the parameter has neither a main_grad "
            f"buffer nor a get_main_grad() method"
        )
