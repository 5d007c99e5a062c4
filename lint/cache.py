"""Results of earlier runs, reused when nothing they were computed from has changed.

What one file's findings depend on, and so what its cache key (a SHA-256) is made of: the
engine's job for it (the file's bytes, the path it is reported under, the rules enabled for
it - ``--select`` and ``--ignore`` with the configuration's select, ignore and
per-file-ignores applied - and the flag helpers found in the other files of the run,
``project.py``), and the linter itself: its own source files, libcst's version and the
Python that compiles the file. A change to any of them is a different key, so a stale
result is never read; entries of other keys simply stay unused.

* Location: ``--cache-dir``, else ``$GMLP_LINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/gmlp-lint``
  (``~/.cache/gmlp-lint``); ``--no-cache`` turns it off. Outside the linted tree, so a
  checkout, its ``git status`` and its fixes never see it.
* A folder per version of the linter, holding packs: each run that linted files the cache did
  not know writes their entries as one JSON file, under a temporary name renamed into place,
  so a concurrent run reads a whole pack or none; past ``MAX_PACKS`` packs, the run merges
  them. Folders of other versions untouched for ``STALE_DAYS`` are removed when a new
  version's is made.
* A cache that cannot be made, read or written is no cache: the files are linted, and no
  word of it is printed. Only clean results and findings are stored, never a file that could
  not be linted (its error may be passing: memory, a crash).
* Plain lint runs only: ``--fix`` and ``--diff`` need the file's text and the fixes applied,
  which are not stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from importlib.util import find_spec
from pathlib import Path

from .model import Edit, Finding, Fix

ENV_DIR = "GMLP_LINT_CACHE_DIR"
STALE_DAYS = 7
MAX_PACKS = 8  # more packs than this are merged into one
# A merged pack past this many entries (about 7 MB) keeps only those of the run merging.
MAX_ENTRIES = 100_000
_FORMAT = 1  # the layout of an entry; part of the linter's fingerprint


def default_directory() -> Path:
    """Where the cache lives when neither ``--cache-dir`` nor ``--no-cache`` is given."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "gmlp-lint")


def linter_fingerprint(package: Path = Path(__file__).parent) -> str:
    """A digest of everything in the linter that decides a file's findings: the source of
    ``package`` (so an edited checkout is a new version, not only a released one), libcst's
    version and the running Python."""
    digest = hashlib.sha256(f"{_FORMAT}\0{sys.version}\0{sys.implementation.cache_tag}".encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    digest.update(_libcst_version().encode())
    return digest.hexdigest()


def _libcst_version() -> str:
    """libcst's version file, read without importing libcst (a warm run never needs it)."""
    spec = find_spec("libcst")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            return Path(folder, "_version.py").read_text()
        except OSError:
            continue
    return "libcst: unknown"


class Cache:
    """Entries are kept in packs: one JSON file of {key: findings} written by each run that
    linted a file the cache did not know, read all at once by the next run. (A file per
    entry cost a cold run of Megatron-LM's 1,344 files up to 0.8 s of creating files.)"""

    def __init__(self, directory: Path, fingerprint: str | None = None) -> None:
        self.fingerprint = fingerprint or linter_fingerprint()
        self.folder = Path(directory, self.fingerprint[:16])
        self._known: dict[str, list] | None = None  # the packs' entries, read on first use
        self._packs: list[Path] = []  # the packs they were read from
        self._new: dict[str, list] = {}
        self._used: set[str] = set()

    def key(self, job) -> str:
        """The key of a ``file_lint.Job``: every field of it (the file's bytes and path, the
        rules enabled for it, what the run found in the other files), so a fact the engine
        adds to a job for the rules is part of the key without a change here."""
        digest = hashlib.sha256(self.fingerprint.encode())
        for field in dataclasses.fields(job):
            value = getattr(job, field.name)
            if isinstance(value, (set, frozenset)):
                value = sorted(value)
            text = value if isinstance(value, bytes) else repr(value).encode()
            digest.update(b"\0%s\0%d\0" % (field.name.encode(), len(text)) + text)
        return digest.hexdigest()

    def holds_nothing(self) -> bool:
        """No pack of this linter version is there (a first run, or a new linter): every file
        will be linted, so a run may start its workers before it knows the keys."""
        if self._known is not None:
            return not self._known
        try:
            return next(self.folder.glob("pack-*.json"), None) is None
        except OSError:
            return True

    def load(self, key: str, path: str) -> list[Finding] | None:
        """The findings stored under ``key`` (reported under ``path``); None when there are
        none or the entry cannot be read."""
        if self._known is None:
            self._known = self._read_packs()
        try:
            findings = [_finding(path, item) for item in self._known[key]]
        except (KeyError, ValueError, TypeError):
            return None
        self._used.add(key)
        return findings

    def store(self, key: str, findings: list[Finding]) -> None:
        """Kept for ``save``."""
        self._new[key] = [_record(finding) for finding in findings]

    def save(self) -> None:
        """Write what ``store`` kept as one new pack; when packs pile up, merge them."""
        if not self._new:
            return
        try:
            if not self.folder.is_dir():
                self._make_folder()
            written = self._write_pack(self._new)
            if len(self._packs) + 1 > MAX_PACKS:
                self._merge(written)
        except OSError:
            pass  # no cache this time; the run's results are already out

    def _read_packs(self) -> dict[str, list]:
        known: dict[str, list] = {}
        try:
            self._packs = sorted(self.folder.glob("pack-*.json"))
        except OSError:
            return known
        for pack in self._packs:  # oldest first: a newer pack's entry wins
            try:
                entries = json.loads(pack.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(entries, dict):
                known.update(entries)
        return known

    def _write_pack(self, entries: dict[str, list]) -> Path:
        # Named so that they sort by age, written under a name no other process uses and
        # renamed into place: a reader sees a whole pack or none.
        name = f"pack-{time.time_ns():020d}-{os.getpid()}.json"
        temporary = self.folder / f".{name}"
        try:
            temporary.write_bytes(json.dumps(entries, separators=(",", ":")).encode())
            os.replace(temporary, self.folder / name)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        return self.folder / name

    def _merge(self, written: Path) -> None:
        """One pack instead of the ones this run read and wrote (packs other runs write
        meanwhile are left alone). Past ``MAX_ENTRIES``, only this run's entries are kept."""
        merged = {**(self._known or {}), **self._new}
        if len(merged) > MAX_ENTRIES:
            merged = {key: merged[key] for key in self._used | set(self._new)}
        self._write_pack(merged)
        for pack in [*self._packs, written]:
            with contextlib.suppress(OSError):
                pack.unlink()

    def _make_folder(self) -> None:
        parent = self.folder.parent
        fresh = not parent.is_dir()
        self.folder.mkdir(parents=True, exist_ok=True)
        if fresh:  # tools that back up or index a tree pass over a tagged cache folder
            (parent / "CACHEDIR.TAG").write_text(
                "Signature: 8a477f597d28d172789f06886806bc55\n# gmlp-lint's cache\n"
            )
        cutoff = time.time() - STALE_DAYS * 86400
        for other in parent.iterdir():
            if other != self.folder and other.is_dir() and other.stat().st_mtime < cutoff:
                shutil.rmtree(other, ignore_errors=True)


def _record(finding: Finding) -> list:
    fix = finding.fix
    stored_fix = None
    if fix is not None:
        edits = [[edit.start, edit.end, edit.text] for edit in fix.edits]
        stored_fix = [fix.message, edits, fix.applicability]
    return [finding.code, finding.line, finding.column, finding.end_line, finding.end_column,
            finding.message, stored_fix]  # fmt: skip


def _finding(path: str, item: list) -> Finding:
    code, line, column, end_line, end_column, message, stored_fix = item
    fix = None
    if stored_fix is not None:
        text, edits, applicability = stored_fix
        fix = Fix(text, tuple(Edit(*edit) for edit in edits), applicability)
    return Finding(code, path, line, column, end_line, end_column, message, fix)
