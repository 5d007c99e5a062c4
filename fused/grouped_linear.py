"""fc1 / fc2 of a fused grouped MLP: refimpl's parameter layout (refimpl.layout), views of
it for the kernels, and the queue of weight gradients deferred by delay_wgrad_compute.

It holds no compute: the backends run the GEMMs.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import torch

from gmlp_check.refimpl.layout import GroupedLinearParams


class Splits(NamedTuple):
    """One forward's split sizes twice: for the kernels, which never read them back, and on
    the host, where a choice per expert (fused.tiles.wgrad_by_cublas) needs them without
    waiting for the device."""

    device: torch.Tensor  # int32 [G] on the tensors' device
    host: tuple[int, ...]


class DeferredWgrad(NamedTuple):
    """Inputs of one weight-gradient GEMM deferred to backward_dw(): dW_g = dy_g^T x_g."""

    x: torch.Tensor
    dy: torch.Tensor
    splits: Splits


class FusedGroupedLinear(GroupedLinearParams):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pending_wgrads: deque[DeferredWgrad] = deque()

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
