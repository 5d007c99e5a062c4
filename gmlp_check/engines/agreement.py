"""Do the emulated and the real engines reach the same verdicts? Compares two
``gmlp-check diff --format json`` reports of the same backend and matrix case by case.

    python -m gmlp_check.engines.agreement emulated.json real.json

A verdict is what a case says about the fused side: green (passed, skipped, or xfailed by a
known deviation) or red (failed, xpassed). Prints how many cases reach the same verdict, one
line per case that does not (with the failing observables of each side), and, as notes, the
cases whose verdicts agree but whose statuses differ (a case the real engine xfails because
of a known upstream deviation that the emulation does not model, say); exit 0 when every
verdict agrees, 1 when some differ, 2 when a report cannot be read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

GREEN = ("passed", "skipped", "xfailed")


@dataclass(frozen=True)
class Verdict:
    status: str
    failing: tuple[str, ...]

    @property
    def green(self) -> bool:
        return self.status in GREEN

    def describe(self) -> str:
        return f"{self.status} ({', '.join(self.failing)})" if self.failing else self.status


def verdicts(document: dict) -> dict[str, Verdict]:
    """Case id -> verdict of one report (ValueError when it is not a diff report)."""
    if document.get("schema") != "gmlp-check/diff/v1" or "cases" not in document:
        raise ValueError("expected a gmlp-check/diff/v1 report (gmlp-check diff --format json)")
    return {
        c["id"]: Verdict(
            c["status"], tuple(k["observable"] for k in c["checks"] if not k["passed"])
        )
        for c in document["cases"]
    }


def compare(emulated: dict[str, Verdict], real: dict[str, Verdict]) -> tuple[list[str], list[str]]:
    """(one line per case whose verdict differs or that only one report has, one line per case
    whose verdicts agree but whose statuses differ)."""
    differ, notes = [], []
    for case in sorted(set(emulated) | set(real)):
        e, r = emulated.get(case), real.get(case)
        e_text = e.describe() if e else "absent"
        r_text = r.describe() if r else "absent"
        if e is None or r is None or e.green != r.green:
            differ.append(f"{case}: emulated {e_text}, real {r_text}")
        elif e.status != r.status:
            notes.append(f"{case}: emulated {e_text}, real {r_text}")
    return differ, notes


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(
            "usage: python -m gmlp_check.engines.agreement EMULATED.json REAL.json", file=sys.stderr
        )
        return 2
    loaded = []
    for path in args:
        try:
            with open(path) as f:
                loaded.append(verdicts(json.load(f)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            return 2
    emulated, real = loaded
    differ, notes = compare(emulated, real)
    total = len(set(emulated) | set(real))
    print(f"{total - len(differ)} of {total} cases reach the same verdict")
    for line in differ:
        print(f"  {line}")
    if notes:
        print(f"{len(notes)} of them with different statuses:")
        for line in notes:
            print(f"  {line}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
