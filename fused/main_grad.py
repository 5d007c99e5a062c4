"""Where each weight gradient of the fused path goes: the main_grad contract (CONTRACT.md).

Two decisions are kept apart on purpose, because conflating them is the bug this project is
about (TE #2936):
  * output into main_grad or not -- aliasing the GEMM's output to main_grad, setting
    grad_added_to_main_grad, returning a dummy gradient -- follows the op-level
    ``accumulate_into_main_grad`` setting alone;
  * the GEMM's accumulate-vs-overwrite flag follows the parameter's ``overwrite_main_grad``.

Shared by every backend: a backend plans the delivery, makes its GEMMs write into the planned
regions with the planned flags, then finishes the delivery. The fault branches (fused.faults)
sit at the decisions the real bugs corrupted; they are dead unless a fault was injected.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from refimpl.validation import check_main_grad_source, main_grad_view

from .faults import (
    ALIAS_GATED_ON_LOCAL_FLAG,
    BOOKKEEPING_GATED_ON_LOCAL_FLAG,
    DUMMY_NOT_ZEROED,
    FSDP_MAIN_GRAD_NOT_FETCHED,
    NO_DUMMY_GRAD,
    OVERWRITE_ACCUMULATE_SWAPPED,
)
from .grouped_linear import FusedGroupedLinear


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
    into_main_grad: bool  # the op-level setting
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


def fetch_main_grad(name: str, param: torch.Tensor, fault: str | None) -> torch.Tensor:
    """The parameter's main_grad viewed as its shape; fetched through get_main_grad() when
    Megatron-FSDP has not exposed it yet (Megatron #5209)."""
    check_main_grad_source(name, param)
    buffer = getattr(param, "main_grad", None)
    if buffer is None:
        if fault == FSDP_MAIN_GRAD_NOT_FETCHED:
            buffer = torch.zeros(param.numel(), dtype=torch.float32, device=param.device)
        else:
            buffer = param.get_main_grad()
        # Expose it as Megatron's own wgrad paths do, so later readers see the same buffer.
        param.main_grad = buffer
    return main_grad_view(name, param, buffer)


def gemm_accumulates(param: torch.Tensor, fault: str | None) -> bool:
    """The GEMM's accumulate flag: ``+=`` unless the parameter asks for overwrite."""
    overwrite = bool(getattr(param, "overwrite_main_grad", False))
    if fault == OVERWRITE_ACCUMULATE_SWAPPED:
        return overwrite
    return not overwrite


def plan_wgrads(layer: FusedGroupedLinear, fault: str | None) -> WgradPlan:
    params = layer.weight_params()
    into_main_grad = layer.accumulate_into_main_grad
    if not into_main_grad:
        # Plain mode: the kernel overwrites fresh fp32 buffers, every element of them.
        destinations = [torch.empty(p.shape, dtype=torch.float32, device=p.device) for p in params]
        accumulate = [False] * len(params)
    else:
        names = [f"{layer.name}.{n}" for n in layer.weight_names()]
        # Every destination is fetched and checked before the first write: nothing half-written.
        main_grads = [fetch_main_grad(n, p, fault) for n, p in zip(names, params)]
        accumulate = [gemm_accumulates(p, fault) for p in params]
        destinations = []
        for p, main_grad, local_accumulate in zip(params, main_grads, accumulate):
            alias = local_accumulate if fault == ALIAS_GATED_ON_LOCAL_FLAG else into_main_grad
            # Without the alias the GEMM writes a scratch buffer nobody reads (TE #2936).
            destinations.append(  # gmlp: ignore[GMLP001] deliberate fault ALIAS_GATED_ON_LOCAL_FLAG
                main_grad if alias else torch.empty(p.shape, dtype=torch.float32, device=p.device)
            )
    return WgradPlan(params, destinations, accumulate, into_main_grad, layer)


def dummy_wgrad(param: torch.Tensor, fault: str | None) -> torch.Tensor:
    """The placeholder handed to autograd when the real gradient went into main_grad.

    DDP hooks assert that a gradient arrived (TE #2097) and, under zero_out_wgrad, add it to
    main_grad anyway (Megatron #6565), so it must exist, must not alias main_grad, and must be
    zero when zero_out_wgrad is set."""
    if getattr(param, "zero_out_wgrad", False) and fault != DUMMY_NOT_ZEROED:
        return torch.zeros_like(param)
    return torch.empty_like(param)


def mark_grad_added(param: torch.Tensor) -> None:
    if hasattr(param, "grad_added_to_main_grad"):
        param.grad_added_to_main_grad = True


def finish_wgrads(plan: WgradPlan, fault: str | None) -> list[torch.Tensor | None]:
    """What autograd must see as each weight's gradient, once the GEMMs wrote their regions:
    the gradient in the parameter dtype, or a dummy when it went into main_grad."""
    if not plan.into_main_grad:
        return [d.to(p.dtype) for d, p in zip(plan.destinations, plan.params)]
    grads: list[torch.Tensor | None] = []
    for p, destination, local_accumulate in zip(plan.params, plan.destinations, plan.accumulate):
        bookkeeping = (
            local_accumulate if fault == BOOKKEEPING_GATED_ON_LOCAL_FLAG else plan.into_main_grad
        )
        if bookkeeping:
            mark_grad_added(p)
            grads.append(None if fault == NO_DUMMY_GRAD else dummy_wgrad(p, fault))
        else:
            grads.append(destination.to(p.dtype, copy=True))
    return grads
