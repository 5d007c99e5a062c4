"""The fused grouped MLP: Triton kernels and their autograd glue (``GroupedMLP``), and the same
contract on ``torch._grouped_mm`` (``grouped_mm.TorchGroupedMMMLP``).

GroupedMLP is imported on first use, so that importing the package compiles nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .mlp import GroupedMLP

__all__ = ["GroupedMLP"]


def __getattr__(name: str):
    if name == "GroupedMLP":
        from .mlp import GroupedMLP

        return GroupedMLP
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
