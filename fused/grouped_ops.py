"""Host-side launchers of the fused kernels: shapes, pointer tables, descriptors, grids, tiles.

Every function takes the split sizes as an int32 tensor on the tensors' device and launches
one kernel over all experts; none of them reads a size back to the host or waits for the
device. How their operands reach the kernels (pointer tables, descriptors) is operands.py.

Each launcher but grouped_bias_grad takes an optional ``tiles`` (fused.tiles.Tiles) in place
of the tuned default: the tuning script (scripts/tune_kernels.py) times variants through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton

from .kernels.activation_backward import activation_backward_kernel
from .kernels.activation_gemm import fc1_activation_kernel, fc2_dgrad_activation_kernel
from .kernels.grouped_gemm import grouped_gemm_kernel
from .kernels.wgrad import grouped_bias_grad_kernel, grouped_wgrad_kernel
from .operands import (
    b_strides,
    descriptor,
    entry_rows,
    expert_pointers,
    experts_pow2,
    grouped_regions,
    no_pointers,
    paired_entries,
    region_layouts,
    region_tma_ready,
    row_gemm_options,
    row_operands,
    row_slots,
    tma_ready,
    use_scratch_allocator,
)
from .tiles import (
    Tiles,
    dgrad_activation_apart,
    dot_precision,
    tiles_for,
    wgrad_tiles,
)


@dataclass(frozen=True)
class RowLaunch:
    """What the three row-tiled kernels (grouped_gemm, fc1_activation, fc2_dgrad_activation)
    take alike: the row operand and the expert matrices (their first arguments, in kernel
    order), the number of row-tile slots and the compile-time options."""

    operands: tuple
    slots: int
    options: dict[str, object]


def row_launch(
    a: torch.Tensor, mats: Sequence[torch.Tensor], *, transpose: bool, tiles: Tiles
) -> RowLaunch:
    """The shared setup of a row-tiled launch over ``a`` [T, K] and the experts' ``mats``."""
    b = expert_pointers(mats, a.device)
    ops = row_operands(a, b, transpose=transpose, tiles=tiles)
    operands = (
        a,
        ops.a_desc,
        a.stride(0),
        a.stride(1),
        ops.b_pointers,
        ops.b_desc,
        ops.b_desc_rows,
        *b_strides(b, transpose),
    )
    slots = row_slots(a.shape[0], len(mats), tiles)
    return RowLaunch(
        operands, slots, row_gemm_options(ops, b, tiles, a.shape[1], a.dtype, len(mats))
    )


def bias_operands(biases: Sequence[torch.Tensor] | None, device: torch.device) -> tuple:
    """The kernels' (bias pointer table, bias stride) arguments; a placeholder without biases."""
    if not biases:
        return no_pointers(device), 0
    bias = expert_pointers(biases, device)
    return bias.pointers, bias.strides[0]


def grouped_gemm(
    a: torch.Tensor,
    splits: torch.Tensor,
    mats: Sequence[torch.Tensor],
    *,
    transpose: bool,
    biases: Sequence[torch.Tensor] | None = None,
    tiles: Tiles | None = None,
) -> torch.Tensor:
    """out[rows of g] = a[rows of g] @ B_g (+ bias_g), B_g = mats[g] or mats[g].T."""
    num_tokens, k = a.shape
    n = mats[0].shape[0] if transpose else mats[0].shape[1]
    out = a.new_empty((num_tokens, n))
    if num_tokens == 0:
        return out
    tiles = tiles or tiles_for("row_gemm", a.device, a.dtype)
    launch = row_launch(a, mats, transpose=transpose, tiles=tiles)
    grid = (launch.slots * triton.cdiv(n, tiles.block_n),)
    grouped_gemm_kernel[grid](
        *launch.operands,
        *bias_operands(biases, a.device),
        out,
        out.stride(0),
        out.stride(1),
        splits,
        len(mats),
        launch.slots,
        n,
        k,
        HAS_BIAS=bool(biases),
        B_TRANSPOSED=transpose,
        **launch.options,
    )
    return out


def fc1_forward(
    x: torch.Tensor,
    splits: torch.Tensor,
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor] | None,
    *,
    activation: int,
    glu: bool,
    probs: torch.Tensor | None,
    tiles: Tiles | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, act(h) [* probs]): fc1's pre-activation [T, out] and the activation [T, ffn]."""
    num_tokens, k = x.shape
    fc1_out = weights[0].shape[0]
    ffn = fc1_out // 2 if glu else fc1_out
    h = x.new_empty((num_tokens, fc1_out))
    out = x.new_empty((num_tokens, ffn))
    if num_tokens == 0:
        return h, out
    tiles = tiles or tiles_for("activation_gemm", x.device, x.dtype)
    launch = row_launch(x, weights, transpose=True, tiles=tiles)
    grid = (launch.slots * triton.cdiv(ffn, tiles.block_n),)
    fc1_activation_kernel[grid](
        *launch.operands,
        *bias_operands(biases, x.device),
        probs if probs is not None else x,
        probs.stride(0) if probs is not None else 0,
        h,
        h.stride(0),
        h.stride(1),
        out,
        out.stride(0),
        out.stride(1),
        splits,
        len(weights),
        launch.slots,
        ffn,
        k,
        ACT=activation,
        GLU=glu,
        HAS_BIAS=bool(biases),
        HAS_PROBS=probs is not None,
        **launch.options,
    )
    return h, out


def fc2_dgrad_activation(
    dy: torch.Tensor,
    splits: torch.Tensor,
    weights: Sequence[torch.Tensor],
    h: torch.Tensor,
    *,
    activation: int,
    glu: bool,
    probs: torch.Tensor | None,
    tiles: Tiles | None = None,
    apart: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dh, d probs): gradient of fc1's pre-activation [T, fc1 out] and, with probs, of probs
    (fp32 [T]). The derivative is applied in the GEMM's epilogue, or, ``apart``, by a kernel
    of its own after a row GEMM that stores da (default: fused.tiles.dgrad_activation_apart;
    ``tiles`` are the epilogue kernel's)."""
    if apart is None:
        apart = dgrad_activation_apart(dy.dtype)
    if apart:
        da = grouped_gemm(dy, splits, weights, transpose=False)
        return activation_backward(da, h, activation=activation, glu=glu, probs=probs)
    num_tokens, k = dy.shape
    ffn = weights[0].shape[1]
    dh = dy.new_empty(h.shape)
    tiles = tiles or tiles_for("activation_gemm", dy.device, dy.dtype)
    col_tiles = triton.cdiv(ffn, tiles.block_n)
    partial = _dprobs_partials(col_tiles, num_tokens, probs, dy.device)
    if num_tokens == 0:
        return dh, _dprobs(partial, probs)
    launch = row_launch(dy, weights, transpose=False, tiles=tiles)
    fc2_dgrad_activation_kernel[(launch.slots * col_tiles,)](
        *launch.operands,
        *_activation_grad_operands(h, probs, dh, partial),
        splits,
        len(weights),
        launch.slots,
        ffn,
        k,
        ACT=activation,
        GLU=glu,
        HAS_PROBS=probs is not None,
        **launch.options,
    )
    return dh, _dprobs(partial, probs)


def activation_backward(
    da: torch.Tensor,
    h: torch.Tensor,
    *,
    activation: int,
    glu: bool,
    probs: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dh, d probs) from da [T, F], the gradient of the activation's output, and h."""
    num_tokens, ffn = da.shape
    dh = da.new_empty(h.shape)
    tiles = tiles_for("activation_backward", da.device, da.dtype)
    col_tiles = triton.cdiv(ffn, tiles.block_n)
    partial = _dprobs_partials(col_tiles, num_tokens, probs, da.device)
    if num_tokens == 0:
        return dh, _dprobs(partial, probs)
    grid = (triton.cdiv(num_tokens, tiles.block_m), col_tiles)
    activation_backward_kernel[grid](
        da,
        da.stride(0),
        da.stride(1),
        *_activation_grad_operands(h, probs, dh, partial),
        num_tokens,
        ffn,
        ACT=activation,
        GLU=glu,
        HAS_PROBS=probs is not None,
        BLOCK_M=tiles.block_m,
        BLOCK_N=tiles.block_n,
        **tiles.launch_options(),
    )
    return dh, _dprobs(partial, probs)


def _activation_grad_operands(
    h: torch.Tensor, probs: torch.Tensor | None, dh: torch.Tensor, partial: torch.Tensor
) -> tuple:
    """The arguments both activation-gradient kernels take alike, in the order of
    kernels/activation_backward.py's store_activation_grad: h, probs (h itself as a
    placeholder without), dh and the d probs partials, each with its strides."""
    return (
        h,
        h.stride(0),
        h.stride(1),
        probs if probs is not None else h,
        probs.stride(0) if probs is not None else 0,
        dh,
        dh.stride(0),
        dh.stride(1),
        partial,
        partial.stride(0),
        partial.stride(1),
    )


def _dprobs_partials(
    col_tiles: int, num_tokens: int, probs: torch.Tensor | None, device: torch.device
) -> torch.Tensor:
    """Where the activation-gradient kernels put d probs: one row of partial sums per column
    tile, every (tile, token) element written; a placeholder without probs."""
    shape = (col_tiles, num_tokens) if probs is not None else (1, 1)
    return torch.empty(shape, dtype=torch.float32, device=device)


def _dprobs(partial: torch.Tensor, probs: torch.Tensor | None) -> torch.Tensor | None:
    return partial.sum(0) if probs is not None else None


def grouped_wgrad(
    dy: torch.Tensor,
    x: torch.Tensor,
    splits: torch.Tensor,
    destinations: Sequence[tuple[int, torch.Tensor]] | torch.Tensor,
    *,
    accumulate: bool,
    tiles: Tiles | None = None,
) -> None:
    """For each (expert g, fp32 region [N, K]): region (+)= dy_g^T @ x_g; or, for one fp32
    [G, N, K] tensor, its slice g for every expert g.

    One launch per distinct region layout (strides, alignment): normally one. The regions are
    written in place, so unlike read-only operands they are never copied to unify strides.
    Every expert named must have a split size: the rows are looked up by expert id."""
    num_experts = splits.shape[0]
    if isinstance(destinations, torch.Tensor):
        listed = range(destinations.shape[0])
        launches = [grouped_regions(destinations, dy.device)]
    else:
        listed = [expert for expert, _ in destinations]
        launches = region_layouts(destinations, dy.device)
    if any(not 0 <= expert < num_experts for expert in listed):
        raise ValueError(
            f"destinations: expert ids must lie in [0, {num_experts}) (one per split size), "
            f"got {sorted(set(listed))}"
        )
    if not launches:
        return
    num_tokens, n = dy.shape
    k = x.shape[1]
    tiles = tiles or wgrad_tiles(dy.device, dy.dtype, rows=num_tokens, experts=num_experts)
    tma = tiles.tma and tma_ready(dy) and tma_ready(x)
    dy_desc = descriptor(dy, (tiles.block_m, tiles.block_n)) if tma else dy
    x_desc = descriptor(x, (tiles.block_m, tiles.block_k)) if tma else x
    tiles_per_expert = triton.cdiv(n, tiles.block_n) * triton.cdiv(k, tiles.block_k)
    for launch in launches:
        tma_dest = tiles.tma_dest and tma and region_tma_ready(launch)
        if tma_dest and dy.device.type == "cuda":
            use_scratch_allocator()
        rows, pointers = entry_rows(splits, launch.experts), launch.pointers
        slots = launch.count
        if tiles.paired:
            rows, pointers = paired_entries(rows, pointers)
            slots = 2 * triton.cdiv(launch.count, 2)
        grouped_wgrad_kernel[(slots * tiles_per_expert,)](
            dy,
            dy_desc,
            dy.stride(0),
            dy.stride(1),
            x,
            x_desc,
            x.stride(0),
            x.stride(1),
            rows,
            pointers,
            *launch.strides,
            launch.count,
            num_tokens,
            n,
            k,
            ACCUMULATE=accumulate,
            PAIRED=tiles.paired,
            ALIGNED=launch.aligned,
            TMA=tma,
            TMA_DEST=tma_dest,
            EVICT_FIRST_DEST=tiles.evict_first_dest,
            START_FROM_DEST=tiles.start_from_dest,
            DOT_PRECISION=dot_precision(dy.dtype),
            BLOCK_N=tiles.block_n,
            BLOCK_K=tiles.block_k,
            BLOCK_T=tiles.block_m,
            GROUP_N=tiles.group,
            **tiles.launch_options(),
        )


def grouped_bias_grad(dy: torch.Tensor, splits: torch.Tensor) -> torch.Tensor:
    """fp32 [G, N]: each expert's sum of dy over its rows (zero for an expert without rows)."""
    num_experts = splits.shape[0]
    n = dy.shape[1]
    out = torch.empty((num_experts, n), dtype=torch.float32, device=dy.device)
    tiles = tiles_for("bias_grad", dy.device, dy.dtype)
    grouped_bias_grad_kernel[(num_experts, triton.cdiv(n, tiles.block_n))](
        dy,
        dy.stride(0),
        dy.stride(1),
        out,
        out.stride(0),
        out.stride(1),
        splits,
        num_experts,
        n,
        BLOCK_N=tiles.block_n,
        BLOCK_T=tiles.block_m,
        EXPERTS_POW2=experts_pow2(num_experts),
        **tiles.launch_options(),
    )
    return out
