"""Probe on a GPU: the weight-gradient kernel without its in-kernel scan of the split sizes.

Question: every program of production's weight-gradient kernel (fused/kernels/wgrad.py) finds
its expert's rows by loading all G split sizes and scanning them (``expert_row_range``: a
cumsum and two sums over G lanes, each a round through shared memory with barriers), after a
dependent load of its expert number, before its first TMA load can be issued. DeepSeek-V3
runs 458,752 such programs for fc1 alone (one or two 64-row reduction steps each), about 6 us
apiece with two per multiprocessor; a chain of dependent loads and barriers of 1-2 us at the
start of each would be a sizeable part of that. Here the host side computes, once per launch
on the device (two small torch ops), each listed entry's first row and row count; a program
loads them beside its region pointer, all three independent, and starts its TMA loads one
load latency after it starts. Everything else is production's code and tiles.

Prediction: 5-15 % off DeepSeek-V3's fc1 / fc2 overwrite, less on Qwen3 (1024-row reductions)
and nothing on Mixtral's long reductions.

Checked first: each variant's result equals production's bit for bit (same products, same
order), overwriting NaN-poisoned regions and accumulating from a known start; then timed with
triton.testing.do_bench (median ms, L2 cleared), two passes in turn. One JSON line per
measurement on stdout.

Ran on main c20548c, whose production kernel still scanned (docs/gpu-runs/h100-session-2026-12-06/);
production has since adopted the tables, so on later code the two variants are the same kernel.

    python scripts/gpu/wgrad_prologue_probe.py [--shapes deepseek,qwen3,mixtral]
    TRITON_INTERPRET=1 python scripts/gpu/wgrad_prologue_probe.py --interpret   # CPU check
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
import triton.language as tl

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.dual_jit import dual_jit
from gmlp_check.fused.kernels.expert_rows import expert_pointer, grouped_tile
from gmlp_check.fused.kernels.wgrad import _masked_step
from gmlp_check.fused.operands import (
    descriptor,
    grouped_regions,
    region_layouts,
    tma_ready,
)
from gmlp_check.fused.tiles import LONG_REDUCTION_ROWS, dot_precision, tiles_for


@dual_jit
def rows_wgrad_kernel(
    DY,
    DY_DESC,
    stride_dym,
    stride_dyn,
    X,
    X_DESC,
    stride_xm,
    stride_xk,
    ENTRY_FIRST,
    ENTRY_COUNT,
    DEST_PTRS,
    stride_dest_n,
    stride_dest_k,
    num_tokens,
    N,
    K,
    ACCUMULATE: tl.constexpr,
    ALIGNED: tl.constexpr,
    TMA: tl.constexpr,
    START_FROM_DEST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    GROUP_N: tl.constexpr,
):
    """Production's grouped_wgrad_kernel (pointer store, no TMA destination), the entry's rows
    read from two per-entry tables instead of scanned from the split sizes."""
    num_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    per_expert = num_n * num_k
    pid = tl.program_id(0)
    entry = pid // per_expert
    pid_n, pid_k = grouped_tile(pid % per_expert, num_n, num_k, GROUP_N)
    first_row = tl.load(ENTRY_FIRST + entry)
    count = tl.load(ENTRY_COUNT + entry)
    if ACCUMULATE:  # noqa: SIM102
        if count == 0:
            return
    end_row = tl.minimum(first_row + count, num_tokens)
    n0 = pid_n * BLOCK_N
    k0 = pid_k * BLOCK_K
    ns = n0 + tl.arange(0, BLOCK_N)
    ks = k0 + tl.arange(0, BLOCK_K)
    n_ok = ns < N
    k_ok = ks < K
    mask = n_ok[:, None] & k_ok[None, :]
    dest = expert_pointer(DEST_PTRS, entry, tl.float32, ALIGNED)
    dest = dest + ns[:, None] * stride_dest_n + ks[None, :] * stride_dest_k
    if ACCUMULATE and START_FROM_DEST:
        acc = tl.load(dest, mask=mask)
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
                DY, stride_dym, stride_dyn, X, stride_xm, stride_xk, full_end, end_row,
                ns, ks, n_ok, k_ok, acc, BLOCK_T, DOT_PRECISION,
            )  # fmt: skip
    else:
        for t0 in range(first_row, end_row, BLOCK_T):
            acc = _masked_step(
                DY, stride_dym, stride_dyn, X, stride_xm, stride_xk, t0, end_row,
                ns, ks, n_ok, k_ok, acc, BLOCK_T, DOT_PRECISION,
            )  # fmt: skip
    if ACCUMULATE and not START_FROM_DEST:
        acc += tl.load(dest, mask=mask, other=0.0)
    tl.store(dest, acc, mask=mask)


def rows_wgrad(dy, x, splits, destinations, *, accumulate: bool, tiles=None) -> None:
    """grouped_ops.grouped_wgrad with per-entry row tables made on the device."""
    if isinstance(destinations, torch.Tensor):
        launches = [grouped_regions(destinations, dy.device)]
    else:
        launches = region_layouts(destinations, dy.device)
    num_tokens, n = dy.shape
    k = x.shape[1]
    long = num_tokens >= LONG_REDUCTION_ROWS * splits.shape[0]
    tiles = tiles or tiles_for("wgrad_long" if long else "wgrad", dy.device, dy.dtype)
    tma = tiles.tma and tma_ready(dy) and tma_ready(x)
    dy_desc = descriptor(dy, (tiles.block_m, tiles.block_n)) if tma else dy
    x_desc = descriptor(x, (tiles.block_m, tiles.block_k)) if tma else x
    per_expert = triton.cdiv(n, tiles.block_n) * triton.cdiv(k, tiles.block_k)
    sizes = splits.to(torch.int32)
    offsets = torch.cumsum(sizes, 0, dtype=torch.int32) - sizes
    for launch in launches:
        experts = launch.experts.long()
        grid = (launch.count * per_expert,)
        rows_wgrad_kernel[grid](
            dy, dy_desc, dy.stride(0), dy.stride(1), x, x_desc, x.stride(0), x.stride(1),
            offsets[experts], sizes[experts], launch.pointers, *launch.strides,
            num_tokens, n, k,
            ACCUMULATE=accumulate, ALIGNED=launch.aligned, TMA=tma,
            START_FROM_DEST=tiles.start_from_dest, DOT_PRECISION=dot_precision(dy.dtype),
            BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, BLOCK_T=tiles.block_m,
            GROUP_N=tiles.group, **tiles.launch_options(),
        )  # fmt: skip


VARIANTS = {"production": grouped_ops.grouped_wgrad, "entry-rows": rows_wgrad}


def emit(doc: dict) -> None:
    print(json.dumps(doc), flush=True)


def compare(shape, label, dy, x, splits, *, timed: bool) -> None:
    experts = splits.shape[0]
    n, k = dy.shape[1], x.shape[1]
    regions = [torch.empty(n, k, device=dy.device) for _ in range(experts)]
    # An expert listed out of order and one left out: the tables must follow the entries.
    destinations = [(e, regions[e]) for e in reversed(range(experts)) if e != 1 or experts < 3]

    def reset(accumulate: bool) -> None:
        # The accumulate start is drawn again each time (same seed) rather than kept: DeepSeek-V3's
        # fc1 regions are 30 GB, and an H100 holds only two copies beside the operands.
        g = torch.Generator(device=dy.device).manual_seed(1)
        for region in regions:
            region.normal_(generator=g) if accumulate else region.fill_(float("nan"))

    def snapshot() -> list[torch.Tensor]:
        return [region.to("cpu", copy=True) for region in regions]

    for mode, accumulate in (("overwrite", False), ("accumulate", True)):
        reset(accumulate)
        VARIANTS["production"](dy, x, splits, destinations, accumulate=accumulate)
        reference = snapshot()
        if not timed:  # the interpreter: against torch's fp32 sums too
            offs = [0, *torch.cumsum(splits, 0).tolist()]
            reset(accumulate)
            start = snapshot()
            for e, _region in destinations:
                part = dy[offs[e] : offs[e + 1]].float().t() @ x[offs[e] : offs[e + 1]].float()
                want = start[e] + part if accumulate else part
                worst = (reference[e] - want).abs().max().item()
                assert worst <= 1e-3 * max(1.0, want.abs().max().item()), (label, mode, e, worst)
        for name, fn in VARIANTS.items():
            reset(accumulate)
            fn(dy, x, splits, destinations, accumulate=accumulate)
            same = all(
                torch.equal(got.cpu().nan_to_num(7.0), want.nan_to_num(7.0))
                for got, want in zip(regions, reference)
            )
            emit({"shape": shape, "gemm": label, "mode": mode, "variant": name, "identical": same})
            if not same:
                raise SystemExit(f"{name} differs from production on {shape} {label} {mode}")
        del reference
        if not timed:
            continue
        times: dict[str, list[float]] = {}
        for _ in range(2):
            for name, fn in VARIANTS.items():
                ms = triton.testing.do_bench(
                    lambda fn=fn, acc=accumulate: fn(dy, x, splits, destinations, accumulate=acc)
                )
                times.setdefault(name, []).append(round(ms, 3))
        for name, ms in times.items():
            emit({"shape": shape, "gemm": label, "mode": mode, "variant": name, "ms": ms})


def interpret() -> None:
    """Ragged splits with an empty expert, rows off the block, K off the tile, on CPU."""
    g = torch.Generator().manual_seed(0)
    splits = torch.tensor([37, 0, 64, 19], dtype=torch.int32)
    rows = int(splits.sum())
    dy = torch.randn(rows, 40, generator=g).half()
    x = torch.randn(rows, 72, generator=g).half()
    compare("ragged", "cpu", dy, x, splits, timed=False)


def main() -> None:
    import probe_shapes  # beside this file; imports the bench presets

    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=probe_shapes.shape_names, default="deepseek,qwen3")
    parser.add_argument("--interpret", action="store_true")
    args = parser.parse_args()
    if args.interpret:
        interpret()
        return
    emit({"torch": torch.__version__, "triton": triton.__version__,
          "device": torch.cuda.get_device_name()})  # fmt: skip
    for name in args.shapes:
        ops = probe_shapes.wgrad_operands(name)
        for label, (a, b) in (("fc2", (ops.dy, ops.act)), ("fc1", (ops.dh, ops.x))):
            compare(name, label, a, b, ops.splits, timed=True)
            torch.cuda.empty_cache()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
