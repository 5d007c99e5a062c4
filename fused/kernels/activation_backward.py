"""The activation's derivative as a kernel of its own, after fc2's dgrad GEMM.

fc2_dgrad_activation_kernel (activation_gemm.py) applies the derivative in the GEMM's
epilogue: it loads two h tiles and stores two dh tiles per output tile while holding the
accumulator, with one program per multiprocessor, and that epilogue is not hidden behind
products. With 16-bit operands a plain GEMM storing da (the row GEMM's tiles) followed by this
elementwise pass takes less time on every preset shape (docs/perf-notes.md), and rounds da to
the operands' type before the derivative, as autograd in that type (and the reference) does.

Elementwise over [T, F] tiles: no expert structure, no reduction across programs. With probs
(scaled activations), each program stores its rows' partial sum of da * act(h) over its
columns in row (its column tile) of DPROBS_PARTIAL, summed on the host, as the fused epilogue
does: no atomics, so the result does not depend on scheduling.
"""

import triton
import triton.language as tl

from ..dual_jit import dual_jit
from .activations import glu_backward, glu_forward, pointwise_backward, pointwise_forward


@triton.jit
def store_activation_grad(
    grad,
    rows,
    cols,
    row_ok,
    mask,
    col_tile,
    H,
    stride_hm,
    stride_hn,
    PROBS,
    stride_p,
    DH,
    stride_dhm,
    stride_dhn,
    DPROBS_PARTIAL,
    stride_ppn,
    stride_ppm,
    F,
    ACT: tl.constexpr,
    GLU: tl.constexpr,
    HAS_PROBS: tl.constexpr,
):
    """Store dh = act'(h) * grad (* probs) for a [rows, cols] tile of the activation's output
    gradient ``grad`` (fp32), and with probs the tile's partial d probs in row ``col_tile`` of
    DPROBS_PARTIAL. Shared by this kernel and fc2_dgrad_activation_kernel's epilogue."""
    h_ptrs = H + rows[:, None] * stride_hm + cols[None, :] * stride_hn
    h = tl.load(h_ptrs, mask=mask, other=0.0).to(tl.float32)
    if GLU:
        h_linear = tl.load(h_ptrs + F * stride_hn, mask=mask, other=0.0).to(tl.float32)
    if HAS_PROBS:
        activated = glu_forward(h, h_linear, ACT) if GLU else pointwise_forward(h, ACT)
        partial = tl.sum(tl.where(mask, grad * activated, 0.0), 1)
        tl.store(DPROBS_PARTIAL + col_tile * stride_ppn + rows * stride_ppm, partial, mask=row_ok)
        probs = tl.load(PROBS + rows * stride_p, mask=row_ok, other=0.0).to(tl.float32)
        grad = grad * probs[:, None]
    dh_ptrs = DH + rows[:, None] * stride_dhm + cols[None, :] * stride_dhn
    if GLU:
        d_gate, d_linear = glu_backward(h, h_linear, grad, ACT)
        tl.store(dh_ptrs, d_gate.to(DH.dtype.element_ty), mask=mask)
        tl.store(dh_ptrs + F * stride_dhn, d_linear.to(DH.dtype.element_ty), mask=mask)
    else:
        d_h = pointwise_backward(h, grad, ACT)
        tl.store(dh_ptrs, d_h.to(DH.dtype.element_ty), mask=mask)


@dual_jit
def activation_backward_kernel(
    DA,
    stride_am,
    stride_an,
    H,
    stride_hm,
    stride_hn,
    PROBS,
    stride_p,
    DH,
    stride_dhm,
    stride_dhn,
    DPROBS_PARTIAL,
    stride_ppn,
    stride_ppm,
    T,
    F,
    ACT: tl.constexpr,
    GLU: tl.constexpr,
    HAS_PROBS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """dh = act'(h) * da (* probs) for da [T, F] and h [T, F] (GLU: [T, 2F], gate first)."""
    col_tile = tl.program_id(1)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_tile * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < T
    mask = row_ok[:, None] & (cols < F)[None, :]
    grad = tl.load(
        DA + rows[:, None] * stride_am + cols[None, :] * stride_an, mask=mask, other=0.0
    ).to(tl.float32)
    store_activation_grad(
        grad, rows, cols, row_ok, mask, col_tile, H, stride_hm, stride_hn, PROBS, stride_p,
        DH, stride_dhm, stride_dhn, DPROBS_PARTIAL, stride_ppn, stride_ppm, F, ACT, GLU, HAS_PROBS,
    )  # fmt: skip
