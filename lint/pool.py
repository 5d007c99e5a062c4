"""The worker processes ``engine`` hands files to: started, given chunks of files, and ended
(also on Ctrl-C, without waiting for their chunks).

Workers may be started before the run knows everything its jobs need (``engine.run`` starts
them before the project facts when the pool is sure to be used): each loads the parser and
the rules as it starts, on a core the parent leaves idle while it works out the facts,
instead of when its first chunk arrives.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool


def available_cpus() -> int:
    """CPUs this process may run on (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def chunks_by_work(work: Sequence[int], count: int) -> list[list[int]]:
    """Job indices in about ``count`` chunks of similar work, the heaviest chunks first (so
    that a big file does not start last)."""
    target = max(1, sum(work) // count)
    chunks: list[list[int]] = []
    current: list[int] = []
    load = 0
    for i, cost in enumerate(work):
        current.append(i)
        load += cost
        if load >= target:
            chunks.append(current)
            current, load = [], 0
    if current:
        chunks.append(current)
    return sorted(chunks, key=lambda chunk: -sum(work[i] for i in chunk))


class Workers:
    """``count`` worker processes, started now. With ``codes``, each loads libcst, the
    analysis and those rules' modules as it starts (what its first analysed file would
    load)."""

    def __init__(self, count: int, codes: frozenset[str] = frozenset()) -> None:
        self.count = count
        self._others = set(multiprocessing.active_children())  # a caller's children: not ours
        self._executor = ProcessPoolExecutor(
            max_workers=count, initializer=_prepare, initargs=(codes, _forking_parent())
        )
        # Processes start with the first task (all of them with ``fork``, one a task with
        # the other start methods): one task each that does nothing starts them all now.
        for _ in range(count):
            self._executor.submit(int)

    def submit(self, function: Callable, *args) -> Future:
        return self._executor.submit(function, *args)

    def close(self) -> None:
        """Wait for the workers to finish their tasks and end."""
        self._executor.shutdown()

    def stop(self) -> None:
        """End the workers now, dropping what they have not done. Waiting for them to
        finish their chunks took up to a minute after a Ctrl-C; they are ours, and nothing
        of theirs is written."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        children = set(multiprocessing.active_children()) - self._others  # the pool's
        for child in children:
            child.terminate()
        for child in children:
            child.join(timeout=1)  # reaped here: no zombie is left to an init that may not


def gather(pool: Workers, futures: dict[Future, list[int]], results: list, on_result, redo) -> None:
    """Each chunk's results into ``results``, at the indices ``futures`` gives for it, as the
    chunk is done (each handed to ``on_result`` too, when given); after a worker died, each
    index still without a result gets ``redo``'s. Then ``pool`` ends: at once on a failure
    or Ctrl-C, else once its tasks are done."""
    try:
        for future in as_completed(futures):
            try:
                chunk_results = future.result()
            except BrokenProcessPool:
                continue  # a worker died: its files, and all not yet done, are redone below
            for i, result in zip(futures[future], chunk_results):
                results[i] = result
                if on_result is not None:
                    on_result(result)
        for i in [i for i, result in enumerate(results) if result is None]:
            results[i] = redo(i)
            if on_result is not None:
                on_result(results[i])
    except BaseException:
        pool.stop()
        raise
    pool.close()


def run_alone(function: Callable, *args):
    """``function(*args)`` in a worker process of its own (BrokenProcessPool when it dies)."""
    pool = Workers(1)
    try:
        return pool.submit(function, *args).result()
    finally:
        pool.close()


def _prepare(codes: frozenset[str], parent: int | None) -> None:
    """A worker's start: Ctrl-C left to the parent, ended with the parent; with ``codes``,
    the analysis loaded."""
    _ignore_sigint()
    _end_with(parent)
    if codes:
        import libcst  # noqa: F401

        from .analysis import collector, module, patterns  # noqa: F401
        from .registry import module_checks

        module_checks(codes)


def _forking_parent() -> int | None:
    """This process's id when the pool's workers are its own children (the ``fork`` start
    method; under ``forkserver`` and ``spawn`` a server process is their parent)."""
    fork = multiprocessing.get_start_method(allow_none=False) == "fork"
    return os.getpid() if fork else None


def _end_with(parent: int | None) -> None:
    """On Linux, the kernel ends the worker when the parent process dies. A parent killed
    by SIGTERM (``timeout``, a CI job's limit, ``kill``) or SIGKILL cleans nothing up: its
    workers, waiting for chunks on a queue no one writes to, ran on for ever and held the
    run's stdout and stderr open, so whatever read them (``$(gmlp-lint ...)``, a CI step)
    hung. A worker writes no file (the parent writes the fixes), so ending it is safe."""
    if parent is None or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _ignore_sigint() -> None:
    """In a worker: a terminal's Ctrl-C goes to the whole process group; the parent alone
    handles it (and ends the workers), so they print no traceback of their own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
