"""Where an activation's derivative jumps, and how far that lets fc1's gradients move.

ReLU's derivative jumps at 0 and clamped QGeGLU's at its clamp limits. A fused side computes
the pre-activation h in its working dtype (and may round it twice, e.g. a bf16 GEMM output plus
a bf16 bias), so an h within rounding distance of a kink can land on the other side of it from
the fp32 reference. That flips one element of dh = act'(h) * da and moves, legitimately:

    dx[t, :]     by |jump[t, f]| * |W1[f, :]|      (fc1 dgrad)
    dW1[f, :]    by |jump[t, f]| * |x[t, :]|       (fc1 weight gradient, expert of token t)
    db1[f]       by |jump[t, f]|                   (fc1 bias gradient)

At real sizes a few hundred of a million pre-activations sit that close to 0 in bf16, and
each moves a whole row of these gradients by tens of tolerances. ``kink_slack`` computes, from
the reference's own h and da, the largest such move for every element of those gradients;
gmlp_check.checks adds it to their tolerance. Forward outputs need no slack: the activations
are continuous at their kinks. Smooth activations get none at all.

The rounding window is deliberately generous: two roundings to the working dtype (2 * eps of
the sum of absolute terms of h) plus the worst-case fp32 accumulation error (K * eps_fp32); and
the slack is twice the jump, because a flip moves the gradient by the jump itself and the fused
side's da is rounded too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gmlp_check.refimpl.activations import QGEGLU_ALPHA, QGEGLU_LIMIT
from gmlp_check.refimpl.grouped_linear import row_offsets

from .tolerance import Precision

KINKED_ACTIVATIONS = ("relu", "clamped_qgeglu")


def _qgelu(g: torch.Tensor) -> torch.Tensor:
    return g * torch.sigmoid(QGEGLU_ALPHA * g)


def _qgelu_derivative(g: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(QGEGLU_ALPHA * g)
    return s + QGEGLU_ALPHA * g * s * (1 - s)


def derivative_jumps(
    activation: str, h: torch.Tensor, da: torch.Tensor, window: torch.Tensor
) -> torch.Tensor:
    """[T, fc1_out]: how much dh[t, f] changes if h[t, f], within ``window`` of a kink, is
    taken on the other side of it; zero for elements away from every kink."""
    if activation == "relu":
        return torch.where(h.abs() <= window, da.abs(), torch.zeros_like(h))
    if activation == "clamped_qgeglu":
        gate, linear = h.chunk(2, dim=-1)
        w_gate, w_linear = window.chunk(2, dim=-1)
        limit = torch.full_like(gate, QGEGLU_LIMIT)
        near_gate = (gate - QGEGLU_LIMIT).abs() <= w_gate
        gate_jump = _qgelu_derivative(limit).abs() * (linear.clamp(-QGEGLU_LIMIT, QGEGLU_LIMIT) + 1)
        near_linear = ((linear.abs() - QGEGLU_LIMIT).abs()) <= w_linear
        linear_jump = _qgelu(gate.clamp(max=QGEGLU_LIMIT))
        zero = torch.zeros_like(gate)
        return torch.cat(
            [
                torch.where(near_gate, gate_jump.abs() * da.abs(), zero),
                torch.where(near_linear, linear_jump.abs() * da.abs(), zero),
            ],
            dim=-1,
        )
    return torch.zeros_like(h)


@dataclass
class KinkSlack:
    """Extra tolerance, per microbatch, for the gradients a kink can move."""

    input_grads: list[torch.Tensor]  # [T, hidden]
    params: list[dict[str, torch.Tensor]]  # fc1 parameter name -> tensor of its shape

    def cumulative(self, name: str, microbatch: int) -> torch.Tensor | None:
        """Slack of a gradient accumulated over microbatches 0..microbatch (main_grad)."""
        parts = [p[name] for p in self.params[: microbatch + 1] if name in p]
        return torch.stack(parts).sum(0) if parts else None


def kink_slack(
    activation: str,
    precision: Precision,
    reference: torch.nn.Module,
    xs: list[torch.Tensor],
    dys: list[torch.Tensor],
    splits: list[list[int]],
) -> KinkSlack | None:
    """The slack for each microbatch, from the reference module's (fp32) weights and the fp32
    inputs and output gradients; None for activations without kinks."""
    if activation not in KINKED_ACTIVATIONS:
        return None
    fc1, fc2 = reference.fc1, reference.fc2
    eps = precision.eps
    eps32 = torch.finfo(torch.float32).eps
    with torch.no_grad():
        w1 = fc1.per_expert(fc1.weight_params())
        w2 = fc2.per_expert(fc2.weight_params())
        b1 = fc1.per_expert(fc1.bias_params()) if fc1.use_bias else None
        input_slack, param_slack = [], []
        for x, dy, sizes in zip(xs, dys, splits):
            dx_slack = torch.zeros_like(x)
            w_slack = [torch.zeros_like(w) for w in w1]
            b_slack = [torch.zeros(w.shape[0], device=w.device) for w in w1]
            for g, (start, end) in enumerate(row_offsets(sizes)):
                if start == end:
                    continue
                xg, dyg = x[start:end], dy[start:end]
                h = xg @ w1[g].t()
                magnitude = xg.abs() @ w1[g].abs().t()
                if b1 is not None:
                    h = h + b1[g]
                    magnitude = magnitude + b1[g].abs()
                window = (2 * eps + x.shape[1] * eps32) * magnitude
                # Doubled: a flipped element moves its gradients by exactly its jump, so
                # without margin the fused side's own rounding of da would push the error over.
                jumps = 2 * derivative_jumps(activation, h, dyg @ w2[g], window)
                dx_slack[start:end] = jumps @ w1[g].abs()
                w_slack[g] = jumps.t() @ xg.abs()
                b_slack[g] = jumps.sum(0)
            per_param = {}
            _spread(per_param, fc1, fc1.weight_names(), w_slack)
            if fc1.use_bias:
                _spread(per_param, fc1, fc1.bias_names(), b_slack)
            input_slack.append(dx_slack)
            param_slack.append(per_param)
    return KinkSlack(input_slack, param_slack)


def _spread(out: dict, layer, names: list[str], per_expert: list[torch.Tensor]) -> None:
    """Per-expert tensors -> one per parameter (stacked for a single grouped parameter)."""
    prefix = layer.name
    if layer.single_grouped_weight:
        out[f"{prefix}.{names[0]}"] = torch.stack(per_expert)
    else:
        for name, t in zip(names, per_expert):
            out[f"{prefix}.{name}"] = t
