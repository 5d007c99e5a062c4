"""fc1's forward with the activation in its epilogue, and fc2's dgrad with the activation's
derivative in its epilogue: the grouped row GEMMs of grouped_gemm.py, whose docstring says how
operands reach a program, with more work after the products.
"""

import triton.language as tl

from ..dual_jit import dual_jit
from .activation_backward import store_activation_grad
from .activations import glu_forward, pointwise_forward
from .row_tiles import (
    a_tile,
    add_expert_bias,
    b_tile,
    expert_matrix,
    row_tile,
    row_tile_product,
)


@dual_jit
def fc1_activation_kernel(
    X,
    X_DESC,
    stride_xm,
    stride_xk,
    W_PTRS,
    W_DESC,
    w_desc_rows,
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
    num_row_slots,
    F,
    K,
    ACT: tl.constexpr,
    GLU: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_PROBS: tl.constexpr,
    ALIGNED: tl.constexpr,
    TMA: tl.constexpr,
    PER_EXPERT_DESC: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """fc1 forward with the activation in the epilogue.

    h = x @ W1_g^T (+ b1_g) is stored (the pre-activation backward needs) and
    out = act(h) (* probs per row) is stored for fc2. With GLU, the program owns output
    columns j of out and computes both h[:, j] (gate) and h[:, F + j] (linear) for them: two
    dots per K step that share the x tile, as one BLOCK_M x 2 BLOCK_N tile would.
    W1_g is [fc1 out, K]; w_desc_rows is fc1 out (TMA only)."""
    expert, row0, rows, row_ok, n0 = row_tile(
        SPLITS,
        num_experts,
        num_row_slots,
        tl.cdiv(F, BLOCK_N),
        BLOCK_M,
        BLOCK_N,
        GROUP_M,
        EXPERTS_POW2,
    )
    if expert >= num_experts:
        return
    # W1_g stored [fc1 out, K].
    w_base, w_desc, desc_row0 = expert_matrix(
        W_PTRS, W_DESC, expert, w_desc_rows, K, stride_wn, X.dtype.element_ty,
        ALIGNED, TMA, PER_EXPERT_DESC, BLOCK_N, BLOCK_K,
    )  # fmt: skip
    # B_g[k, n] = W1_g[n, k]: the linear half's columns are W1_g's rows F.. (F + n0 on).
    linear_base = w_base + F * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if GLU:
        acc_linear = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = a_tile(X, X_DESC, row0, rows, row_ok, k0, K, stride_xm, stride_xk, BLOCK_K, TMA, EVEN_K)
        w = b_tile(
            w_base,
            w_desc,
            desc_row0,
            k0,
            n0,
            K,
            F,
            stride_wk,
            stride_wn,
            BLOCK_K,
            BLOCK_N,
            TMA,
            True,
            EVEN_K,
        )
        acc = tl.dot(x, w, acc, input_precision=DOT_PRECISION)
        if GLU:
            w_linear = b_tile(
                linear_base,
                w_desc,
                desc_row0 + F,
                k0,
                n0,
                K,
                F,
                stride_wk,
                stride_wn,
                BLOCK_K,
                BLOCK_N,
                TMA,
                True,
                EVEN_K,
            )
            acc_linear = tl.dot(x, w_linear, acc_linear, input_precision=DOT_PRECISION)

    cols = n0 + tl.arange(0, BLOCK_N)
    col_ok = cols < F
    if HAS_BIAS:
        bias_ty = H.dtype.element_ty
        acc = add_expert_bias(acc, BIAS_PTRS, expert, cols, col_ok, stride_bias, bias_ty)
        if GLU:
            acc_linear = add_expert_bias(
                acc_linear, BIAS_PTRS, expert, cols + F, col_ok, stride_bias, bias_ty
            )

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
    DY_DESC,
    stride_dym,
    stride_dyk,
    W_PTRS,
    W_DESC,
    w_desc_rows,
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
    num_row_slots,
    F,
    K,
    ACT: tl.constexpr,
    GLU: tl.constexpr,
    HAS_PROBS: tl.constexpr,
    ALIGNED: tl.constexpr,
    TMA: tl.constexpr,
    PER_EXPERT_DESC: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """fc2 dgrad with the activation's derivative in the epilogue.

    da = dy @ W2_g, then dh = act'(h) * da (* probs) is stored for fc1's dgrad and wgrad.
    With probs, d probs[t] = sum_j da[t, j] * act(h)[t, j]; each program stores its partial
    sum over its columns in row (its column tile) of DPROBS_PARTIAL, summed on the host: no
    atomics, so the result does not depend on scheduling.
    W2_g is [K, F] (B_g itself); w_desc_rows is K (TMA only)."""
    num_col_tiles = tl.cdiv(F, BLOCK_N)
    expert, row0, rows, row_ok, n0 = row_tile(
        SPLITS, num_experts, num_row_slots, num_col_tiles, BLOCK_M, BLOCK_N, GROUP_M, EXPERTS_POW2
    )
    if expert >= num_experts:
        return
    # W2_g stored [K, F].
    w_base, w_desc, desc_row0 = expert_matrix(
        W_PTRS, W_DESC, expert, w_desc_rows, F, stride_wk, DY.dtype.element_ty,
        ALIGNED, TMA, PER_EXPERT_DESC, BLOCK_K, BLOCK_N,
    )  # fmt: skip
    acc = row_tile_product(
        DY,
        DY_DESC,
        row0,
        rows,
        row_ok,
        stride_dym,
        stride_dyk,
        w_base,
        w_desc,
        desc_row0,
        n0,
        K,
        F,
        stride_wk,
        stride_wn,
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        TMA,
        False,
        EVEN_K,
        DOT_PRECISION,
    )

    cols = n0 + tl.arange(0, BLOCK_N)
    mask = row_ok[:, None] & (cols < F)[None, :]
    store_activation_grad(
        acc, rows, cols, row_ok, mask, n0 // BLOCK_N, H, stride_hm, stride_hn, PROBS, stride_p,
        DH, stride_dhm, stride_dhn, DPROBS_PARTIAL, stride_ppn, stride_ppm, F, ACT, GLU, HAS_PROBS,
    )  # fmt: skip
