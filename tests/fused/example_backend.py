"""Factories for the backends-registry tests ("tests.fused.example_backend:<name>")."""

import torch

from fused import GroupedMLP


def wrapped_triton(**mlp_kwargs) -> torch.nn.Module:
    """A third-party factory: takes refimpl.GroupedMLP's keyword arguments, returns a module."""
    return GroupedMLP(**mlp_kwargs)


def not_a_module(**mlp_kwargs):
    return "not a module"


NOT_CALLABLE = 42
