"""A third party's grouped MLP, written the plain way: one linear per expert, each expert's
weight its own Parameter, and the main_grad contract kept by hand. It imports nothing but
torch, as a user's backend would, so reproductions written for it run without gmlp_check.

``make`` is the module:factory (``--fused tests.thirdparty.per_expert_mlp:make``). It builds
discrete weights only (a single grouped weight raises NotImplementedError: those cases are
skipped) and the activations in ``ACTIVATIONS``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _swiglu(h: torch.Tensor) -> torch.Tensor:
    gate, linear = h.chunk(2, dim=-1)
    return F.silu(gate) * linear


ACTIVATIONS = {
    # name -> (function, fc1 produces gate and linear halves, output scaled by probs)
    "swiglu": (_swiglu, True, False),
    "scaled_swiglu": (_swiglu, True, True),
    "gelu": (lambda h: F.gelu(h, approximate="tanh"), False, False),
    "relu": (F.relu, False, False),
}


def _destination(param: nn.Parameter) -> torch.Tensor:
    """main_grad, fetched from Megatron-FSDP when it has not exposed it yet."""
    buffer = getattr(param, "main_grad", None)
    if buffer is None:
        buffer = param.get_main_grad()
        param.main_grad = buffer
    return buffer.view(param.shape)


class ExpertLinears(nn.Module):
    """G linears, weight{g} [out, in] and optionally bias{g}."""

    def __init__(self, experts, in_features, out_features, bias, into_main_grad, delay, **dev):
        super().__init__()
        self.into_main_grad, self.delay = into_main_grad, delay
        self.pending: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        for g in range(experts):
            self.register_parameter(
                f"weight{g}", nn.Parameter(torch.randn(out_features, in_features, **dev) * 0.1)
            )
        for g in range(experts if bias else 0):
            self.register_parameter(f"bias{g}", nn.Parameter(torch.zeros(out_features, **dev)))
        self.use_bias = bias

    def weight(self, g: int) -> nn.Parameter:
        return getattr(self, f"weight{g}")

    def forward(self, g: int, x: torch.Tensor) -> torch.Tensor:
        y = _ExpertLinear.apply(x, self.weight(g), self, g)
        return y + getattr(self, f"bias{g}") if self.use_bias else y

    def deliver(self, g: int, x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        """Expert g's weight gradient where the contract says: returned, or into main_grad
        (overwritten or accumulated) with the flag set and a dummy returned."""
        p = self.weight(g)
        wgrad = dy.float().t() @ x.float()
        if not self.into_main_grad:
            return wgrad.to(p.dtype)
        destination = _destination(p)
        if getattr(p, "overwrite_main_grad", False):
            destination.copy_(wgrad)
        else:
            destination.add_(wgrad)
        if hasattr(p, "grad_added_to_main_grad"):
            p.grad_added_to_main_grad = True
        if getattr(p, "zero_out_wgrad", False):
            return torch.zeros_like(p)
        return torch.empty_like(p)

    def backward_dw(self) -> bool:
        ran = bool(self.pending)
        for g, x, dy in self.pending:
            grad = self.deliver(g, x, dy)
            p = self.weight(g)
            p.grad = grad if p.grad is None else p.grad + grad
        self.pending.clear()
        return ran


class _ExpertLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, layer, g):
        ctx.save_for_backward(x, weight)
        ctx.layer, ctx.g = layer, g
        return x @ weight.t()

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        dx = dy @ weight
        if ctx.layer.delay:
            ctx.layer.pending.append((ctx.g, x.detach(), dy.detach()))
            return dx, None, None, None
        return dx, ctx.layer.deliver(ctx.g, x, dy), None, None


class PerExpertMLP(nn.Module):
    def __init__(self, experts, hidden, ffn, activation, bias, into_main_grad, delay, **dev):
        super().__init__()
        self.activation, glu, self.uses_probs = ACTIVATIONS[activation]
        self.experts = experts
        self.delay_wgrad_compute = delay
        self.fc1 = ExpertLinears(
            experts, hidden, 2 * ffn if glu else ffn, bias, into_main_grad, delay, **dev
        )
        self.fc2 = ExpertLinears(experts, ffn, hidden, bias, into_main_grad, delay, **dev)
        self.hooks: list = []

    def forward(self, x, split_sizes, probs=None):
        sizes = [int(s) for s in split_sizes]
        rows = torch.split(x, sizes)
        scales = torch.split(probs, sizes) if self.uses_probs else [None] * len(sizes)
        outputs = []
        for g in range(self.experts):
            a = self.activation(self.fc1(g, rows[g]))
            if scales[g] is not None:
                a = a * scales[g].unsqueeze(-1)
            outputs.append(self.fc2(g, a))
        return torch.cat(outputs)

    def backward_dw(self) -> None:
        ran = [layer.backward_dw() for layer in (self.fc2, self.fc1)]
        if any(ran):
            for hook in self.hooks:
                hook()

    def register_wgrad_accumulation_and_reduce_hooks(self, hook) -> None:
        self.hooks.append(hook)


def make(
    num_experts,
    hidden,
    ffn,
    activation="swiglu",
    bias=False,
    single_grouped_weight=False,
    accumulate_into_main_grad=False,
    delay_wgrad_compute=False,
    dtype=torch.float32,
    device="cpu",
):
    if single_grouped_weight:
        raise NotImplementedError("per-expert weights only")
    if activation not in ACTIVATIONS:
        raise NotImplementedError(f"activation {activation} not written")
    return PerExpertMLP(
        num_experts,
        hidden,
        ffn,
        activation,
        bias,
        accumulate_into_main_grad,
        delay_wgrad_compute,
        dtype=dtype,
        device=device,
    )
