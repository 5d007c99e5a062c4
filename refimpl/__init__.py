"""The oracle: a readable per-expert PyTorch grouped MLP implementing CONTRACT.md exactly.

The names below are imported on first use, so that importing ``activation_names`` (torch-free,
read by the command-line options and the pytest plugin) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .activation_names import ACTIVATION_NAMES

if TYPE_CHECKING:
    from .activations import ACTIVATIONS, Activation, get_activation
    from .config import MLPConfig
    from .grouped_linear import GroupedLinear, row_offsets
    from .mlp import GroupedMLP

__all__ = [
    "ACTIVATIONS",
    "ACTIVATION_NAMES",
    "Activation",
    "GroupedLinear",
    "GroupedMLP",
    "MLPConfig",
    "get_activation",
    "row_offsets",
]


def __getattr__(name: str):
    if name in ("ACTIVATIONS", "Activation", "get_activation"):
        from . import activations as module
    elif name in ("GroupedLinear", "row_offsets"):
        from . import grouped_linear as module
    elif name == "MLPConfig":
        from . import config as module
    elif name == "GroupedMLP":
        from . import mlp as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)
