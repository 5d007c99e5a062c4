"""What every fused backend shares: refimpl's constructor and parameter layout, the same input
validation, the delayed weight-gradient queue run by backward_dw(), and the wgrad hooks.

A backend subclass implements the forward (with its own autograd function) and the
weight-gradient GEMM that writes the regions planned by fused.main_grad.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from refimpl.activations import get_activation
from refimpl.validation import (
    check_input,
    check_main_grad_source,
    check_probs,
    normalize_split_sizes,
)

from .faults import DELAYED_WGRAD_DROPPED
from .grouped_linear import DeferredWgrad, GroupedLinearParams
from .main_grad import WgradPlan, finish_wgrads, plan_wgrads


def device_split_sizes(
    split_sizes: Sequence[int] | torch.Tensor, sizes: list[int], device: torch.device
) -> torch.Tensor:
    """The validated split sizes as an int32 tensor on ``device`` for the kernels.

    A tensor is copied, not aliased: the caller may reuse it before backward runs. A list goes
    to a GPU through pinned memory without blocking: a copy from pageable memory would wait for
    the device to drain, putting the CPU behind the GPU once every forward."""
    if isinstance(split_sizes, torch.Tensor):
        return split_sizes.to(device=device, dtype=torch.int32, copy=True)
    host = torch.tensor(sizes, dtype=torch.int32)
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


class FusedGroupedMLPBase(nn.Module):
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
        self.fc1 = GroupedLinearParams(
            "fc1", num_experts, hidden, self.activation.fc1_out_features(ffn), **common
        )
        self.fc2 = GroupedLinearParams("fc2", num_experts, ffn, hidden, **common)
        self._wgrad_hooks: list[Callable[[], None]] = []
        # Name of an injected fault (fused.faults.inject); None is the correct behaviour.
        self.fault: str | None = None

    def forward(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        weight = self.fc1.weight_params()[0]
        check_input(x, self.hidden, weight.dtype, weight.device)
        sizes = normalize_split_sizes(split_sizes, self.num_experts, x.shape[0])
        check_probs(probs, x.shape[0], self.activation.uses_probs, self.activation.name)
        if self.accumulate_into_main_grad:
            # Fail at forward, not deep inside backward, when a buffer can never be found.
            for layer in (self.fc1, self.fc2):
                for name, p in zip(layer.weight_names(), layer.weight_params()):
                    check_main_grad_source(f"{layer.name}.{name}", p)
        splits = device_split_sizes(split_sizes, sizes, x.device)
        return self._forward(x, splits, probs)

    def _forward(
        self, x: torch.Tensor, splits: torch.Tensor, probs: torch.Tensor | None
    ) -> torch.Tensor:
        raise NotImplementedError

    def _compute_wgrads(
        self, plan: WgradPlan, x: torch.Tensor, dy: torch.Tensor, splits: torch.Tensor
    ) -> None:
        """Write dy_g^T x_g into every region of ``plan`` with its accumulate flag."""
        raise NotImplementedError

    # -- weight gradients ---------------------------------------------------------------------
    def deliver_wgrads(
        self, layer: GroupedLinearParams, x: torch.Tensor, dy: torch.Tensor, splits: torch.Tensor
    ) -> list[torch.Tensor | None]:
        """Compute and deliver one layer's weight gradients as CONTRACT.md says; returns what
        autograd must see as each weight's gradient."""
        plan = plan_wgrads(layer, self.fault)
        self._compute_wgrads(plan, x, dy, splits)
        return finish_wgrads(plan, self.fault)

    def wgrads_for_backward(
        self, layer: GroupedLinearParams, x: torch.Tensor, dy: torch.Tensor, splits: torch.Tensor
    ) -> list[torch.Tensor | None]:
        """Weight gradients for the autograd backward: delivered now, or queued for
        backward_dw() (then None, as the reference returns)."""
        if layer.delay_wgrad_compute:
            layer.pending_wgrads.append(DeferredWgrad(x.detach(), dy.detach(), splits))
            return [None] * len(layer.weight_names())
        return self.deliver_wgrads(layer, x, dy, splits)

    def register_wgrad_accumulation_and_reduce_hooks(self, hook: Callable[[], None]) -> None:
        """Hooks run by backward_dw() once delayed weight gradients are in place (TE's name)."""
        self._wgrad_hooks.append(hook)

    def backward_dw(self) -> None:
        """Compute the weight gradients deferred by delay_wgrad_compute; no-op otherwise."""
        if self.fault == DELAYED_WGRAD_DROPPED:
            for layer in (self.fc2, self.fc1):
                layer.pending_wgrads.clear()
            return
        ran = [self._run_deferred(layer) for layer in (self.fc2, self.fc1)]
        if any(ran):
            for hook in self._wgrad_hooks:
                hook()

    def _run_deferred(self, layer: GroupedLinearParams) -> bool:
        """Run every deferred weight-gradient GEMM of ``layer``, oldest first; True if any ran."""
        ran = bool(layer.pending_wgrads)
        while layer.pending_wgrads:
            deferred = layer.pending_wgrads.popleft()
            grads = self.deliver_wgrads(layer, deferred.x, deferred.dy, deferred.splits)
            for p, grad in zip(layer.weight_params(), grads):
                if grad is None:
                    continue
                # What autograd's AccumulateGrad would have done in backward.
                p.grad = grad if p.grad is None else p.grad + grad
        return ran
