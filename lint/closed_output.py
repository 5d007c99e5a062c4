"""A reader that goes away early (``gmlp-lint . | head -1``, ``gmlp-check diff | less`` quit
at the first page) is not an error of the run. Every console entry point (gmlp-lint,
gmlp-check, and ``python -m`` of either) calls ``tolerate_closed_output`` first: once a write
to stdout or stderr finds the pipe closed (EPIPE), that descriptor is pointed at /dev/null and
the run goes on, silently, to the end it would have had. Its exit status is the one the run
would have had (0 clean, 1 findings or mismatches, 2 an error), as ruff and pytest report
what they found, not that the reader left; report files (``--junit-xml``, ``bench --output``)
are still written. Nothing is printed about the closed pipe, and Python's "Exception ignored
... BrokenPipeError" at exit never comes.

It lives here, not in gmlp_check/, because gmlp-lint also runs as ``python -m lint``, which
can import nothing outside this folder.
"""

from __future__ import annotations

import io
import os
import sys


class _PipeWriter(io.RawIOBase):
    """Writes to a descriptor; a closed pipe there turns it into /dev/null."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int | None:
        try:
            return os.write(self._fd, data)
        except BlockingIOError:  # a non-blocking descriptor that is full: as FileIO does
            return None
        except BrokenPipeError:
            # The reader is gone: what follows, on this descriptor (child processes started
            # later too), goes nowhere, and the run carries on.
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._fd)
            finally:
                os.close(null)
            return len(data)


def tolerate_closed_output() -> None:
    """Make sys.stdout and sys.stderr carry on silently past a closed pipe (module docstring).
    Their encoding, error handler and buffering stay as Python set them."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
            stream.flush()
        except (AttributeError, OSError, ValueError):
            continue  # no stream (pythonw), one without a descriptor, or one already closed
        replacement = io.TextIOWrapper(
            io.BufferedWriter(_PipeWriter(fd)),
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering,
            write_through=getattr(stream, "write_through", False),
        )
        setattr(sys, name, replacement)
