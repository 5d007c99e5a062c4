"""The activations of the grouped MLP, written as plain torch expressions.

GLU activations split fc1's output [T, 2*ffn] into two halves: the first half is the gate,
the second the linear ("up") part, as Transformer Engine's SwiGLU does. Autograd
differentiates these expressions, so the reference needs no hand-written derivatives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .activation_names import ACTIVATION_NAMES

# Clamped QGeGLU (the GPT-OSS activation): quick-GELU gate x*sigmoid(alpha*x) with clamping.
QGEGLU_LIMIT = 7.0
QGEGLU_ALPHA = 1.702


def _halves(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    gate, linear = h.chunk(2, dim=-1)
    return gate, linear


def swiglu(h: torch.Tensor) -> torch.Tensor:
    gate, linear = _halves(h)
    return F.silu(gate) * linear


def _clip(x: torch.Tensor, low: float | None, high: float) -> torch.Tensor:
    """``x`` clipped to [low, high], with the gradient passing up to and including the limits
    and 0 beyond them. Written with ``torch.where`` rather than ``clamp``: clamp's derivative
    at exactly the limit changed in torch 2.14 (0 there, 1 before), and the reference must not
    depend on the torch that runs it."""
    x = torch.where(x > high, torch.full_like(x, high), x)
    if low is not None:
        x = torch.where(x < low, torch.full_like(x, low), x)
    return x


def clamped_qgeglu(h: torch.Tensor) -> torch.Tensor:
    gate, linear = _halves(h)
    gate = _clip(gate, None, QGEGLU_LIMIT)
    linear = _clip(linear, -QGEGLU_LIMIT, QGEGLU_LIMIT)
    return gate * torch.sigmoid(QGEGLU_ALPHA * gate) * (linear + 1.0)


def geglu(h: torch.Tensor) -> torch.Tensor:
    gate, linear = _halves(h)
    return F.gelu(gate, approximate="tanh") * linear


def gelu(h: torch.Tensor) -> torch.Tensor:
    return F.gelu(h, approximate="tanh")


def relu(h: torch.Tensor) -> torch.Tensor:
    return F.relu(h)


def srelu(h: torch.Tensor) -> torch.Tensor:
    return F.relu(h) ** 2


@dataclass(frozen=True)
class Activation:
    name: str
    fn: Callable[[torch.Tensor], torch.Tensor]
    glu: bool  # fc1 produces 2*ffn features (gate and linear halves)
    uses_probs: bool  # the output row of token t is multiplied by probs[t]

    def fc1_out_features(self, ffn: int) -> int:
        return 2 * ffn if self.glu else ffn

    def __call__(self, h: torch.Tensor, probs: torch.Tensor | None) -> torch.Tensor:
        a = self.fn(h)
        if self.uses_probs:
            a = a * probs.unsqueeze(-1)
        return a


ACTIVATIONS: dict[str, Activation] = {
    a.name: a
    for a in (
        Activation("swiglu", swiglu, glu=True, uses_probs=False),
        Activation("scaled_swiglu", swiglu, glu=True, uses_probs=True),
        Activation("clamped_qgeglu", clamped_qgeglu, glu=True, uses_probs=False),
        Activation("geglu", geglu, glu=True, uses_probs=False),
        Activation("gelu", gelu, glu=False, uses_probs=False),
        Activation("relu", relu, glu=False, uses_probs=False),
        Activation("srelu", srelu, glu=False, uses_probs=False),
    )
}
if tuple(ACTIVATIONS) != ACTIVATION_NAMES:  # the torch-free list offers exactly these
    raise ImportError(f"ACTIVATION_NAMES {ACTIVATION_NAMES} != ACTIVATIONS {tuple(ACTIVATIONS)}")


def get_activation(name: str) -> Activation:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"activation: expected one of {', '.join(ACTIVATIONS)}, got {name!r}"
        ) from None
