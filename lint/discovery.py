"""Turning the command line's paths into the list of files to lint.

Directories are walked for regular ``*.py`` and ``*.pyi`` files (symlinks to them count;
FIFOs, devices, broken or looping symlinks are passed over), skipping excluded directories
and files. Files named explicitly are linted even when excluded, unless ``force_exclude``
is set (pre-commit passes every staged file by name, so its hooks use ``--force-exclude``).
Test files a walk finds are only compiled (``config.only_compiled``, ``test_scope``); so is
a test file named explicitly with ``force_exclude``.
A path that cannot be looked at - missing, unreadable, a special file named explicitly, a
directory that cannot be listed - is an error for that path; the others are still linted.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from .config import Config, Resolver, is_excluded, only_compiled
from .model import FileError
from .source import describe, kind_name

SUFFIXES = (".py", ".pyi")
# What a walk passes over without a word: links that lead nowhere (or in circles).
_NOT_A_FILE = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)


def collect(
    paths: Sequence[str], resolver: Resolver, force_exclude: bool
) -> tuple[list[tuple[str, Config, bool]], list[FileError]]:
    """([(file to lint, its configuration, whether it is only compiled)], the paths that
    could not be looked at)."""
    files: list[tuple[str, Config, bool]] = []
    errors: list[FileError] = []
    seen: set[tuple[int, int]] = set()

    def add(shown: str, config: Config, info: os.stat_result, compiled_only: bool) -> None:
        # One file under several names (symlinks, hard links) is linted, and fixed, once.
        key = (info.st_dev, info.st_ino)
        if key not in seen:
            seen.add(key)
            files.append((os.path.normpath(shown), config, compiled_only))

    for raw in paths:
        try:
            info = os.stat(raw)
            path = Path(raw)
            config = resolver.for_path(path)
        except OSError as error:
            missing = error.errno == errno.ENOENT
            message = "no such file or directory" if missing else f"cannot read: {describe(error)}"
            errors.append(FileError(raw, message))
            continue
        if force_exclude and is_excluded(path, config):
            continue
        if stat.S_ISREG(info.st_mode):
            add(raw, config, info, force_exclude and only_compiled(path, config))
        elif stat.S_ISDIR(info.st_mode):
            _walk(raw, resolver, force_exclude, add, errors)
        else:
            kind = kind_name(info.st_mode)
            errors.append(FileError(raw, f"cannot read: not a regular file ({kind})"))
    return files, errors


def _walk(raw: str, resolver: Resolver, force_exclude: bool, add, errors: list) -> None:
    root = Path(raw).resolve()
    named = None if force_exclude else root

    def shown(absolute: str) -> str:
        return os.path.join(raw, os.path.relpath(absolute, root))

    def unreadable(error: OSError) -> None:
        where = shown(error.filename) if error.filename else raw
        errors.append(FileError(os.path.normpath(where), f"cannot read: {describe(error)}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        directory = Path(dirpath)
        try:
            config = resolver.for_directory(directory)
        except OSError as error:
            unreadable(error)
            dirnames[:] = []
            continue
        dirnames[:] = sorted(n for n in dirnames if not is_excluded(directory / n, config, named))
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if not name.endswith(SUFFIXES) or is_excluded(Path(full), config, named):
                continue
            try:
                info = os.stat(full)
            except OSError as error:
                if error.errno not in _NOT_A_FILE:
                    unreadable(error)
                continue
            if stat.S_ISREG(info.st_mode):
                add(shown(full), config, info, only_compiled(Path(full), config, named))
