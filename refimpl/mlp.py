"""The reference grouped MLP: fc1 -> activation -> fc2, one expert at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .activations import get_activation
from .grouped_linear import GroupedLinear
from .validation import check_input, check_main_grad_source, check_probs, normalize_split_sizes


class GroupedMLP(nn.Module):
    def __init__(
        self,
        num_experts: int,
        hidden: int,
        ffn: int,
        activation: str = "swiglu",
        bias: bool = False,
        single_grouped_weight: bool = False,
        accumulate_into_main_grad: bool = False,
        delay_wgrad_compute: bool = False,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__()
        for arg, value in (("num_experts", num_experts), ("hidden", hidden), ("ffn", ffn)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{arg}: expected a positive int, got {value!r}")
        self.num_experts = num_experts
        self.hidden = hidden
        self.ffn = ffn
        self.activation = get_activation(activation)
        self.accumulate_into_main_grad = accumulate_into_main_grad
        self.delay_wgrad_compute = delay_wgrad_compute
        common = {
            "bias": bias,
            "single_grouped_weight": single_grouped_weight,
            "accumulate_into_main_grad": accumulate_into_main_grad,
            "delay_wgrad_compute": delay_wgrad_compute,
            "dtype": dtype,
            "device": device,
        }
        self.fc1 = GroupedLinear(
            "fc1", num_experts, hidden, self.activation.fc1_out_features(ffn), **common
        )
        self.fc2 = GroupedLinear("fc2", num_experts, ffn, hidden, **common)
        self._wgrad_hooks: list[Callable[[], None]] = []

    def forward(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        weight = self.fc1.weight_params()[0]
        check_input(x, self.hidden, weight.dtype, weight.device)
        splits = normalize_split_sizes(split_sizes, self.num_experts, x.shape[0])
        check_probs(probs, x.shape[0], self.activation.uses_probs, self.activation.name)
        if self.accumulate_into_main_grad:
            # Fail at forward, not deep inside backward, when a buffer can never be found.
            for layer in (self.fc1, self.fc2):
                for name, p in zip(layer.weight_names(), layer.weight_params()):
                    check_main_grad_source(f"{layer.name}.{name}", p)
        h = self.fc1(x, splits)
        a = self.activation(h, probs)
        return self.fc2(a, splits)

    def register_wgrad_accumulation_and_reduce_hooks(self, hook: Callable[[], None]) -> None:
        """Hooks run by backward_dw() once delayed weight gradients are in place (TE's name)."""
        self._wgrad_hooks.append(hook)

    def backward_dw(self) -> None:
        """Compute the weight gradients deferred by delay_wgrad_compute; no-op otherwise."""
        ran = [layer.backward_dw() for layer in (self.fc2, self.fc1)]
        if any(ran):
            for hook in self._wgrad_hooks:
                hook()
