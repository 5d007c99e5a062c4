"""The fused backend's own weight gradients under an FP8 recipe: the same backend, weights,
inputs and recipe, built without output into main_grad, so its weight gradients come back as
plain ``.grad``. FP8 cases judge main_grad against these tightly (tolerance.py, FP8): the
numerics are the same, so anything beyond the rounding of ``.grad`` to the weight's dtype is
bookkeeping (a gradient written twice, into the wrong buffer, accumulated where overwrite was
asked), which the loose bound against the fp32 reference could not see."""

from __future__ import annotations

from dataclasses import replace

import torch

from . import fp8
from .inputs import Inputs
from .matrix import Case


def own_gradients(
    build, case: Case, state: dict[str, object], inputs: Inputs
) -> list[dict[str, torch.Tensor]]:
    """Per microbatch, each parameter's ``.grad`` from a twin of the fused side that does not
    write main_grad (``build(case)`` makes a module for a case). The twin takes the fused
    side's ``state`` as built (FP8 metadata and quantized weights included) and a recipe object
    of its own, so a delayed recipe's amax history evolves exactly as the fused side's did."""
    plain_case = replace(case, mode="off")
    with fp8.weights_init(case.fp8, case.fp8_weights):
        twin = build(plain_case)
    twin.load_state_dict(state)
    autocast = fp8.Autocast(case.fp8)
    params = dict(twin.named_parameters())
    grads = []
    for mb in range(case.microbatches):
        x = inputs.xs[mb].detach().clone().requires_grad_(True)
        probs = inputs.probs[mb]
        with autocast():
            y = twin(x, inputs.splits[mb], probs)
        y.backward(inputs.dys[mb])
        twin.backward_dw()
        grads.append(
            {n: p.grad.detach().float().clone() for n, p in params.items() if p.grad is not None}
        )
        for p in params.values():
            p.grad = None
    return grads
