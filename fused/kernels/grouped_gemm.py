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
    takes TMA only where K % BLOCK_K == 0 when K runs along the stacked rows. Matrices that do
    not lie back to back (discrete weights) get a descriptor per expert instead, which each
    program makes on the device from the pointer table (row_tiles.expert_matrix); it
    zero-fills at its own expert's bounds, so no K condition applies there.
Biases: a pointer table and one stride. Outputs are stored through pointers with masks.

Grid: one program per (row-tile slot, column tile), in the grouped order of expert_rows.py
(cdiv(T, BLOCK_M) + G row-tile slots). Accumulation is fp32; fp32 operands use DOT_PRECISION
(see fused/tiles.py).
"""

import triton.language as tl

from ..dual_jit import dual_jit
from .row_tiles import add_expert_bias, expert_matrix, row_tile, row_tile_product


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
    PER_EXPERT_DESC: tl.constexpr,
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
    expert, row0, rows, row_ok, n0 = row_tile(
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
    if B_TRANSPOSED:  # B_g = W_g^T, W_g stored [N, K]
        b_base, b_desc, desc_row0 = expert_matrix(
            B_PTRS, B_DESC, expert, b_desc_rows, K, stride_bn, A.dtype.element_ty,
            ALIGNED, TMA, PER_EXPERT_DESC, BLOCK_N, BLOCK_K,
        )  # fmt: skip
    else:  # B_g stored [K, N]
        b_base, b_desc, desc_row0 = expert_matrix(
            B_PTRS, B_DESC, expert, b_desc_rows, N, stride_bk, A.dtype.element_ty,
            ALIGNED, TMA, PER_EXPERT_DESC, BLOCK_K, BLOCK_N,
        )  # fmt: skip
    acc = row_tile_product(
        A,
        A_DESC,
        row0,
        rows,
        row_ok,
        stride_am,
        stride_ak,
        b_base,
        b_desc,
        desc_row0,
        n0,
        K,
        N,
        stride_bk,
        stride_bn,
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        TMA,
        B_TRANSPOSED,
        EVEN_K,
        DOT_PRECISION,
    )

    cols = n0 + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    if HAS_BIAS:
        acc = add_expert_bias(acc, BIAS_PTRS, expert, cols, col_ok, stride_bias, C.dtype.element_ty)
    tl.store(
        C + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
        acc.to(C.dtype.element_ty),
        mask=row_ok[:, None] & col_ok[None, :],
    )
