"""Python source files: reading them as Python does, checking that they parse, and writing
fixes back.

* Reading takes regular files only: the file is opened without blocking and checked before
  a byte is read, so a FIFO or a device named on the command line is an error, not a hang.
* Decoding follows PEP 263 as Python does (``tokenize.detect_encoding``): a UTF-8 BOM or a
  coding declaration in the first two lines, otherwise UTF-8. Fixes are written back in the
  same encoding (and with the BOM when there was one).
* Whether a file is valid Python, and where it is not, is CPython's own answer.
* Fixes are written in place, as ruff and black write them: through symlinks (the target
  changes, the link stays a link) and hard links, keeping the file's owner and mode. A
  read-only file is refused, not replaced.
"""

from __future__ import annotations

import errno
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


def syntax_error(text: str, path: str) -> SourceError | None:
    """Where CPython rejects ``text``, or None when it is valid Python. The symbol table is
    the cheapest complete check CPython offers: it parses everything (about half the cost of
    building an AST, a tenth of libcst's) and also catches what only the compiler would
    (``nonlocal`` at module level, a duplicate argument)."""
    import symtable

    try:
        symtable.symtable(text, path, "exec")
    except SyntaxError as error:
        if "null bytes" in str(error.msg):
            return _null_byte(text)
        return SourceError(f"cannot parse: {error.msg}", error.lineno, error.offset)
    except ValueError:  # Python 3.11 raises this for null bytes
        return _null_byte(text)
    except (RecursionError, MemoryError):
        return SourceError("cannot parse: too deeply nested")
    return None


def _null_byte(text: str) -> SourceError:
    at = text.find("\0")
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return SourceError("cannot parse: the source contains a null byte", line, column)


def write_in_place(path: str, text: str, encoding: str) -> None:
    """Replace the contents of ``path`` with ``text``, writing the file itself (through a
    symlink, keeping hard links, owner and mode). Raises SourceError, after which the file
    holds its old contents unless the disk failed in the middle of the write."""
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as error:
        raise SourceError(f"cannot write the fixes: not representable in {encoding}") from error
    try:
        info = os.stat(path)
    except OSError as error:
        raise SourceError(f"cannot write the fixes: {describe(error)}") from error
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        # Root may write anyway; ruff and black leave such files alone, and so do we.
        raise SourceError("cannot write the fixes: the file is read-only")
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise SourceError(f"cannot write the fixes: {describe(error)}") from error
    try:
        _reserve(fd, len(data))  # a full disk fails here, before anything is overwritten
        _write_all(fd, data)
        os.ftruncate(fd, len(data))
    except OSError as error:
        raise SourceError(
            f"cannot write the fixes: {describe(error)}; the file may be partly written"
        ) from error
    finally:
        os.close(fd)


def _reserve(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except AttributeError:  # not on this platform
        pass
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS, errno.ENODEV):
            raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)
