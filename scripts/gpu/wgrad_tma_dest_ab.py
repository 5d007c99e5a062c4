"""A/B on a GPU: the weight-gradient kernel's fp32 main_grad tile read and written through a
descriptor each program makes over its expert's region (``Tiles.tma_dest``) against through
pointers (production before), accumulating and overwriting.

Question: DeepSeek-V3's wgrad-overwrite is store-bound (30 GB of fp32 for fc1 at about
2.8 TB/s, docs/perf-notes.md) and trails te-ops at 0.80-0.84x; does a bulk TMA store of each
tile raise that, and what does it do to the accumulate mode and the other shapes?

For every preset shape (bf16, uniform load, discrete fp32 regions as the module hands them,
and one [G, N, K] destination as a single grouped weight's main_grad), fc1's and fc2's weight
gradients with the tiles production picks for the shape: both ways are checked against each
other (max |difference| / max |result| after one accumulate into a known start), then timed
with triton.testing.do_bench (median ms; L2 cleared before each call), two passes. Writes one
JSON object to stdout.

    python scripts/gpu/wgrad_tma_dest_ab.py [--shapes mixtral,qwen3,deepseek]
"""

from __future__ import annotations

import dataclasses

import probe_shapes  # beside this file
import torch
import triton

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.tiles import LONG_REDUCTION_ROWS, tiles_for


def ways(dy, x, splits, layout: str, regions, stacked):
    """name -> (accumulate) -> None for the pointer and descriptor epilogues."""
    long = dy.shape[0] >= LONG_REDUCTION_ROWS * splits.shape[0]
    production = tiles_for("wgrad_long" if long else "wgrad", dy.device, dy.dtype)
    destinations = stacked if layout == "single" else list(enumerate(regions))
    out = {}
    for name, tma_dest in (("pointers", False), ("descriptor", True)):
        tiles = dataclasses.replace(production, tma_dest=tma_dest)
        out[name] = lambda acc, tiles=tiles: grouped_ops.grouped_wgrad(
            dy, x, splits, destinations, accumulate=acc, tiles=tiles
        )
    return out, production


def measure_gemm(label: str, dy, x, splits, layout: str) -> dict:
    experts = splits.shape[0]
    n, k = dy.shape[1], x.shape[1]
    g = torch.Generator(device="cuda").manual_seed(1)
    start = torch.randn(experts, n, k, generator=g, device="cuda")
    # One layout's destination at a time: DeepSeek's fc1 is 30 GB of fp32 per copy.
    stacked = start.clone() if layout == "single" else None
    regions = [t.clone() for t in start.unbind(0)] if layout == "discrete" else None
    table, production = ways(dy, x, splits, layout, regions, stacked)
    doc: dict = {"gemm": label, "layout": layout, "n": n, "k": k, "tiles": str(production)}

    def reset() -> list[torch.Tensor]:
        views = regions if regions is not None else list(stacked.unbind(0))
        for view, first in zip(views, start.unbind(0)):
            view.copy_(first)
        return views

    reset()
    table["pointers"](True)
    ref = torch.stack(regions) if regions is not None else stacked.clone()
    views = reset()
    try:
        table["descriptor"](True)
        torch.cuda.synchronize()
    except Exception as exc:  # a compiler refusal is this probe's answer, not its end
        doc["descriptor_error"] = f"{type(exc).__name__}: {exc}"[:400]
        return doc
    worst = max((v - r).abs().max().item() for v, r in zip(views, ref.unbind(0)))
    doc["max_rel_difference"] = worst / ref.abs().max().item()
    del ref
    for _ in range(2):
        for name, way in table.items():
            for mode, acc in (("accumulate", True), ("overwrite", False)):
                ms = triton.testing.do_bench(lambda way=way, acc=acc: way(acc))
                doc.setdefault(f"{name}_{mode}_ms", []).append(round(ms, 3))
    return doc


def measure(name: str) -> dict:
    ops = probe_shapes.wgrad_operands(name)
    doc: dict = {"shape": name, "rows": ops.rows, "experts": len(ops.sizes), "gemms": []}
    for layout in ("discrete", "single"):
        for label, (a, b) in (("fc1", (ops.dh, ops.x)), ("fc2", (ops.dy, ops.act))):
            doc["gemms"].append(measure_gemm(label, a, b, ops.splits, layout))
            torch.cuda.empty_cache()
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure)
