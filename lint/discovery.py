"""Turning the command line's paths into the list of files to lint.

Directories are walked for ``*.py`` and ``*.pyi`` files, skipping excluded directories and
files. Files named explicitly are linted even when excluded, unless ``force_exclude`` is set
(pre-commit passes every staged file by name, so its hooks use ``--force-exclude``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .config import Config, Resolver, is_excluded

SUFFIXES = (".py", ".pyi")


def collect(
    paths: Sequence[str], resolver: Resolver, force_exclude: bool
) -> tuple[list[tuple[str, Config]], list[str]]:
    """([(file to lint, its configuration)], error messages for paths that do not exist)."""
    files: list[tuple[str, Config]] = []
    errors: list[str] = []
    seen: set[Path] = set()

    def add(path: Path, config: Config, absolute: Path | None = None) -> None:
        key = absolute or path.resolve()
        if key not in seen:
            seen.add(key)
            files.append((os.path.normpath(path), config))

    for raw in paths:
        path = Path(raw)
        if not path.exists():
            errors.append(f"{raw}: no such file or directory")
            continue
        config = resolver.for_path(path)
        if force_exclude and is_excluded(path, config):
            continue
        if not path.is_dir():
            add(path, config)
            continue
        root = path.resolve()
        named = None if force_exclude else root
        for dirpath, dirnames, filenames in os.walk(root):
            directory = Path(dirpath)
            config = resolver.for_directory(directory)
            dirnames[:] = sorted(
                n for n in dirnames if not is_excluded(directory / n, config, named)
            )
            shown = Path(raw) / os.path.relpath(dirpath, root)
            for name in sorted(filenames):
                if name.endswith(SUFFIXES) and not is_excluded(directory / name, config, named):
                    add(shown / name, config, directory / name)
    return files, errors
