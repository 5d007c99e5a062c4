"""fc1 / fc2 of a fused grouped MLP: parameters under Transformer Engine's names, and the
queue of weight gradients deferred by delay_wgrad_compute.

Same names, shapes, registration order and initialisation as refimpl.GroupedLinear, so state
dicts move between implementations in both directions and one seed gives the same weights.
It holds no compute: the backends run the GEMMs.
"""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

import torch
from torch import nn


class DeferredWgrad(NamedTuple):
    """Inputs of one weight-gradient GEMM deferred to backward_dw(): dW_g = dy_g^T x_g."""

    x: torch.Tensor
    dy: torch.Tensor
    splits: torch.Tensor  # int32 split sizes on the tensors' device


class GroupedLinearParams(nn.Module):
    def __init__(
        self,
        name: str,
        num_groups: int,
        in_features: int,
        out_features: int,
        *,
        bias: bool,
        single_grouped_weight: bool,
        accumulate_into_main_grad: bool,
        delay_wgrad_compute: bool,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        super().__init__()
        self.name = name
        self.num_groups = num_groups
        self.in_features = in_features
        self.out_features = out_features
        self.use_bias = bias
        self.single_grouped_weight = single_grouped_weight
        self.accumulate_into_main_grad = accumulate_into_main_grad
        self.delay_wgrad_compute = delay_wgrad_compute
        factory = {"dtype": dtype, "device": device}
        if single_grouped_weight:
            shape = (num_groups, out_features, in_features)
            self.weight = nn.Parameter(torch.empty(shape, **factory))
            if bias:
                self.bias = nn.Parameter(torch.empty(num_groups, out_features, **factory))
        else:
            for g in range(num_groups):
                weight = nn.Parameter(torch.empty(out_features, in_features, **factory))
                self.register_parameter(f"weight{g}", weight)
            for g in range(num_groups if bias else 0):
                bias_g = nn.Parameter(torch.empty(out_features, **factory))
                self.register_parameter(f"bias{g}", bias_g)
        self.pending_wgrads: deque[DeferredWgrad] = deque()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-bound, bound)

    def weight_names(self) -> list[str]:
        if self.single_grouped_weight:
            return ["weight"]
        return [f"weight{g}" for g in range(self.num_groups)]

    def bias_names(self) -> list[str]:
        if not self.use_bias:
            return []
        if self.single_grouped_weight:
            return ["bias"]
        return [f"bias{g}" for g in range(self.num_groups)]

    def weight_params(self) -> list[nn.Parameter]:
        return [getattr(self, n) for n in self.weight_names()]

    def bias_params(self) -> list[nn.Parameter]:
        return [getattr(self, n) for n in self.bias_names()]

    def per_expert(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Split per-parameter tensors (one [G, ...] or G of [...]) into one per expert."""
        if self.single_grouped_weight:
            return list(tensors[0].unbind(0))
        return list(tensors)

    def expert_weights(self) -> torch.Tensor | list[torch.Tensor]:
        """G matrices [out, in], no copy: the single grouped weight itself ([G, out, in], which
        indexes and measures like a list of G matrices, without building G views on every
        launch), or the G weight parameters."""
        if self.single_grouped_weight:
            return self.weight.detach()
        return [p.detach() for p in self.weight_params()]

    def expert_biases(self) -> list[torch.Tensor] | None:
        if not self.use_bias:
            return None
        return self.per_expert([p.detach() for p in self.bias_params()])

    def bias_grads(self, per_expert_fp32: torch.Tensor) -> list[torch.Tensor]:
        """Bias gradients for autograd, in the parameter dtype, from fp32 [G, out] sums."""
        params = self.bias_params()
        if self.single_grouped_weight:
            return [per_expert_fp32.to(p.dtype) for p in params]
        return [per_expert_fp32[g].to(p.dtype, copy=True) for g, p in enumerate(params)]
