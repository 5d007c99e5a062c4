"""The values every part of gmlp-lint passes around: findings, fixes and text edits.

Kept free of libcst so reporters, config and the CLI can use them without paying for the
parser import on files that never need parsing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """Replace source[start:end] (character offsets into the file's text) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    applicability: str  # SAFE or UNSAFE

    @property
    def is_safe(self) -> bool:
        return self.applicability == SAFE


@dataclass(frozen=True)
class Finding:
    """One diagnostic. Lines and columns count from 1; end_column is one past the last
    character (the SARIF convention)."""

    code: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    fix: Fix | None = None

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def applicable(self, unsafe_fixes: bool) -> bool:
        return self.fix is not None and (self.fix.is_safe or unsafe_fixes)


@dataclass(frozen=True)
class FileError:
    """A path that could not be checked or fixed: missing, unreadable, not valid Python, or
    not written. ``line``/``column`` (from 1) point at the problem when it has a place."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    @property
    def location(self) -> str:
        if self.line is None:
            return self.path
        return f"{self.path}:{self.line}:{self.column or 1}"


@dataclass
class FileResult:
    """What linting one file produced. ``error`` is set when the file could not be read or
    parsed. With fixes, ``fixed_source`` holds the fixed text (nothing is written here),
    ``findings`` what remains after the fixes and ``unfixed_findings`` what the file as it
    is on disk has (what to report if the fixes cannot be written)."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: FileError | None = None
    source: str | None = None
    encoding: str = "utf-8"
    fixed_source: str | None = None
    fixed_count: int = 0
    unfixed_findings: list[Finding] = field(default_factory=list)
