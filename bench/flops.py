"""Model FLOPs and compulsory memory traffic of each benchmark phase.

FLOPs count the GEMMs only, 2 * M * N * K each, over all T = rows routed rows (an expert with
no rows costs nothing); the activation and main_grad's add are left out (under 0.5 % of the
GEMMs on every model shape: the add is G / (2 T) of the weight-gradient GEMMs).
With fc1: hidden -> fc1_out and fc2: ffn -> hidden:

    forward  y = fc2(act(x W1^T)) W2^T     2*T*hidden*fc1_out + 2*T*ffn*hidden
    dgrad    dx = dh W1,  da = dy W2       the same two products, transposed
    wgrad    dW1 = dh^T x, dW2 = dy^T a    the same two products again
    step     forward + dgrad + wgrad       (non-delayed forward and backward)

Bytes are the traffic no backend can avoid, counted only for the weight-gradient
phases, where the fp32 main_grad epilogue makes them memory-relevant: each operand
(x [T, hidden], dh [T, fc1_out], a [T, ffn], dy [T, hidden]) read once in the module dtype,
and each weight-gradient element written once: fp32 read + write (8 B) when accumulating into
main_grad, fp32 write (4 B) when overwriting it, one write in the module dtype for the plain
``torch._grouped_mm`` baseline.
"""

from __future__ import annotations

from .shapes import Shape

FP32_BYTES = 4


def forward_flops(shape: Shape) -> int:
    t = shape.rows
    return 2 * t * shape.hidden * shape.fc1_out + 2 * t * shape.ffn * shape.hidden


def dgrad_flops(shape: Shape) -> int:
    t = shape.rows
    return 2 * t * shape.fc1_out * shape.hidden + 2 * t * shape.hidden * shape.ffn


def wgrad_flops(shape: Shape) -> int:
    t = shape.rows
    return 2 * shape.fc1_out * t * shape.hidden + 2 * shape.hidden * t * shape.ffn


def weight_elements(shape: Shape) -> int:
    return shape.experts * (shape.fc1_out * shape.hidden + shape.hidden * shape.ffn)


def wgrad_operand_bytes(shape: Shape, element_bytes: int) -> int:
    t = shape.rows
    return t * (shape.hidden + shape.fc1_out + shape.ffn + shape.hidden) * element_bytes


# Bytes per weight-gradient element written by each weight-gradient phase.
_DESTINATION_BYTES = {
    "wgrad-accumulate": 2 * FP32_BYTES,
    "wgrad-overwrite": FP32_BYTES,
}


def phase_flops(shape: Shape, phase: str) -> int:
    if phase == "forward":
        return forward_flops(shape)
    if phase == "dgrad":
        return dgrad_flops(shape)
    if phase in ("wgrad-accumulate", "wgrad-overwrite", "wgrad-baseline"):
        return wgrad_flops(shape)
    if phase == "step":
        return forward_flops(shape) + dgrad_flops(shape) + wgrad_flops(shape)
    raise ValueError(f"phase: unknown phase {phase!r}")


def phase_bytes(shape: Shape, phase: str, element_bytes: int) -> int | None:
    """Compulsory bytes of a weight-gradient phase; None for the other phases."""
    if phase == "wgrad-baseline":
        destination = element_bytes
    elif phase in _DESTINATION_BYTES:
        destination = _DESTINATION_BYTES[phase]
    else:
        return None
    return wgrad_operand_bytes(shape, element_bytes) + weight_elements(shape) * destination
