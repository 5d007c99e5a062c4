"""Do our weight-gradient kernels gain from running concurrently, as te-ops' GEMMs do? (H200,
issue #21)

scripts/gpu/wgrad_kernels_vs_te.py found te-ops' DeepSeek-V3 overwrite phase running its 512
per-expert cuBLAS GEMMs on four streams at once: 18.7 ms of kernels in a 13.5 ms span, fp32
stores at 3.3 TB/s, where our two grouped kernels (fc2's, then fc1's, one stream) store at
2.8 TB/s and a plain ``zero_`` of the same bytes reaches 3.8-4.0. Prediction: the grouped
kernel alone leaves DRAM idle between a tile's product and its store; fc1's and fc2's kernels
side by side, or each layer's experts split in halves over two streams, fill those gaps;
10-15 % on DeepSeek's overwrite, little on Qwen3.

Ways, each for fc1 and fc2 of one step with discrete fp32 regions (one allocation per
expert), both modes, ``triton.testing.do_bench`` medians (L2 cleared), two passes:

* serial: fc2's launch, then fc1's, one stream (production);
* two-streams: fc2's launch on a side stream, fc1's on the current one, joined;
* halves: each layer's experts in two halves, four launches over two streams.

Overwrite results are compared bit for bit with serial's. One JSON object on stdout.

    python scripts/gpu/wgrad_streams_ab.py [--shapes deepseek,qwen3]
"""

from __future__ import annotations

import probe_shapes  # beside this file
import torch
import triton

from gmlp_check.fused import grouped_ops


def _regions(ops, gemm: str) -> list[torch.Tensor]:
    n = ops.dh.shape[1] if gemm == "fc1" else ops.dy.shape[1]
    k = ops.x.shape[1] if gemm == "fc1" else ops.act.shape[1]
    return [torch.zeros(n, k, device="cuda") for _ in ops.sizes]


def measure(name: str) -> dict:
    ops = probe_shapes.wgrad_operands(name)
    layers = {
        "fc1": (ops.dh, ops.x, _regions(ops, "fc1")),
        "fc2": (ops.dy, ops.act, _regions(ops, "fc2")),
    }
    side = torch.cuda.Stream()

    def launch(gemm: str, experts: range, acc: bool) -> None:
        dy, x, regions = layers[gemm]
        chosen = [(g, regions[g]) for g in experts]
        grouped_ops.grouped_wgrad(dy, x, ops.splits, chosen, accumulate=acc)

    every = range(len(ops.sizes))
    half = len(ops.sizes) // 2
    first, second = range(half), range(half, len(ops.sizes))

    def serial(acc: bool) -> None:
        launch("fc2", every, acc)
        launch("fc1", every, acc)

    def two_streams(acc: bool) -> None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch("fc2", every, acc)
        launch("fc1", every, acc)
        torch.cuda.current_stream().wait_stream(side)

    def halves(acc: bool) -> None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch("fc2", second, acc)
            launch("fc1", second, acc)
        launch("fc2", first, acc)
        launch("fc1", first, acc)
        torch.cuda.current_stream().wait_stream(side)

    ways = {"serial": serial, "two-streams": two_streams, "halves": halves}
    doc: dict = {"shape": name, "experts": len(ops.sizes)}
    reference = None
    for label, way in ways.items():  # overwrite bits against serial's
        for regions in (layers["fc1"][2], layers["fc2"][2]):
            for r in regions:
                r.fill_(float("nan"))
        way(False)
        torch.cuda.synchronize()
        sample = torch.cat([r.view(-1)[::997] for gemm in layers for r in layers[gemm][2]])
        if reference is None:
            reference = sample.cpu()
        doc[f"{label}_bit_identical"] = bool(torch.equal(sample.cpu(), reference))
    for _ in range(2):
        for label, way in ways.items():
            for mode, acc in (("overwrite", False), ("accumulate", True)):
                ms = triton.testing.do_bench(lambda way=way, acc=acc: way(acc))
                doc.setdefault(f"{label}_{mode}_ms", []).append(round(ms, 3))
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure, default="deepseek,qwen3")
