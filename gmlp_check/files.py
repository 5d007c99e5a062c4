"""Writing report files whole or not at all, with the permissions the user's umask gives."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory, renamed into
    place: a reader (or an interrupted run) never sees half a file. The file gets the mode an
    ordinary ``open(path, "w")`` would give (0666 minus the umask), not mkstemp's 0600."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable(option: str, path: str | os.PathLike) -> None:
    """Raise ValueError naming the option when ``path``'s directory does not exist, before a
    long run rather than after it."""
    parent = Path(os.path.abspath(path)).parent
    if not parent.is_dir():
        raise ValueError(f"{option} {str(path)!r}: the directory {str(parent)!r} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"{option} {str(path)!r}: is a directory, expected a file name")
