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


@dataclass
class FileResult:
    """What linting one file produced. ``error`` is set when the file could not be read or
    parsed; ``fixed_source`` when fixes changed it (nothing is written here)."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    source: str | None = None
    fixed_source: str | None = None
    fixed_count: int = 0
