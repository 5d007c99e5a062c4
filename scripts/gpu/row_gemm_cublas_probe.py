"""Probe on a GPU: the plain row GEMMs of the fused path (fused.grouped_ops.grouped_gemm:
fc2's forward, fc2's dgrad storing da, fc1's dgrad) against cuBLAS called once per expert
(torch.mm into slices of one output), and torch._grouped_mm, for every preset shape (bf16,
uniform load, discrete weights). Each is checked against torch._grouped_mm, then timed with
triton.testing.do_bench (median ms), two passes. Writes one JSON object to stdout.

Question: the weight gradient of few large experts is faster by cuBLAS per expert
(scripts/gpu/wgrad_cublas_ab.py); are the row GEMMs too?

    python scripts/gpu/row_gemm_cublas_probe.py [--shapes mixtral,qwen3,deepseek]
"""

from __future__ import annotations

from itertools import accumulate

import probe_shapes  # beside this file
import torch
import triton

from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused import grouped_ops


def per_expert_mm(a, mats, sizes, *, transpose: bool):
    out = a.new_empty((a.shape[0], mats[0].shape[0] if transpose else mats[0].shape[1]))
    row = 0
    for g, rows in enumerate(sizes):
        b = mats[g].t() if transpose else mats[g]
        torch.mm(a[row : row + rows], b, out=out[row : row + rows])
        row += rows
    return out


def measure_gemm(label, a, mats, sizes, splits, offs, *, transpose: bool) -> dict:
    stacked = torch.stack(mats)
    b = stacked.transpose(1, 2) if transpose else stacked
    ways = {
        "triton": lambda: grouped_ops.grouped_gemm(a, splits, mats, transpose=transpose),
        "cublas": lambda: per_expert_mm(a, mats, sizes, transpose=transpose),
        "torch_grouped_mm": lambda: torch._grouped_mm(a, b, offs=offs),
    }
    ref = ways["torch_grouped_mm"]().float()
    doc: dict = {"gemm": label}
    for name, way in ways.items():
        doc[f"{name}_rel_error"] = ((way().float() - ref).norm() / ref.norm()).item()
    del ref
    for _ in range(2):
        for name, way in ways.items():
            doc.setdefault(f"{name}_ms", []).append(round(triton.testing.do_bench(way), 3))
    return doc


def measure(name: str) -> dict:
    shape = PRESETS[name]
    sizes = split_sizes(shape, "uniform")
    rows = sum(sizes)
    g = torch.Generator(device="cuda").manual_seed(0)

    def randn(*dims, scale=1.0):
        return (torch.randn(*dims, generator=g, device="cuda") * scale).to(torch.bfloat16)

    a = randn(rows, shape.ffn)
    dy = randn(rows, shape.hidden)
    dh = randn(rows, 2 * shape.ffn)
    w1 = [randn(2 * shape.ffn, shape.hidden, scale=0.02) for _ in range(shape.experts)]
    w2 = [randn(shape.hidden, shape.ffn, scale=0.02) for _ in range(shape.experts)]
    splits = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    offs = torch.tensor(list(accumulate(sizes)), dtype=torch.int32, device="cuda")
    doc: dict = {"shape": name, "rows": rows, "experts": shape.experts}
    doc["fc2_forward"] = measure_gemm("fc2_forward", a, w2, sizes, splits, offs, transpose=True)
    doc["fc2_dgrad_da"] = measure_gemm("fc2_dgrad_da", dy, w2, sizes, splits, offs, transpose=False)
    doc["fc1_dgrad"] = measure_gemm("fc1_dgrad", dh, w1, sizes, splits, offs, transpose=False)
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure)
