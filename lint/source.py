"""Python source files: reading them as Python does, checking that they parse, and writing
fixes back.

* Reading takes regular files only: the file is opened without blocking and checked before
  a byte is read, so a FIFO or a device named on the command line is an error, not a hang.
* Decoding follows PEP 263 as Python does: a UTF-8 BOM or a coding declaration in the first
  two lines, otherwise UTF-8; a codec that does not turn bytes into text (rot13, hex) is an
  error. Fixes are written back in the
  same encoding (and with the BOM when there was one).
* Writing fixes back is ``writing.py``'s job.
"""

from __future__ import annotations

import codecs
import os
import re
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
    # Only a BOM or the word "coding" in the first lines can change the encoding; the common
    # file pays for no regular expression.
    head = data[:_HEAD_BYTES]
    encoding = "utf-8"
    if data.startswith(BOM) or b"coding" in head:
        encoding = declared_encoding(head)
    try:
        return Source(data.decode(encoding), encoding)
    except LookupError as error:  # a codec of bytes to bytes or of text to text (rot13, hex)
        raise SourceError(f"cannot read: {encoding!r} is not a text encoding") from error
    except UnicodeError as error:
        expected = "UTF-8" if encoding.startswith("utf-8") else f"{encoding} as declared"
        start = getattr(error, "start", None)
        if start is None:  # a codec that does not say where (punycode)
            raise SourceError(f"cannot read: not {expected}") from error
        line, column = _place(data, start)
        raise SourceError(
            f"cannot read: not {expected} ({error.reason}, byte {start})", line, column
        ) from error


def check_writable(fixed: str, source: Source, data: bytes) -> None:
    """Raise SourceError when the ``fixed`` text of ``source`` (read from ``data``) cannot be
    written in the file's encoding without changing what no fix touched."""
    if not read_back_unchanged(fixed, source.encoding):
        raise SourceError(
            "a fix would change the encoding Python reads the file in (a coding line "
            "moved into or out of the first two lines), nothing written"
        )
    try:
        same = source.text.encode(source.encoding) == data
    except UnicodeError:
        return  # not writable at all: the writer reports that, with its own message
    if not same:
        # utf-7 and the stateful codecs (iso-2022-*) have several byte forms of one text:
        # writing the fixed text would rewrite lines no fix touched.
        raise SourceError(
            f"cannot write the fixes: {source.encoding} does not encode the file's text back "
            "to its bytes, so lines no fix touches would change; nothing written"
        )


def read_back_unchanged(text: str, encoding: str) -> bool:
    """Whether ``text`` written in ``encoding`` is read back by Python as ``text``. A fix that
    moves a coding line into the first two lines, or out of them (by removing or inserting a
    line above it), changes the encoding and so the meaning of every non-ASCII byte."""
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        return True  # not writable at all: the writer reports that, with its own message
    try:
        return decode(data).text == text
    except SourceError:
        return False


# PEP 263: a comment on line 1 or 2 that says ``coding[:=] name``; line 2 counts only when
# line 1 is blank or a comment. Matched on bytes, so any byte may follow the name.
_COOKIE = re.compile(rb"[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
_BLANK = re.compile(rb"[ \t\f]*(?:[#\r\n]|$)", re.ASCII)
_ENDING = re.compile(rb"\r\n|\r|\n")
_HEAD_BYTES = 4096  # two lines longer than this carry no coding line Python would honour


def declared_encoding(head: bytes) -> str:
    """The encoding the first lines of a file declare, as a codec name for ``bytes.decode``
    ("utf-8-sig" when a UTF-8 byte order mark starts the file)."""
    bom = head.startswith(BOM)
    body = head[len(BOM) :] if bom else head
    for line in _ENDING.split(body, 2)[:2]:
        match = _COOKIE.match(line)
        if match is not None:
            name = match.group(1).decode("ascii")
            try:
                canonical = codecs.lookup(name).name
            except LookupError as error:
                raise SourceError(f"cannot read: unknown encoding: {name}") from error
            if bom and canonical != "utf-8":
                raise SourceError(
                    f"cannot read: a UTF-8 byte order mark and a coding line for {name}"
                )
            return "utf-8-sig" if bom else name
        if not _BLANK.match(line):
            break
    return "utf-8-sig" if bom else "utf-8"


def _place(data: bytes, offset: int) -> tuple[int, int]:
    """(line, column) from 1 of a byte offset, lines ending where Python ends them."""
    line, start = 1, 0
    for match in _ENDING.finditer(data, 0, offset):
        line, start = line + 1, match.end()
    return line, offset - start + 1
