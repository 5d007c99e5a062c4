"""The oracle: a readable per-expert PyTorch grouped MLP implementing CONTRACT.md exactly."""

from .activations import ACTIVATIONS, Activation, get_activation
from .grouped_linear import GroupedLinear, row_offsets
from .mlp import GroupedMLP

__all__ = [
    "ACTIVATIONS",
    "Activation",
    "GroupedLinear",
    "GroupedMLP",
    "get_activation",
    "row_offsets",
]
