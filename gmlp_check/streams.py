"""Keeping stdout for the report alone: with ``--format json`` it holds one JSON document,
and a factory, a forward or a library that prints must not break it. Progress goes to stderr,
through the one progress bar the checker and the benchmark share."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


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


def progress_bar(console: Console) -> Progress:
    """Description, bar, done/total, elapsed time and the task's ``case`` field (the case or
    step last finished), on ``console`` while it is a terminal; gone when the run ends. A quiet
    console shows nothing."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[case]}", style="dim"),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
