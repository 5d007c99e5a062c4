"""Which expert, and which rows of it, a program of a grouped GEMM works on; expert pointers;
the order in which programs visit output tiles.

Split sizes stay on the device: every program loads the G sizes and scans them itself, so no
per-expert offsets are computed or synchronised on the host. A grouped GEMM over rows has
``cdiv(T, BLOCK_M) + G`` row-tile slots, an upper bound on the number of row tiles (each
expert wastes at most one partial tile); the programs of slots beyond the last tile return at
once.

Tile order matters more than tile shape here. Programs launch in program-id order, and only
the tiles of about two waves (2 x 132 programs on an H200) are resident at once; what those
tiles read should fit in L2 (50 MB). Row GEMMs therefore visit GROUP_M row tiles across all
column tiles before moving on (A rows are read from memory once, not once per column tile),
and weight-gradient programs visit one expert's tiles together (its rows of dy and x, a few MB,
stay in L2 while all its output tiles reduce them).
"""

import triton
import triton.language as tl


@triton.jit
def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of program ``pid``: GROUP_M consecutive pid_m per column sweep."""
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    in_group = pid % per_group
    return first_m + in_group % group_m, in_group // group_m


@triton.jit
def expert_row_block(SPLITS, num_experts, tile, BLOCK_M: tl.constexpr, EXPERTS_POW2: tl.constexpr):
    """Map row tile number ``tile`` to (expert, the expert's first row, the tile's first row,
    the expert's end row).

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
    return expert, first_row, first_row + (tile - first_tile) * BLOCK_M, end_row


@triton.jit
def expert_row_range(SPLITS, num_experts, expert, EXPERTS_POW2: tl.constexpr):
    """First row and row count of ``expert``: the first row is the exclusive scan of the
    split sizes at ``expert``."""
    idx = tl.arange(0, EXPERTS_POW2)
    sizes = tl.load(SPLITS + idx, mask=idx < num_experts, other=0)
    scan = tl.cumsum(sizes, 0)
    offsets = scan - sizes
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
