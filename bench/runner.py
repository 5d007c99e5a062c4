"""The benchmark loop: for each shape and load, the baseline, then each backend's phases.

A backend that cannot be built here is recorded as "unavailable" (with the reason) for
the rest of that workload; an exception while timing is recorded as "error"; neither stops the
run. Everything a phase allocated is released before the next one starts (its module, inputs
and main_grad buffers go out of scope, then gc and ``torch.cuda.empty_cache()``), so only one
module's weights and fp32 main_grad are ever resident: 67.5 GB for the DeepSeek-like shape.
"""

from __future__ import annotations

import functools
import gc
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import timed_backends
from .phases import (
    BASELINE_BACKEND,
    BASELINE_PHASE,
    MODULE_PHASES,
    Workload,
    run_baseline,
    run_module_phase,
)
from .timing import Clock, RepeatPolicy, Samples


@dataclass
class Result:
    shape: str
    load: str
    backend: str
    phase: str
    status: str  # "ok", "unavailable" or "error"
    samples: Samples | None = None
    reason: str | None = None
    peak_memory_bytes: int | None = None
    wall_s: float = 0.0
    weights: str = "single"  # the weight layout: "single" grouped weight or "discrete"


def planned_steps(workloads: list[Workload], backend_names: list[str], phases: list[str]) -> int:
    module_phases = [p for p in phases if p in MODULE_PHASES]
    per_workload = len(backend_names) * len(module_phases) + (BASELINE_PHASE in phases)
    return len(workloads) * per_workload


def run(
    workloads: list[Workload],
    backend_names: list[str],
    phases: list[str],
    clock: Clock,
    policy: RepeatPolicy,
    on_step: Callable[[str], None] = lambda description: None,
    on_workload_done: Callable[[list[Result]], None] = lambda results: None,
) -> list[Result]:
    """Every result, in order; ``on_workload_done`` sees the results so far after each workload."""
    results: list[Result] = []
    module_phases = [p for p in phases if p in MODULE_PHASES]
    for workload in workloads:
        label = f"{workload.shape.name}/{workload.load}/{workload.weights}"
        if BASELINE_PHASE in phases:
            on_step(f"{label} {BASELINE_BACKEND} {BASELINE_PHASE}")
            results.append(
                _timed(
                    workload,
                    BASELINE_BACKEND,
                    BASELINE_PHASE,
                    lambda w=workload: run_baseline(w, clock, policy),
                )
            )
        for name in backend_names:
            unavailable: str | None = None
            for phase in module_phases:
                on_step(f"{label} {name} {phase}")
                if unavailable is not None:
                    results.append(
                        Result(
                            workload.shape.name,
                            workload.load,
                            name,
                            phase,
                            "unavailable",
                            reason=unavailable,
                            weights=workload.weights,
                        )
                    )
                    continue
                job = functools.partial(
                    run_module_phase,
                    phase,
                    functools.partial(timed_backends.build, name),
                    workload,
                    clock,
                    policy,
                )
                result = _timed(workload, name, phase, job)
                if result.status == "unavailable":
                    unavailable = result.reason
                results.append(result)
        on_workload_done(results)
    return results


def _timed(workload: Workload, backend: str, phase: str, job: Callable[[], Samples]) -> Result:
    result = Result(
        workload.shape.name, workload.load, backend, phase, "ok", weights=workload.weights
    )
    on_cuda = workload.device.type == "cuda"
    if on_cuda:
        torch.cuda.reset_peak_memory_stats(workload.device)
    started = time.perf_counter()
    try:
        result.samples = job()
    except timed_backends.Unavailable as error:
        result.status, result.reason = "unavailable", str(error)
    except torch.cuda.OutOfMemoryError as error:
        result.status = "error"
        result.reason = f"out of memory: {str(error).splitlines()[0]}"
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the run stops (bench/cli.py)
        raise
    # Any other failure of the implementation, sys.exit or another BaseException of its own
    # included, is its error, and the run goes on.
    except BaseException as error:
        result.status, result.reason = "error", _describe(error)
    result.wall_s = time.perf_counter() - started
    if on_cuda:
        result.peak_memory_bytes = torch.cuda.max_memory_allocated(workload.device)
    # The failed frame (module, activations) must not outlive this call.
    gc.collect()
    if on_cuda:
        torch.cuda.empty_cache()
    return result


def _describe(error: BaseException) -> str:
    """The exception and the innermost frame it came from, for the report."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0] if message else ''}{where}"
