"""Is our weight-gradient phase behind te-ops', or is the gap run-to-run spread? (issue #21)

Mixtral's weight-gradient phases trailed te-ops by 1-6 % in two H200 runs, while the per-expert
GEMM both run is the same cuBLAS kernel (scripts/gpu/wgrad_blas_backend_probe.py) and two
passes of one way on an H100 differed by up to 15 %. One bench run times each backend once, at
a different moment. This probe keeps both backends built on one device, with the same weights
and operands, and times ``backward_dw`` in alternating rounds (triton first in even rounds,
te-ops first in odd ones), each round a median of seven, so that a drift of the device's
clocks or memory falls on both. Per round it reports both times and their ratio; overall the
median ratio and its range. It also profiles one ``backward_dw`` per backend to report when
its first device kernel starts after the call (the "lead": host work before the first GEMM)
and when its last kernel ends, and checks both leave the same main_grads (relative error).

One JSON object on stdout.

    python scripts/gpu/wgrad_alternated_vs_te.py [--shapes mixtral] [--rounds 6]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
from pathlib import Path

import probe_shapes  # beside this file
import torch
import triton
from torch.profiler import ProfilerActivity, profile, record_function
from wgrad_kernels_vs_te import _phase_ms, _same_weights  # beside this file

from gmlp_check.bench.phases import Workload, _attach_main_grads
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.bench.timed_backends import build
from gmlp_check.refimpl.megatron import reset_for_step

BACKENDS = ("triton", "te-ops")
MARK = "gmlp.backward_dw"
SPIN_CYCLES = 40_000_000  # about 20 ms at Hopper's clocks: longer than any backward_dw's host work


class _Built:
    """One backend's module, its main_grad-carrying weights, and one step's operands."""

    def __init__(self, name: str, work: Workload, overwrite: bool) -> None:
        self.module = build(name, work.mlp_config(delay_wgrad_compute=True))
        self.params = _attach_main_grads(self.module, overwrite=overwrite)
        _same_weights(self.params, work.device)
        gen = torch.Generator(device=work.device).manual_seed(0)
        self.x = work.randn(work.shape.rows, work.shape.hidden, gen).requires_grad_()
        self.dy = work.randn(work.shape.rows, work.shape.hidden, gen)
        self.splits = work.splits

    def step_to_backward_dw(self) -> None:
        reset_for_step(self.params)
        self.module(self.x, self.splits).backward(self.dy)
        torch.cuda.synchronize()

    def timed(self) -> dict:
        return {**_phase_ms(self.module, self.params, self.x, self.dy, self.splits),
                "device_only_ms": self.device_only_ms()}  # fmt: skip

    def device_only_ms(self) -> float:
        """``backward_dw``'s events with its host work hidden: a spin kernel keeps the stream
        busy past the host's return, so the start event stands right before the first of
        the phase's kernels (in training the stream is busy when backward_dw is called)."""
        flush = torch.empty(256 * 2**20, dtype=torch.uint8, device=self.x.device)
        times = []
        for _ in range(7):
            self.step_to_backward_dw()
            flush.zero_()  # as _phase_ms does: the phase starts with a cold L2
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SPIN_CYCLES)
            start.record()
            self.module.backward_dw()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return round(_median(times), 3)

    def host_profile(self) -> list[dict]:
        """The host functions of one ``backward_dw`` by own time (cProfile), the first 15."""
        self.step_to_backward_dw()
        profiler = cProfile.Profile()
        profiler.runcall(self.module.backward_dw)
        torch.cuda.synchronize()
        stats = pstats.Stats(profiler).stats  # (file, line, name) -> (cc, calls, own, cum, _)
        ranked = sorted(stats.items(), key=lambda kv: -kv[1][2])[:15]
        return [
            {"function": f"{Path(file).name}:{line}:{name}", "calls": calls,
             "own_us": round(own * 1e6, 1), "cumulative_us": round(cum * 1e6, 1)}
            for (file, line, name), (_, calls, own, cum, _) in ranked
        ]  # fmt: skip

    def lead(self) -> dict:
        """µs from the call to the first device kernel, and to the last kernel's end."""
        self.step_to_backward_dw()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            with record_function(MARK):
                self.module.backward_dw()
            torch.cuda.synchronize()
        events = prof.events()
        called = min(e.time_range.start for e in events if e.name == MARK)
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        if not kernels:
            return {"kernels": 0}
        return {
            "kernels": len(kernels),
            "first_kernel_us": round(min(e.time_range.start for e in kernels) - called, 1),
            "last_kernel_end_us": round(max(e.time_range.end for e in kernels) - called, 1),
        }

    def sample(self) -> torch.Tensor:
        """One more step's main_grads, strided, in the order _same_weights draws them."""
        self.step_to_backward_dw()
        self.module.backward_dw()
        torch.cuda.synchronize()
        keyed: dict[tuple, list[torch.Tensor]] = {}
        for p in self.params:
            keyed.setdefault(tuple(p.shape), []).append(p.main_grad.detach().view(-1)[::997])
        return torch.cat([t.double().cpu() for k in sorted(keyed) for t in keyed[k]])


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure_mode(work: Workload, overwrite: bool, rounds: int) -> dict:
    built = {name: _Built(name, work, overwrite) for name in BACKENDS}
    for b in built.values():  # compile, autotune, warm the allocator
        for _ in range(2):
            b.step_to_backward_dw()
            b.module.backward_dw()
            torch.cuda.synchronize()
    per_round = []
    for r in range(rounds):
        order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
        times = {name: built[name].timed() for name in order}
        ratio = times["te-ops"]["events_ms"] / times["triton"]["events_ms"]
        per_round.append({"first": order[0], **times, "te_over_triton": round(ratio, 4)})
    ratios = [r["te_over_triton"] for r in per_round]
    ours, theirs = built["triton"].sample(), built["te-ops"].sample()
    return {
        "rounds": per_round,
        "median_te_over_triton": _median(ratios),
        "min_te_over_triton": min(ratios),
        "max_te_over_triton": max(ratios),
        "median_events_ms": {n: _median([r[n]["events_ms"] for r in per_round]) for n in BACKENDS},
        "median_device_only_ms": {
            n: _median([r[n]["device_only_ms"] for r in per_round]) for n in BACKENDS
        },
        "host_profile": {name: b.host_profile() for name, b in built.items()},
        "lead": {name: b.lead() for name, b in built.items()},
        "te_vs_triton_rel_error": float((ours - theirs).norm() / ours.norm()),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=probe_shapes.shape_names, default="mixtral")
    parser.add_argument("--rounds", type=int, choices=range(2, 41), default=6, metavar="2..40")
    args = parser.parse_args()
    results = []
    for name in args.shapes:
        shape = PRESETS[name]
        sizes = split_sizes(shape, "uniform")
        work = Workload(shape, "uniform", sizes, torch.bfloat16, torch.device("cuda"), False)
        doc: dict = {"shape": name}
        for mode, overwrite in (("accumulate", False), ("overwrite", True)):
            doc[mode] = measure_mode(work, overwrite, args.rounds)
            torch.cuda.empty_cache()
        results.append(doc)
    versions = {"torch": torch.__version__, "triton": triton.__version__}
    print(json.dumps({**versions, "device": torch.cuda.get_device_name(), "results": results}))


if __name__ == "__main__":
    main()
