"""Probe on a GPU: fc1's forward with the activation in the GEMM's epilogue (production,
fused.grouped_ops.fc1_forward) against a row GEMM storing h (grouped_ops.grouped_gemm, the
row GEMM's 128x256 tiles) followed by the activation as an elementwise pass (torch's SwiGLU
on h, standing in for a Triton kernel of the same traffic: read h, write a).

Question: does fc1's forward gain what fc2's dgrad gained from the same split (2026-12-03,
scripts/gpu/dgrad_apart_ab.py)? The tuning table predicts ~11.8 against 12.2 ms on Mixtral.
For every preset shape (bf16, uniform load, discrete weights), both are checked against
torch._grouped_mm + SwiGLU, then timed with triton.testing.do_bench (median ms), two passes.
Writes one JSON object to stdout.

    python scripts/gpu/fc1_apart_probe.py [--shapes mixtral,qwen3,deepseek]
"""

from __future__ import annotations

from itertools import accumulate

import probe_shapes  # beside this file
import torch
import torch.nn.functional as F
import triton

from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused import grouped_ops
from gmlp_check.fused.kernels.activations import ACTIVATION_CODES

SWIGLU = ACTIVATION_CODES["swiglu"]


def swiglu(h: torch.Tensor) -> torch.Tensor:
    ffn = h.shape[1] // 2
    return F.silu(h[:, :ffn]) * h[:, ffn:]


def measure(name: str) -> dict:
    shape = PRESETS[name]
    sizes = split_sizes(shape, "uniform")
    rows = sum(sizes)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, shape.hidden, generator=g, device="cuda").to(torch.bfloat16)
    w1 = torch.randn(shape.experts, 2 * shape.ffn, shape.hidden, generator=g, device="cuda")
    w1 = (w1 * 0.02).to(torch.bfloat16)
    experts = [w.clone() for w in w1.unbind(0)]
    splits = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    offs = torch.tensor(list(accumulate(sizes)), dtype=torch.int32, device="cuda")
    ref = swiglu(torch._grouped_mm(x, w1.transpose(1, 2), offs=offs).float())

    def epilogue():
        return grouped_ops.fc1_forward(
            x, splits, experts, None, activation=SWIGLU, glu=True, probs=None
        )[1]

    def apart():
        return swiglu(grouped_ops.grouped_gemm(x, splits, experts, transpose=True))

    doc: dict = {"shape": name, "rows": rows, "experts": shape.experts}
    for label, way in (("epilogue", epilogue), ("apart", apart)):
        out = way().float()
        doc[f"{label}_rel_error"] = ((out - ref).norm() / ref.norm()).item()
    del ref, out
    for label, way in (("epilogue", epilogue), ("apart", apart)) * 2:
        doc.setdefault(f"{label}_ms", []).append(round(triton.testing.do_bench(way), 3))
    h = grouped_ops.grouped_gemm(x, splits, experts, transpose=True)
    doc["row_gemm_alone_ms"] = round(
        triton.testing.do_bench(
            lambda: grouped_ops.grouped_gemm(x, splits, experts, transpose=True)
        ),
        3,
    )
    doc["swiglu_alone_ms"] = round(triton.testing.do_bench(lambda: swiglu(h)), 3)
    doc["torch_grouped_mm_ms"] = round(
        triton.testing.do_bench(lambda: torch._grouped_mm(x, w1.transpose(1, 2), offs=offs)), 3
    )
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure)
