"""Writing fixes back to a file without ever leaving it half-written.

* Through symlinks: the file a link points at changes, the link stays a link.
* Atomically where the file allows it: the new text goes to a temporary file next to the
  target (same directory, so same file system), flushed to disk, given the file's mode and
  owner, then renamed over it. A reader, a Ctrl-C or a full disk sees the old file or the
  new one, never a mix.
* In place where renaming would change what the file is: a file with hard links (a rename
  would split them), a directory gmlp-lint may not create files in, or an owner it cannot
  give the new file. Space for the new text is reserved first, so a full disk fails before
  a byte is overwritten.
* A read-only file is refused, not replaced (as ruff and black do), and so is a file whose
  text is no longer the one the fixes were computed from (saved by an editor meanwhile).
* Signals wait until the write is done. An in-place write is a reservation, a write and a
  truncation: SIGTERM's default action mid-way (the kernel even cuts a large write short for
  it) or a KeyboardInterrupt between the steps would leave the start of the new text over the
  rest of the old. So every signal that can come from outside (Ctrl-C, SIGTERM, SIGHUP, ...)
  is blocked in this thread for the write and delivered when it is over: the file is then
  wholly new, and the signal acts as it would have (the process ends, or KeyboardInterrupt is
  raised). gmlp-lint writes from its main thread after the analysis threads are gone, so no
  other thread takes the signal meanwhile. Only SIGKILL (and a power cut) cannot wait.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
from collections.abc import Iterator

from .source import SourceError, decode, describe, read_bytes

# Errors that mean "this directory will not take a temporary file": write in place instead.
_NO_TEMPORARY = (errno.EACCES, errno.EPERM, errno.EROFS)


def write_in_place(path: str, text: str, encoding: str, linted: str | None = None) -> None:
    """Replace the contents of ``path`` with ``text`` encoded in ``encoding``. With
    ``linted`` (the text the fixes were computed from), a file that no longer holds it (an
    editor saved it meanwhile) is left alone. Raises SourceError, after which the file holds
    its old contents."""
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as error:
        raise SourceError(f"cannot write the fixes: not representable in {encoding}") from error
    if linted is not None and _current_text(path) != linted:
        raise SourceError("cannot write the fixes: the file changed while gmlp-lint ran")
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except OSError as error:
        raise SourceError(f"cannot write the fixes: {describe(error)}") from error
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        # Root may write anyway; ruff and black leave such files alone, and so do we.
        raise SourceError("cannot write the fixes: the file is read-only")
    if not os.access(target, os.W_OK):
        raise SourceError(f"cannot write the fixes: {os.strerror(errno.EACCES)}")
    with _signals_deferred():
        if info.st_nlink == 1 and _replace(target, data, info):
            return
        _overwrite(target, data)


# Raised by a fault of this thread itself, not sent from outside: blocking them cannot defer
# them (the kernel kills the process), so they are left as they are.
_SYNCHRONOUS = {
    getattr(signal, name)
    for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS")
    if hasattr(signal, name)
}


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Every signal sent from outside waits until the block is done (see the module's
    docstring), then is delivered as it would have been."""
    if not hasattr(signal, "pthread_sigmask"):  # not POSIX: nothing to block with
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - _SYNCHRONOUS)
    try:
        yield
    finally:
        # Pending signals are delivered here: a default action ends the process, a Python
        # handler (Ctrl-C's KeyboardInterrupt) runs as this returns.
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _current_text(path: str) -> str | None:
    try:
        return decode(read_bytes(path)).text
    except SourceError:
        return None  # unreadable or undecodable now: not the text that was linted


def _replace(target: str, data: bytes, info: os.stat_result) -> bool:
    """Write ``data`` to a temporary file and rename it over ``target``; False when this
    directory or owner does not allow it (nothing changed then)."""
    directory, name = os.path.split(target)
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".gmlp-lint", dir=directory)
    except OSError as error:
        if error.errno in _NO_TEMPORARY:
            return False
        raise SourceError(f"cannot write the fixes: {describe(error)}") from error
    renamed = False
    try:
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            try:
                os.fchown(fd, info.st_uid, info.st_gid)
            except PermissionError:
                return False
        os.fchmod(fd, stat.S_IMODE(info.st_mode))
        _write_all(fd, data)
        os.fsync(fd)
        os.replace(temporary, target)
        renamed = True
        return True
    except OSError as error:
        raise SourceError(f"cannot write the fixes: {describe(error)}") from error
    finally:
        os.close(fd)
        if not renamed:
            _remove(temporary)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):  # nothing more to do: a dot-file next to the target
        os.unlink(path)


def _overwrite(target: str, data: bytes) -> None:
    try:
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
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
