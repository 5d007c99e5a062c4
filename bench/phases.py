"""What each benchmark phase runs, through the grouped MLP's public API only.

Every module phase builds a fresh module (swiglu, no bias) whose weights have fp32 main_grad
buffers set up as Megatron DDP does (``setup_ddp_param``) and accumulate_into_main_grad=True,
so weight gradients take the fused path's main_grad epilogue as in training. Before every
repeat, untimed: what DDP does between steps (``reset_for_step``: no ``.grad`` held,
grad_added_to_main_grad False) and ``x.grad = None``. Inputs are the same tensors in every
repeat (not rotated); the L2 flush before each repeat (timing.py) keeps that honest.

  forward           timed: y = mlp(x, splits), autograd recording as in training
  dgrad             delay_wgrad_compute=True; untimed forward, timed y.backward(dy) (input
                    gradients only), untimed backward_dw() to drain the queued weight gradients
  wgrad-accumulate  delay_wgrad_compute=True; untimed forward and backward, timed backward_dw():
                    weight gradients added into fp32 main_grad
  wgrad-overwrite   the same with param.overwrite_main_grad=True (main_grad = wgrad)
  step              timed: y = mlp(x, splits); y.backward(dy), not delayed, accumulating
  wgrad-baseline    not a module: the two weight-gradient GEMMs (dW1 = dh^T x, dW2 = dy^T a) as
                    plain ``torch._grouped_mm`` calls in the module dtype, writing no main_grad
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

import torch
from torch import nn

from gmlp_check.refimpl.config import MLPConfig
from gmlp_check.refimpl.megatron import reset_for_step, setup_ddp_param, weight_params

from .shapes import Shape
from .timed_backends import Unavailable
from .timing import Clock, RepeatPolicy, Samples, measure

MODULE_PHASES = ("forward", "dgrad", "wgrad-accumulate", "wgrad-overwrite", "step")
BASELINE_PHASE = "wgrad-baseline"
PHASES = (*MODULE_PHASES, BASELINE_PHASE)
BASELINE_BACKEND = "torch._grouped_mm"
DELAYED_PHASES = ("dgrad", "wgrad-accumulate", "wgrad-overwrite")


@dataclass(frozen=True)
class Workload:
    shape: Shape
    load: str
    splits: list[int]
    dtype: torch.dtype
    device: torch.device
    single_grouped_weight: bool

    @property
    def weights(self) -> str:
        """The weight layout as the bench names it (--weights)."""
        return "single" if self.single_grouped_weight else "discrete"

    def mlp_config(self, *, delay_wgrad_compute: bool) -> MLPConfig:
        return MLPConfig(
            num_experts=self.shape.experts,
            hidden=self.shape.hidden,
            ffn=self.shape.ffn,
            single_grouped_weight=self.single_grouped_weight,
            accumulate_into_main_grad=True,
            delay_wgrad_compute=delay_wgrad_compute,
            dtype=self.dtype,
            device=self.device,
        )

    def randn(self, rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(rows, cols, generator=generator, dtype=self.dtype, device=self.device)


Builder = Callable[[MLPConfig], nn.Module]


def _attach_main_grads(module: nn.Module, *, overwrite: bool) -> list[torch.Tensor]:
    params = weight_params(module)
    if not params:
        raise Unavailable("the module has no weight parameters (expected fc1.weight0.. or weight)")
    for p in params:
        setup_ddp_param(p, torch.zeros(p.shape, dtype=torch.float32, device=p.device))
        if overwrite:
            p.overwrite_main_grad = True
    return params


def run_module_phase(
    phase: str, build: Builder, workload: Workload, clock: Clock, policy: RepeatPolicy
) -> Samples:
    """Build the module for ``phase`` (raises Unavailable if it cannot be built) and time it."""
    module = build(workload.mlp_config(delay_wgrad_compute=phase in DELAYED_PHASES))
    params = _attach_main_grads(module, overwrite=phase == "wgrad-overwrite")
    generator = torch.Generator(device=workload.device).manual_seed(0)
    x = workload.randn(workload.shape.rows, workload.shape.hidden, generator).requires_grad_()
    dy = workload.randn(workload.shape.rows, workload.shape.hidden, generator)
    splits = workload.splits
    held: dict[str, torch.Tensor] = {}

    def reset() -> None:
        reset_for_step(params)
        x.grad = None

    def forward() -> None:
        held["y"] = module(x, splits)

    def backward() -> None:
        held.pop("y").backward(dy)

    def forward_backward() -> None:
        module(x, splits).backward(dy)

    def release() -> None:
        held.clear()

    if phase == "forward":
        return measure(clock, forward, policy=policy, before=reset, after=release)
    if phase == "dgrad":
        return measure(
            clock,
            backward,
            policy=policy,
            before=lambda: (reset(), forward()),
            after=module.backward_dw,
        )
    if phase in ("wgrad-accumulate", "wgrad-overwrite"):
        return measure(
            clock,
            module.backward_dw,
            policy=policy,
            before=lambda: (reset(), forward_backward()),
        )
    if phase == "step":
        return measure(clock, forward_backward, policy=policy, before=reset)
    raise ValueError(f"phase: expected one of {', '.join(MODULE_PHASES)}, got {phase!r}")


def run_baseline(workload: Workload, clock: Clock, policy: RepeatPolicy) -> Samples:
    if not hasattr(torch, "_grouped_mm"):
        raise Unavailable(f"torch {torch.__version__} has no torch._grouped_mm")
    shape = workload.shape
    generator = torch.Generator(device=workload.device).manual_seed(0)
    x = workload.randn(shape.rows, shape.hidden, generator)
    dh = workload.randn(shape.rows, shape.fc1_out, generator)
    a = workload.randn(shape.rows, shape.ffn, generator)
    dy = workload.randn(shape.rows, shape.hidden, generator)
    offs = group_ends(workload.splits, workload.device)
    return measure(clock, lambda: baseline_wgrads(x, dh, a, dy, offs), policy=policy)


def group_ends(splits: list[int], device: torch.device) -> torch.Tensor:
    """Group ends along the shared row (K) dimension: dW[g] = A[:, rows of g] @ B[rows of g]."""
    return torch.tensor(list(accumulate(splits)), dtype=torch.int32, device=device)


def baseline_wgrads(
    x: torch.Tensor, dh: torch.Tensor, a: torch.Tensor, dy: torch.Tensor, offs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """dW1 [G, fc1_out, hidden] and dW2 [G, hidden, ffn] from one grouped GEMM each."""
    return torch._grouped_mm(dh.t(), x, offs=offs), torch._grouped_mm(dy.t(), a, offs=offs)
