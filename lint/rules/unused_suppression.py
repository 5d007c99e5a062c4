"""GMLP100: a suppression comment that suppresses nothing."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..model import SAFE, Edit, Finding, Fix
from ..registry import CODES, SUPPRESSIONS, Example, Rule
from ..suppressions import PATTERN

if TYPE_CHECKING:
    from ..suppressions import Suppression

CODE = "GMLP100"
RULE = Rule(
    code=CODE,
    classes=(),
    name="unused-suppression",
    summary=(
        "A `# gmlp: ignore[...]` comment names a rule that reports nothing on its line or "
        "the next, names an unknown rule, or names none."
    ),
    flags="a suppression that suppresses nothing, names an unknown rule, or names none",
    explanation="""
        A suppression `# gmlp: ignore[GMLP001] reason` silences the named rules on its own
        line and on the line below. Once the code is fixed the comment becomes a blind spot
        waiting for the next bug, so a code that suppresses nothing is reported. Only rules
        enabled for the file are judged: a suppression of a rule that `ignore` turns off is
        left alone. A bare `# gmlp: ignore` (no codes) is reported too: blanket suppressions
        would hide future rules.

        Not seen: suppressions of rules not enabled for the file (with `--select GMLP100` alone,
        none of them is judged); comments not spelled `# gmlp: ignore` (`# GMLP: ignore[GMLP004]`,
        `# noqa: GMLP004`), which neither silence nor get reported; the same text inside a string.
        A finding covered both on its line and from the line above uses the suppression on its own
        line, and the one above is reported. A suppression of GMLP100 itself silences nothing (its
        findings come after the others') and is reported as unused.
    """,
    fix="""
        Remove the unused codes, or the suppression when none is used (safe); another
        comment after it on the line (`# type: ignore`, `# pragma: no cover`) is kept.
    """,
    fix_summary="remove it (safe)",
    scope=SUPPRESSIONS,
    valid=(
        Example(
            """
            def fetch(param):
                # gmlp: ignore[GMLP004] one-element buffer, value test intended
                if param.main_grad:
                    return param.main_grad
            """
        ),
        Example(
            """
            def fetch(param):
                if param.main_grad:  # gmlp: ignore[GMLP004] value test intended
                    return param.main_grad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def fetch(param):
                if param.main_grad is None:  # gmlp: ignore[GMLP004] stale
                    param.main_grad = param.get_main_grad()
            """,
            line=2,
            fixed="""
            def fetch(param):
                if param.main_grad is None:
                    param.main_grad = param.get_main_grad()
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                # gmlp: ignore[GMLP001, GMLP004] value test intended
                if param.main_grad:
                    return param.main_grad
            """,
            line=2,
            fixed="""
            def fetch(param):
                # gmlp: ignore[GMLP004] value test intended
                if param.main_grad:
                    return param.main_grad
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                # gmlp: ignore[GMLP999]
                return param.main_grad
            """,
            line=2,
            fixed="""
            def fetch(param):
                return param.main_grad
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                return param.main_grad  # gmlp: ignore
            """,
            line=2,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
def check(suppressions: list[Suppression], path: str, enabled: frozenset[str]) -> list[Finding]:
    """A finding for each suppression that names no rule, an unknown rule, or an enabled rule
    that reported nothing it covers (``suppressions.apply`` has marked the used codes)."""
    found = (_judge(s, path, enabled) for s in suppressions)
    return [f for f in found if f is not None]


def _judge(s: Suppression, path: str, enabled: frozenset[str]) -> Finding | None:
    def finding(message: str, fix: Fix | None) -> Finding:
        return Finding(CODE, path, s.line, s.column + 1, s.line, s.end_column + 1, message, fix)

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
    text = PATTERN.sub(lambda m: f"# gmlp: ignore[{', '.join(remaining)}]", s.comment_text, 1)
    return Edit(s.comment_start, s.comment_end, text)


def _remove_comment(s: Suppression) -> Edit:
    start = s.line_start + s.column  # where ``# gmlp:`` starts (maybe after another comment)
    before = s.line_text[: start - s.line_start]
    # Another comment after the suppression's codes and reason (``# type: ignore``,
    # ``# pragma: no cover``) belongs to another tool: it stays. The suppression
    # ends where a ``#`` after white space starts the next one.
    after = s.comment_text[s.end_column - (s.comment_start - s.line_start) :]
    tail = _NEXT_COMMENT.search(after)
    if tail is not None:
        return Edit(start, s.comment_end - len(after) + tail.start("hash"), "")
    if not before.strip():
        # A comment on a line of its own: drop the whole line.
        return Edit(s.line_start, s.line_start + len(s.line_text), "")
    return Edit(s.line_start + len(before.rstrip()), s.comment_end, "")


_NEXT_COMMENT = re.compile(r"\s(?P<hash>#)(?=[\sA-Za-z])")  # not ``#12``, an issue number
