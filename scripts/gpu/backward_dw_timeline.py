"""Where the ~2 ms between backward_dw's CUDA events and its kernels go (H200, issue #21).

scripts/gpu/wgrad_kernels_vs_te.py found, on DeepSeek-V3 with discrete weights, our two
weight-gradient kernels busy 16.3 ms of an 18.5 ms phase (events), and te-ops' whole phase
13.7 ms. This probe records one ``backward_dw`` of the triton backend under torch.profiler
with a CUDA event marker kernel just before it, and reports, in µs from that marker's end:
each device kernel and memory copy (start, duration, stream), and the host's runtime calls
(cudaLaunchKernel, cudaMemcpyAsync, cudaStreamSynchronize, ...) by name with count, total
and the first one's start, plus when the call returned. One JSON object on stdout.

    python scripts/gpu/backward_dw_timeline.py [--shapes deepseek] [--mode overwrite]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict

import probe_shapes  # beside this file
import torch
from torch.profiler import ProfilerActivity, profile

from gmlp_check.bench.phases import Workload, _attach_main_grads
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused.mlp import TritonGroupedMLP
from gmlp_check.refimpl.megatron import reset_for_step


def _trace(prof) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as file:
        prof.export_chrome_trace(file.name)
        with open(file.name) as handle:
            return json.load(handle)["traceEvents"]


def timeline(name: str, overwrite: bool, single: bool) -> dict:
    shape = PRESETS[name]
    device = torch.device("cuda")
    work = Workload(shape, "uniform", split_sizes(shape, "uniform"), torch.bfloat16, device, single)
    module = TritonGroupedMLP(work.mlp_config(delay_wgrad_compute=True))
    params = _attach_main_grads(module, overwrite=overwrite)
    gen = torch.Generator(device=device).manual_seed(0)
    x = work.randn(shape.rows, shape.hidden, gen).requires_grad_()
    dy = work.randn(shape.rows, shape.hidden, gen)
    marker = torch.empty(1, device=device)
    for repeat in range(3):
        reset_for_step(params)
        module(x, work.splits).backward(dy)
        torch.cuda.synchronize()
        if repeat < 2:
            module.backward_dw()
            torch.cuda.synchronize()
            continue
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            marker.zero_()  # the device-side origin: the phase's start event stands here
            torch.cuda.synchronize()
            called = time.perf_counter()
            module.backward_dw()
            returned_us = (time.perf_counter() - called) * 1e6
            torch.cuda.synchronize()
    events = _trace(prof)
    device_ops = sorted(
        (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
        key=lambda e: e["ts"],
    )
    origin = device_ops[0]["ts"] + device_ops[0].get("dur", 0)  # the marker's end
    runtime: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, None])
    for e in events:
        if e.get("cat") == "cuda_runtime" and e["ts"] >= origin:
            entry = runtime[e["name"]]
            entry[0] += 1
            entry[1] += e.get("dur", 0)
            entry[2] = e["ts"] - origin if entry[2] is None else entry[2]
    return {
        "shape": name,
        "mode": "overwrite" if overwrite else "accumulate",
        "weights": "single" if single else "discrete",
        "returned_us_wall": round(returned_us, 1),
        "device": [
            {
                "name": e["name"][:60],
                "start_us": round(e["ts"] - origin, 1),
                "dur_us": round(e.get("dur", 0), 1),
                "stream": e.get("args", {}).get("stream"),
            }
            for e in device_ops[1:40]
        ],
        "runtime": {
            k: {"count": c, "total_us": round(t, 1), "first_start_us": round(f, 1)}
            for k, (c, t, f) in sorted(runtime.items(), key=lambda kv: -kv[1][1])[:12]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    # Every name is checked before any tensor is made (probe_shapes: one line, exit 2).
    parser.add_argument("--shapes", type=probe_shapes.shape_names, default="deepseek,qwen3")
    args = parser.parse_args()
    results = []
    for name in args.shapes:
        for overwrite in (True, False):
            results.append(timeline(name, overwrite, single=False))
            torch.cuda.empty_cache()
    print(json.dumps({"torch": torch.__version__, "results": results}, indent=1))


if __name__ == "__main__":
    main()
