"""Where backward_dw's time goes on a GPU: host time (the call returns, nothing synced)
against device time (CUDA events around it), for the bench's Qwen3 shape with discrete and
single weights, accumulate and overwrite; then torch.profiler's top host and device entries
of one call. Writes JSON lines to stdout.

    python scripts/gpu/backward_dw_host.py [SHAPE]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from gmlp_check.bench.phases import Workload, _attach_main_grads
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused.mlp import TritonGroupedMLP
from gmlp_check.refimpl.megatron import reset_for_step


def one(shape_name: str, single: bool, overwrite: bool) -> dict:
    shape = PRESETS[shape_name]
    device = torch.device("cuda")
    splits = split_sizes(shape, "uniform")
    work = Workload(shape, "uniform", splits, torch.bfloat16, device, single)
    module = TritonGroupedMLP(work.mlp_config(delay_wgrad_compute=True))
    params = _attach_main_grads(module, overwrite=overwrite)
    gen = torch.Generator(device=device).manual_seed(0)
    x = work.randn(shape.rows, shape.hidden, gen).requires_grad_()
    dy = work.randn(shape.rows, shape.hidden, gen)
    host, dev = [], []
    for i in range(8):
        reset_for_step(params)
        module(x, splits).backward(dy)
        torch.cuda.synchronize()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        begin.record()
        module.backward_dw()
        end.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        if i >= 2:
            host.append((t1 - t0) * 1e3)
            dev.append(begin.elapsed_time(end))
    reset_for_step(params)
    module(x, splits).backward(dy)
    torch.cuda.synchronize()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    ) as prof:
        module.backward_dw()
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
    cuda_table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8)
    return {
        "shape": shape_name,
        "weights": "single" if single else "discrete",
        "mode": "overwrite" if overwrite else "accumulate",
        "host_ms": round(statistics.median(host), 3),
        "events_ms": round(statistics.median(dev), 3),
        "cpu_table": table,
        "cuda_table": cuda_table,
    }


def main() -> None:
    shape = sys.argv[1] if len(sys.argv) > 1 else "qwen3"
    for single in (False, True):
        for overwrite in (False, True):
            print(json.dumps(one(shape, single, overwrite)), flush=True)


if __name__ == "__main__":
    main()
