"""Timing one phase: warm-up, then repeats of an untimed setup and a timed region; the median.

On CUDA the timed region is bracketed by CUDA events. Before each repeat the L2 cache is
flushed (a 256 MiB buffer is zeroed, five times the H200's 50 MB of L2) and the device is
synchronised, so every repeat starts from a cold cache and an idle GPU: the measured time then
includes any CPU launch overhead the backend cannot hide behind GPU work (a per-expert
Python loop over 128 or 256 experts is launch-bound), as it would in a training step.
On CPU the timed region is measured with the wall clock; those figures are not comparable
with GPU figures or across machines, and every report says so.

Warm-up runs the whole repeat (setup and timed region) ``warmup`` times untimed: the first one
compiles and autotunes Triton kernels and warms cuBLAS. The number of timed repeats is either
fixed, or chosen from the last warm-up's wall-clock duration so that the repeats of one phase
take about ``target_s`` seconds, within [min_repeats, max_repeats]; a slow backend
(refimpl on the big shapes) thus gets fewer repeats, and the report records how many it got.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class RepeatPolicy:
    warmup: int
    repeats: int | None = None  # fixed count; None: chosen from the warm-up's duration
    min_repeats: int = 3
    max_repeats: int = 20
    target_s: float = 0.5

    def count(self, iteration_s: float) -> int:
        if self.repeats is not None:
            return self.repeats
        wanted = int(self.target_s / max(iteration_s, 1e-9))
        return max(self.min_repeats, min(self.max_repeats, wanted))

    def describe(self) -> str:
        warmup = f"{self.warmup} warm-up run{'s' if self.warmup > 1 else ''}"
        if self.repeats is not None:
            return f"{warmup}, then {self.repeats} timed repeat{'s' if self.repeats > 1 else ''}"
        return (
            f"{warmup}, then {self.min_repeats} to {self.max_repeats} timed repeats, as many "
            f"as fit in about {self.target_s:g} s at the last warm-up's pace"
        )


@dataclass(frozen=True)
class Samples:
    times_ms: list[float]
    warmup: int
    warmup_s: float  # wall clock of the whole warm-up, autotuning included

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)


class CudaEventClock:
    name = "cuda-events"
    comparable = True

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)

    def prepare(self) -> None:
        self._flush.zero_()
        torch.cuda.synchronize(self.device)

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def time_ms(self, region: Callable[[], object]) -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        region()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


class WallClock:
    name = "wall-clock"
    comparable = False

    def prepare(self) -> None:
        pass

    def sync(self) -> None:
        pass

    def time_ms(self, region: Callable[[], object]) -> float:
        start = time.perf_counter()
        region()
        return (time.perf_counter() - start) * 1e3


Clock = CudaEventClock | WallClock


def clock_for(device: torch.device) -> Clock:
    return CudaEventClock(device) if device.type == "cuda" else WallClock()


def measure(
    clock: Clock,
    region: Callable[[], object],
    *,
    policy: RepeatPolicy,
    before: Callable[[], object] | None = None,
    after: Callable[[], object] | None = None,
) -> Samples:
    """Time ``region``; ``before`` and ``after`` run untimed around every repeat."""

    def repeat() -> float:
        if before is not None:
            before()
        clock.prepare()
        elapsed = clock.time_ms(region)
        if after is not None:
            after()
        return elapsed

    warmup_start = time.perf_counter()
    iteration_s = 0.0
    for _ in range(policy.warmup):
        started = time.perf_counter()
        repeat()
        clock.sync()
        iteration_s = time.perf_counter() - started
    warmup_s = time.perf_counter() - warmup_start
    times = [repeat() for _ in range(policy.count(iteration_s))]
    clock.sync()
    return Samples(times_ms=times, warmup=policy.warmup, warmup_s=warmup_s)
