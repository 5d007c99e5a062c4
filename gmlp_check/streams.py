"""Keeping stdout for the report alone: with ``--format json`` it holds one JSON document,
and a factory, a forward or a library that prints must not break it."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While the block runs, whatever is written to stdout goes to stderr: Python's
    ``print`` (sys.stdout) and writes to file descriptor 1 from C code or child processes."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
