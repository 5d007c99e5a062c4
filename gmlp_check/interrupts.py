"""How a ``gmlp-check`` run ends when it is stopped: Ctrl-C (SIGINT) or SIGTERM (a job
scheduler's time limit, ``timeout``, ``kill``).

Both stop the run where it is, as a KeyboardInterrupt: the cases that finished are still
reported and written to the report files, "interrupted" is one line on stderr, and the exit
status is the shell's for the signal, 128 + its number: 130 for Ctrl-C, 143 for SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is so that it stops as on Ctrl-C."""

    signum = signal.SIGTERM


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal's number: 130 for Ctrl-C (a plain KeyboardInterrupt), 143 for SIGTERM."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def _raise_terminated(signum, frame) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises Terminated while the block runs (in the main thread; elsewhere signal
    handlers cannot be set and SIGTERM keeps its default)."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
