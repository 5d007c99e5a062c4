"""The reference grouped MLP: fc1 -> activation -> fc2, one expert at a time."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .grouped_linear import GroupedLinear
from .layout import GroupedMLPParams


class GroupedMLP(GroupedMLPParams):
    linear_class = GroupedLinear

    def forward(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        splits = self.check_call(x, split_sizes, probs)
        h = self.fc1(x, splits)
        a = self.activation(h, probs)
        return self.fc2(a, splits)

    def backward_dw(self) -> None:
        """Compute the weight gradients deferred by delay_wgrad_compute; no-op otherwise."""
        ran = [layer.backward_dw() for layer in (self.fc2, self.fc1)]
        if any(ran):
            self.run_wgrad_hooks()
