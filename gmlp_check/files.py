"""Report files (``--junit-xml``, ``bench --output``, ``bench --plot``): every path checked
before a run, written whole or not at all after it.

What is at the path decides how it is written, as a shell's ``>`` would:

* a symbolic link is written through (its target changes, the link stays);
* a character device or a FIFO (``/dev/null``, a named pipe a reader waits on) is opened for
  writing, never replaced by a regular file;
* ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` and ``/proc/self/fd/N`` are written to that
  descriptor of this process, after what it already holds (the report on stdout, say), even
  when it is a regular file; a pipe there (or a FIFO) whose reader has gone takes nothing,
  silently, as stdout does;
* anything else is a regular file, written to a temporary file in the same directory and
  renamed into place, so a reader or an interrupted run never sees half of it. A file that
  existed keeps its mode (and, where we may set it, its owner); a new one gets the mode an
  ordinary ``open(path, "w")`` would give (0666 minus the umask).

``--write-repro`` names a directory: ``check_directory`` checks it before the run.

These functions raise ``OutputError`` with one line naming the option: the CLIs exit 2 on it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import tempfile
from pathlib import Path


class OutputError(ValueError):
    """A report path that cannot be written; the message names the option and the path."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _target(path: str | os.PathLike) -> str:
    """The file a write to ``path`` lands in: symbolic links followed, even a dangling one."""
    return os.path.realpath(os.fspath(path))


def _is_stream(mode: int) -> bool:
    """Written by opening, never by replacing: a character device or a FIFO."""
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


_STANDARD = {"/dev/stdout": 1, "/dev/stderr": 2}
_DESCRIPTOR = re.compile(r"/(?:dev|proc/self)/fd/(\d+)")


def _descriptor(path: str | os.PathLike) -> int | None:
    """The descriptor of this process a path names (/dev/stdout, /dev/fd/N, ...), or None."""
    text = os.path.abspath(os.fspath(path))
    if text in _STANDARD:
        return _STANDARD[text]
    match = _DESCRIPTOR.fullmatch(text)
    return int(match.group(1)) if match else None


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_output(option: str, path: str | os.PathLike) -> None:
    """Raise OutputError unless a report can be written to ``path``: before a long run, so
    that nothing is lost after it. A trial file is created (and removed) in the directory,
    because as root permission bits say nothing about /sys, /proc, a read-only mount or an
    immutable directory."""
    text = os.fspath(path)
    where = f"{option} {text!r}"
    if not text:
        raise OutputError(f"{option}: expected a file name, got ''")
    if text.endswith(os.sep) or os.path.isdir(text):
        raise OutputError(f"{where}: is a directory, expected a file name")
    descriptor = _descriptor(text)
    if descriptor is not None:
        try:
            os.fstat(descriptor)
        except OSError:
            raise OutputError(f"{where}: descriptor {descriptor} is not open") from None
        return
    target = _target(text)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"{where}: cannot be written ({_reason(exc)})") from None
    if mode is not None and _is_stream(mode):
        if not os.access(target, os.W_OK):
            raise OutputError(f"{where}: cannot be written (permission denied)")
        return
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(
            f"{where}: is neither a regular file, a character device nor a FIFO; "
            "expected a file name"
        )
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise OutputError(f"{where}: the directory {parent!r} does not exist")
    if mode is not None and not os.access(target, os.W_OK):
        raise OutputError(f"{where}: cannot be written (permission denied)")
    try:
        fd, trial = tempfile.mkstemp(prefix=".gmlp-check-", dir=parent)
    except OSError as exc:
        raise OutputError(f"{where}: cannot create a file in {parent!r} ({_reason(exc)})") from None
    os.close(fd)
    os.unlink(trial)


def check_directory(option: str, path: str | os.PathLike) -> None:
    """Raise OutputError unless files can be created in the directory ``path`` (made with
    its parents when missing): before a long run, as check_output does for a file. Nothing
    is created; a trial file goes into the directory or its nearest existing ancestor."""
    text = os.fspath(path)
    where = f"{option} {text!r}"
    if not text:
        raise OutputError(f"{option}: expected a directory name, got ''")
    existing = _target(text)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        shown = "" if existing == _target(text) else f" ({existing!r} is not one)"
        raise OutputError(f"{where}: is not a directory{shown}; expected a directory name")
    try:
        fd, trial = tempfile.mkstemp(prefix=".gmlp-check-", dir=existing)
    except OSError as exc:
        raise OutputError(
            f"{where}: cannot create a file in {existing!r} ({_reason(exc)})"
        ) from None
    os.close(fd)
    os.unlink(trial)


def write_output(option: str, path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` as the module docstring says; OutputError on failure, with
    nothing half-written left behind (a temporary file is removed)."""
    where = f"{option} {os.fspath(path)!r}"
    target = _target(path)
    try:
        existing = os.stat(target)
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise OutputError(f"{where}: cannot be written ({_reason(exc)})") from None
    descriptor = _descriptor(path)
    try:
        if descriptor is not None:
            # Whatever this process wrote there first (the report on stdout) goes first.
            sys.stdout.flush()
            sys.stderr.flush()
            with os.fdopen(os.dup(descriptor), "wb") as handle:
                handle.write(data)
        elif existing is not None and _is_stream(existing.st_mode):
            with open(target, "wb") as handle:
                handle.write(data)
        else:
            _replace(target, data, existing)
    except BrokenPipeError:
        # A pipe whose reader has gone (`--junit-xml /dev/stdout | head`): nothing more can
        # be written there, and that is no error of the run (lint/standard_streams.py).
        return
    except OSError as exc:
        raise OutputError(f"{where}: cannot be written ({_reason(exc)})") from None


def _replace(target: str, data: bytes, existing: os.stat_result | None) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if existing is None:
            os.chmod(tmp, 0o666 & ~_umask())
        else:
            os.chmod(tmp, stat.S_IMODE(existing.st_mode))
            with contextlib.suppress(PermissionError):  # only root may give files away
                os.chown(tmp, existing.st_uid, existing.st_gid)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
