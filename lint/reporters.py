"""Writing findings as text, JSON or GitHub Actions annotations (SARIF is in ``sarif.py``).

JSON (``--format json``) is a list, one object per finding, sorted by path, line, column:

    {"code": "GMLP001", "path": "pkg/mlp.py", "line": 12, "column": 8, "end_line": 12,
     "end_column": 18, "message": "...", "fixable": true, "fix_applicability": "unsafe"}

Lines and columns count from 1; ``end_column`` is one past the last character.
``fixable`` is true when a fix exists; ``fix_applicability`` says whether ``--fix`` applies
it ("safe") or it needs ``--unsafe-fixes`` ("unsafe"), and is null without a fix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .model import Finding


def sort_findings(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.path, f.line, f.column, f.code))


def to_json(findings: Sequence[Finding]) -> str:
    return json.dumps([as_dict(f) for f in sort_findings(findings)], indent=2) + "\n"


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


def to_text(
    findings: Sequence[Finding],
    *,
    unsafe_fixes: bool,
    fixed: int = 0,
    fix_mode: bool = False,
    would: bool = False,
) -> str:
    lines = []
    for f in sort_findings(findings):
        marker = " [*]" if f.applicable(unsafe_fixes) else ""
        lines.append(f"{f.path}:{f.line}:{f.column}: {f.code}{marker} {f.message}")
    lines.extend(
        summary(findings, unsafe_fixes=unsafe_fixes, fixed=fixed, fix_mode=fix_mode, would=would)
    )
    return "\n".join(lines) + "\n"


def summary(
    findings, *, unsafe_fixes: bool, fixed: int, fix_mode: bool, would: bool = False
) -> list[str]:
    """Ruff-style closing lines. ``would``: fixes were shown (``--diff``), not applied."""
    remaining = len(findings)
    if would and fixed:
        head = f"Would fix {_errors(fixed)} ({remaining} remaining)."
        if not remaining:
            return [head]
    elif fix_mode and fixed:
        total = fixed + remaining
        head = f"Found {_errors(total)} ({fixed} fixed, {remaining} remaining)."
        if not remaining:
            return [head]
    elif not remaining:
        return ["All checks passed!"]
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


def _errors(n: int) -> str:
    return f"{n} error{'s' if n != 1 else ''}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(findings: Sequence[Finding]) -> str:
    """GitHub Actions workflow commands: one ``::error`` annotation per finding."""
    lines = []
    for f in sort_findings(findings):
        properties = ",".join(
            [
                f"title={_escape_property(f'gmlp-lint ({f.code})')}",
                f"file={_escape_property(f.path)}",
                f"line={f.line}",
                f"col={f.column}",
                f"endLine={f.end_line}",
                f"endColumn={f.end_column}",
            ]
        )
        text = _escape_data(f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}")
        lines.append(f"::error {properties}::{text}")
    return "".join(line + "\n" for line in lines)
