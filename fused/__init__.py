"""The fused grouped MLP: Triton kernels, autograd glue and a backends registry.

``from fused import GroupedMLP`` gives the triton backend; ``fused.backends`` builds any
backend by name or ``module:factory`` string. GroupedMLP is imported on first use, so that
``fused.backends`` and ``fused.faults`` load without compiling anything.
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
    raise AttributeError(f"module 'fused' has no attribute {name!r}")
