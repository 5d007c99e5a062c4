"""A/B on a GPU: the weight gradient into fp32 main_grad by the fused Triton kernel against
cuBLAS called once per expert with an fp32 output from 16-bit operands (torch.addmm /
torch.mm with ``out_dtype=torch.float32``: the same GEMM with beta = 1 that Transformer
Engine's general_gemm issues for ``accumulate_into_main_grad``), on one stream and spread
over four side streams as TE's grouped GEMM does.

For every preset shape (bf16, uniform load, discrete fp32 main_grad per expert, as the module
hands them), fc1's and fc2's weight gradients: each way is checked against fp32 torch.mm
(||out - ref|| / ||ref|| after one accumulate into a known start), then timed with
triton.testing.do_bench (median ms; L2 cleared before each call), two passes. The bare bf16
torch._grouped_mm of the same product is the yardstick. Writes one JSON object to stdout.

    python scripts/gpu/wgrad_cublas_ab.py [--shapes mixtral,qwen3,deepseek]
"""

from __future__ import annotations

from contextlib import nullcontext
from itertools import accumulate

import probe_shapes  # beside this file
import torch
import triton

from gmlp_check.fused import grouped_ops


def rel_error(regions, start, dy, x, sizes) -> float:
    """||regions - (start + dy_g^T x_g in fp32)|| / ||reference||, one expert at a time (the
    stacked reference of DeepSeek's fc1 alone would be 30 GB)."""
    err = ref_norm = 0.0
    row = 0
    for region, first, rows in zip(regions, start.unbind(0), sizes):
        ref = first + dy[row : row + rows].float().t() @ x[row : row + rows].float()
        row += rows
        err += (region - ref).norm().item() ** 2
        ref_norm += ref.norm().item() ** 2
    return (err / ref_norm) ** 0.5


def per_expert_cublas(dy, x, sizes, regions, *, accumulate_: bool, streams=None):
    """region_g (+)= dy_g^T @ x_g by one cuBLAS call per expert (fp32 out, 16-bit in)."""
    start = 0
    main = torch.cuda.current_stream()
    if streams:
        for s in streams:
            s.wait_stream(main)
    for g, rows in enumerate(sizes):
        dy_g, x_g = dy[start : start + rows], x[start : start + rows]
        start += rows
        ctx = torch.cuda.stream(streams[g % len(streams)]) if streams else nullcontext()
        with ctx:
            if accumulate_:
                torch.addmm(regions[g], dy_g.t(), x_g, out_dtype=torch.float32, out=regions[g])
            else:
                torch.mm(dy_g.t(), x_g, out_dtype=torch.float32, out=regions[g])
    if streams:
        for s in streams:
            main.wait_stream(s)


def measure_gemm(label: str, dy, x, sizes, splits, offs) -> dict:
    experts = len(sizes)
    n, k = dy.shape[1], x.shape[1]
    g = torch.Generator(device="cuda").manual_seed(1)
    start = torch.randn(experts, n, k, generator=g, device="cuda")
    regions = [t.clone() for t in start.unbind(0)]  # discrete: one allocation per expert
    streams = [torch.cuda.Stream() for _ in range(4)]
    ways = {
        "triton": lambda acc: grouped_ops.grouped_wgrad(
            dy, x, splits, list(enumerate(regions)), accumulate=acc
        ),
        "cublas": lambda acc: per_expert_cublas(dy, x, sizes, regions, accumulate_=acc),
        "cublas_4streams": lambda acc: per_expert_cublas(
            dy, x, sizes, regions, accumulate_=acc, streams=streams
        ),
    }
    doc: dict = {"gemm": label, "n": n, "k": k}
    for name, way in ways.items():
        for r, s in zip(regions, start.unbind(0)):
            r.copy_(s)
        try:
            way(True)
            torch.cuda.synchronize()
        except Exception as exc:  # a way this torch lacks is recorded, not fatal
            doc[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        doc[f"{name}_rel_error"] = rel_error(regions, start, dy, x, sizes)
    for _ in range(2):
        for name, way in ways.items():
            if f"{name}_error" in doc:
                continue
            for mode, acc in (("accumulate", True), ("overwrite", False)):
                ms = triton.testing.do_bench(lambda way=way, acc=acc: way(acc))
                doc.setdefault(f"{name}_{mode}_ms", []).append(round(ms, 3))
    doc["bf16_grouped_mm_ms"] = round(
        triton.testing.do_bench(lambda: torch._grouped_mm(dy.t(), x, offs=offs)), 3
    )
    return doc


def measure(name: str) -> dict:
    ops = probe_shapes.wgrad_operands(name)
    sizes, rows, splits = ops.sizes, ops.rows, ops.splits
    x, dh, act, dy = ops.x, ops.dh, ops.act, ops.dy
    offs = torch.tensor(list(accumulate(sizes)), dtype=torch.int32, device="cuda")
    doc: dict = {"shape": name, "rows": rows, "experts": len(sizes)}
    doc["fc1"] = measure_gemm("fc1", dh, x, sizes, splits, offs)
    torch.cuda.empty_cache()
    doc["fc2"] = measure_gemm("fc2", dy, act, sizes, splits, offs)
    torch.cuda.empty_cache()
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure)
