"""Stdout and stderr as every console entry point (gmlp-lint, gmlp-check, and ``python -m`` of
either) sets them up first, with ``prepare_standard_streams``:

* A reader that goes away early (``gmlp-lint . | head -1``, a pager quit at the first page)
  is not an error of the run. Once a write finds the pipe closed (EPIPE), that descriptor is
  pointed at /dev/null and the run goes on, silently, to the end it would have had: its exit
  status is the one the run would have had (0 clean, 1 findings or mismatches, 2 an error),
  as ruff and pytest report what they found, not that the reader left, and report files
  (``--junit-xml``, ``bench --output``) are still written. Nothing is printed about the pipe,
  and Python's "Exception ignored ... BrokenPipeError" at exit never comes.
* A file name that is not UTF-8 reaches the text reports as surrogate escapes (PEP 383).
  Where Python's stdout is strict (a UTF-8 locale other than C.UTF-8, PYTHONIOENCODING),
  printing one would end the run with a UnicodeEncodeError; stdout writes the name's own
  bytes instead, as it already does under the C and C.UTF-8 locales, and as ``ls`` and
  ``find`` print names (JSON shows them as U+FFFD: json_text.py). Stderr keeps its
  backslashreplace.

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


def prepare_standard_streams() -> None:
    """Replace sys.stdout and sys.stderr as the module docstring says; their encoding and
    buffering stay as Python set them."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
            stream.flush()
        except (AttributeError, OSError, ValueError):
            continue  # no stream (pythonw), one without a descriptor, or one already closed
        errors = stream.errors
        if name == "stdout" and errors == "strict":
            errors = "surrogateescape"
        replacement = io.TextIOWrapper(
            io.BufferedWriter(_PipeWriter(fd)),
            encoding=stream.encoding,
            errors=errors,
            line_buffering=stream.line_buffering,
            write_through=getattr(stream, "write_through", False),
        )
        setattr(sys, name, replacement)
