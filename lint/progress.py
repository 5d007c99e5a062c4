"""Progress on stderr while gmlp-lint works: wanted for long runs (a large tree, one 10 MB
file), noise in short ones and in logs.

* ``--progress``: a bar from the start. ``--no-progress``: never.
* By default: only when stderr is a terminal, and only once the run has taken
  ``DELAY_S`` seconds, so a quick run never flickers and a slow one (many files, or one
  large file that libcst takes minutes over) shows it is working, with the time elapsed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

DELAY_S = 2.0


class Progress:
    """A context manager that gives a callback to call once per file checked (or None when
    no progress is shown)."""

    def __init__(self, total: int, wanted: bool | None) -> None:
        self.total = total
        self.immediate = bool(wanted)
        self.enabled = total > 0 and (wanted if wanted is not None else sys.stderr.isatty())
        self.done = 0
        self._lock = threading.Lock()
        self._bar = None
        self._task = None
        self._timer: threading.Timer | None = None
        self._finished = False

    def __enter__(self) -> Callable[[object], None] | None:
        if not self.enabled:
            return None
        if self.immediate:
            self._show()
        else:
            self._timer = threading.Timer(DELAY_S, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self._advance

    def _show(self) -> None:
        with self._lock:
            if self._finished or self._bar is not None:
                return
            from rich.console import Console
            from rich.progress import MofNCompleteColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                *Bar.get_default_columns()[:-1],  # the estimate of time left misleads here
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._task = self._bar.add_task("gmlp-lint", total=self.total, completed=self.done)
            self._bar.start()

    def _advance(self, _result: object) -> None:
        with self._lock:
            self.done += 1
            if self._bar is not None:
                self._bar.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._finished = True
            if self._bar is not None:
                self._bar.stop()
