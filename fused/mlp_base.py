"""What every fused backend shares: refimpl's constructor and parameter layout, the same input
validation, the delayed weight-gradient queue run by backward_dw(), and the wgrad hooks.

A backend subclass implements the forward (with its own autograd function) and the
weight-gradient GEMM that writes the regions planned by fused.main_grad.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gmlp_check.refimpl.layout import GroupedMLPParams

from .grouped_linear import DeferredWgrad, FusedGroupedLinear, Splits
from .main_grad import MainGradPolicy, WgradPlan, finish_wgrads, plan_wgrads


def device_split_sizes(
    split_sizes: Sequence[int] | torch.Tensor, sizes: list[int], device: torch.device
) -> torch.Tensor:
    """The validated split sizes as an int32 tensor on ``device`` for the kernels.

    A tensor is copied, not aliased: the caller may reuse it before backward runs. A list goes
    to a GPU through pinned memory without blocking: a copy from pageable memory would wait for
    the device to drain, putting the CPU behind the GPU once every forward."""
    if isinstance(split_sizes, torch.Tensor):
        return split_sizes.to(device=device, dtype=torch.int32, copy=True)
    # The host tensor names its device: torch.set_default_device("cuda") must not move it.
    host = torch.tensor(sizes, dtype=torch.int32, device="cpu")
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


class FusedGroupedMLPBase(GroupedMLPParams):
    linear_class = FusedGroupedLinear

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Every main_grad decision of this module (fused/main_grad.py).
        self.main_grad_policy = MainGradPolicy()

    def forward(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sizes = self.check_call(x, split_sizes, probs)
        splits = Splits(device_split_sizes(split_sizes, sizes, x.device), tuple(sizes))
        return self._forward(x, splits, probs)

    def _forward(self, x: torch.Tensor, splits: Splits, probs: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def _compute_wgrads(
        self, plan: WgradPlan, x: torch.Tensor, dy: torch.Tensor, splits: Splits
    ) -> None:
        """Write dy_g^T x_g into every region of ``plan`` with its accumulate flag."""
        raise NotImplementedError

    # -- weight gradients ---------------------------------------------------------------------
    def deliver_wgrads(
        self, layer: FusedGroupedLinear, x: torch.Tensor, dy: torch.Tensor, splits: Splits
    ) -> list[torch.Tensor | None]:
        """Compute and deliver one layer's weight gradients as CONTRACT.md says; returns what
        autograd must see as each weight's gradient."""
        plan = plan_wgrads(layer, self.main_grad_policy)
        self._compute_wgrads(plan, x, dy, splits)
        return finish_wgrads(plan, self.main_grad_policy)

    def wgrads_for_backward(
        self, layer: FusedGroupedLinear, x: torch.Tensor, dy: torch.Tensor, splits: Splits
    ) -> list[torch.Tensor | None]:
        """Weight gradients for the autograd backward: delivered now, or queued for
        backward_dw() (then None, as the reference returns)."""
        if layer.delay_wgrad_compute:
            layer.pending_wgrads.append(DeferredWgrad(x.detach(), dy.detach(), splits))
            return [None] * len(layer.weight_names())
        return self.deliver_wgrads(layer, x, dy, splits)

    def backward_dw(self) -> None:
        """Compute the weight gradients deferred by delay_wgrad_compute; no-op otherwise.

        Every deferred GEMM is planned and launched first, then each weight's bookkeeping is
        done (its dummy, flag and .grad: host time that grows with the experts, 3.4 ms for
        Qwen3's 256 weights on the H200's host): the device runs fc2's GEMM while the host
        plans fc1's, and the bookkeeping overlaps the last GEMM instead of standing between
        two. Each plan still fetches and checks its destinations before its GEMM writes."""
        launched = [
            self._launch_deferred(layer, deferred)
            for layer in (self.fc2, self.fc1)
            for deferred in self.main_grad_policy.drain(layer.pending_wgrads)
        ]
        for plan in launched:
            grads = finish_wgrads(plan, self.main_grad_policy)
            for p, grad in zip(plan.params, grads):
                if grad is None:
                    continue
                # What autograd's AccumulateGrad would have done in backward.
                p.grad = grad if p.grad is None else p.grad + grad
        if launched:
            self.run_wgrad_hooks()

    def _launch_deferred(self, layer: FusedGroupedLinear, deferred: DeferredWgrad) -> WgradPlan:
        """Plan one deferred weight gradient of ``layer`` and launch its GEMM."""
        plan = plan_wgrads(layer, self.main_grad_policy)
        self._compute_wgrads(plan, deferred.x, deferred.dy, deferred.splits)
        return plan
