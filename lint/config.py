"""``[tool.gmlp-lint]`` in the nearest pyproject.toml, and which rules apply to a file.

The nearest pyproject.toml that has a ``[tool.gmlp-lint]`` table, looking up from each
file's directory, configures that file (files without one get the defaults). Keys:

    select = ["GMLP"]                 # codes or prefixes; default: every rule
    ignore = ["GMLP004"]
    per-file-ignores = {"tests/*" = ["GMLP003"]}
    exclude = ["tests/lint/fixtures"]  # added to the built-in excludes (.git, .venv, ...)
    analyse-tests = false             # true: test files found in a walk are analysed too

Patterns are matched against the path relative to the pyproject's directory, against each
of its parent directories, and against the file name.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from .registry import CODES
from .source import BOM, SourceError, kind_name, read_bytes
from .test_scope import in_test_directory, is_test_file

TABLE = "gmlp-lint"
KEYS = ("select", "ignore", "per-file-ignores", "exclude", "analyse-tests")
DEFAULT_EXCLUDES = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


NOTHING_SELECTED = "no rule selected; expected codes or prefixes such as GMLP001, or ALL"


class ConfigError(Exception):
    """A configuration or selection that cannot be used; the message names the culprit."""


@dataclass(frozen=True)
class Config:
    root: Path  # directory patterns are relative to
    source: Path | None = None  # the pyproject.toml, None for defaults
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    # Test files found in a walk are only compiled unless this is set (``test_scope``).
    analyse_tests: bool = False


def expand_codes(selectors, where: str) -> frozenset[str]:
    """Codes matched by selectors (full codes, prefixes like ``GMLP00``, or ``ALL``)."""
    codes: set[str] = set()
    for raw in selectors:
        selector = str(raw).strip().upper()
        if not selector:
            continue
        matched = CODES if selector == "ALL" else [c for c in CODES if c.startswith(selector)]
        if not matched:
            raise ConfigError(
                f"{where}: unknown rule selector {raw!r}; expected a code or prefix of "
                f"{', '.join(CODES)}, or ALL"
            )
        codes.update(matched)
    return frozenset(codes)


def _string_list(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def load(pyproject: Path) -> Config | None:
    """The ``[tool.gmlp-lint]`` table of ``pyproject``, or None when it has none."""
    try:
        # Opened without blocking and checked to be a regular file before a byte is read
        # (source.read_bytes): one that became a FIFO since present() looked is an error too.
        raw = read_bytes(str(pyproject))
    except SourceError as error:
        raise ConfigError(f"{pyproject}: {error.message}") from error
    # A leading UTF-8 BOM (Windows editors, PowerShell's Out-File write one) is skipped, as
    # ruff's and cargo's TOML parser (the toml crate) skips it; tomllib would read it as the
    # start of a statement and report "Invalid statement (at line 1, column 1)".
    skipped = len(BOM) if raw.startswith(BOM) else 0
    raw = raw[skipped:]
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{pyproject}: invalid TOML: {error}") from error
    except UnicodeDecodeError as error:  # TOML is UTF-8 by definition
        raise ConfigError(
            f"{pyproject}: invalid TOML: not UTF-8 ({error.reason}, byte {error.start + skipped})"
        ) from error
    except (RecursionError, MemoryError) as error:  # tomllib recurses on nested arrays
        raise ConfigError(f"{pyproject}: invalid TOML: nested too deeply to read") from error
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{pyproject}: `tool` must be a table, got {tool!r}")
    table = tool.get(TABLE)
    if table is None:
        return None
    where = f"{pyproject} [tool.{TABLE}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; expected one of {', '.join(KEYS)}")
    select = None
    if "select" in table:
        select = _string_list(table["select"], f"{where} select")
        if not expand_codes(select, f"{where} select"):
            raise ConfigError(f"{where} select: {NOTHING_SELECTED}")
    ignore = _string_list(table.get("ignore", []), f"{where} ignore")
    expand_codes(ignore, f"{where} ignore")
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where} per-file-ignores: expected a table of pattern = [codes]")
    pairs = []
    for pattern, codes in per_file.items():
        codes = _string_list(codes, f"{where} per-file-ignores {pattern!r}")
        expand_codes(codes, f"{where} per-file-ignores {pattern!r}")
        pairs.append((pattern, codes))
    exclude = _string_list(table.get("exclude", []), f"{where} exclude")
    analyse_tests = table.get("analyse-tests", False)
    if not isinstance(analyse_tests, bool):
        raise ConfigError(f"{where} analyse-tests: expected true or false, got {analyse_tests!r}")
    return Config(pyproject.parent, pyproject, select, ignore, tuple(pairs), exclude, analyse_tests)


def present(pyproject: Path) -> bool:
    """Whether ``pyproject`` is a file to read: False when nothing has that name, ConfigError
    when something that cannot be one does (a directory, a FIFO, a socket, a broken or looping
    symbolic link). Those were taken as "no configuration here" and the run went on with a
    parent's or the defaults, silently. A FIFO is never opened: that would wait for a writer."""
    try:
        os.lstat(pyproject)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        mode = os.stat(pyproject).st_mode
    except FileNotFoundError as error:
        target = os.readlink(pyproject)
        raise ConfigError(
            f"{pyproject}: a broken symbolic link (its target {target!r} does not exist); "
            "expected a TOML file"
        ) from error
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise  # unreadable: a "cannot read" of the path being linted (discovery.py)
        raise ConfigError(f"{pyproject}: a symbolic link loop; expected a TOML file") from error
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{pyproject}: {kind_name(mode)}, not a file; expected a TOML file")
    return True


@dataclass
class Resolver:
    """Finds and caches the configuration that applies to each directory."""

    default_root: Path = field(default_factory=Path.cwd)
    _cache: dict[Path, Config] = field(default_factory=dict)

    def for_path(self, path: Path) -> Config:
        directory = path.parent if not path.is_dir() else path
        return self.for_directory(Path(os.path.realpath(directory)))

    def for_directory(self, directory: Path) -> Config:
        """The configuration for an absolute, resolved directory."""
        cached = self._cache.get(directory)
        if cached is not None:
            return cached
        pyproject = directory / "pyproject.toml"
        config = load(pyproject) if present(pyproject) else None
        if config is None:
            parent = directory.parent
            if parent == directory:
                config = Config(self.default_root.resolve())
            else:
                config = self.for_directory(parent)
        self._cache[directory] = config
        return config


def _relative(path: Path, root: Path) -> str:
    # realpath, unlike Path.resolve on Python < 3.13, does not raise on a symlink loop.
    absolute = path if path.is_absolute() else Path(os.path.realpath(path))
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix()


def _matches(relative: str, patterns) -> bool:
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if pattern.startswith("./"):
            pattern = pattern[2:]
        if any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            return True
        if fnmatch.fnmatchcase(parts[-1], pattern):
            return True
    return False


def is_excluded(path: Path, config: Config, named_root: Path | None = None) -> bool:
    """Excluded by the built-in names (any part of the path below the configuration's
    directory) or by the configuration's ``exclude`` patterns.

    ``named_root`` is a directory named on the command line: like ruff, it is linted even when
    a pattern or a built-in name excludes it, so patterns that match it (or a directory above
    it) do not count, and built-in names count only below it (``gmlp-lint
    .venv/lib/python3.11/site-packages/megatron`` lints Megatron)."""
    relative = _relative(path, config.root)
    parts = relative.split("/") if not relative.startswith("/") else [path.name]
    root = _relative(named_root, config.root) if named_root is not None else None
    if root is not None and not root.startswith("/") and relative.startswith(root + "/"):
        parts = parts[len(root.split("/")) :]
    if any(part in DEFAULT_EXCLUDES for part in parts):
        return True
    patterns = config.exclude
    if root is not None and patterns:
        patterns = [p for p in patterns if not _matches(root, [p])]
    return bool(patterns) and _matches(relative, patterns)


def only_compiled(path: Path, config: Config, named_root: Path | None = None) -> bool:
    """Whether ``path`` is a test file (``test_scope``) that the rules leave alone.

    ``named_root`` is a directory named on the command line (resolved) that the walk found
    ``path`` in: the path below it is judged, and nothing is left alone below a named directory that
    is, or lies in, a test directory. Without one (a file named with ``--force-exclude``, a
    walk under it) the path below the configuration's directory is judged, or only the file
    name for a file outside it, as the built-in excludes are."""
    if config.analyse_tests:
        return False
    if named_root is not None:
        # The named directory's own path is judged below the configuration's directory (a
        # checkout under /home/me/test/ is not a test directory), else whole.
        named = _relative(named_root, config.root)
        if in_test_directory(named.split("/") if not named.startswith("/") else named_root.parts):
            return False
        return is_test_file(Path(os.path.relpath(path, named_root)).parts)
    relative = _relative(path, config.root)
    return is_test_file(relative.split("/") if not relative.startswith("/") else [path.name])


@dataclass(frozen=True)
class Selection:
    """Rule selection from the command line; None means "not given"."""

    select: frozenset[str] | None = None
    ignore: frozenset[str] = frozenset()


def enabled_codes(path: Path, config: Config, selection: Selection) -> frozenset[str]:
    """Command-line ``--select`` replaces the configuration's select and ignore;
    ``--ignore`` and per-file-ignores are always subtracted."""
    if selection.select is not None:
        codes = set(selection.select)
    else:
        base = config.select if config.select is not None else ("ALL",)
        codes = set(expand_codes(base, "select")) - expand_codes(config.ignore, "ignore")
    codes -= selection.ignore
    relative = _relative(path, config.root)
    for pattern, ignored in config.per_file_ignores:
        if _matches(relative, [pattern]):
            codes -= expand_codes(ignored, "per-file-ignores")
    return frozenset(codes)
