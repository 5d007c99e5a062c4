"""Weight and bias gradients: per-expert reductions over that expert's ragged rows.

The weight-gradient kernel writes fp32 straight into its destinations: each weight's
main_grad (or the [G, out, in] view of one), or fresh fp32 buffers in plain mode. They come as
a table of the listed experts' first rows and row counts (int32) and their region pointers
(int64), with strides shared by the launch. Accumulate (``+=``) or overwrite (``=``) is a
compile-time choice; a launch covers the experts it lists, so parameters with different
``overwrite_main_grad`` settings (or region strides) take one launch each.
"""

import triton
import triton.language as tl

from ..dual_jit import dual_jit
from .expert_rows import expert_pointer, expert_row_range, grouped_tile


@dual_jit
def grouped_wgrad_kernel(
    DY,
    DY_DESC,
    stride_dym,
    stride_dyn,
    X,
    X_DESC,
    stride_xm,
    stride_xk,
    ENTRY_ROWS,
    DEST_PTRS,
    stride_dest_n,
    stride_dest_k,
    num_entries,
    num_tokens,
    N,
    K,
    ACCUMULATE: tl.constexpr,
    PAIRED: tl.constexpr,
    ALIGNED: tl.constexpr,
    TMA: tl.constexpr,
    TMA_DEST: tl.constexpr,
    EVICT_FIRST_DEST: tl.constexpr,
    START_FROM_DEST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    GROUP_N: tl.constexpr,
):
    """dest_g (+)= dy_g^T @ x_g, fp32, for the listed experts.

    Grid: (listed experts * cdiv(N, BLOCK_N) * cdiv(K, BLOCK_K),), expert-major: an
    expert's output tiles run together, in groups of GROUP_N row tiles (expert_rows.py).
    An expert without tokens is left untouched when accumulating (its region stays bit for
    bit) and zero-filled when overwriting, as the contract requires.

    ENTRY_ROWS (int32 [listed experts, 2]) holds each listed expert's first row and row count,
    made on the device by the launch (fused/operands.py, entry_rows). A program loads its two
    numbers beside its region pointer, independent loads, and issues its first operand load
    one latency after it starts. Scanning the G split sizes in every program instead (as the
    row GEMMs do) put a dependent load and a few barrier-bound reductions before it: DeepSeek-V3
    runs 458,752 short programs for fc1, and the scan cost 9 % of its overwrite on an H100
    (scripts/gpu/wgrad_prologue_probe.py, docs/perf-notes.md).

    With TMA, whole BLOCK_T row blocks of the expert come through the descriptors over dy
    [T, N] and x [T, K]; the last partial block, whose rows past the expert's end belong to
    the next expert and must not be summed, is loaded through masked pointers.

    START_FROM_DEST (accumulate only): the reduction starts from the destination's values
    instead of adding them after it. The load then overlaps the first operand fetches and the
    epilogue holds no second [BLOCK_N, BLOCK_K] fp32 tile in registers, which keeps two
    programs per multiprocessor so that one's fp32 read-modify-write hides behind the other's
    matrix products. The sum is the same up to fp32 rounding order.

    TMA_DEST: the program reads and writes its fp32 tile of the destination through a
    descriptor it makes on the device over its expert's region (the host checked alignment
    and strides): the store goes out as one bulk copy from shared memory instead of each
    thread's scattered pieces of the matrix-product layout, and the descriptor clips the
    tile at the region's edges.

    EVICT_FIRST_DEST (pointer path): the tile is stored with an evict-first hint: main_grad
    is written once and never read again by this kernel, while the operand tiles in L2 are
    reused by the expert's other programs.

    PAIRED: the entries come in pairs whose programs alternate (grid: cdiv(entries, 2) *
    2 * tiles per expert), the table ordered by the launch so that an expert with many rows
    is paired with one with few (fused/operands.py, paired_entries). Expert-major order runs
    a heavy expert's long, compute-bound programs together, then light experts' short ones
    that only move main_grad's fp32 tiles; side by side the two overlap. Each tile's
    reduction is unchanged, so is the result, bit for bit."""
    num_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    per_expert = num_n * num_k
    pid = tl.program_id(0)
    if PAIRED:
        # Entries 2j and 2j + 1 take turns, tile by tile (grid: cdiv(entries, 2) pairs).
        in_pair = pid % (2 * per_expert)
        entry = pid // (2 * per_expert) * 2 + in_pair % 2
        tile = in_pair // 2
        if entry >= num_entries:
            return  # the second of an odd last pair
    else:
        entry = pid // per_expert
        tile = pid % per_expert
    pid_n, pid_k = grouped_tile(tile, num_n, num_k, GROUP_N)
    first_row = tl.load(ENTRY_ROWS + 2 * entry)
    count = tl.load(ENTRY_ROWS + 2 * entry + 1)
    # Compile-time condition outside, runtime condition inside: not one `and`.
    if ACCUMULATE:  # noqa: SIM102
        if count == 0:
            return
    # Never read past the token tensor, whatever the offsets say.
    end_row = tl.minimum(first_row + count, num_tokens)

    n0 = pid_n * BLOCK_N
    k0 = pid_k * BLOCK_K
    ns = n0 + tl.arange(0, BLOCK_N)
    ks = k0 + tl.arange(0, BLOCK_K)
    n_ok = ns < N
    k_ok = ks < K
    mask = n_ok[:, None] & k_ok[None, :]
    dest_base = expert_pointer(DEST_PTRS, entry, tl.float32, ALIGNED)
    if TMA_DEST:
        dest_desc = tl.make_tensor_descriptor(
            dest_base, shape=[N, K], strides=[stride_dest_n, 1], block_shape=[BLOCK_N, BLOCK_K]
        )
    if ACCUMULATE and START_FROM_DEST:
        if TMA_DEST:
            acc = dest_desc.load([n0, k0])
        else:
            acc = tl.load(
                dest_base + ns[:, None] * stride_dest_n + ks[None, :] * stride_dest_k, mask=mask
            )
    else:
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    if TMA:
        full_end = first_row + (tl.maximum(end_row - first_row, 0) // BLOCK_T) * BLOCK_T
        for t0 in range(first_row, full_end, BLOCK_T):
            dy = DY_DESC.load([t0, n0])
            x = X_DESC.load([t0, k0])
            acc = tl.dot(dy.T, x, acc, input_precision=DOT_PRECISION)
        if full_end < end_row:
            acc = _masked_step(
                DY,
                stride_dym,
                stride_dyn,
                X,
                stride_xm,
                stride_xk,
                full_end,
                end_row,
                ns,
                ks,
                n_ok,
                k_ok,
                acc,
                BLOCK_T,
                DOT_PRECISION,
            )
    else:
        for t0 in range(first_row, end_row, BLOCK_T):
            acc = _masked_step(
                DY,
                stride_dym,
                stride_dyn,
                X,
                stride_xm,
                stride_xk,
                t0,
                end_row,
                ns,
                ks,
                n_ok,
                k_ok,
                acc,
                BLOCK_T,
                DOT_PRECISION,
            )

    if TMA_DEST:
        if ACCUMULATE and not START_FROM_DEST:
            acc += dest_desc.load([n0, k0])
        dest_desc.store([n0, k0], acc)
    else:
        dest = dest_base + ns[:, None] * stride_dest_n + ks[None, :] * stride_dest_k
        if ACCUMULATE and not START_FROM_DEST:
            acc += tl.load(dest, mask=mask, other=0.0)
        if EVICT_FIRST_DEST:
            tl.store(dest, acc, mask=mask, eviction_policy="evict_first")
        else:
            tl.store(dest, acc, mask=mask)


@triton.jit
def _masked_step(
    DY,
    stride_dym,
    stride_dyn,
    X,
    stride_xm,
    stride_xk,
    t0,
    end_row,
    ns,
    ks,
    n_ok,
    k_ok,
    acc,
    BLOCK_T: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """acc + dy[t0 : t0 + BLOCK_T, ns]^T @ x[t0 : t0 + BLOCK_T, ks], rows from end_row on
    taken as zero."""
    ts = (t0 + tl.arange(0, BLOCK_T)).to(tl.int64)
    t_ok = ts < end_row
    dy_t = tl.load(
        DY + ts[None, :] * stride_dym + ns[:, None] * stride_dyn,
        mask=n_ok[:, None] & t_ok[None, :],
        other=0.0,
    )
    x = tl.load(
        X + ts[:, None] * stride_xm + ks[None, :] * stride_xk,
        mask=t_ok[:, None] & k_ok[None, :],
        other=0.0,
    )
    return tl.dot(dy_t, x, acc, input_precision=DOT_PRECISION)


@dual_jit
def grouped_bias_grad_kernel(
    DY,
    stride_dym,
    stride_dyn,
    OUT,
    stride_og,
    stride_on,
    SPLITS,
    num_experts,
    N,
    BLOCK_N: tl.constexpr,
    BLOCK_T: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    """OUT[g] = sum of dy over expert g's rows, fp32; zero for an expert without tokens.

    Grid: (G, cdiv(N, BLOCK_N))."""
    expert = tl.program_id(0)
    first_row, count = expert_row_range(SPLITS, num_experts, expert, EXPERTS_POW2)
    ns = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = ns < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for t0 in range(first_row, first_row + count, BLOCK_T):
        ts = (t0 + tl.arange(0, BLOCK_T)).to(tl.int64)
        t_ok = ts < first_row + count
        dy = tl.load(
            DY + ts[:, None] * stride_dym + ns[None, :] * stride_dyn,
            mask=t_ok[:, None] & n_ok[None, :],
            other=0.0,
        )
        acc += tl.sum(dy.to(tl.float32), 0)
    tl.store(OUT + expert * stride_og + ns * stride_on, acc, mask=n_ok)
