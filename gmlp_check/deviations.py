"""Known deviations: differences between a real stack and the contract that are deliberate,
harmless or upstream bugs already written up. Each backend has a table of expected failures
(a case selection, the observables that fail there, why, and the upstream reference), with the
semantics of pytest's strict xfail: a matching case is *xfailed* when exactly those
observables fail, and fails as usual when another observable fails too or when it passes
(*xpassed*: the deviation is gone, so the table is stale).

The tables are data (``KNOWN``) from which the README's per-backend tables are generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .selection import compile_expression


@dataclass(frozen=True)
class Deviation:
    cases: str  # a -k expression over case ids
    observables: tuple[str, ...]  # exactly the observables that fail in those cases
    reason: str
    upstream: str  # where it is discussed or fixed upstream (a PR, an issue, a file:line)
    kind: str = "bug"  # "bug" (upstream bug, kept failing in plain runs) or "deviation"

    def matches(self, case_id: str) -> bool:
        return compile_expression(self.cases)(case_id)


# backend name -> its known deviations. Filled in from runs against the real stacks on an
# H200 (README: "What gmlp-check finds in Transformer Engine ..."); the triton backend has none.
KNOWN: dict[str, tuple[Deviation, ...]] = {}


def for_backend(spec: str) -> tuple[Deviation, ...]:
    return KNOWN.get(spec, ())


def expected_for(deviations: Sequence[Deviation], case_id: str) -> Deviation | None:
    """The deviation listed for a case, if any (the first that matches)."""
    return next((d for d in deviations if d.matches(case_id)), None)


def markdown_table(spec: str) -> str:
    rows = for_backend(spec)
    if not rows:
        return f"No known deviations for `{spec}`."
    lines = [
        "| cases (-k) | failing observables | kind | reason | upstream |",
        "|---|---|---|---|---|",
    ]
    for d in rows:
        observables = ", ".join(f"`{o}`" for o in d.observables)
        lines.append(f"| `{d.cases}` | {observables} | {d.kind} | {d.reason} | {d.upstream} |")
    return "\n".join(lines)
