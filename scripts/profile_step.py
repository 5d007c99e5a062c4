"""Where one training step of a grouped MLP spends its time: kernels, gaps, host latency.

    python scripts/profile_step.py --shape qwen3 [--impl triton] [--load uniform]
        [--out profile.json] [--no-trace]

Builds the module as `gmlp-check bench` does (bf16, single grouped weights, fp32 main_grad,
accumulate), runs warm-up steps, times steps with CUDA events, then records one step with
torch.profiler: each kernel's device time, their sum, the idle time between them and the time
from the step's start until the first kernel runs (host work the device waits for). With
--no-trace it only runs the steps, for ncu:

    ncu --clock-control none --kernel-name regex:wgrad --launch-skip 2 --launch-count 1 \\
        python scripts/profile_step.py --shape qwen3 --no-trace
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from gmlp_check import backends
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.refimpl.config import MLPConfig


def build(shape, impl: str):
    config = MLPConfig(
        num_experts=shape.experts,
        hidden=shape.hidden,
        ffn=shape.ffn,
        activation="swiglu",
        single_grouped_weight=True,
        accumulate_into_main_grad=True,
        dtype=torch.bfloat16,
        device="cuda",
    )
    module = backends.load(impl).build(config)
    for p in module.parameters():
        p.main_grad = torch.zeros(p.numel(), dtype=torch.float32, device="cuda")
        p.grad_added_to_main_grad = False
    return module


def step(module, x, splits, dy) -> None:
    for p in module.parameters():
        p.grad = None
    x.grad = None
    module(x, splits).backward(dy)


def timed_step(module, x, splits, dy) -> float:
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step(module, x, splits, dy)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def kernel_timeline(module, x, splits, dy) -> dict:
    """One profiled step: kernels in launch order with device start/duration (us)."""
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        # One kernel just before the step: the reference the step's first device work is
        # measured from (the device idles in between while the host prepares the step).
        torch.empty(1, device="cuda").fill_(1)
        step(module, x, splits, dy)
        torch.cuda.synchronize()
    kernels = sorted(
        (
            (e.time_range.start, e.time_range.end - e.time_range.start, e.name)
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
        ),
        key=lambda k: k[0],
    )
    first = kernels[0][0]
    rows = [{"name": n[:90], "start_us": s - first, "us": d} for s, d, n in kernels]
    busy = sum(r["us"] for r in rows[1:])
    span = rows[-1]["start_us"] + rows[-1]["us"] - rows[1]["start_us"] if len(rows) > 1 else 0
    return {
        "kernels": rows,
        "busy_us": busy,
        "span_us": span,
        "idle_us": span - busy,
        "host_latency_us": rows[1]["start_us"] if len(rows) > 1 else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="qwen3", choices=sorted(PRESETS))
    parser.add_argument("--impl", default="triton")
    parser.add_argument("--load", default="uniform", choices=["uniform", "skewed"])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--out")
    parser.add_argument("--no-trace", action="store_true")
    args = parser.parse_args()
    shape = PRESETS[args.shape]
    splits = split_sizes(shape, args.load)
    module = build(shape, args.impl)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(shape.rows, shape.hidden, generator=g, device="cuda").bfloat16()
    x.requires_grad_()
    dy = torch.randn(shape.rows, shape.hidden, generator=g, device="cuda").bfloat16()
    times = [timed_step(module, x, splits, dy) for _ in range(args.steps)]
    report = {"shape": args.shape, "impl": args.impl, "load": args.load,
              "step_ms": statistics.median(times[2:] or times), "times_ms": times}  # fmt: skip
    if not args.no_trace:
        report |= kernel_timeline(module, x, splits, dy)
        for k in report["kernels"]:
            print(f"{k['start_us']:10.1f} {k['us']:9.1f}  {k['name']}")
        print(
            f"step {report['step_ms']:.3f} ms (events); profiled: kernels {report['busy_us']:.0f}"
            f" us busy over {report['span_us']:.0f} us, idle {report['idle_us']:.0f} us, "
            f"first kernel {report['host_latency_us']:.0f} us after the marker"
        )
    else:
        print(f"step {report['step_ms']:.3f} ms (events)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
