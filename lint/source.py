"""Python source files: reading them as Python does, checking that they parse, and writing
fixes back.

* Reading takes regular files only: the file is opened without blocking and checked before
  a byte is read, so a FIFO or a device named on the command line is an error, not a hang.
* Decoding follows PEP 263 as Python does (``tokenize.detect_encoding``): a UTF-8 BOM or a
  coding declaration in the first two lines, otherwise UTF-8. Fixes are written back in the
  same encoding (and with the BOM when there was one).
* Writing fixes back is ``writing.py``'s job.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"


class SourceError(Exception):
    """The file cannot be read, decoded, parsed or written. ``line``/``column`` (from 1)
    point at the problem when it has a place in the file."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Source:
    text: str
    encoding: str  # "utf-8", "utf-8-sig" (a BOM) or the declared encoding


def describe(error: OSError) -> str:
    """An OSError as the rest of a ``cannot read: ...`` line."""
    return error.strerror or str(error)


def read_bytes(path: str) -> bytes:
    """The contents of the regular file ``path`` (symlinks followed); SourceError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise SourceError(f"cannot read: {describe(error)}") from error
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            raise SourceError(f"cannot read: not a regular file ({kind_name(kind)})")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as error:
        raise SourceError(f"cannot read: {describe(error)}") from error
    finally:
        os.close(fd)


def kind_name(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def decode(data: bytes) -> Source:
    """``data`` decoded as Python decodes a source file (PEP 263)."""
    encoding = "utf-8"
    # Only a BOM or the word "coding" in the first two lines can change the encoding; the
    # common file pays for neither tokenize nor its regular expressions.
    second_newline = data.find(b"\n", data.find(b"\n") + 1)
    head = data if second_newline == -1 else data[:second_newline]
    if data.startswith(BOM) or b"coding" in head:
        import io
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as error:
            raise SourceError(f"cannot read: {error.msg}") from error
    try:
        return Source(data.decode(encoding), encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        expected = "UTF-8" if encoding.startswith("utf-8") else f"{encoding} as declared"
        raise SourceError(
            f"cannot read: not {expected} ({error.reason}, byte {error.start})", line, column
        ) from error
