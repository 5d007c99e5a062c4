"""A grouped linear layer: expert g multiplies its rows of x by its own weight.

Forward, dgrad and wgrad are loops over experts with plain matmuls. The weight gradient of
each expert is computed in fp32 (fp64 when the module is fp64) and handed to the main_grad
contract in ``main_grad.py``.
"""

from __future__ import annotations

from collections import deque

import torch

from .layout import GroupedLinearParams
from .main_grad import dummy_wgrad, fetch_main_grad, mark_grad_added, overwrites_main_grad


def row_offsets(split_sizes: list[int]) -> list[tuple[int, int]]:
    """[start, end) row range of each expert in the permuted token tensor."""
    bounds, start = [], 0
    for size in split_sizes:
        bounds.append((start, start + size))
        start += size
    return bounds


class GroupedLinear(GroupedLinearParams):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._pending_wgrads: deque[tuple[torch.Tensor, torch.Tensor, list[int]]] = deque()

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
            # gmlp: ignore[GMLP019] a single-process reference: no grad hook is registered to fire
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
