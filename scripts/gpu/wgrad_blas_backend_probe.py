"""Probe on a GPU: does cuBLASLt, asked for by torch's preferred-BLAS switch, run the per-expert
weight gradient (fp32 out, 16-bit in, beta = 1) faster than what torch picks by default?

Mixtral's weight gradients go to cuBLAS per expert (fused/cublas_wgrad.py) and still trail
te-ops by 2-6 % in both recorded H200 runs, although both issue one fp32-output GEMM per
expert (four side streams were tried on 2026-12-03 and did not help). Transformer Engine calls
cublasLtMatmul with its own heuristic; torch's addmm / mm with ``out_dtype`` go through
whichever backend ``torch.backends.cuda.preferred_blas_library`` names. Prediction: if the gap
is the algorithm, the Lt backend closes part of it.

For each shape and load (bf16, discrete fp32 regions per expert): fc1's and fc2's weight
gradients by the Triton kernel, by cuBLAS per expert under the default backend and under
cuBLASLt, and with the operands swapped into each region's transposed view
(``cublas_swapped``: the order TE's general_gemm uses); each checked against fp32 torch.mm
after one accumulate into a known start, then timed with triton.testing.do_bench (median
ms), two passes, accumulate and overwrite; the CUDA kernels one call of each runs
(torch.profiler) are recorded by name. One JSON object to stdout.

    python scripts/gpu/wgrad_blas_backend_probe.py [--shapes mixtral]
"""

from __future__ import annotations

from contextlib import contextmanager

import probe_shapes  # beside this file
import torch
import triton
from torch.profiler import ProfilerActivity, profile
from wgrad_cublas_ab import per_expert_cublas, rel_error  # beside this file

from gmlp_check.fused import grouped_ops


@contextmanager
def blas(library: str | None):
    """torch's preferred BLAS library for the calls inside (None: leave it as it is)."""
    before = torch.backends.cuda.preferred_blas_library()
    if library is not None:
        torch.backends.cuda.preferred_blas_library(library)
    try:
        yield
    finally:
        torch.backends.cuda.preferred_blas_library(before)


def kernels_of(call) -> list[str]:
    """Names of the CUDA kernels one call launches, most time first."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    events.sort(key=lambda e: -e.device_time_total)
    return [f"{e.key[:90]} x{e.count}" for e in events[:4]]


def measure_gemm(label: str, dy, x, sizes, splits) -> dict:
    n, k = dy.shape[1], x.shape[1]
    g = torch.Generator(device="cuda").manual_seed(1)
    start = torch.randn(len(sizes), n, k, generator=g, device="cuda")
    regions = [t.clone() for t in start.unbind(0)]  # discrete: one allocation per expert

    def cublas_under(library):
        def way(acc):
            with blas(library):
                per_expert_cublas(dy, x, sizes, regions, accumulate_=acc)

        return way

    def swapped(acc):
        """region^T (+)= x_g^T @ dy_g into the transposed view of each region: the same
        product with the operands in the other order, as TE's general_gemm orders them for
        the weight gradient (cuBLAS may pick another kernel for it)."""
        start_row = 0
        for region, rows in zip(regions, sizes):
            dy_g, x_g = dy[start_row : start_row + rows], x[start_row : start_row + rows]
            start_row += rows
            out = region.t()
            if acc:
                torch.addmm(out, x_g.t(), dy_g, out_dtype=torch.float32, out=out)
            else:
                torch.mm(x_g.t(), dy_g, out_dtype=torch.float32, out=out)

    ways = {
        "triton": lambda acc: grouped_ops.grouped_wgrad(
            dy, x, splits, list(enumerate(regions)), accumulate=acc
        ),
        "cublas_default": cublas_under(None),
        "cublas_cublaslt": cublas_under("cublaslt"),
        "cublas_cublas": cublas_under("cublas"),
        "cublas_swapped": swapped,
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
        doc[f"{name}_kernels"] = kernels_of(lambda way=way: way(True))
    for _ in range(2):
        for name, way in ways.items():
            if f"{name}_error" in doc:
                continue
            for mode, acc in (("accumulate", True), ("overwrite", False)):
                ms = triton.testing.do_bench(lambda way=way, acc=acc: way(acc))
                doc.setdefault(f"{name}_{mode}_ms", []).append(round(ms, 3))
    return doc


def measure(name: str) -> dict:
    doc: dict = {"shape": name, "default_blas": str(torch.backends.cuda.preferred_blas_library())}
    for load in ("uniform", "skewed"):
        ops = probe_shapes.wgrad_operands(name, load=load)
        sizes, splits = ops.sizes, ops.splits
        doc[load] = {
            "sizes": list(sizes),
            "fc1": measure_gemm("fc1", ops.dh, ops.x, sizes, splits),
            "fc2": measure_gemm("fc2", ops.dy, ops.act, sizes, splits),
        }
        del ops
        torch.cuda.empty_cache()
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure, default="mixtral")
