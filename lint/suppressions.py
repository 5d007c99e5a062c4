"""``# gmlp: ignore[GMLP001] reason`` comments: reading them and silencing the findings they
cover. The rule that reports the ones that silence nothing (GMLP100) judges them afterwards.

A comment on line N covers findings that start on line N or N+1. Comments are read with
``tokenize``, so the same text inside a string is not a suppression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import lines, registry
from .model import Finding

MARKER = "gmlp:"
PATTERN = re.compile(r"#\s*gmlp:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")


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

    line_starts = lines.line_starts(source)
    source_lines = lines.split(source)
    # tokenize splits at ``\n`` only: it reads each line with its ending written as ``\n``, so
    # its line numbers and columns are Python's (and libcst's) in files with ``\r`` endings.
    for_tokenize = [lines.ENDING.sub("\n", line) for line in source_lines]
    found = []
    try:
        tokens = list(tokenize.generate_tokens(iter(for_tokenize).__next__))
    except (tokenize.TokenError, SyntaxError):
        return []
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = PATTERN.search(token.string)
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
                line_text=source_lines[line - 1] if line - 1 < len(source_lines) else "",
                line_start=line_starts[line - 1],
                used=set(),
            )
        )
    return found


def apply(
    findings: list[Finding], suppressions: list[Suppression], path: str, enabled: frozenset[str]
) -> list[Finding]:
    """The findings that no suppression covers, plus the suppression rule's findings (GMLP100)
    when it is enabled."""
    by_line: dict[int, list[Suppression]] = {}
    for suppression in suppressions:
        by_line.setdefault(suppression.line, []).append(suppression)
    kept = [finding for finding in findings if not _silenced(finding, by_line)]
    code = registry.suppression_code()
    if code in enabled:
        kept.extend(registry.check_of(code)(suppressions, path, enabled))
    return kept


def _silenced(finding: Finding, by_line: dict[int, list[Suppression]]) -> bool:
    for line in (finding.line, finding.line - 1):
        for suppression in by_line.get(line, ()):
            if suppression.codes and finding.code in suppression.codes:
                suppression.used.add(finding.code)
                return True
    return False
