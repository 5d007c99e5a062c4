"""Where each weight gradient of the fused path goes: the main_grad contract (CONTRACT.md).

Two decisions are kept apart on purpose, because conflating them is the bug this project is
about (TE #2936):
  * output into main_grad or not -- aliasing the GEMM's output to main_grad, setting
    grad_added_to_main_grad, returning a dummy gradient -- follows the op-level
    ``accumulate_into_main_grad`` setting alone;
  * the GEMM's accumulate-vs-overwrite flag follows the parameter's ``overwrite_main_grad``.

Every such decision is one method of :class:`MainGradPolicy`, and a fused module holds its
policy in ``main_grad_policy``. The module asks the policy and never decides itself, so the
whole contract of the fused path can be read here, in one place, and replaced as a whole (a
checker proves itself by swapping in a policy that gets one decision wrong).

Shared by every backend: a backend plans the delivery, makes its GEMMs write into the planned
regions with the planned flags, then finishes the delivery.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from gmlp_check.refimpl.main_grad import (
    dummy_is_zeroed,
    fetch_main_grad,
    mark_grad_added,
    overwrites_main_grad,
)

from .grouped_linear import DeferredWgrad, FusedGroupedLinear


class MainGradPolicy:
    """The decisions CONTRACT.md prescribes for one fused grouped MLP, one method each."""

    def fetch(self, name: str, param: torch.Tensor) -> torch.Tensor:
        """The parameter's main_grad viewed as its shape, fetched as the reference does."""
        return fetch_main_grad(name, param)

    def accumulates(self, param: torch.Tensor) -> bool:
        """The GEMM's flag: ``+=`` unless the parameter asks for overwrite."""
        return not overwrites_main_grad(param)

    def aliases(self, accumulate_into_main_grad: bool, accumulate: bool) -> bool:
        """Whether the GEMM writes main_grad itself: the op-level setting alone. Without the
        alias it writes a scratch buffer nobody reads (TE #2936)."""
        return accumulate_into_main_grad

    def bookkeeps(self, accumulate_into_main_grad: bool, accumulate: bool) -> bool:
        """Whether grad_added_to_main_grad is set and a dummy handed to autograd: the op-level
        setting alone."""
        return accumulate_into_main_grad

    def dummies(self, params: list[torch.nn.Parameter]) -> list[torch.Tensor | None]:
        """The placeholders handed to autograd when the real gradients went into main_grad:
        the reference's (one per weight, which must exist, must not alias main_grad and is
        zero under zero_out_wgrad), allocated together: one block per shape, dtype and
        zero_out_wgrad setting, each weight one slice of it. One allocation per expert would
        cost more host time than a whole weight-gradient launch with a hundred experts."""
        blocks: dict[tuple, list[int]] = {}
        for i, p in enumerate(params):
            key = (p.shape, p.dtype, p.device, dummy_is_zeroed(p))
            blocks.setdefault(key, []).append(i)
        out: list[torch.Tensor | None] = [None] * len(params)
        for (shape, dtype, device, zero), members in blocks.items():
            allocate = torch.zeros if zero else torch.empty
            block = allocate((len(members), *shape), dtype=dtype, device=device)
            for i, dummy in zip(members, block.unbind(0)):
                out[i] = dummy
        return out

    def drain(self, pending: deque[DeferredWgrad]) -> Iterator[DeferredWgrad]:
        """The weight gradients deferred by delay_wgrad_compute, oldest first, each removed
        as it is handed out: backward_dw() computes every one."""
        while pending:
            yield pending.popleft()


@dataclass(frozen=True)
class ExpertRegion:
    """The fp32 [out, in] region that receives expert ``expert``'s weight gradient."""

    expert: int
    region: torch.Tensor
    accumulate: bool


@dataclass(frozen=True)
class WgradPlan:
    """Destinations of one layer's weight gradients, fetched and checked before any write."""

    params: list[torch.nn.Parameter]
    destinations: list[torch.Tensor]  # one fp32 tensor of each parameter's shape
    accumulate: list[bool]  # the GEMM's flag per parameter (the "local" flag)
    accumulate_into_main_grad: bool  # the op-level setting
    layer: FusedGroupedLinear

    @functools.cached_property
    def experts(self) -> list[ExpertRegion]:
        """One region per expert; built on first use (G views: host time on every backward)."""
        layer = self.layer
        regions = layer.per_expert(self.destinations)
        flags = (
            self.accumulate * layer.num_groups if layer.single_grouped_weight else self.accumulate
        )
        return [ExpertRegion(g, regions[g], flags[g]) for g in range(layer.num_groups)]

    def grouped_destination(self) -> tuple[torch.Tensor, bool] | None:
        """(the [G, out, in] destination, its flag) of a single grouped weight, else None: a
        backend may write it whole instead of expert by expert."""
        if not self.layer.single_grouped_weight:
            return None
        return self.destinations[0], self.accumulate[0]


def _scratch(param: torch.Tensor) -> torch.Tensor:
    return torch.empty(param.shape, dtype=torch.float32, device=param.device)


def plan_wgrads(layer: FusedGroupedLinear, policy: MainGradPolicy) -> WgradPlan:
    params = layer.weight_params()
    accumulate_into_main_grad = layer.accumulate_into_main_grad
    if not accumulate_into_main_grad:
        # Plain mode: the kernel overwrites fresh fp32 buffers, every element of them.
        return WgradPlan(params, [_scratch(p) for p in params], [False] * len(params), False, layer)
    names = [f"{layer.name}.{n}" for n in layer.weight_names()]
    # Every destination is fetched and checked before the first write: nothing half-written.
    main_grads = [policy.fetch(n, p) for n, p in zip(names, params)]
    accumulate = [policy.accumulates(p) for p in params]
    destinations = [
        main_grad if policy.aliases(accumulate_into_main_grad, flag) else _scratch(p)
        for p, main_grad, flag in zip(params, main_grads, accumulate)
    ]
    return WgradPlan(params, destinations, accumulate, accumulate_into_main_grad, layer)


def finish_wgrads(plan: WgradPlan, policy: MainGradPolicy) -> list[torch.Tensor | None]:
    """What autograd must see as each weight's gradient, once the GEMMs wrote their regions:
    the gradient in the parameter dtype, or a dummy when it went into main_grad."""
    if not plan.accumulate_into_main_grad:
        return [d.to(p.dtype) for d, p in zip(plan.destinations, plan.params)]
    bookkept = [policy.bookkeeps(plan.accumulate_into_main_grad, f) for f in plan.accumulate]
    dummies = iter(policy.dummies([p for p, b in zip(plan.params, bookkept) if b]))
    grads: list[torch.Tensor | None] = []
    for p, destination, bookkeeps in zip(plan.params, plan.destinations, bookkept):
        if bookkeeps:
            mark_grad_added(p)
            grads.append(next(dummies))
        else:
            grads.append(destination.to(p.dtype, copy=True))
    return grads
