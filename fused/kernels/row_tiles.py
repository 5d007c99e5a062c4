"""The tile of a grouped row GEMM a program works on, its operand tiles, its K loop and its bias
epilogue: shared by the plain grouped GEMM (grouped_gemm.py) and the GEMMs with an activation in
their epilogue (activation_gemm.py). How operands are laid out and reach a program is described in
grouped_gemm.py's docstring.
"""

import triton
import triton.language as tl

from .expert_rows import expert_pointer, expert_row_block, grouped_tile


@triton.jit
def row_tile(
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
def expert_matrix(
    PTRS,
    DESC,
    expert,
    desc_rows,
    desc_cols,
    desc_row_stride,
    dtype: tl.constexpr,
    ALIGNED: tl.constexpr,
    TMA: tl.constexpr,
    PER_EXPERT_DESC: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """(base pointer, descriptor, first row in the descriptor) of ``expert``'s matrix, stored
    as [desc_rows, desc_cols] with unit column stride.

    Without TMA the base pointer comes from the table and DESC is a placeholder. With TMA,
    either one host descriptor covers the stacked matrices (expert g's rows from
    g * desc_rows on; PTRS is a placeholder then), or (PER_EXPERT_DESC: matrices no one
    descriptor covers, as discrete weights) this program makes a descriptor over its expert's
    matrix alone, here on the device, from the table's pointer (the host checked alignment);
    its BLOCK_R x BLOCK_C block is the tile b_tile loads."""
    base = PTRS
    desc = DESC
    desc_row0 = expert * desc_rows
    if not TMA:
        base = expert_pointer(PTRS, expert, dtype, ALIGNED)
    elif PER_EXPERT_DESC:
        base = expert_pointer(PTRS, expert, dtype, True)
        desc = tl.make_tensor_descriptor(
            base,
            shape=[desc_rows, desc_cols],
            strides=[desc_row_stride, 1],
            block_shape=[BLOCK_R, BLOCK_C],
        )
        desc_row0 = 0
    return base, desc, desc_row0


@triton.jit
def a_tile(
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
def b_tile(
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


@triton.jit
def row_tile_product(
    A,
    A_DESC,
    row0,
    rows,
    row_ok,
    stride_am,
    stride_ak,
    b_base,
    B_DESC,
    desc_row0,
    n0,
    K,
    N,
    stride_bk,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    TMA: tl.constexpr,
    B_TRANSPOSED: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """A[rows] @ B_g[:, n0 : n0 + BLOCK_N] accumulated in fp32: the K loop of the kernels with
    one product per tile (fc1's GLU kernel shares each A tile between two products)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_tile(A, A_DESC, row0, rows, row_ok, k0, K, stride_am, stride_ak, BLOCK_K, TMA, EVEN_K)
        b = b_tile(
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
    return acc


@triton.jit
def add_expert_bias(acc, BIAS_PTRS, expert, cols, col_ok, stride_bias, element_ty: tl.constexpr):
    """acc + bias_g[cols], the bias row broadcast over the tile's rows and added in fp32: the
    bias epilogue of the row GEMMs. A GLU's linear half passes its columns, cols + F."""
    bias_base = expert_pointer(BIAS_PTRS, expert, element_ty, False)
    bias = tl.load(bias_base + cols * stride_bias, mask=col_ok, other=0.0)
    return acc + bias.to(tl.float32)[None, :]
