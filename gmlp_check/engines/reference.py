"""The reference's side of a real-engine case: every rank's data, the fp32 reference run on it,
and the data-parallel result the engines promise.

Weights are identical on all ranks (drawn as the emulated run draws them, from
``case_seed(seed, case)``); tokens differ per rank (rank r > 0 draws from
``case_seed(seed, case, r)``; rank 0 continues the weights' generator, so its first step sees
exactly the emulated run's data). Each step draws new tokens, as training does.

Let N be the data-parallel ranks, k the microbatches and W_{r,i} the exact fp32 gradient of a
parameter on rank r, microbatch i. Megatron's default loss scaling (calculate_per_token_loss
off) makes every engine deliver the mean over ranks: after finish_grad_sync each parameter's
reduced gradient is (1/N) * sum_r sum_i W_{r,i} (DDP: pre-scale 1/dp and SUM, megatron-core
0.19.2 ``DistributedDataParallel.__init__``'s gradient_scaling_factor; Megatron-FSDP likewise,
megatron-fsdp 0.6.1 ``gradient_reduce_preprocessing``). The same value from the last
microbatch alone, (1/N) * sum_r W_{r,k}, is what an engine holds when a fused side overwrote where
it had to accumulate (Megatron-LM #6357).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from ..inputs import Inputs, Sizes, case_seed, make_inputs, make_state
from ..kinks import KinkSlack, kink_slack
from ..matrix import Case
from ..tolerance import Precision
from .step import Microbatch


def rank_data(
    case: Case,
    sizes: Sizes,
    shapes: dict[str, torch.Size],
    device: torch.device,
    rank: int,
    steps: int,
) -> tuple[dict[str, torch.Tensor], list[Inputs]]:
    """The weights (the same on every rank) and this rank's inputs for each step."""
    generator = torch.Generator(device="cpu").manual_seed(case_seed(sizes.seed, case))
    state = make_state(shapes, case, sizes, device, generator)
    if rank > 0:
        generator = torch.Generator(device="cpu").manual_seed(case_seed(sizes.seed, case, rank))
    return state, [make_inputs(case, sizes, state, device, generator) for _ in range(steps)]


def microbatches(inputs: Inputs) -> list[Microbatch]:
    return [
        Microbatch(x, list(splits), probs, dy)
        for x, splits, probs, dy in zip(inputs.xs, inputs.splits, inputs.probs, inputs.dys)
    ]


@dataclass
class ReferenceStep:
    """The fp32 reference on one rank's microbatches of one step."""

    outputs: list[torch.Tensor]
    input_grads: list[torch.Tensor]
    probs_grads: list[torch.Tensor | None]
    grads: list[dict[str, torch.Tensor]]  # per microbatch, every parameter's exact gradient
    slack: KinkSlack | None


def run_reference(
    reference: nn.Module, inputs: Inputs, activation: str, precision: Precision
) -> ReferenceStep:
    """Plain autograd, one microbatch at a time (``reference`` outputs into ``.grad``)."""
    upcast = inputs.upcast()
    step = ReferenceStep([], [], [], [], None)
    for x, splits, probs, dy in zip(upcast.xs, upcast.splits, upcast.probs, upcast.dys):
        for p in reference.parameters():
            p.grad = None
        x = x.detach().clone().requires_grad_(True)
        if probs is not None:
            probs = probs.detach().clone().requires_grad_(True)
        y = reference(x, splits, probs)
        y.backward(dy)
        reference.backward_dw()
        step.outputs.append(y.detach())
        step.input_grads.append(x.grad.detach())
        step.probs_grads.append(None if probs is None else probs.grad.detach())
        step.grads.append(
            {n: p.grad.detach().float().clone() for n, p in reference.named_parameters()}
        )
    step.slack = kink_slack(activation, precision, reference, upcast.xs, upcast.dys, upcast.splits)
    return step


@dataclass
class Promised:
    """What every correct engine holds after finish_grad_sync, per parameter (full shape)."""

    synced: dict[str, torch.Tensor]
    last_only: dict[str, torch.Tensor]  # the #6357 signature
    slack: dict[str, torch.Tensor]  # kink slack of the reduced value (fc1 only, kinked acts)


def mean_over_ranks(local: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """(1/N) * sum over ranks of each tensor: one all_reduce of one flat vector (the identity
    on one rank, or without torch.distributed)."""
    if not local:
        return {}
    names = list(local)
    flat = torch.cat([local[n].reshape(-1) for n in names])
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= dist.get_world_size()
    out, start = {}, 0
    for n in names:
        size = local[n].numel()
        out[n] = flat[start : start + size].view_as(local[n])
        start += size
    return out


def promised(step: ReferenceStep) -> Promised:
    """The engines' promise for one step (a collective: every rank calls it)."""
    names = list(step.grads[0]) if step.grads else []
    local = {n: torch.stack([g[n] for g in step.grads]).sum(0) for n in names}
    last = {n: step.grads[-1][n] for n in names}
    slack_local: dict[str, torch.Tensor] = {}
    if step.slack is not None:
        for n in names:
            cumulative = step.slack.cumulative(n, len(step.grads) - 1)
            if cumulative is not None:
                slack_local[n] = cumulative.float()
    # Every rank has the same parameters and the same kinked activation, so the three
    # dictionaries have the same keys everywhere and the collectives line up.
    return Promised(mean_over_ranks(local), mean_over_ranks(last), mean_over_ranks(slack_local))
