"""Where the weight-gradient phases lose time beyond their kernels (H200, issue #21).

DeepSeek-V3's wgrad-overwrite phase took 18.1 ms in the recorded bench while its two kernels
take about 16 ms under do_bench (scripts/gpu/wgrad_tma_dest_ab.py) and te-ops' phase 15.1 ms.
This probe runs the bench's own phase (bench.phases.run_module_phase, CUDA events, L2 flushed)
for the triton backend with discrete weights, uniform load, two ways:

* production: the module as it is (one dummy per weight, slices of one block per shape);
* shared-dummy: a policy handing every weight of a shape the same dummy tensor, as
  Transformer Engine's cached get_dummy_wgrad does (the contract allows it: a dummy must
  exist, not alias main_grad and be zero under zero_out_wgrad);

and reports the phase medians, backward_dw's host time (wall clock to return, unsynced), and
the allocator's retries and cudaMalloc count during the timed repeats. One JSON object on stdout.

    python scripts/gpu/wgrad_phase_overhead.py [--shapes deepseek,qwen3]
"""

from __future__ import annotations

import time

import probe_shapes  # beside this file
import torch

from gmlp_check.bench.phases import Workload, _attach_main_grads, run_module_phase
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.bench.timing import RepeatPolicy, clock_for
from gmlp_check.fused.main_grad import MainGradPolicy
from gmlp_check.fused.mlp import TritonGroupedMLP
from gmlp_check.refimpl.megatron import reset_for_step


class SharedDummyPolicy(MainGradPolicy):
    """One dummy tensor per (shape, dtype, device, zero_out_wgrad), shared by those weights."""

    def dummies(self, params):
        from gmlp_check.refimpl.main_grad import dummy_is_zeroed

        made: dict[tuple, torch.Tensor] = {}
        out = []
        for p in params:
            key = (p.shape, p.dtype, p.device, dummy_is_zeroed(p))
            if key not in made:
                allocate = torch.zeros if key[3] else torch.empty
                made[key] = allocate(p.shape, dtype=p.dtype, device=p.device)
            out.append(made[key])
        return out


def builder(policy_class):
    def build(config):
        module = TritonGroupedMLP(config)
        module.main_grad_policy = policy_class()
        return module

    return build


def host_ms(work: Workload, overwrite: bool) -> list[float]:
    """backward_dw's wall clock to return (nothing synced inside), the last six of eight."""
    module = TritonGroupedMLP(work.mlp_config(delay_wgrad_compute=True))
    params = _attach_main_grads(module, overwrite=overwrite)
    gen = torch.Generator(device=work.device).manual_seed(0)
    x = work.randn(work.shape.rows, work.shape.hidden, gen).requires_grad_()
    dy = work.randn(work.shape.rows, work.shape.hidden, gen)
    out = []
    for _ in range(8):
        reset_for_step(params)
        module(x, work.splits).backward(dy)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        module.backward_dw()
        out.append(round((time.perf_counter() - t0) * 1e3, 3))
        torch.cuda.synchronize()
    return out[2:]


def measure(name: str) -> dict:
    shape = PRESETS[name]
    device = torch.device("cuda")
    work = Workload(shape, "uniform", split_sizes(shape, "uniform"), torch.bfloat16, device, False)
    clock = clock_for(device)
    policy = RepeatPolicy(warmup=2, repeats=10)
    doc: dict = {"shape": name}
    for phase in ("wgrad-overwrite", "wgrad-accumulate"):
        for label, policy_class in (
            ("production", MainGradPolicy),
            ("shared-dummy", SharedDummyPolicy),
        ):
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_stats()
            samples = run_module_phase(phase, builder(policy_class), work, clock, policy)
            after = torch.cuda.memory_stats()
            doc[f"{phase}/{label}"] = {
                "median_ms": round(samples.median_ms, 3),
                "times_ms": [round(t, 3) for t in samples.times_ms],
                "alloc_retries": after["num_alloc_retries"] - before["num_alloc_retries"],
                "cuda_mallocs": after.get("num_device_alloc", 0)
                - before.get("num_device_alloc", 0),
                "peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 1),
            }
            torch.cuda.empty_cache()
        doc[f"{phase}/backward_dw_host_ms"] = host_ms(work, phase == "wgrad-overwrite")
        torch.cuda.empty_cache()
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure, default="deepseek,qwen3")
