"""Applying fixes to source text: non-overlapping fixes in one pass; a fix that overlaps an
earlier one waits for the next pass (``file_lint`` re-lints between passes).

Rules write their new lines with ``\n``; here, for every rule, each inserted newline becomes
the ending of the line the edit is on (the file's first ending when that line has none), so
a CRLF file stays CRLF and a file with lone ``\r`` endings keeps them."""

from __future__ import annotations

from collections.abc import Iterable

from . import lines
from .model import Edit, Finding


def apply_fixes(source: str, findings: Iterable[Finding], unsafe: bool) -> tuple[str, int]:
    """The source with every applicable, non-overlapping fix applied, and how many were."""
    chosen: list[Edit] = []
    applied = 0
    candidates = sorted(
        (f for f in findings if f.applicable(unsafe)),
        key=lambda f: min(e.start for e in f.fix.edits),
    )
    for finding in candidates:
        edits = finding.fix.edits
        if any(_overlaps(edit, other) for edit in edits for other in chosen):
            continue
        chosen.extend(edits)
        applied += 1
    if not chosen:
        return source, 0
    pieces = []
    cursor = 0
    for edit in sorted(chosen, key=lambda e: (e.start, e.end)):
        pieces.append(source[cursor : edit.start])
        pieces.append(lines.with_newline(edit.text, _newline_at(source, edit.start)))
        cursor = edit.end
    pieces.append(source[cursor:])
    return "".join(pieces), applied


def _newline_at(source: str, offset: int) -> str:
    return lines.ending_at(source, offset) or lines.first_ending(source)


def _overlaps(a: Edit, b: Edit) -> bool:
    if a.start == a.end or b.start == b.end:  # insertions clash only at the same point
        return a.start == b.start or (b.start < a.start < b.end) or (a.start < b.start < a.end)
    return a.start < b.end and b.start < a.end
