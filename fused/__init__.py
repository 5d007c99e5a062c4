"""The fused grouped MLP: Triton kernels and their autograd glue (``TritonGroupedMLP``), and
the same contract on ``torch._grouped_mm`` (``grouped_mm.TorchGroupedMMMLP``).

TritonGroupedMLP is imported on first use, so that importing the package compiles nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .mlp import TritonGroupedMLP

__all__ = ["TritonGroupedMLP"]


def __getattr__(name: str):
    if name == "TritonGroupedMLP":
        from .mlp import TritonGroupedMLP

        return TritonGroupedMLP
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
