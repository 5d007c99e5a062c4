"""``# gmlp: ignore[GMLP001] reason`` comments: which findings they silence, and GMLP100 for
the ones that silence nothing.

A comment on line N covers findings that start on line N or N+1. Comments are read with
``tokenize``, so the same text inside a string is not a suppression.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from .catalog import CODES, SUPPRESSION_CODE
from .model import SAFE, Edit, Finding, Fix

MARKER = "gmlp:"
_PATTERN = re.compile(r"#\s*gmlp:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")


@dataclass
class Suppression:
    line: int
    column: int  # of the ``#``, from 0
    end_column: int  # end of the suppression part of the comment, from 0
    codes: list[str] | None  # None: no bracketed list of codes
    comment_start: int  # offsets of the whole comment token in the source
    comment_end: int
    comment_text: str
    line_text: str
    line_start: int
    used: set[str]


def parse(source: str) -> list[Suppression]:
    if MARKER not in source:
        return []
    import tokenize  # only files with a suppression comment pay for it

    line_starts = [0]
    for i, char in enumerate(source):
        if char == "\n":
            line_starts.append(i + 1)
    lines = source.splitlines(keepends=True)
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = _PATTERN.search(token.string)
        if match is None:
            continue
        line, column = token.start
        raw = match.group("codes")
        codes = None if raw is None else [c.strip().upper() for c in raw.split(",") if c.strip()]
        start = line_starts[line - 1] + column
        found.append(
            Suppression(
                line=line,
                column=column + match.start(),
                end_column=column + match.end(),
                codes=codes,
                comment_start=start,
                comment_end=start + len(token.string),
                comment_text=token.string,
                line_text=lines[line - 1] if line - 1 < len(lines) else "",
                line_start=line_starts[line - 1],
                used=set(),
            )
        )
    return found


def apply(
    findings: list[Finding], suppressions: list[Suppression], path: str, enabled: frozenset[str]
) -> list[Finding]:
    """The findings that no suppression covers, plus GMLP100 findings when enabled."""
    by_line: dict[int, list[Suppression]] = {}
    for suppression in suppressions:
        by_line.setdefault(suppression.line, []).append(suppression)
    kept = []
    for finding in findings:
        if not _silenced(finding, by_line):
            kept.append(finding)
    if SUPPRESSION_CODE in enabled:
        kept.extend(_unused(s, path, enabled) for s in suppressions)
    return [f for f in kept if f is not None]


def _silenced(finding: Finding, by_line: dict[int, list[Suppression]]) -> bool:
    for line in (finding.line, finding.line - 1):
        for suppression in by_line.get(line, ()):
            if suppression.codes and finding.code in suppression.codes:
                suppression.used.add(finding.code)
                return True
    return False


def _unused(s: Suppression, path: str, enabled: frozenset[str]) -> Finding | None:
    def finding(message: str, fix: Fix | None) -> Finding:
        return Finding(
            SUPPRESSION_CODE, path, s.line, s.column + 1, s.line, s.end_column + 1, message, fix
        )

    if s.codes is None or not s.codes:
        return finding(
            "suppression names no rule: write `# gmlp: ignore[GMLP00x] reason` (a blanket "
            "suppression would hide future rules)",
            None,
        )
    unknown = [c for c in s.codes if c not in CODES]
    unused = [c for c in s.codes if c in CODES and c in enabled and c not in s.used]
    if not unknown and not unused:
        return None
    drop = set(unknown) | set(unused)
    parts = []
    if unknown:
        parts.append(f"unknown rule {', '.join(unknown)}")
    if unused:
        parts.append(f"unused suppression of {', '.join(unused)}")
    remaining = [c for c in s.codes if c not in drop]
    if remaining:
        edit = _rewrite_codes(s, remaining)
        fix = Fix(f"Keep only {', '.join(remaining)}", (edit,), SAFE)
    else:
        fix = Fix("Remove the suppression comment", (_remove_comment(s),), SAFE)
    return finding("; ".join(parts), fix)


def _rewrite_codes(s: Suppression, remaining: list[str]) -> Edit:
    text = _PATTERN.sub(lambda m: f"# gmlp: ignore[{', '.join(remaining)}]", s.comment_text, 1)
    return Edit(s.comment_start, s.comment_end, text)


def _remove_comment(s: Suppression) -> Edit:
    start = s.line_start + s.column  # where ``# gmlp:`` starts (maybe after another comment)
    before = s.line_text[: start - s.line_start]
    if not before.strip():
        # A comment on a line of its own: drop the whole line.
        return Edit(s.line_start, s.line_start + len(s.line_text), "")
    return Edit(s.line_start + len(before.rstrip()), s.comment_end, "")
