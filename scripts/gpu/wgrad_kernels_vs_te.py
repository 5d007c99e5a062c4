"""What te-ops' weight-gradient phases run on the device, beside ours (H200, issue #21).

DeepSeek-V3's wgrad-overwrite phase is the largest gap left against te-ops (0.77x in the
recorded bench): our two kernels take about 16.3 ms for 45 GB of fp32 main_grad, te-ops'
whole phase 14.1 ms, and cuBLAS called per expert by us (scripts/gpu/wgrad_cublas_ab.py)
took 17.7 ms for the same GEMMs. So what does te-ops' phase run? For each backend (triton,
te-ops), discrete weights, uniform load, both modes, this probe:

* runs the bench's own phase setup (bench.phases: DDP-style fp32 main_grad, the flag reset,
  forward + backward with delayed weight gradients) and profiles one ``backward_dw`` with
  torch.profiler: every device kernel by name with its count and total time, the device time
  from the first kernel's start to the last one's end, and the host time to return;
* reads main_grad back after it and compares te-ops' with ours (relative error), so that a
  phase that writes less than the contract asks cannot pass for a faster one;
* times the device's store ceiling for that many bytes: ``zero_`` over the same main_grads
  (fp32 stores only, no reads).

One JSON object on stdout.

    python scripts/gpu/wgrad_kernels_vs_te.py [--shapes deepseek,qwen3]
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict

import probe_shapes  # beside this file
import torch
from torch.profiler import ProfilerActivity, profile

from gmlp_check.bench.phases import Workload, _attach_main_grads
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.bench.timed_backends import build
from gmlp_check.refimpl.megatron import reset_for_step

BACKENDS = ("triton", "te-ops")
SAMPLE_STRIDE = 997  # prime: the sample walks every column and row of a weight


def _kernels(prof) -> dict:
    """Device kernels of a profile: by name (count, total µs), and the span they cover."""
    by_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    starts, ends = [], []
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        entry = by_name[event.name[:90]]
        entry[0] += 1
        entry[1] += event.time_range.elapsed_us()
        starts.append(event.time_range.start)
        ends.append(event.time_range.end)
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    return {
        "kernels": [{"name": n, "count": c, "total_us": round(t, 1)} for n, (c, t) in ranked[:12]],
        "kernel_total_ms": round(sum(t for _, t in by_name.values()) / 1e3, 3),
        "device_span_ms": round((max(ends) - min(starts)) / 1e3, 3) if starts else None,
    }


def _same_weights(params: list, device: torch.device) -> None:
    """Every backend's weights drawn from one seed per (shape, place among the weights of
    that shape), so that their main_grads can be compared whatever order a backend
    registers fc1's and fc2's experts in."""
    seen: dict[tuple, int] = defaultdict(int)
    with torch.no_grad():
        for p in params:
            key = tuple(p.shape)
            gen = torch.Generator(device=device).manual_seed(hash((key, seen[key])) % 2**31)
            seen[key] += 1
            p.copy_(torch.randn(p.shape, generator=gen, device=device, dtype=p.dtype) * 0.02)


def _phase_ms(module, params, x, dy, splits) -> dict:
    """``backward_dw`` timed three ways, medians of seven: CUDA events on the current stream
    (the bench's clock), the host's time to return, and the wall clock to a device-wide
    synchronize (every stream's work done). Events shorter than the synchronized wall clock
    mean work on other streams that the current stream never waited for."""
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=x.device)
    events, host, wall = [], [], []
    for _ in range(7):
        reset_for_step(params)
        module(x, splits).backward(dy)
        flush.zero_()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        module.backward_dw()
        host.append((time.perf_counter() - t0) * 1e3)
        end.record()
        end.synchronize()
        events.append(start.elapsed_time(end))
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
    med = lambda v: round(sorted(v)[len(v) // 2], 3)  # noqa: E731
    return {"events_ms": med(events), "host_ms": med(host), "synced_wall_ms": med(wall)}


def _streams(prof) -> dict:
    """Kernels per device stream (count, total ms), from the profile's trace."""
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        with open(trace.name) as file:
            events = json.load(file)["traceEvents"]
    per: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for event in events:
        if event.get("cat") == "kernel":
            entry = per[str(event.get("args", {}).get("stream"))]
            entry[0] += 1
            entry[1] += event.get("dur", 0) / 1e3
    return {k: {"count": c, "total_ms": round(t, 3)} for k, (c, t) in per.items()}


def _profile_backend(name: str, work: Workload, overwrite: bool) -> tuple[dict, dict]:
    module = build(name, work.mlp_config(delay_wgrad_compute=True))
    params = _attach_main_grads(module, overwrite=overwrite)
    _same_weights(params, work.device)
    gen = torch.Generator(device=work.device).manual_seed(0)
    x = work.randn(work.shape.rows, work.shape.hidden, gen).requires_grad_()
    dy = work.randn(work.shape.rows, work.shape.hidden, gen)
    doc: dict = {}
    for repeat in range(3):  # the first two compile and warm the allocator
        reset_for_step(params)
        for p in params:  # poison: an overwrite must replace every element
            p.main_grad.fill_(float("nan") if overwrite else 1.0)
        module(x, work.splits).backward(dy)
        torch.cuda.synchronize()
        if repeat < 2:
            module.backward_dw()
            torch.cuda.synchronize()
            continue
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            module.backward_dw()
            doc["host_return_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
            torch.cuda.synchronize()
        doc.update(_kernels(prof))
        doc["streams"] = _streams(prof)
    doc.update(_phase_ms(module, params, x, dy, work.splits))
    reset_for_step(params)  # the compared main_grads: one more step, poisoned first
    for p in params:
        p.main_grad.fill_(float("nan") if overwrite else 1.0)
    module(x, work.splits).backward(dy)
    module.backward_dw()
    torch.cuda.synchronize()
    # A strided sample of every main_grad (45 GB whole on DeepSeek) is what is compared.
    grads = {}
    seen: dict[tuple, int] = defaultdict(int)
    for p in params:  # keyed as _same_weights draws them
        key = tuple(p.shape)
        grads[key, seen[key]] = p.main_grad.detach().view(-1)[::SAMPLE_STRIDE].cpu()
        seen[key] += 1
    doc["nan_left"] = int(sum(torch.isnan(p.main_grad).sum().item() for p in params))
    doc["main_grad_gb"] = round(sum(p.main_grad.numel() * 4 for p in params) / 1e9, 2)
    del module, params, x, dy
    torch.cuda.empty_cache()
    return doc, grads


def _store_ceiling(work: Workload) -> dict:
    """``zero_`` over main_grads the size of the phase's: fp32 stores, nothing read."""
    module = build("triton", work.mlp_config(delay_wgrad_compute=True))
    shapes = [p.shape for p in _attach_main_grads(module, overwrite=True)]
    del module
    torch.cuda.empty_cache()
    bufs = [torch.empty(shape, dtype=torch.float32, device="cuda") for shape in shapes]
    total = sum(b.numel() * 4 for b in bufs)
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for b in bufs:
            b.zero_()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    best = sorted(times)[len(times) // 2]
    del bufs
    torch.cuda.empty_cache()
    return {"bytes_gb": round(total / 1e9, 2), "zero_ms": round(best, 3),
            "tb_per_s": round(total / best / 1e9, 2)}  # fmt: skip


def measure(name: str) -> dict:
    shape = PRESETS[name]
    device = torch.device("cuda")
    work = Workload(shape, "uniform", split_sizes(shape, "uniform"), torch.bfloat16, device, False)
    doc: dict = {"shape": name}
    for mode, overwrite in (("overwrite", True), ("accumulate", False)):
        grads_of = {}
        for backend in BACKENDS:
            try:
                doc[f"{mode}/{backend}"], grads_of[backend] = _profile_backend(
                    backend, work, overwrite
                )
            except Exception as error:  # TE absent or refusing: say so, go on
                doc[f"{mode}/{backend}"] = {"error": f"{type(error).__name__}: {error}"[:300]}
        if len(grads_of) == 2:
            ours, theirs = grads_of["triton"], grads_of["te-ops"]
            num = sum((ours[k] - theirs[k]).double().norm() ** 2 for k in ours)
            den = sum(g.double().norm() ** 2 for g in ours.values())
            doc[f"{mode}/te_vs_triton_rel_error"] = float((num / den) ** 0.5)
        if mode == "overwrite":
            doc["store_ceiling"] = _store_ceiling(work)
        grads_of.clear()
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure, default="deepseek,qwen3")
