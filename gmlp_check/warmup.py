"""Compile the fused side's kernels for the selected cases in parallel, before the run.

A backend that compiles its kernels on first use (Triton JIT) spends most of a cold run in
the compiler, one kernel specialization after another, on one core: every activation, dtype,
bias and mode of the matrix is its own set of kernels. Triton keeps what it compiled on disk
(its cache directory), so compiling is needed once per machine and source version; what a
cold run lacks is parallelism. Here worker processes each run a share of the selected cases'
pairs (the same code paths and shapes as the run itself, so exactly the specializations the
run will ask for) and discard the results; the run then loads every kernel from the disk
cache.

One case per set of kernels (``compile_key``) runs; a first stage compiles the kernels that
many sets share (``shared_key``), so that the second stage's workers do not all compile them
at once. When a warm-up of the same cases, sizes, backend
sources and library versions has finished before, a marker file in Triton's cache directory
says so and nothing is started: a warm run pays nothing. Workers' output goes nowhere and
their failures are ignored: the run itself meets the same failure and reports it.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .inputs import Sizes
from .matrix import Case

# More workers than this gain little: each one pays a CUDA context and torch's import.
MAX_WORKERS = 8


def compile_key(case: Case) -> tuple[object, ...]:
    """What decides the kernels a case compiles: not the microbatch count, the delay or
    zero_out, which change the Python around the same launches."""
    return (
        case.dtype,
        case.activation,
        case.bias,
        case.single,
        case.mode,
        case.splits,
        case.fp8,
        case.fp8_weights,
    )


def representatives(cases: Sequence[Case]) -> list[Case]:
    """One case per compile key, in the cases' order."""
    chosen: dict[tuple[object, ...], Case] = {}
    for case in cases:
        chosen.setdefault(compile_key(case), case)
    return list(chosen.values())


def default_workers(compiles_on_first_use: bool, device: torch.device, groups: int) -> int:
    """Workers when --compile-workers is not given: none for a backend that does not compile
    on first use, on the CPU (the interpreter compiles nothing) or for a single group."""
    if not compiles_on_first_use or device.type != "cuda" or groups < 2:
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(0, min(groups, (cpus or 1) - 1, MAX_WORKERS))


@dataclass(frozen=True)
class Plan:
    spec: str
    device: str
    sizes: Sizes
    workers: int
    # Cases run one after another stage; within a stage, by whichever worker is free.
    stages: tuple[tuple[Case, ...], ...]
    marker: Path | None  # written when every stage finished

    @property
    def cases(self) -> int:
        return sum(len(s) for s in self.stages)


def shared_key(case: Case) -> tuple[object, ...]:
    """What decides the kernels without an activation (the row GEMMs, the bias gradient): the
    first stage compiles those once per key, so that the second stage's workers, one case
    per activation, do not all compile them at the same time."""
    return (case.dtype, case.single, case.bias)


def plan(
    spec: str,
    source: Path | None,
    device: torch.device,
    sizes: Sizes,
    cases: Sequence[Case],
    workers: int,
) -> Plan | None:
    """The warm-up of ``cases`` on ``workers`` processes; None when there is nothing to do
    (no workers, or this warm-up already ran on this machine)."""
    chosen = representatives(cases)
    workers = min(workers, len(chosen))
    if workers < 1:
        return None
    marker = _marker(spec, source, device, sizes, chosen)
    if marker is not None and marker.exists():
        return None
    first: dict[tuple[object, ...], Case] = {}
    for case in chosen:
        first.setdefault(shared_key(case), case)
    rest = tuple(c for c in chosen if c not in first.values())
    stages = tuple(s for s in (tuple(first.values()), rest) if s)
    return Plan(spec, str(device), sizes, workers, stages, marker)


def run(plan: Plan, on_done: Callable[[int], None]) -> None:
    """Run the plan's stages in worker processes; ``on_done(1)`` after each case.
    A KeyboardInterrupt (or SIGTERM turned into one) stops the workers and passes through."""
    pool = _context().Pool(plan.workers, initializer=_silence)
    try:
        for stage in plan.stages:
            jobs = [(plan.spec, plan.device, plan.sizes, case) for case in stage]
            for _ in pool.imap_unordered(_warm, jobs):
                on_done(1)
        pool.close()
    finally:
        pool.terminate()
        pool.join()
    if plan.marker is not None:
        try:
            plan.marker.parent.mkdir(parents=True, exist_ok=True)
            plan.marker.touch()
        except OSError:
            pass  # an unwritable cache only costs the next run another warm-up


# Imported once by the fork server, so that each worker starts without importing torch, Triton
# and the checker again (seconds each, times the workers, on a cold run's critical path).
_PRELOAD = ["torch", "gmlp_check.pair", "gmlp_check.backends", "gmlp_check.fused.mlp"]


def _context():
    """A fork server (Linux) holding the heavy imports, without CUDA: each worker is forked
    from it and initializes its own CUDA context. Elsewhere fresh interpreters (spawn)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _silence() -> None:
    """Workers write nothing where the report goes, and die quietly on Ctrl-C."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


def _warm(job: tuple[str, str, Sizes, Case]) -> None:
    from . import backends
    from .pair import run_pair

    spec, device, sizes, case = job
    # A failure here is met again by the run itself, which reports it.
    with contextlib.suppress(Exception):
        run_pair(case, sizes, torch.device(device), backends.load(spec))
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _marker(
    spec: str, source: Path | None, device: torch.device, sizes: Sizes, cases: Sequence[Case]
) -> Path | None:
    """The file that says this warm-up ran: keyed by the backend's sources, the library
    versions, the GPU, the sizes and the cases, in Triton's cache directory (cleared with it).
    None when the backend's sources are unknown."""
    cache = _triton_cache_dir()
    if source is None or cache is None:
        return None
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*.py")):
        digest.update(str(path.relative_to(source)).encode())
        digest.update(path.read_bytes())
    import triton

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    facts = [spec, triton.__version__, torch.__version__, name, sys.version, repr(sizes)]
    facts += [repr(compile_key(c)) for c in cases]
    digest.update("\n".join(facts).encode())
    return cache / "gmlp-check-warm" / digest.hexdigest()[:32]


def _triton_cache_dir() -> Path | None:
    try:
        import triton
    except ImportError:
        return None
    knobs = getattr(triton, "knobs", None)
    configured = getattr(getattr(knobs, "cache", None), "dir", None)
    if configured:
        return Path(configured)
    home = os.environ.get("TRITON_HOME", os.path.expanduser("~"))
    return Path(os.environ.get("TRITON_CACHE_DIR", os.path.join(home, ".triton", "cache")))
