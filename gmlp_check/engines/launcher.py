"""Our launcher for ``gmlp-check diff --nproc N`` outside torchrun: N worker processes, one per
GPU, each running the same command with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT a free port) plus NVLink multicast off
unless the user's environment sets those switches itself (theirs is kept, as in
process_groups.ensure).

Workers inherit stdout and stderr, so their output is forwarded as they write it (only rank 0
prints reports). The launch exits with the worst exit code of its workers when all of them end
normally (0 clean, 1 findings). A worker that ends otherwise (killed by a signal, an exit code
other than 0 or 1) would leave the others waiting in a collective: the launcher stops them and
exits 2 with one line; so does Ctrl-C. Workers run in their own process groups so that a
Ctrl-C reaches the launcher only, which then stops each worker's group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from .process_groups import COMMUNICATION_ENV, free_port

NORMAL_EXIT_CODES = (0, 1)
EXIT_ERROR = 2
POLL_S = 0.05
GRACE_S = 5.0


def worker_env(rank: int, nproc: int, port: int, base: Mapping[str, str]) -> dict[str, str]:
    """The environment of worker ``rank``: torchrun's variables on top of ``base``, and the
    communication defaults where ``base`` does not set them."""
    env = {**COMMUNICATION_ENV, **base}
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    return env


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def stop(procs: Sequence[subprocess.Popen], grace_s: float = GRACE_S) -> None:
    """SIGTERM each live worker's process group, SIGKILL what is left after ``grace_s``."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in live:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def launch(
    command: Sequence[str],
    nproc: int,
    *,
    env: Mapping[str, str] | None = None,
    grace_s: float = GRACE_S,
) -> int:
    """Run ``command`` as ``nproc`` workers; the exit code the launch ends with."""
    if nproc < 1:
        raise ValueError(f"--nproc: expected an int >= 1, got {nproc}")
    base = dict(os.environ if env is None else env)
    port = free_port()
    procs: list[subprocess.Popen] = []
    # A SIGTERM to the launcher stops the workers as Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for rank in range(nproc):
            procs.append(
                subprocess.Popen(
                    list(command),
                    env=worker_env(rank, nproc, port, base),
                    start_new_session=True,
                )
            )
        while True:
            codes = [p.poll() for p in procs]
            for rank, code in enumerate(codes):
                if code is not None and code not in NORMAL_EXIT_CODES:
                    stop(procs, grace_s)
                    print(
                        f"gmlp-check: worker rank {rank} of {nproc} {describe_exit(code)}; "
                        "stopped the other workers",
                        file=sys.stderr,
                        flush=True,
                    )
                    return EXIT_ERROR
            if all(code is not None for code in codes):
                return max(codes)
            time.sleep(POLL_S)
    except OSError as exc:  # the command could not be started
        stop(procs, grace_s)
        print(f"gmlp-check: cannot start a worker: {exc}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        stop(procs, grace_s)
        print(f"gmlp-check: interrupted; stopped {len(procs)} workers", file=sys.stderr, flush=True)
        return EXIT_ERROR
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
