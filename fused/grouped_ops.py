"""Host-side launchers of the fused kernels: shapes, pointer tables, grids, tile sizes.

Every function takes the split sizes as an int32 tensor on the tensors' device and launches
one kernel over all experts; none of them reads a size back to the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton

from .kernels.grouped_gemm import (
    fc1_activation_kernel,
    fc2_dgrad_activation_kernel,
    grouped_gemm_kernel,
)
from .kernels.wgrad import grouped_bias_grad_kernel, grouped_wgrad_kernel
from .tiles import dot_precision, tiles_for


def experts_pow2(num_experts: int) -> int:
    """Vector width that holds every expert's split size inside a kernel."""
    return max(2, triton.next_power_of_2(num_experts))


@dataclass(frozen=True)
class ExpertPointers:
    """G same-shaped tensors as the kernels take them: a device table of base pointers and
    the strides they share. ``tensors`` keeps any contiguous copies alive until the launch."""

    pointers: torch.Tensor  # int64 [G]
    strides: tuple[int, ...]
    aligned: bool  # every pointer 16-byte aligned: the kernels may vectorise through them
    tensors: tuple[torch.Tensor, ...]


def expert_pointers(tensors: Sequence[torch.Tensor], device: torch.device) -> ExpertPointers:
    """Pointer table of read-only expert operands (weights, biases).

    Experts whose strides differ (a parameter replaced by a non-contiguous tensor) are read
    from contiguous copies, so one stride pair serves them all."""
    if len({t.stride() for t in tensors}) > 1:
        tensors = [t.contiguous() for t in tensors]
    pointers = [t.data_ptr() for t in tensors]
    return ExpertPointers(
        torch.tensor(pointers, dtype=torch.int64).to(device),
        tuple(tensors[0].stride()),
        all(p % 16 == 0 for p in pointers),
        tuple(tensors),
    )


def _b_strides(mats: ExpertPointers, transpose: bool) -> tuple[int, int]:
    """(stride along k, stride along n) of B_g[k, n] = mats[g] ([k, n]) or mats[g].T."""
    s0, s1 = mats.strides
    return (s1, s0) if transpose else (s0, s1)


def _no_pointers(device: torch.device) -> torch.Tensor:
    return torch.zeros(1, dtype=torch.int64, device=device)


def grouped_gemm(
    a: torch.Tensor,
    splits: torch.Tensor,
    mats: Sequence[torch.Tensor],
    *,
    transpose: bool,
    biases: Sequence[torch.Tensor] | None = None,
) -> torch.Tensor:
    """out[rows of g] = a[rows of g] @ B_g (+ bias_g), B_g = mats[g] or mats[g].T."""
    num_tokens, k = a.shape
    n = mats[0].shape[0] if transpose else mats[0].shape[1]
    out = a.new_empty((num_tokens, n))
    b = expert_pointers(mats, a.device)
    bias = expert_pointers(biases, a.device) if biases else None
    tiles = tiles_for("row_gemm", a.device, a.dtype)
    grid = (triton.cdiv(num_tokens, tiles.block_m) + len(mats), triton.cdiv(n, tiles.block_n))
    grouped_gemm_kernel[grid](
        a,
        a.stride(0),
        a.stride(1),
        b.pointers,
        *_b_strides(b, transpose),
        bias.pointers if bias else _no_pointers(a.device),
        bias.strides[0] if bias else 0,
        out,
        out.stride(0),
        out.stride(1),
        splits,
        len(mats),
        n,
        k,
        HAS_BIAS=bias is not None,
        ALIGNED=b.aligned,
        DOT_PRECISION=dot_precision(a.dtype),
        BLOCK_M=tiles.block_m,
        BLOCK_N=tiles.block_n,
        BLOCK_K=tiles.block_k,
        EXPERTS_POW2=experts_pow2(len(mats)),
        **tiles.launch_options(),
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
) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, act(h) [* probs]): fc1's pre-activation [T, out] and the activation [T, ffn]."""
    num_tokens, k = x.shape
    fc1_out = weights[0].shape[0]
    ffn = fc1_out // 2 if glu else fc1_out
    h = x.new_empty((num_tokens, fc1_out))
    out = x.new_empty((num_tokens, ffn))
    w = expert_pointers(weights, x.device)
    bias = expert_pointers(biases, x.device) if biases else None
    tiles = tiles_for("activation_gemm", x.device, x.dtype)
    grid = (triton.cdiv(num_tokens, tiles.block_m) + len(weights), triton.cdiv(ffn, tiles.block_n))
    fc1_activation_kernel[grid](
        x,
        x.stride(0),
        x.stride(1),
        w.pointers,
        *_b_strides(w, transpose=True),
        bias.pointers if bias else _no_pointers(x.device),
        bias.strides[0] if bias else 0,
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
        ffn,
        k,
        ACT=activation,
        GLU=glu,
        HAS_BIAS=bias is not None,
        HAS_PROBS=probs is not None,
        ALIGNED=w.aligned,
        DOT_PRECISION=dot_precision(x.dtype),
        BLOCK_M=tiles.block_m,
        BLOCK_N=tiles.block_n,
        BLOCK_K=tiles.block_k,
        EXPERTS_POW2=experts_pow2(len(weights)),
        **tiles.launch_options(),
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
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dh, d probs): gradient of fc1's pre-activation [T, fc1 out] and, with probs, of probs
    (fp32 [T])."""
    num_tokens, k = dy.shape
    ffn = weights[0].shape[1]
    dh = dy.new_empty(h.shape)
    w = expert_pointers(weights, dy.device)
    tiles = tiles_for("activation_gemm", dy.device, dy.dtype)
    col_tiles = triton.cdiv(ffn, tiles.block_n)
    # One row of partial sums per column tile; every (tile, token) element is written.
    partial = (
        torch.empty((col_tiles, num_tokens), dtype=torch.float32, device=dy.device)
        if probs is not None
        else torch.empty((1, 1), dtype=torch.float32, device=dy.device)
    )
    grid = (triton.cdiv(num_tokens, tiles.block_m) + len(weights), col_tiles)
    fc2_dgrad_activation_kernel[grid](
        dy,
        dy.stride(0),
        dy.stride(1),
        w.pointers,
        *_b_strides(w, transpose=False),
        h,
        h.stride(0),
        h.stride(1),
        probs if probs is not None else dy,
        probs.stride(0) if probs is not None else 0,
        dh,
        dh.stride(0),
        dh.stride(1),
        partial,
        partial.stride(0),
        partial.stride(1),
        splits,
        len(weights),
        ffn,
        k,
        ACT=activation,
        GLU=glu,
        HAS_PROBS=probs is not None,
        ALIGNED=w.aligned,
        DOT_PRECISION=dot_precision(dy.dtype),
        BLOCK_M=tiles.block_m,
        BLOCK_N=tiles.block_n,
        BLOCK_K=tiles.block_k,
        EXPERTS_POW2=experts_pow2(len(weights)),
        **tiles.launch_options(),
    )
    return dh, (partial.sum(0) if probs is not None else None)


def grouped_wgrad(
    dy: torch.Tensor,
    x: torch.Tensor,
    splits: torch.Tensor,
    destinations: Sequence[tuple[int, torch.Tensor]],
    *,
    accumulate: bool,
    skip_empty_experts: bool = False,
    inclusive_offsets: bool = False,
) -> None:
    """For each (expert g, fp32 region [N, K]): region (+)= dy_g^T @ x_g.

    One launch per distinct region layout (strides, alignment): normally one. The regions are
    written in place, so unlike read-only operands they are never copied to unify strides.
    skip_empty_experts and inclusive_offsets are fault switches (fused.faults), off unless a
    fault was injected."""
    layouts: dict[tuple, list[tuple[int, torch.Tensor]]] = {}
    for expert, region in destinations:
        key = (region.stride(), region.data_ptr() % 16 == 0)
        layouts.setdefault(key, []).append((expert, region))
    num_tokens, n = dy.shape
    k = x.shape[1]
    num_experts = splits.shape[0]
    tiles = tiles_for("wgrad", dy.device, dy.dtype)
    for ((stride_n, stride_k), aligned), group in layouts.items():
        experts = torch.tensor([g for g, _ in group], dtype=torch.int32).to(dy.device)
        pointers = torch.tensor([r.data_ptr() for _, r in group], dtype=torch.int64).to(dy.device)
        grid = (len(group), triton.cdiv(n, tiles.block_n), triton.cdiv(k, tiles.block_k))
        grouped_wgrad_kernel[grid](
            dy,
            dy.stride(0),
            dy.stride(1),
            x,
            x.stride(0),
            x.stride(1),
            experts,
            pointers,
            stride_n,
            stride_k,
            splits,
            num_experts,
            num_tokens,
            n,
            k,
            ACCUMULATE=accumulate,
            SKIP_EMPTY_EXPERTS=skip_empty_experts,
            INCLUSIVE_OFFSETS=inclusive_offsets,
            ALIGNED=aligned,
            DOT_PRECISION=dot_precision(dy.dtype),
            BLOCK_N=tiles.block_n,
            BLOCK_K=tiles.block_k,
            BLOCK_T=tiles.block_m,
            EXPERTS_POW2=experts_pow2(num_experts),
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
