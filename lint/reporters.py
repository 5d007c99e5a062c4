"""Writing findings, and the paths that could not be checked or fixed, as text, JSON or
GitHub Actions annotations (SARIF is in ``sarif.py``).

JSON (``--format json``) is a list, one object per finding, sorted by path, line, column:

    {"code": "GMLP001", "path": "pkg/mlp.py", "line": 12, "column": 8, "end_line": 12,
     "end_column": 18, "message": "...", "fixable": true, "fix_applicability": "unsafe"}

Lines and columns count from 1; ``end_column`` is one past the last character.
``fixable`` is true when a fix exists; ``fix_applicability`` says whether ``--fix`` applies
it ("safe") or it needs ``--unsafe-fixes`` ("unsafe"), and is null without a fix. A path
that could not be checked or fixed is an object of the same shape with ``"code": null``
(as ruff reports syntax errors), placed where the problem is, or at 1:1. A path that is not
UTF-8 is shown as ruff shows it, each undecodable run of bytes as U+FFFD, so that the output
is strict UTF-8 JSON (lint/json_text.py, which writes every JSON document of the tools).

In the text format those errors go to stderr as ``error: path:line:column: message`` lines;
the closing summary counts them and never says "All checks passed!" after one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import FileError, Finding


@dataclass(frozen=True)
class Summary:
    """What the closing lines of the text format report besides the findings."""

    unsafe_fixes: bool = False
    fixed: int = 0  # fixes applied (written, or with ``would`` shown)
    fix_mode: bool = False
    would: bool = False  # fixes were shown (``--diff``), not applied
    unchecked: int = 0  # paths that could not be checked
    unwritten: int = 0  # files whose fixes could not be written


def sort_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.path, f.line, f.column, f.code))


def to_json(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    from .json_text import dumps  # only this format pays for json

    entries = [as_dict(f) for f in findings] + [error_as_dict(e) for e in errors]
    entries.sort(key=lambda e: (e["path"], e["line"], e["column"], e["code"] or ""))
    return dumps(entries) + "\n"


def error_as_dict(error: FileError) -> dict:
    line, column = error.line or 1, error.column or 1
    return {
        "code": None,
        "path": error.path,
        "line": line,
        "column": column,
        "end_line": line,
        "end_column": column,
        "message": error.message,
        "fixable": False,
        "fix_applicability": None,
    }


def as_dict(finding: Finding) -> dict:
    return {
        "code": finding.code,
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "message": finding.message,
        "fixable": finding.fixable,
        "fix_applicability": finding.fix.applicability if finding.fix else None,
    }


def render(
    output_format: str, findings: Sequence[Finding], errors: Sequence[FileError], summary: Summary
) -> str:
    """The report in ``output_format`` (text, json, github or sarif)."""
    if output_format == "json":
        return to_json(findings, errors)
    if output_format == "github":
        return to_github(findings, errors)
    if output_format == "sarif":
        from .sarif import to_sarif

        return to_sarif(sort_findings(findings), errors)
    return to_text(findings, summary)


def to_text(findings: Sequence[Finding], summary: Summary) -> str:
    lines = []
    for f in sort_findings(findings):
        marker = " [*]" if f.applicable(summary.unsafe_fixes) else ""
        lines.append(f"{f.path}:{f.line}:{f.column}: {f.code}{marker} {f.message}")
    lines.extend(closing_lines(findings, summary))
    return "\n".join(lines) + "\n"


def closing_lines(findings: Sequence[Finding], summary: Summary) -> list[str]:
    """Ruff-style closing lines, then what could not be checked or written."""
    lines = _finding_lines(findings, summary)
    if summary.unchecked or summary.unwritten:
        if lines == [ALL_PASSED]:
            lines = []  # not all of them were checked
        if summary.unchecked:
            lines.append(f"{_files(summary.unchecked)} could not be checked (errors on stderr).")
        if summary.unwritten:
            lines.append(f"{_files(summary.unwritten)} could not be fixed (errors on stderr).")
    return lines


ALL_PASSED = "All checks passed!"


def _finding_lines(findings: Sequence[Finding], summary: Summary) -> list[str]:
    remaining = len(findings)
    fixed, unsafe_fixes = summary.fixed, summary.unsafe_fixes
    if summary.would and fixed:
        head = f"Would fix {_errors(fixed)} ({remaining} remaining)."
        if not remaining:
            return [head]
    elif summary.fix_mode and fixed:
        total = fixed + remaining
        head = f"Found {_errors(total)} ({fixed} fixed, {remaining} remaining)."
        if not remaining:
            return [head]
    elif not remaining:
        return [ALL_PASSED]
    else:
        head = f"Found {_errors(remaining)}."
    lines = [head]
    applicable = sum(f.applicable(unsafe_fixes) for f in findings)
    hidden = sum(f.fixable and not f.applicable(unsafe_fixes) for f in findings)
    if applicable:
        hint = "--fix --unsafe-fixes" if unsafe_fixes else "--fix"
        lines.append(f"[*] {applicable} fixable with the `{hint}` option.")
    if hidden:
        lines.append(
            f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
            "`--unsafe-fixes` option."
        )
    return lines


def _files(n: int) -> str:
    return f"{n} file{'s' if n != 1 else ''}"


def _errors(n: int) -> str:
    return f"{n} error{'s' if n != 1 else ''}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> str:
    """GitHub Actions workflow commands: one ``::error`` annotation per finding or error."""
    lines = []
    for f in sort_findings(findings):
        text = f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}"
        where = (f.path, f.line, f.column, f.end_line, f.end_column)
        lines.append(_annotation(f"gmlp-lint ({f.code})", where, text))
    for e in errors:
        line, column = e.line or 1, e.column or 1
        text = f"{e.location}: {e.message}"
        lines.append(_annotation("gmlp-lint", (e.path, line, column, line, column), text))
    return "".join(line + "\n" for line in lines)


def _annotation(title: str, where: tuple, text: str) -> str:
    path, line, column, end_line, end_column = where
    properties = ",".join(
        [
            f"title={_escape_property(title)}",
            f"file={_escape_property(path)}",
            f"line={line}",
            f"col={column}",
            f"endLine={end_line}",
            f"endColumn={end_column}",
        ]
    )
    return f"::error {properties}::{_escape_data(text)}"
