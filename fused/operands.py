"""How operands reach the fused kernels: device tables of pointers (cached by value), the
pointer set of G expert matrices, TMA descriptors (one over stacked matrices, or one per
expert made on the device), and the choice between descriptors and pointers for a row GEMM;
and the regions a weight-gradient launch writes.

Pointer tables are built once per distinct set of pointers and kept on the device
(``device_table``): a fresh ``torch.tensor(...).to(cuda)`` per launch would copy from pageable
memory, which synchronises the stream and stalls the CPU behind the GPU.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from .tiles import Tiles, dot_precision

_TABLE_CACHE_SIZE = 64
_tables: OrderedDict[tuple, torch.Tensor] = OrderedDict()


def experts_pow2(num_experts: int) -> int:
    """Vector width that holds every expert's split size inside a kernel."""
    return max(2, triton.next_power_of_2(num_experts))


def device_table(values: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
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
            return grouped_tensor_pointers(tensors, device)
        tensors = list(tensors.unbind(0))
    if len({t.stride() for t in tensors}) > 1:
        tensors = [t.contiguous() for t in tensors]
    pointers = tuple(t.data_ptr() for t in tensors)
    return ExpertPointers(
        device_table(pointers, torch.int64, device),
        tuple(tensors[0].stride()),
        all(p % 16 == 0 for p in pointers),
        tuple(tensors),
        stacked_view(tensors, pointers),
        tensors[0].shape[0],
    )


def slice_pointers(grouped: torch.Tensor) -> tuple[tuple[int, ...], bool]:
    """(the base pointer of grouped[g] for every g, whether all are 16-byte aligned), computed
    rather than read off G views: the host work of a launch stays independent of the number
    of experts."""
    step = grouped.stride(0) * grouped.element_size()
    base = grouped.data_ptr()
    pointers = tuple(base + g * step for g in range(grouped.shape[0]))
    return pointers, base % 16 == 0 and step % 16 == 0


def grouped_tensor_pointers(grouped: torch.Tensor, device: torch.device) -> ExpertPointers:
    """The pointers of the slices grouped[g] of a [G, rows, cols] tensor."""
    num, rows, cols = grouped.shape
    pointers, aligned = slice_pointers(grouped)
    dense = grouped.stride() == (rows * cols, cols, 1)
    return ExpertPointers(
        device_table(pointers, torch.int64, device),
        tuple(grouped.stride()[1:]),
        aligned,
        (grouped,),
        grouped.view(num * rows, cols) if dense and grouped.numel() else None,
        rows,
    )


def stacked_view(tensors: Sequence[torch.Tensor], pointers: tuple[int, ...]) -> torch.Tensor | None:
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


def tma_ready(t: torch.Tensor) -> bool:
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


def descriptor(t: torch.Tensor, block: tuple[int, int]) -> TensorDescriptor:
    return TensorDescriptor(t, list(t.shape), list(t.stride()), list(block))


def b_strides(mats: ExpertPointers, transpose: bool) -> tuple[int, int]:
    """(stride along k, stride along n) of B_g[k, n] = mats[g] ([k, n]) or mats[g].T."""
    s0, s1 = mats.strides
    return (s1, s0) if transpose else (s0, s1)


def no_pointers(device: torch.device) -> torch.Tensor:
    return device_table((0,), torch.int64, device)


@dataclass(frozen=True)
class RowOperands:
    """What a row GEMM launch passes for A and the expert matrices: descriptors with TMA,
    or the tensors themselves as placeholders in those slots without. With
    ``per_expert_desc`` each program makes its expert matrix's descriptor on the device from
    ``b_pointers``, and ``b_desc`` is a placeholder."""

    tma: bool
    per_expert_desc: bool
    a_desc: TensorDescriptor | torch.Tensor
    b_desc: TensorDescriptor | torch.Tensor
    b_desc_rows: int
    b_pointers: torch.Tensor


def row_operands(
    a: torch.Tensor,
    mats: ExpertPointers,
    *,
    transpose: bool,
    tiles: Tiles,
) -> RowOperands:
    """TMA descriptors when the tiles ask for them and the tensors allow, else pointers.

    One host descriptor over the stacked matrices where they lie back to back (a single
    grouped weight). Along K its tiles must not cross into the next expert: with
    B_g = W_g^T (transpose) K runs along W's columns, never across experts; otherwise along
    the stacked rows, so K must be a multiple of BLOCK_K (kernels/grouped_gemm.py).
    Otherwise (discrete weights) a descriptor per expert, made by each program on the device:
    with pointer loads instead, Mixtral-sized forward, dgrad and step phases took 5-11 % longer
    on the H200 (docs/perf-notes.md), and a copy into one stack would cost a pass over the
    weights."""
    k = a.shape[1]
    stacked = mats.stacked
    if not (tiles.tma and tma_ready(a)):
        return RowOperands(False, False, a, a, 0, mats.pointers)
    a_desc = descriptor(a, (tiles.block_m, tiles.block_k))
    if stacked is not None and tma_ready(stacked) and (transpose or k % tiles.block_k == 0):
        b_block = (tiles.block_n, tiles.block_k) if transpose else (tiles.block_k, tiles.block_n)
        return RowOperands(
            True, False, a_desc, descriptor(stacked, b_block), mats.rows, no_pointers(a.device)
        )
    # The experts share one stride pair (expert_pointers) and ALIGNED covers every pointer,
    # so the first matrix speaks for all.
    if mats.aligned and tma_ready(mats.tensors[0]):
        if a.device.type == "cuda":
            use_scratch_allocator()
        return RowOperands(True, True, a_desc, a, mats.rows, mats.pointers)
    return RowOperands(False, False, a, a, 0, mats.pointers)


def use_scratch_allocator() -> None:
    """Give Triton an allocator for the global scratch memory that kernels making descriptors
    on the device need (Triton has none by default), unless one is set. Set per call, not
    once: Triton 3.5 and later keep it per thread (a context variable), and autograd runs
    backward on a thread of its own."""
    from triton.runtime import _allocation

    current = getattr(_allocation, "_allocator", None)
    current = current.get() if hasattr(current, "get") else current
    null = getattr(_allocation, "NullAllocator", None)
    if current is None or null is None or isinstance(current, null):
        triton.set_allocator(_scratch)


def _scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    # PyTorch's caching allocator, on the current device and stream: 512-byte aligned,
    # freed when Triton drops it after the launch is queued (the stream orders the reuse).
    return torch.empty(size, dtype=torch.int8, device="cuda")


def row_slots(num_tokens: int, num_experts: int, tiles: Tiles) -> int:
    return triton.cdiv(num_tokens, tiles.block_m) + num_experts


def row_gemm_options(
    ops: RowOperands, b: ExpertPointers, tiles: Tiles, k: int, dtype: torch.dtype, experts: int
) -> dict:
    """The compile-time options and launch options every row-GEMM launch shares."""
    return {
        "ALIGNED": b.aligned,
        "TMA": ops.tma,
        "PER_EXPERT_DESC": ops.per_expert_desc,
        "EVEN_K": k % tiles.block_k == 0,
        "DOT_PRECISION": dot_precision(dtype),
        "BLOCK_M": tiles.block_m,
        "BLOCK_N": tiles.block_n,
        "BLOCK_K": tiles.block_k,
        "GROUP_M": tiles.group,
        "EXPERTS_POW2": experts_pow2(experts),
        **tiles.launch_options(),
    }


@dataclass(frozen=True)
class RegionLaunch:
    """The regions one weight-gradient launch writes: expert ids and region pointers (device
    tables), the strides they share, whether every pointer is 16-byte aligned."""

    count: int
    experts: torch.Tensor  # int32
    pointers: torch.Tensor  # int64
    strides: tuple[int, int]
    aligned: bool


def region_layouts(
    destinations: Sequence[tuple[int, torch.Tensor]], device: torch.device
) -> list[RegionLaunch]:
    layouts: dict[tuple, list[tuple[int, torch.Tensor]]] = {}
    for expert, region in destinations:
        key = (region.stride(), region.data_ptr() % 16 == 0)
        layouts.setdefault(key, []).append((expert, region))
    return [
        RegionLaunch(
            len(group),
            device_table(tuple(g for g, _ in group), torch.int32, device),
            device_table(tuple(r.data_ptr() for _, r in group), torch.int64, device),
            strides,
            aligned,
        )
        for (strides, aligned), group in layouts.items()
    ]


def entry_rows(splits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """[listed experts, 2] int32: each listed expert's first row (the exclusive scan of the
    split sizes) and row count, in the order ``experts`` lists them. Made on the device by
    torch, without a synchronisation: the split sizes never travel to the host."""
    sizes = splits.to(torch.int32)
    first = torch.cumsum(sizes, 0, dtype=torch.int32) - sizes
    return torch.stack((first, sizes), 1).index_select(0, experts)


def paired_entries(rows: torch.Tensor, pointers: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``entry_rows``' table and the region pointers, reordered on the device (no
    synchronisation) for the paired weight-gradient grid: entries by row count, the most
    rows first, the i-th of the first half paired with the i-th of the second (the heaviest
    beside one from the middle, whose share of main_grad traffic is the same and whose
    products are few; experts without rows come last)."""
    order = torch.argsort(rows[:, 1], descending=True, stable=True)
    count = order.numel()
    half = (count + 1) // 2
    interleaved = torch.empty(2 * half, dtype=order.dtype, device=order.device)
    interleaved[0::2] = order[:half]
    interleaved[1 : 2 * (count - half) : 2] = order[half:]
    interleaved = interleaved[:count]  # an odd count: the last pair has one entry
    return rows.index_select(0, interleaved), pointers.index_select(0, interleaved)


def region_tma_ready(launch: RegionLaunch) -> bool:
    """Whether a descriptor made on the device can describe every fp32 region of the launch:
    16-byte aligned bases (ALIGNED covers every pointer), unit column stride, a row stride of
    whole 16-byte units."""
    row_stride, col_stride = launch.strides
    return launch.aligned and col_stride == 1 and (row_stride * 4) % 16 == 0


def grouped_regions(destination: torch.Tensor, device: torch.device) -> RegionLaunch:
    """Every expert's slice of one [G, N, K] destination."""
    num = destination.shape[0]
    pointers, aligned = slice_pointers(destination)
    return RegionLaunch(
        num,
        device_table(tuple(range(num)), torch.int32, device),
        device_table(pointers, torch.int64, device),
        (destination.stride(1), destination.stride(2)),
        aligned,
    )
