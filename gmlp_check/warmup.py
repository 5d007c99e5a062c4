"""Compile the fused side's kernels for the selected cases in parallel, before the run.

A backend that compiles its kernels on first use (Triton JIT) spends most of a cold run in
the compiler, one kernel specialization after another, on one core: every activation, dtype,
bias and mode of the matrix is its own set of kernels. Triton keeps what it compiled on disk
(its cache directory), so compiling is needed once per machine and source version; what a
cold run lacks is parallelism, and at the level of kernels, not cases: one case launches ten
or so kernels in sequence, so handing whole cases to workers leaves each worker compiling
them one after another.

So the warm-up first finds the kernels: it runs one case per set of kernels (``compile_key``)
in this process with Triton's ``jit_cache_hook`` answering "skip" for every launch, which
records the launch's exact specialization (Triton's own serialized form) and neither compiles
nor runs it. Only the fused side runs (gmlp_check.pair.run_fused_side, on the data the run
gives it), and its results, garbage then, are discarded: the reference and the comparison
launch no Triton kernel. Then worker processes compile the distinct specializations,
one per job, with ``JITFunction.preload`` (Triton's way of compiling a recorded
specialization ahead of its launch), into the disk cache the run then loads from. The workers
are started before the finding (``workers``): the fork server's imports and each worker's CUDA
context take seconds, which then pass while this process finds the kernels. Kernels are
found by their module and name, so any Triton kernel defined at module level is warmed,
anyone's factory included; others are left to the run.

Each worker also makes the kernel's launcher, as a first launch would: Triton before 3.7
compiles one in C per signature (a second or so each, cached on disk), which a cold run would
otherwise pay in its cases, one after another.

Each worker first computes the kernels' cache keys in the order the run first launches them
(the order they were found in). A kernel's key includes the constant globals of the helpers it
calls, and Triton (3.6 at least) takes a helper's into it only when that helper's own key was
computed before: so fc2's dgrad kernel, hashed after fc1's forward (which shares the activation
helpers), gets another key than when hashed first. A worker that compiled fc2's kernel first
filled the cache under a key the run never asked for (about a quarter of the activation
kernels, measured on the H200).

When a warm-up of the same cases, sizes, backend sources and library versions has finished
before, a marker file in Triton's cache directory says so and nothing is started: a warm run
pays nothing. Failures while finding or compiling are ignored: the run itself meets the same
failure and reports it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .inputs import Sizes
from .matrix import Case

if TYPE_CHECKING:
    from .backends import Backend

# Compiling is one core's work per job; past this, CUDA contexts and memory cost more than
# the parallelism gains.
MAX_WORKERS = 16


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
    return max(0, min((cpus or 1) - 1, MAX_WORKERS))


@dataclass(frozen=True)
class Plan:
    device: torch.device
    sizes: Sizes
    workers: int  # at most; no more than there are kernels to compile
    cases: tuple[Case, ...]  # one per compile key: run to find the kernels
    marker: Path | None  # written when every kernel was compiled


@dataclass(frozen=True)
class KernelJob:
    """One kernel specialization to compile: the kernel by module and name, the device, and
    Triton's serialized specialization of the launch (JSON)."""

    module: str
    name: str
    device: int
    specialization: str


def plan(
    spec: str,
    source: Path | None,
    device: torch.device,
    sizes: Sizes,
    cases: Sequence[Case],
    workers: int,
) -> Plan | None:
    """The warm-up of ``cases`` on ``workers`` processes; None when there is nothing to do
    (no workers, not CUDA, or this warm-up already ran on this machine)."""
    chosen = representatives(cases)
    if workers < 1 or device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    marker = warm_marker(spec, source, name, sizes, chosen)
    if marker is not None and marker.exists():
        return None
    return Plan(device, sizes, workers, tuple(chosen), marker)


def find_kernels(plan: Plan, backend: Backend, on_case: Callable[[int], None]) -> list[KernelJob]:
    """Run the plan's cases with every Triton launch skipped, and return the distinct
    kernel specializations they launched; ``on_case(1)`` after each case."""
    from .pair import run_fused_side

    jobs: dict[tuple[str, str, str], KernelJob] = {}

    def record(*, key: Any, fn: Any, compile: dict, **_: Any) -> bool:
        module = getattr(fn.module, "__name__", fn.module)
        job = KernelJob(module, fn.name, compile["device"], compile["specialization_data"])
        jobs.setdefault((module, fn.name, str(key)), job)
        return True  # Triton then neither compiles nor launches

    with _jit_cache_hook(record):
        for case in plan.cases:
            # The fused side computes nothing now: whatever it fails on is discarded, an exit
            # (sys.exit, any BaseException) too; the run meets it again and reports it.
            with _passed_over():
                run_fused_side(case, plan.sizes, plan.device, backend)
            on_case(1)
    return list(jobs.values())


@contextlib.contextmanager
def workers(plan: Plan) -> Iterator[Future]:
    """The plan's worker pool, starting in the background from now on and stopped on leaving:
    a Future of it. Starting a pool blocks until the fork server has imported torch and the
    kernels and forked every worker, and each worker makes its CUDA context as it starts:
    seconds that pass while this process finds the kernels. A KeyboardInterrupt (or SIGTERM
    turned into one) inside stops them and passes through."""
    index = plan.device.index if plan.device.index is not None else 0
    starter = ThreadPoolExecutor(1, thread_name_prefix="gmlp-check-warm-up")
    pool = starter.submit(
        _context().Pool, plan.workers, initializer=_start_worker, initargs=(index,)
    )
    starter.shutdown(wait=False)
    try:
        yield pool
    finally:
        with contextlib.suppress(Exception):
            pool.result().terminate()
            pool.result().join()


def compile_kernels(
    plan: Plan,
    jobs: Sequence[KernelJob],
    on_done: Callable[[int], None],
    pool: Future | None = None,
) -> None:
    """Compile ``jobs`` into Triton's disk cache on ``pool`` (from ``workers``; started here
    when not given); ``on_done(1)`` after each, then the marker."""
    if jobs and pool is None:
        with workers(plan) as started:
            compile_kernels(plan, jobs, on_done, started)
        return
    if jobs:
        # The kernels in the order the run first launches them (see the module's docstring).
        order = tuple(dict.fromkeys((job.module, job.name) for job in jobs))
        for _ in pool.result().imap_unordered(_compile, [(order, job) for job in jobs]):
            on_done(1)
    if plan.marker is not None:
        try:
            plan.marker.parent.mkdir(parents=True, exist_ok=True)
            plan.marker.touch()
        except OSError:
            pass  # an unwritable cache only costs the next run another warm-up


@contextlib.contextmanager
def _jit_cache_hook(hook: Callable[..., bool]) -> Iterator[None]:
    import triton

    runtime = triton.knobs.runtime
    before = runtime.jit_cache_hook
    runtime.jit_cache_hook = hook
    try:
        yield
    finally:
        runtime.jit_cache_hook = before


# Imported once by the fork server, so that each worker starts without importing torch, Triton
# and the fused kernels again (seconds each, times the workers, on a cold run's critical path).
_PRELOAD = ["torch", "triton", "gmlp_check.fused.mlp"]


def _context():
    """A fork server (Linux) holding the heavy imports, without CUDA: each worker is forked
    from it and initializes its own CUDA. Elsewhere fresh interpreters (spawn)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _start_worker(device: int) -> None:
    """Each worker writes nothing where the report goes, dies quietly on Ctrl-C, and makes its
    CUDA context now rather than at its first job (a failure is met again there)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    with contextlib.suppress(Exception):
        torch.cuda.set_device(device)
        torch.cuda.init()


_hashed_in_order = False  # per worker: the kernels' cache keys computed in the run's order


def _compile(work: tuple[tuple[tuple[str, str], ...], KernelJob]) -> None:
    global _hashed_in_order
    order, job = work
    # A failure here is met again by the run itself, which reports it. A BaseException of the
    # kernels' module (imported again here) would end this worker and leave its job
    # unanswered, so that the pool waited for ever: it is passed over too.
    with _passed_over():
        if not _hashed_in_order:
            _hashed_in_order = True
            for module, name in order:
                kernel = jit_function(module, name)
                if kernel is not None:
                    kernel.cache_key  # noqa: B018 (computed and kept by Triton)
        kernel = jit_function(job.module, job.name)
        if kernel is not None:
            with torch.cuda.device(job.device):
                compiled = kernel.preload(job.specialization)
                # What the run's first launch does next: load the binary and make the
                # launcher. Triton before 3.7 compiles each signature's launcher in C, with
                # the host compiler, into the same disk cache: a second or so per kernel that
                # a cold run would otherwise pay one after another in its cases.
                load = getattr(compiled, "_init_handles", None)
                if load is not None:
                    load()


@contextlib.contextmanager
def _passed_over() -> Iterator[None]:
    """Whatever user code raises inside (sys.exit and other BaseExceptions included) ends the
    block quietly, except Ctrl-C or SIGTERM (a KeyboardInterrupt): those stop the run."""
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException:
        pass


def jit_function(module: str, name: str) -> Any:
    """The JITFunction named ``name`` in ``module``, through the wrappers that hold one
    (our DualKernel's ``compiled``, an autotuner's ``fn``); None when there is none."""
    from triton.runtime.jit import JITFunction

    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    for _ in range(4):
        if found is None or isinstance(found, JITFunction):
            return found
        found = getattr(found, "compiled", None) or getattr(found, "fn", None)
    return None


def warm_marker(
    spec: str, source: Path | None, device_name: str, sizes: Sizes, cases: Sequence[Case]
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

    facts = [spec, triton.__version__, torch.__version__, device_name, sys.version, repr(sizes)]
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
