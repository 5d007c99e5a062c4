"""A persistent Hopper weight-gradient kernel in Gluon, for scripts/gpu/wgrad_gluon_probe.py.

Question it answers (issue #21): our Triton weight-gradient kernel cannot overlap a tile's
fp32 main_grad store with the next tile's products (Triton 3.6 does not generate that schedule
on Hopper; docs/perf-notes.md), which leaves DeepSeek-V3's overwrite at 2.8 TB/s of stores
against 3.8-4.0 for a plain fill, and Qwen3's accumulate at 1.6x the bare bf16 GEMM. Gluon
(Triton's lower-level language, shipped with Triton 3.6) lets a kernel say the schedule
itself: one program per multiprocessor walks its output tiles; each tile's fp32 result goes
to shared memory and leaves by an asynchronous TMA store that runs while the program loads
and multiplies the next tile; one or two such buffers (C_BUFS) take turns. Accumulating, the
tile's main_grad comes in by TMA into the buffer it will leave from, before the tile's
products.

Written against Triton 3.6's Gluon, the Triton of the GPU machine; 3.9 renames two of the calls
used here (``tma.async_copy_global_to_shared`` is ``async_load``, ``gl.thread_barrier`` is
``gl.barrier``), so this compiles with 3.6 only.

What it computes is the production kernel's contract for one launch (fused/kernels/wgrad.py):
dest_g (+)= dy_g^T @ x_g in fp32 for the listed experts, an expert without rows untouched when
accumulating and zero-filled when overwriting. Rows past an expert's end belong to the next
expert: the last, partial block's dy rows beyond it are zeroed in shared memory before its
product. Its limits, checked by the host function: 16-bit operands, every region one
[N, K] block of a 2-D fp32 view (rows = region row + n) whose N is a multiple of BLOCK_N.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


@gluon.constexpr_function
def _acc_layout(block_n, block_k, num_warps):
    # wgmma's accumulator: warps stacked along the output rows first (16 rows per warp's
    # instruction, 4 warps per warpgroup), the instruction as wide as the tile allows.
    warps = [4, 1]
    while warps[0] * warps[1] != num_warps:
        if block_n > 16 * warps[0]:
            warps[0] *= 2
        else:
            warps[1] *= 2
    width = block_k // warps[1]
    instr_n = 256
    while instr_n > width or block_k % instr_n:
        instr_n -= 8
    return gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=warps, instr_shape=[16, instr_n, 16]
    )


@gluon.jit
def _issue_operands(ring, produced, t0, n0, k0):
    """Block t0 of dy's and x's tiles into the ring's next slot; the count of blocks issued."""
    dy_desc, x_desc, bars, dy_bufs, x_bufs = ring
    slot = produced % dy_bufs.shape[0]
    bar = bars.index(slot)
    mbarrier.expect(bar, dy_desc.block_type.nbytes + x_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(dy_desc, [t0, n0], bar, dy_bufs.index(slot))
    tma.async_copy_global_to_shared(x_desc, [t0, k0], bar, x_bufs.index(slot))
    return produced + 1


@gluon.jit
def persistent_wgrad_kernel(
    dy_desc,
    x_desc,
    dest_desc,
    DEST_ROWS,
    DEST_PTRS,
    ENTRY_EXPERTS,
    OFFSETS,
    num_entries,
    N,
    K,
    ACCUMULATE: gl.constexpr,
    STAGES: gl.constexpr,
    C_BUFS: gl.constexpr,
    DEVICE_DESC: gl.constexpr,
    num_warps: gl.constexpr,
):
    BLOCK_T: gl.constexpr = dy_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = dy_desc.block_type.shape[1]
    BLOCK_K: gl.constexpr = x_desc.block_type.shape[1]
    dtype: gl.constexpr = dy_desc.dtype
    acc_layout: gl.constexpr = _acc_layout(BLOCK_N, BLOCK_K, num_warps)
    # dy's partial block is masked through registers in this layout (rows x columns).
    mask_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])

    dy_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_T, BLOCK_N], dy_desc.layout)
    x_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_T, BLOCK_K], x_desc.layout)
    c_bufs = gl.allocate_shared_memory(gl.float32, [C_BUFS, BLOCK_N, BLOCK_K], dest_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    c_bars = gl.allocate_shared_memory(gl.int64, [C_BUFS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    ring = (dy_desc, x_desc, bars, dy_bufs, x_bufs)
    for i in gl.static_range(C_BUFS):
        mbarrier.init(c_bars.index(i), count=1)

    num_n = N // BLOCK_N
    num_k = gl.cdiv(K, BLOCK_K)
    per_entry = num_n * num_k
    total = num_entries * per_entry
    produced = 0
    consumed = 0
    stored = 0
    for tile in range(gl.program_id(0), total, gl.num_programs(0)):
        entry = tile // per_entry
        within = tile % per_entry
        n0 = (within // num_k) * BLOCK_N
        k0 = (within % num_k) * BLOCK_K
        expert = gl.load(ENTRY_EXPERTS + entry)
        first = gl.load(OFFSETS + expert)
        end = gl.load(OFFSETS + expert + 1)
        if (not ACCUMULATE) or end > first:
            if DEVICE_DESC:
                # A descriptor over this expert's own [N, K] region (any address, the
                # regions need not share a 2-D view); it clips the tile at N and K. It is
                # written into the program's one scratch slot, which a store still in flight
                # may be reading: that store drains first (this variant overlaps less).
                tma.store_wait(pendings=0)
                base = gl.load(DEST_PTRS + entry).to(gl.pointer_type(gl.float32))
                desc = tma.make_tensor_descriptor(
                    base,
                    shape=[N, K],
                    strides=[K, 1],
                    block_shape=[BLOCK_N, BLOCK_K],
                    layout=dest_desc.layout,
                )
                row = n0
            else:
                desc = dest_desc
                row = gl.load(DEST_ROWS + entry) + n0
            buf = stored % C_BUFS
            if ACCUMULATE:
                # The store that last left from this buffer (C_BUFS tiles ago) has read it.
                tma.store_wait(pendings=C_BUFS - 1)
                mbarrier.expect(c_bars.index(buf), dest_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    desc, [row, k0], c_bars.index(buf), c_bufs.index(buf)
                )
            blocks = gl.cdiv(end - first, BLOCK_T)
            ahead = gl.minimum(blocks, STAGES - 1)
            for j in range(0, ahead):
                produced = _issue_operands(ring, produced, first + j * BLOCK_T, n0, k0)
            acc = gl.zeros((BLOCK_N, BLOCK_K), dtype=gl.float32, layout=acc_layout)
            for j in range(0, blocks):
                slot = consumed % STAGES
                mbarrier.wait(bars.index(slot), (consumed // STAGES) & 1)
                consumed += 1
                t0 = first + j * BLOCK_T
                if t0 + BLOCK_T > end:
                    rows = t0 + gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, mask_layout))
                    part = dy_bufs.index(slot).load(mask_layout)
                    part = gl.where(gl.expand_dims(rows < end, 1), part, gl.zeros_like(part))
                    dy_bufs.index(slot).store(part)
                    fence_async_shared()
                    gl.thread_barrier()
                acc = warpgroup_mma(
                    dy_bufs.index(slot).permute((1, 0)), x_bufs.index(slot), acc, is_async=True
                )
                # The product before this one is done: its slot takes the next block.
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
                if j + ahead < blocks:
                    produced = _issue_operands(
                        ring, produced, first + (j + ahead) * BLOCK_T, n0, k0
                    )
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            if ACCUMULATE:
                mbarrier.wait(c_bars.index(buf), (stored // C_BUFS) & 1)
                acc = acc + c_bufs.index(buf).load(acc_layout)
            else:
                # Overwriting, the wait comes as late as it can: the last store from this
                # buffer ran under this tile's loads and products.
                tma.store_wait(pendings=C_BUFS - 1)
            c_bufs.index(buf).store(acc)
            fence_async_shared()
            gl.thread_barrier()
            tma.async_copy_shared_to_global(desc, [row, k0], c_bufs.index(buf))
            stored += 1
    tma.store_wait(pendings=0)


def persistent_wgrad(
    dy,
    x,
    dest_2d,
    dest_rows,
    entry_experts,
    offsets,
    n,
    k,
    accumulate,
    block_t=64,
    block_n=128,
    block_k=128,
    stages=3,
    c_bufs=2,
    num_warps=8,
    programs=None,
    dest_ptrs=None,
):
    """dest_2d[dest_rows[e] + i, j] (+)= (dy_g^T @ x_g)[i, j] for entry e of expert
    g = entry_experts[e], rows offsets[g]:offsets[g + 1]. dest_2d: fp32 [R, k], contiguous
    rows; n a multiple of block_n. With dest_ptrs (int64, one contiguous fp32 [n, k] region
    per entry) the kernel writes those regions through descriptors it makes itself, and
    dest_2d only lends its layout."""
    if n % block_n:
        raise ValueError(f"n={n} is not a multiple of block_n={block_n}")
    gdt = gl.bfloat16 if dy.dtype == torch.bfloat16 else gl.float16
    dy_layout = gl.NVMMASharedLayout.get_default_for([block_t, block_n], gdt)
    x_layout = gl.NVMMASharedLayout.get_default_for([block_t, block_k], gdt)
    c_layout = gl.NVMMASharedLayout.get_default_for([block_n, block_k], gl.float32)
    dy_desc = TensorDescriptor.from_tensor(dy, [block_t, block_n], dy_layout)
    x_desc = TensorDescriptor.from_tensor(x, [block_t, block_k], x_layout)
    dest_desc = TensorDescriptor.from_tensor(dest_2d, [block_n, block_k], c_layout)
    entries = entry_experts.numel()
    tiles = entries * (n // block_n) * triton.cdiv(k, block_k)
    if programs is None:
        programs = torch.cuda.get_device_properties(dy.device).multi_processor_count
    grid = (max(1, min(programs, tiles)),)
    device_desc = dest_ptrs is not None
    persistent_wgrad_kernel[grid](
        dy_desc,
        x_desc,
        dest_desc,
        dest_rows,
        dest_ptrs if device_desc else dest_rows,
        entry_experts,
        offsets,
        entries,
        n,
        k,
        accumulate,
        stages,
        c_bufs,
        device_desc,
        num_warps=num_warps,
    )
