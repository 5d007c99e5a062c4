"""Grouped GEMMs over ragged row blocks: rows of expert g times expert g's matrix.

Expert matrices reach the kernels through a table of base pointers (int64 [G]) and one pair
of strides shared by all experts (B_g[k, n] at pointer_g + k * stride_bk + n * stride_bn), so
discrete weights (G separate parameters), a single [G, out, in] weight and transposed uses
(forward vs dgrad) all run the same code without a copy. Scalar strides let Triton specialise a
unit stride, and ALIGNED (every pointer 16-byte aligned, checked on the host) lets it
vectorise and pipeline the loads through table pointers; without both, loads are scalar.
Biases likewise: a pointer table and one stride.

Grid: (cdiv(T, BLOCK_M) + G, cdiv(N, BLOCK_N)); see expert_rows.py for the row-tile mapping.
Accumulation is fp32; fp32 operands use DOT_PRECISION (see fused/tiles.py).
"""

import triton.language as tl

from ..dual_jit import dual_jit
from .activations import glu_backward, glu_forward, pointwise_backward, pointwise_forward
from .expert_rows import expert_pointer, expert_row_tile


@dual_jit
def grouped_gemm_kernel(
    A,
    stride_am,
    stride_ak,
    B_PTRS,
    stride_bk,
    stride_bn,
    BIAS_PTRS,
    stride_bias,
    C,
    stride_cm,
    stride_cn,
    SPLITS,
    num_experts,
    N,
    K,
    HAS_BIAS: tl.constexpr,
    ALIGNED: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """C[rows of g] = A[rows of g] @ B_g (+ bias_g): fc2 forward and fc1 dgrad."""
    expert, rows, row_ok = expert_row_tile(
        SPLITS, num_experts, tl.program_id(0), BLOCK_M, EXPERTS_POW2
    )
    if expert >= num_experts:
        return
    rows = rows.to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    b_base = expert_pointer(B_PTRS, expert, A.dtype.element_ty, ALIGNED)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(
            A + rows[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        b = tl.load(
            b_base + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
            mask=k_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)

    if HAS_BIAS:
        bias_base = expert_pointer(BIAS_PTRS, expert, C.dtype.element_ty, False)
        bias = tl.load(bias_base + cols * stride_bias, mask=col_ok, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    tl.store(
        C + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
        acc.to(C.dtype.element_ty),
        mask=row_ok[:, None] & col_ok[None, :],
    )


@dual_jit
def fc1_activation_kernel(
    X,
    stride_xm,
    stride_xk,
    W_PTRS,
    stride_wk,
    stride_wn,
    BIAS_PTRS,
    stride_bias,
    PROBS,
    stride_p,
    H,
    stride_hm,
    stride_hn,
    OUT,
    stride_om,
    stride_on,
    SPLITS,
    num_experts,
    F,
    K,
    ACT: tl.constexpr,
    GLU: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_PROBS: tl.constexpr,
    ALIGNED: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """fc1 forward with the activation in the epilogue.

    h = x @ W1_g^T (+ b1_g) is stored (the pre-activation backward needs) and
    out = act(h) (* probs per row) is stored for fc2. With GLU, the program owns output
    columns j of out and computes both h[:, j] (gate) and h[:, F + j] (linear) for them."""
    expert, rows, row_ok = expert_row_tile(
        SPLITS, num_experts, tl.program_id(0), BLOCK_M, EXPERTS_POW2
    )
    if expert >= num_experts:
        return
    rows = rows.to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < F
    w_base = expert_pointer(W_PTRS, expert, X.dtype.element_ty, ALIGNED)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if GLU:
        acc_linear = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        x = tl.load(
            X + rows[:, None] * stride_xm + ks[None, :] * stride_xk,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        w_mask = k_ok[:, None] & col_ok[None, :]
        w_ptrs = w_base + ks[:, None] * stride_wk + cols[None, :] * stride_wn
        acc = tl.dot(x, tl.load(w_ptrs, mask=w_mask, other=0.0), acc, input_precision=DOT_PRECISION)
        if GLU:
            w_linear = tl.load(w_ptrs + F * stride_wn, mask=w_mask, other=0.0)
            acc_linear = tl.dot(x, w_linear, acc_linear, input_precision=DOT_PRECISION)

    if HAS_BIAS:
        bias_base = expert_pointer(BIAS_PTRS, expert, H.dtype.element_ty, False)
        bias = tl.load(bias_base + cols * stride_bias, mask=col_ok, other=0.0)
        acc += bias.to(tl.float32)[None, :]
        if GLU:
            bias_linear = tl.load(bias_base + (cols + F) * stride_bias, mask=col_ok, other=0.0)
            acc_linear += bias_linear.to(tl.float32)[None, :]

    mask = row_ok[:, None] & col_ok[None, :]
    h_ptrs = H + rows[:, None] * stride_hm + cols[None, :] * stride_hn
    # The activation reads h as stored (rounded to the module dtype), as the reference does
    # and as backward will, which re-reads the stored h.
    h = acc.to(H.dtype.element_ty)
    tl.store(h_ptrs, h, mask=mask)
    if GLU:
        h_linear = acc_linear.to(H.dtype.element_ty)
        tl.store(h_ptrs + F * stride_hn, h_linear, mask=mask)
        out = glu_forward(h.to(tl.float32), h_linear.to(tl.float32), ACT)
    else:
        out = pointwise_forward(h.to(tl.float32), ACT)
    if HAS_PROBS:
        probs = tl.load(PROBS + rows * stride_p, mask=row_ok, other=0.0).to(tl.float32)
        out = out * probs[:, None]
    tl.store(
        OUT + rows[:, None] * stride_om + cols[None, :] * stride_on,
        out.to(OUT.dtype.element_ty),
        mask=mask,
    )


@dual_jit
def fc2_dgrad_activation_kernel(
    DY,
    stride_dym,
    stride_dyk,
    W_PTRS,
    stride_wk,
    stride_wn,
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
    SPLITS,
    num_experts,
    F,
    K,
    ACT: tl.constexpr,
    GLU: tl.constexpr,
    HAS_PROBS: tl.constexpr,
    ALIGNED: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """fc2 dgrad with the activation's derivative in the epilogue.

    da = dy @ W2_g, then dh = act'(h) * da (* probs) is stored for fc1's dgrad and wgrad.
    With probs, d probs[t] = sum_j da[t, j] * act(h)[t, j]; each program stores its partial
    sum over its columns in row program_id(1) of DPROBS_PARTIAL, summed on the host: no
    atomics, so the result does not depend on scheduling."""
    expert, rows, row_ok = expert_row_tile(
        SPLITS, num_experts, tl.program_id(0), BLOCK_M, EXPERTS_POW2
    )
    if expert >= num_experts:
        return
    rows = rows.to(tl.int64)
    pid_n = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < F
    w_base = expert_pointer(W_PTRS, expert, DY.dtype.element_ty, ALIGNED)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        dy = tl.load(
            DY + rows[:, None] * stride_dym + ks[None, :] * stride_dyk,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        w = tl.load(
            w_base + ks[:, None] * stride_wk + cols[None, :] * stride_wn,
            mask=k_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        acc = tl.dot(dy, w, acc, input_precision=DOT_PRECISION)

    mask = row_ok[:, None] & col_ok[None, :]
    h_ptrs = H + rows[:, None] * stride_hm + cols[None, :] * stride_hn
    h = tl.load(h_ptrs, mask=mask, other=0.0).to(tl.float32)
    if GLU:
        h_linear = tl.load(h_ptrs + F * stride_hn, mask=mask, other=0.0).to(tl.float32)
    if HAS_PROBS:
        activated = glu_forward(h, h_linear, ACT) if GLU else pointwise_forward(h, ACT)
        partial = tl.sum(tl.where(mask, acc * activated, 0.0), 1)
        tl.store(DPROBS_PARTIAL + pid_n * stride_ppn + rows * stride_ppm, partial, mask=row_ok)
        probs = tl.load(PROBS + rows * stride_p, mask=row_ok, other=0.0).to(tl.float32)
        acc = acc * probs[:, None]
    dh_ptrs = DH + rows[:, None] * stride_dhm + cols[None, :] * stride_dhn
    if GLU:
        d_gate, d_linear = glu_backward(h, h_linear, acc, ACT)
        tl.store(dh_ptrs, d_gate.to(DH.dtype.element_ty), mask=mask)
        tl.store(dh_ptrs + F * stride_dhn, d_linear.to(DH.dtype.element_ty), mask=mask)
    else:
        d_h = pointwise_backward(h, acc, ACT)
        tl.store(dh_ptrs, d_h.to(DH.dtype.element_ty), mask=mask)
