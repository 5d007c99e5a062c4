"""Grouped GEMMs over ragged row blocks: rows of expert g times expert g's matrix.

Operands reach the kernels in one of two ways, chosen on the host per launch (TMA):
  * pointer loads: the rows [T, K] by pointer and strides; expert matrices through a table of
    base pointers (int64 [G]) and one pair of strides shared by all experts (B_g[k, n] at
    pointer_g + k * stride_bk + n * stride_bn), so discrete weights (G separate parameters),
    a single [G, out, in] weight and transposed uses (forward vs dgrad) all run the same code
    without a copy. Scalar strides let Triton specialise a unit stride, and ALIGNED (every
    pointer 16-byte aligned, checked on the host) lets it vectorise and pipeline the loads
    through table pointers; without both, loads are scalar.
  * TMA (Hopper's tensor-memory accelerator; 16-bit types): host tensor descriptors over the
    rows [T, K] and over the expert matrices stacked as one [G * rows, cols] matrix (a single
    grouped weight is one already). The copy engine fetches each operand tile into shared
    memory and zero-fills what lies outside the tensor, so the K loop computes no addresses or
    masks and leaves the registers to the accumulators. A tile's rows past its expert's end
    are the next expert's rows: the products they give land only in output rows or columns
    that the masked store drops. Along K a stacked-matrix tile must not cross into the next
    expert (A's zero columns would meet another expert's weights there), so the launcher
    takes TMA only where K % BLOCK_K == 0 when K runs along the stacked rows.
Biases: a pointer table and one stride. Outputs are stored through pointers with masks.

Grid: one program per (row-tile slot, column tile), in the grouped order of expert_rows.py
(cdiv(T, BLOCK_M) + G row-tile slots). Accumulation is fp32; fp32 operands use DOT_PRECISION
(see fused/tiles.py).
"""

import triton
import triton.language as tl

from ..dual_jit import dual_jit
from .activations import glu_backward, glu_forward, pointwise_backward, pointwise_forward
from .expert_rows import expert_pointer, expert_row_block, grouped_tile


@triton.jit
def _row_tile(
    SPLITS,
    num_experts,
    num_row_slots,
    num_col_tiles,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """(expert, the tile's first row, its rows (int64), their mask, first column) of this
    program; expert == num_experts for a slot past the last row tile."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), num_row_slots, num_col_tiles, GROUP_M)
    expert, _, row0, end_row = expert_row_block(SPLITS, num_experts, pid_m, BLOCK_M, EXPERTS_POW2)
    rows = row0 + tl.arange(0, BLOCK_M)
    return expert, row0, rows.to(tl.int64), rows < end_row, pid_n * BLOCK_N


@triton.jit
def _a_tile(
    A,
    A_DESC,
    row0,
    rows,
    row_ok,
    k0,
    K,
    stride_am,
    stride_ak,
    BLOCK_K: tl.constexpr,
    TMA: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """A[rows, k0 : k0 + BLOCK_K]."""
    if TMA:
        tile = A_DESC.load([row0, k0])
    else:
        ks = k0 + tl.arange(0, BLOCK_K)
        mask = row_ok[:, None] if EVEN_K else row_ok[:, None] & (ks < K)[None, :]
        tile = tl.load(
            A + rows[:, None] * stride_am + ks[None, :] * stride_ak, mask=mask, other=0.0
        )
    return tile


@triton.jit
def _b_tile(
    b_base,
    B_DESC,
    desc_row0,
    k0,
    n0,
    K,
    N,
    stride_bk,
    stride_bn,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    TMA: tl.constexpr,
    B_TRANSPOSED: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """B_g[k0 : k0 + BLOCK_K, n0 : n0 + BLOCK_N].

    The TMA descriptor holds the stacked matrices as stored, expert g's rows from desc_row0
    on: W_g with B_g[k, n] = W_g[n, k] (B_TRANSPOSED), or B_g itself."""
    if TMA:
        if B_TRANSPOSED:
            tile = B_DESC.load([desc_row0 + n0, k0]).T
        else:
            tile = B_DESC.load([desc_row0 + k0, n0])
    else:
        ks = k0 + tl.arange(0, BLOCK_K)
        cols = n0 + tl.arange(0, BLOCK_N)
        mask = (cols < N)[None, :] if EVEN_K else (ks < K)[:, None] & (cols < N)[None, :]
        tile = tl.load(
            b_base + ks[:, None] * stride_bk + cols[None, :] * stride_bn, mask=mask, other=0.0
        )
    return tile


@dual_jit
def grouped_gemm_kernel(
    A,
    A_DESC,
    stride_am,
    stride_ak,
    B_PTRS,
    B_DESC,
    b_desc_rows,
    stride_bk,
    stride_bn,
    BIAS_PTRS,
    stride_bias,
    C,
    stride_cm,
    stride_cn,
    SPLITS,
    num_experts,
    num_row_slots,
    N,
    K,
    HAS_BIAS: tl.constexpr,
    ALIGNED: tl.constexpr,
    TMA: tl.constexpr,
    B_TRANSPOSED: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """C[rows of g] = A[rows of g] @ B_g (+ bias_g): fc2 forward and fc1 dgrad.

    b_desc_rows: rows of one expert in the stacked-matrix descriptor (TMA only)."""
    expert, row0, rows, row_ok, n0 = _row_tile(
        SPLITS,
        num_experts,
        num_row_slots,
        tl.cdiv(N, BLOCK_N),
        BLOCK_M,
        BLOCK_N,
        GROUP_M,
        EXPERTS_POW2,
    )
    if expert >= num_experts:
        return
    # TMA launches pass no pointer table: B_PTRS is a placeholder there, never dereferenced.
    b_base = B_PTRS if TMA else expert_pointer(B_PTRS, expert, A.dtype.element_ty, ALIGNED)
    desc_row0 = expert * b_desc_rows

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = _a_tile(
            A, A_DESC, row0, rows, row_ok, k0, K, stride_am, stride_ak, BLOCK_K, TMA, EVEN_K
        )
        b = _b_tile(
            b_base,
            B_DESC,
            desc_row0,
            k0,
            n0,
            K,
            N,
            stride_bk,
            stride_bn,
            BLOCK_K,
            BLOCK_N,
            TMA,
            B_TRANSPOSED,
            EVEN_K,
        )
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)

    cols = n0 + tl.arange(0, BLOCK_N)
    col_ok = cols < N
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
    expert, row0, rows, row_ok, n0 = _row_tile(
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
    w_base = W_PTRS if TMA else expert_pointer(W_PTRS, expert, X.dtype.element_ty, ALIGNED)
    desc_row0 = expert * w_desc_rows
    # B_g[k, n] = W1_g[n, k]: the linear half's columns are W1_g's rows F.. (F + n0 on).
    linear_base = w_base + F * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if GLU:
        acc_linear = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = _a_tile(
            X, X_DESC, row0, rows, row_ok, k0, K, stride_xm, stride_xk, BLOCK_K, TMA, EVEN_K
        )
        w = _b_tile(
            w_base,
            W_DESC,
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
            w_linear = _b_tile(
                linear_base,
                W_DESC,
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
    expert, row0, rows, row_ok, n0 = _row_tile(
        SPLITS, num_experts, num_row_slots, num_col_tiles, BLOCK_M, BLOCK_N, GROUP_M, EXPERTS_POW2
    )
    if expert >= num_experts:
        return
    w_base = W_PTRS if TMA else expert_pointer(W_PTRS, expert, DY.dtype.element_ty, ALIGNED)
    desc_row0 = expert * w_desc_rows

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        dy = _a_tile(
            DY, DY_DESC, row0, rows, row_ok, k0, K, stride_dym, stride_dyk, BLOCK_K, TMA, EVEN_K
        )
        w = _b_tile(
            w_base,
            W_DESC,
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
            False,
            EVEN_K,
        )
        acc = tl.dot(dy, w, acc, input_precision=DOT_PRECISION)

    cols = n0 + tl.arange(0, BLOCK_N)
    mask = row_ok[:, None] & (cols < F)[None, :]
    h_ptrs = H + rows[:, None] * stride_hm + cols[None, :] * stride_hn
    h = tl.load(h_ptrs, mask=mask, other=0.0).to(tl.float32)
    if GLU:
        h_linear = tl.load(h_ptrs + F * stride_hn, mask=mask, other=0.0).to(tl.float32)
    if HAS_PROBS:
        activated = glu_forward(h, h_linear, ACT) if GLU else pointwise_forward(h, ACT)
        partial = tl.sum(tl.where(mask, acc * activated, 0.0), 1)
        tl.store(
            DPROBS_PARTIAL + (n0 // BLOCK_N) * stride_ppn + rows * stride_ppm, partial, mask=row_ok
        )
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
