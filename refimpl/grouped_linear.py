"""A grouped linear layer: expert g multiplies its rows of x by its own weight.

Forward, dgrad and wgrad are loops over experts with plain matmuls. The weight gradient of
each expert is computed in fp32 (fp64 when the module is fp64) and handed to the main_grad
contract in ``main_grad.py``.
"""

from __future__ import annotations

import math
from collections import deque

import torch
from torch import nn

from .main_grad import dummy_wgrad, fetch_main_grad, mark_grad_added, overwrites_main_grad


def row_offsets(split_sizes: list[int]) -> list[tuple[int, int]]:
    """[start, end) row range of each expert in the permuted token tensor."""
    bounds, start = [], 0
    for size in split_sizes:
        bounds.append((start, start + size))
        start += size
    return bounds


class GroupedLinear(nn.Module):
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
        # Transformer Engine's parameter names, so state dicts move between implementations.
        factory = {"dtype": dtype, "device": device}
        if single_grouped_weight:
            self.weight = nn.Parameter(
                torch.empty(num_groups, out_features, in_features, **factory)
            )
            if bias:
                self.bias = nn.Parameter(torch.empty(num_groups, out_features, **factory))
        else:
            for g in range(num_groups):
                weight = nn.Parameter(torch.empty(out_features, in_features, **factory))
                self.register_parameter(f"weight{g}", weight)
            for g in range(num_groups if bias else 0):
                self.register_parameter(
                    f"bias{g}", nn.Parameter(torch.empty(out_features, **factory))
                )
        self._pending_wgrads: deque[tuple[torch.Tensor, torch.Tensor, list[int]]] = deque()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-bound, bound)

    # -- parameter access -------------------------------------------------------------------
    def weight_names(self) -> list[str]:
        return (
            ["weight"]
            if self.single_grouped_weight
            else [f"weight{g}" for g in range(self.num_groups)]
        )

    def bias_names(self) -> list[str]:
        if not self.use_bias:
            return []
        return (
            ["bias"] if self.single_grouped_weight else [f"bias{g}" for g in range(self.num_groups)]
        )

    def weight_params(self) -> list[nn.Parameter]:
        return [getattr(self, n) for n in self.weight_names()]

    def bias_params(self) -> list[nn.Parameter]:
        return [getattr(self, n) for n in self.bias_names()]

    def per_expert(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Split per-parameter tensors (one [G, ...] or G of [...]) into one per expert."""
        if self.single_grouped_weight:
            return list(tensors[0].unbind(0))
        return list(tensors)

    # -- forward ----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, split_sizes: list[int]) -> torch.Tensor:
        params = self.weight_params() + self.bias_params()
        return _GroupedLinearFunction.apply(x, self, split_sizes, *params)

    # -- weight gradients -------------------------------------------------------------------
    def expert_wgrads(self, x: torch.Tensor, dy: torch.Tensor, split_sizes: list[int]):
        """Yield (g, W_g) with W_g = dy_g^T x_g in fp32 (fp64 for an fp64 module)."""
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        for g, (start, end) in enumerate(row_offsets(split_sizes)):
            yield g, dy[start:end].to(acc).t() @ x[start:end].to(acc)

    def weight_grads(self, x: torch.Tensor, dy: torch.Tensor, split_sizes: list[int]):
        """Compute every expert's weight gradient and deliver it as CONTRACT.md says.

        Returns what autograd must see as each weight parameter's gradient: the real gradient
        in the parameter dtype, or a dummy when the gradient went into main_grad."""
        params = self.weight_params()
        if not self.accumulate_into_main_grad:
            acc = torch.float64 if x.dtype == torch.float64 else torch.float32
            grads = [torch.zeros(p.shape, dtype=acc, device=p.device) for p in params]
            expert_grads = self.per_expert(grads)
            for g, wgrad in self.expert_wgrads(x, dy, split_sizes):
                expert_grads[g].copy_(wgrad)
            return [grad.to(p.dtype) for grad, p in zip(grads, params)]

        names = [f"{self.name}.{n}" for n in self.weight_names()]
        # Every destination is fetched and checked before the first write: nothing half-written.
        destinations = [fetch_main_grad(n, p) for n, p in zip(names, params)]
        expert_params = params * self.num_groups if self.single_grouped_weight else params
        expert_destinations = self.per_expert(destinations)
        for g, wgrad in self.expert_wgrads(x, dy, split_sizes):
            if overwrites_main_grad(expert_params[g]):
                expert_destinations[g].copy_(wgrad)
            else:
                expert_destinations[g].add_(wgrad)
        for p in params:
            mark_grad_added(p)
        return [dummy_wgrad(p) for p in params]

    def bias_grads(self, dy: torch.Tensor, split_sizes: list[int]) -> list[torch.Tensor]:
        if not self.use_bias:
            return []
        acc = torch.float64 if dy.dtype == torch.float64 else torch.float32
        grads = [torch.zeros(p.shape, dtype=acc, device=p.device) for p in self.bias_params()]
        expert_grads = self.per_expert(grads)
        for g, (start, end) in enumerate(row_offsets(split_sizes)):
            expert_grads[g].copy_(dy[start:end].to(acc).sum(dim=0))
        return [grad.to(p.dtype) for grad, p in zip(grads, self.bias_params())]

    def defer_weight_grads(self, x: torch.Tensor, dy: torch.Tensor, split_sizes: list[int]) -> None:
        self._pending_wgrads.append((x, dy, split_sizes))

    def backward_dw(self) -> bool:
        """Run every deferred weight-gradient computation, oldest first; True if any ran."""
        ran = bool(self._pending_wgrads)
        while self._pending_wgrads:
            x, dy, split_sizes = self._pending_wgrads.popleft()
            grads = self.weight_grads(x, dy, split_sizes)
            for p, grad in zip(self.weight_params(), grads):
                # What autograd's AccumulateGrad would have done in backward.
                p.grad = grad if p.grad is None else p.grad + grad
        return ran


class _GroupedLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, layer: GroupedLinear, split_sizes: list[int], *params):
        ctx.layer = layer
        ctx.split_sizes = split_sizes
        ctx.save_for_backward(x)
        weights = layer.per_expert(params[: len(layer.weight_names())])
        biases = layer.per_expert(params[len(layer.weight_names()) :]) if layer.use_bias else None
        y = x.new_empty(x.shape[0], layer.out_features)
        for g, (start, end) in enumerate(row_offsets(split_sizes)):
            rows = x[start:end] @ weights[g].t()
            if biases is not None:
                rows = rows + biases[g]
            y[start:end] = rows
        return y

    @staticmethod
    def backward(ctx, dy):
        layer: GroupedLinear = ctx.layer
        split_sizes = ctx.split_sizes
        (x,) = ctx.saved_tensors
        dy = dy.contiguous()
        weights = layer.per_expert(layer.weight_params())
        dx = torch.zeros_like(x)
        for g, (start, end) in enumerate(row_offsets(split_sizes)):
            dx[start:end] = dy[start:end] @ weights[g]
        if layer.delay_wgrad_compute:
            layer.defer_weight_grads(x.detach(), dy.detach(), split_sizes)
            weight_grads = [None] * len(layer.weight_names())
        else:
            weight_grads = layer.weight_grads(x, dy, split_sizes)
        bias_grads = layer.bias_grads(dy, split_sizes)
        return (dx, None, None, *weight_grads, *bias_grads)
