"""Sentinels for memory nobody wrote: while the context is active every torch.empty allocation
is NaN-filled, deterministically, so a buffer that should have been written and was not shows
as NaN wherever it lands. The reference's tests and the checker both run inside it."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def uninitialized_memory_as_nan() -> Iterator[None]:
    """Make every torch.empty allocation NaN-filled for the duration, then restore.

    A dummy gradient from ``torch.empty`` holds whatever was in memory; under zero_out_wgrad
    the DDP hook adds it into main_grad, and stale memory is often zero, which would hide the
    bug (Megatron #6565). With deterministic algorithms on and fill_uninitialized_memory set,
    PyTorch fills new float tensors with NaN, so a dummy that was not zeroed poisons main_grad
    visibly and deterministically. warn_only keeps ops without a deterministic implementation
    running (with a warning, which is silenced here)."""
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deterministic.*")
            yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill
