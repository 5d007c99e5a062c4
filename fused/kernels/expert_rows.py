"""Which expert, and which rows of it, a program of a grouped GEMM works on; expert pointers.

Split sizes stay on the device: every program loads the G sizes and scans them itself, so no
per-expert offsets are computed or synchronised on the host. A grouped GEMM over rows launches
``cdiv(T, BLOCK_M) + G`` programs along its first axis, an upper bound on the number of
row tiles (each expert wastes at most one partial tile); the programs beyond the last tile
return at once.
"""

import triton
import triton.language as tl


@triton.jit
def expert_row_tile(SPLITS, num_experts, tile, BLOCK_M: tl.constexpr, EXPERTS_POW2: tl.constexpr):
    """Map row tile number ``tile`` to (expert, its row indices, their validity mask).

    Expert g owns tiles [exclusive_scan(tiles)[g], inclusive_scan(tiles)[g]) where
    tiles = cdiv(split_sizes, BLOCK_M); empty experts own none. The expert is num_experts
    when ``tile`` lies beyond the last tile."""
    idx = tl.arange(0, EXPERTS_POW2)
    sizes = tl.load(SPLITS + idx, mask=idx < num_experts, other=0)
    tiles = tl.cdiv(sizes, BLOCK_M)
    tiles_end = tl.cumsum(tiles, 0)
    rows_end = tl.cumsum(sizes, 0)
    expert = tl.sum((tiles_end <= tile).to(tl.int32), 0)
    mine = idx == expert
    first_tile = tl.sum(tl.where(mine, tiles_end - tiles, 0), 0)
    first_row = tl.sum(tl.where(mine, rows_end - sizes, 0), 0)
    end_row = tl.sum(tl.where(mine, rows_end, 0), 0)
    rows = first_row + (tile - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)
    return expert, rows, rows < end_row


@triton.jit
def expert_row_range(
    SPLITS, num_experts, expert, INCLUSIVE_OFFSETS: tl.constexpr, EXPERTS_POW2: tl.constexpr
):
    """First row and row count of ``expert``.

    The first row is the exclusive scan of the split sizes at ``expert``.
    INCLUSIVE_OFFSETS takes the inclusive scan instead: the fault "group-offsets-shifted",
    which hands expert g the rows of expert g+1."""
    idx = tl.arange(0, EXPERTS_POW2)
    sizes = tl.load(SPLITS + idx, mask=idx < num_experts, other=0)
    scan = tl.cumsum(sizes, 0)
    offsets = scan if INCLUSIVE_OFFSETS else scan - sizes
    mine = idx == expert
    return tl.sum(tl.where(mine, offsets, 0), 0), tl.sum(tl.where(mine, sizes, 0), 0)


@triton.jit
def expert_pointer(PTRS, entry, element_ty: tl.constexpr, ALIGNED: tl.constexpr):
    """Base pointer number ``entry`` of an int64 pointer table, typed. ALIGNED promises
    16-byte alignment (checked on the host), which vectorised and pipelined loads need."""
    base = tl.load(PTRS + entry).to(tl.pointer_type(element_ty))
    if ALIGNED:
        base = tl.multiple_of(base, 16)
    return base
