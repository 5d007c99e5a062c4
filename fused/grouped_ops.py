"""Host-side launchers of the fused kernels: shapes, pointer tables, descriptors, grids, tiles.

Every function takes the split sizes as an int32 tensor on the tensors' device and launches
one kernel over all experts; none of them reads a size back to the host or waits for the
device. Pointer tables are built once per distinct set of pointers and kept on the device
(``_device_table``): a fresh ``torch.tensor(...).to(cuda)`` per launch would copy from
pageable memory, which synchronises the stream and stalls the CPU behind the GPU.

Each launcher takes an optional ``tiles`` (fused.tiles.Tiles) in place of the tuned default:
the tuning script (scripts/tune_kernels.py) times variants through it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from .kernels.grouped_gemm import (
    fc1_activation_kernel,
    fc2_dgrad_activation_kernel,
    grouped_gemm_kernel,
)
from .kernels.wgrad import grouped_bias_grad_kernel, grouped_wgrad_kernel
from .tiles import LONG_REDUCTION_ROWS, Tiles, dot_precision, tiles_for

_TABLE_CACHE_SIZE = 64
_tables: OrderedDict[tuple, torch.Tensor] = OrderedDict()


def experts_pow2(num_experts: int) -> int:
    """Vector width that holds every expert's split size inside a kernel."""
    return max(2, triton.next_power_of_2(num_experts))


def _device_table(
    values: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """A device tensor holding ``values``, cached by value.

    The key is the values themselves, so a cached table is right whatever happened to the
    memory the values point to; the cache only saves the copy. Tables are never written."""
    key = (values, dtype, device)
    table = _tables.get(key)
    if table is None:
        table = torch.tensor(values, dtype=dtype, device="cpu")  # host side, whatever the default
        if device.type == "cuda":
            table = table.pin_memory().to(device, non_blocking=True)
        _tables[key] = table
        if len(_tables) > _TABLE_CACHE_SIZE:
            _tables.popitem(last=False)
    else:
        _tables.move_to_end(key)
    return table


@dataclass(frozen=True)
class ExpertPointers:
    """G same-shaped tensors as the kernels take them: a device table of base pointers and
    the strides they share. ``tensors`` keeps any contiguous copies alive until the launch;
    ``stacked`` is the [G * rows, cols] matrix they form when they lie back to back in one
    storage, row-major (a single grouped weight), else None."""

    pointers: torch.Tensor  # int64 [G]
    strides: tuple[int, ...]
    aligned: bool  # every pointer 16-byte aligned: the kernels may vectorise through them
    tensors: tuple[torch.Tensor, ...]
    stacked: torch.Tensor | None
    rows: int  # rows of one expert's matrix (of the stacked matrix's G blocks)


def expert_pointers(
    tensors: Sequence[torch.Tensor] | torch.Tensor, device: torch.device
) -> ExpertPointers:
    """Pointer table of read-only expert operands (weights, biases): G tensors, or one tensor
    whose first dimension indexes the experts (a single grouped weight [G, out, in]).

    Experts whose strides differ (a parameter replaced by a non-contiguous tensor) are read
    from contiguous copies, so one stride pair serves them all."""
    if isinstance(tensors, torch.Tensor):
        if tensors.dim() == 3:
            return _grouped_tensor_pointers(tensors, device)
        tensors = list(tensors.unbind(0))
    if len({t.stride() for t in tensors}) > 1:
        tensors = [t.contiguous() for t in tensors]
    pointers = tuple(t.data_ptr() for t in tensors)
    return ExpertPointers(
        _device_table(pointers, torch.int64, device),
        tuple(tensors[0].stride()),
        all(p % 16 == 0 for p in pointers),
        tuple(tensors),
        _stacked(tensors, pointers),
        tensors[0].shape[0],
    )


def _grouped_tensor_pointers(grouped: torch.Tensor, device: torch.device) -> ExpertPointers:
    """The pointers of grouped[g], computed rather than read off G views: the host work of a
    launch stays independent of the number of experts."""
    num, rows = grouped.shape[0], grouped.shape[1]
    step = grouped.stride(0) * grouped.element_size()
    base = grouped.data_ptr()
    pointers = tuple(base + g * step for g in range(num))
    dense = grouped.dim() == 3 and grouped.stride() == (
        rows * grouped.shape[2],
        grouped.shape[2],
        1,
    )
    return ExpertPointers(
        _device_table(pointers, torch.int64, device),
        tuple(grouped.stride()[1:]),
        base % 16 == 0 and step % 16 == 0,
        (grouped,),
        grouped.view(num * rows, grouped.shape[2]) if dense and grouped.numel() else None,
        rows,
    )


def _stacked(tensors: Sequence[torch.Tensor], pointers: tuple[int, ...]) -> torch.Tensor | None:
    first = tensors[0]
    if first.dim() != 2:
        return None
    rows, cols = first.shape
    if first.stride() != (cols, 1) or rows * cols == 0:
        return None
    step = rows * cols * first.element_size()
    if any(p != pointers[0] + g * step for g, p in enumerate(pointers)):
        return None
    if any(t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr() for t in tensors):
        return None
    return first.as_strided((len(tensors) * rows, cols), (cols, 1), first.storage_offset())


def _tma_ready(t: torch.Tensor) -> bool:
    """A 2-D tensor a TMA descriptor can describe: 16-bit, unit last stride, 16-byte aligned
    base and row stride, no empty dimension."""
    return (
        t.dim() == 2
        and t.dtype in (torch.float16, torch.bfloat16)
        and t.shape[0] > 0
        and t.shape[1] > 0
        and t.stride(1) == 1
        and (t.stride(0) * t.element_size()) % 16 == 0
        and t.data_ptr() % 16 == 0
    )


def _descriptor(t: torch.Tensor, block: tuple[int, int]) -> TensorDescriptor:
    return TensorDescriptor(t, list(t.shape), list(t.stride()), list(block))


def _b_strides(mats: ExpertPointers, transpose: bool) -> tuple[int, int]:
    """(stride along k, stride along n) of B_g[k, n] = mats[g] ([k, n]) or mats[g].T."""
    s0, s1 = mats.strides
    return (s1, s0) if transpose else (s0, s1)


def _no_pointers(device: torch.device) -> torch.Tensor:
    return _device_table((0,), torch.int64, device)


@dataclass(frozen=True)
class _RowOperands:
    """What a row GEMM launch passes for A and the expert matrices: descriptors with TMA,
    or the tensors themselves as placeholders in those slots without."""

    tma: bool
    a_desc: TensorDescriptor | torch.Tensor
    b_desc: TensorDescriptor | torch.Tensor
    b_desc_rows: int
    b_pointers: torch.Tensor


def _row_operands(
    a: torch.Tensor,
    mats: ExpertPointers,
    *,
    transpose: bool,
    k: int,
    tiles: Tiles,
    b_block_n: int,
) -> _RowOperands:
    """TMA descriptors when the tiles ask for them and the tensors allow, else pointers.

    Along K the stacked matrices' tiles must not cross into the next expert: with B_g = W_g^T
    (transpose) K runs along W's columns, never across experts; otherwise along the stacked
    rows, so K must be a multiple of BLOCK_K (kernels/grouped_gemm.py)."""
    stacked = mats.stacked
    usable = (
        tiles.tma
        and stacked is not None
        and _tma_ready(a)
        and _tma_ready(stacked)
        and (transpose or k % tiles.block_k == 0)
    )
    if not usable:
        return _RowOperands(False, a, a, 0, mats.pointers)
    b_block = (b_block_n, tiles.block_k) if transpose else (tiles.block_k, b_block_n)
    return _RowOperands(
        True,
        _descriptor(a, (tiles.block_m, tiles.block_k)),
        _descriptor(stacked, b_block),
        mats.rows,
        _no_pointers(a.device),
    )


def _row_slots(num_tokens: int, num_experts: int, tiles: Tiles) -> int:
    return triton.cdiv(num_tokens, tiles.block_m) + num_experts


def _row_gemm_options(
    ops: _RowOperands, b: ExpertPointers, tiles: Tiles, k: int, dtype: torch.dtype, experts: int
) -> dict:
    """The compile-time options and launch options every row-GEMM launch shares."""
    return {
        "ALIGNED": b.aligned,
        "TMA": ops.tma,
        "EVEN_K": k % tiles.block_k == 0,
        "DOT_PRECISION": dot_precision(dtype),
        "BLOCK_M": tiles.block_m,
        "BLOCK_N": tiles.block_n,
        "BLOCK_K": tiles.block_k,
        "GROUP_M": tiles.group,
        "EXPERTS_POW2": experts_pow2(experts),
        **tiles.launch_options(),
    }


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
    b = expert_pointers(mats, a.device)
    bias = expert_pointers(biases, a.device) if biases else None
    tiles = tiles or tiles_for("row_gemm", a.device, a.dtype)
    ops = _row_operands(a, b, transpose=transpose, k=k, tiles=tiles, b_block_n=tiles.block_n)
    slots = _row_slots(num_tokens, len(mats), tiles)
    grid = (slots * triton.cdiv(n, tiles.block_n),)
    grouped_gemm_kernel[grid](
        a,
        ops.a_desc,
        a.stride(0),
        a.stride(1),
        ops.b_pointers,
        ops.b_desc,
        ops.b_desc_rows,
        *_b_strides(b, transpose),
        bias.pointers if bias else _no_pointers(a.device),
        bias.strides[0] if bias else 0,
        out,
        out.stride(0),
        out.stride(1),
        splits,
        len(mats),
        slots,
        n,
        k,
        HAS_BIAS=bias is not None,
        B_TRANSPOSED=transpose,
        **_row_gemm_options(ops, b, tiles, k, a.dtype, len(mats)),
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
    w = expert_pointers(weights, x.device)
    bias = expert_pointers(biases, x.device) if biases else None
    tiles = tiles or tiles_for("activation_gemm", x.device, x.dtype)
    ops = _row_operands(x, w, transpose=True, k=k, tiles=tiles, b_block_n=tiles.block_n)
    slots = _row_slots(num_tokens, len(weights), tiles)
    grid = (slots * triton.cdiv(ffn, tiles.block_n),)
    fc1_activation_kernel[grid](
        x,
        ops.a_desc,
        x.stride(0),
        x.stride(1),
        ops.b_pointers,
        ops.b_desc,
        ops.b_desc_rows,
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
        slots,
        ffn,
        k,
        ACT=activation,
        GLU=glu,
        HAS_BIAS=bias is not None,
        HAS_PROBS=probs is not None,
        **_row_gemm_options(ops, w, tiles, k, x.dtype, len(weights)),
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
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dh, d probs): gradient of fc1's pre-activation [T, fc1 out] and, with probs, of probs
    (fp32 [T])."""
    num_tokens, k = dy.shape
    ffn = weights[0].shape[1]
    dh = dy.new_empty(h.shape)
    tiles = tiles or tiles_for("activation_gemm", dy.device, dy.dtype)
    col_tiles = triton.cdiv(ffn, tiles.block_n)
    # One row of partial sums per column tile; every (tile, token) element is written.
    partial = (
        torch.empty((col_tiles, num_tokens), dtype=torch.float32, device=dy.device)
        if probs is not None
        else torch.empty((1, 1), dtype=torch.float32, device=dy.device)
    )
    if num_tokens == 0:
        return dh, (partial.sum(0) if probs is not None else None)
    w = expert_pointers(weights, dy.device)
    ops = _row_operands(dy, w, transpose=False, k=k, tiles=tiles, b_block_n=tiles.block_n)
    slots = _row_slots(num_tokens, len(weights), tiles)
    fc2_dgrad_activation_kernel[(slots * col_tiles,)](
        dy,
        ops.a_desc,
        dy.stride(0),
        dy.stride(1),
        ops.b_pointers,
        ops.b_desc,
        ops.b_desc_rows,
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
        slots,
        ffn,
        k,
        ACT=activation,
        GLU=glu,
        HAS_PROBS=probs is not None,
        **_row_gemm_options(ops, w, tiles, k, dy.dtype, len(weights)),
    )
    return dh, (partial.sum(0) if probs is not None else None)


def grouped_wgrad(
    dy: torch.Tensor,
    x: torch.Tensor,
    splits: torch.Tensor,
    destinations: Sequence[tuple[int, torch.Tensor]] | torch.Tensor,
    *,
    accumulate: bool,
    skip_empty_experts: bool = False,
    inclusive_offsets: bool = False,
    tiles: Tiles | None = None,
) -> None:
    """For each (expert g, fp32 region [N, K]): region (+)= dy_g^T @ x_g; or, for one fp32
    [G, N, K] tensor, its slice g for every expert g.

    One launch per distinct region layout (strides, alignment): normally one. The regions are
    written in place, so unlike read-only operands they are never copied to unify strides.
    skip_empty_experts and inclusive_offsets are the kernel's SKIP_EMPTY_EXPERTS and
    INCLUSIVE_OFFSETS switches (kernels/wgrad.py), off in the contract's behaviour."""
    if isinstance(destinations, torch.Tensor):
        launches = [_grouped_regions(destinations, dy.device)]
    else:
        launches = _region_layouts(destinations, dy.device)
    if not launches:
        return
    num_tokens, n = dy.shape
    k = x.shape[1]
    num_experts = splits.shape[0]
    # Long per-expert reductions amortise a larger tile's single resident program; short ones
    # need two programs per multiprocessor to hide the fp32 read-modify-write (fused/tiles.py).
    long = num_tokens >= LONG_REDUCTION_ROWS * num_experts
    tiles = tiles or tiles_for("wgrad_long" if long else "wgrad", dy.device, dy.dtype)
    tma = tiles.tma and _tma_ready(dy) and _tma_ready(x)
    dy_desc = _descriptor(dy, (tiles.block_m, tiles.block_n)) if tma else dy
    x_desc = _descriptor(x, (tiles.block_m, tiles.block_k)) if tma else x
    tiles_per_expert = triton.cdiv(n, tiles.block_n) * triton.cdiv(k, tiles.block_k)
    for launch in launches:
        grouped_wgrad_kernel[(launch.count * tiles_per_expert,)](
            dy,
            dy_desc,
            dy.stride(0),
            dy.stride(1),
            x,
            x_desc,
            x.stride(0),
            x.stride(1),
            launch.experts,
            launch.pointers,
            *launch.strides,
            splits,
            num_experts,
            num_tokens,
            n,
            k,
            ACCUMULATE=accumulate,
            SKIP_EMPTY_EXPERTS=skip_empty_experts,
            INCLUSIVE_OFFSETS=inclusive_offsets,
            ALIGNED=launch.aligned,
            TMA=tma,
            START_FROM_DEST=tiles.start_from_dest,
            DOT_PRECISION=dot_precision(dy.dtype),
            BLOCK_N=tiles.block_n,
            BLOCK_K=tiles.block_k,
            BLOCK_T=tiles.block_m,
            GROUP_N=tiles.group,
            EXPERTS_POW2=experts_pow2(num_experts),
            **tiles.launch_options(),
        )


@dataclass(frozen=True)
class _RegionLaunch:
    """The regions one weight-gradient launch writes: expert ids and region pointers (device
    tables), the strides they share, whether every pointer is 16-byte aligned."""

    count: int
    experts: torch.Tensor  # int32
    pointers: torch.Tensor  # int64
    strides: tuple[int, int]
    aligned: bool


def _region_layouts(
    destinations: Sequence[tuple[int, torch.Tensor]], device: torch.device
) -> list[_RegionLaunch]:
    layouts: dict[tuple, list[tuple[int, torch.Tensor]]] = {}
    for expert, region in destinations:
        key = (region.stride(), region.data_ptr() % 16 == 0)
        layouts.setdefault(key, []).append((expert, region))
    return [
        _RegionLaunch(
            len(group),
            _device_table(tuple(g for g, _ in group), torch.int32, device),
            _device_table(tuple(r.data_ptr() for _, r in group), torch.int64, device),
            strides,
            aligned,
        )
        for (strides, aligned), group in layouts.items()
    ]


def _grouped_regions(destination: torch.Tensor, device: torch.device) -> _RegionLaunch:
    """Every expert's slice of one [G, N, K] destination, pointers computed, not read off G
    views."""
    num = destination.shape[0]
    step = destination.stride(0) * destination.element_size()
    base = destination.data_ptr()
    return _RegionLaunch(
        num,
        _device_table(tuple(range(num)), torch.int32, device),
        _device_table(tuple(base + g * step for g in range(num)), torch.int64, device),
        (destination.stride(1), destination.stride(2)),
        base % 16 == 0 and step % 16 == 0,
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
