"""The checkers: each walks the analysis units of one parsed file and reports findings."""

from __future__ import annotations

from ..analysis.module import ModuleContext
from ..model import Finding
from . import dummy_zero, gating, truthiness
from .base import Collector

# Which codes each checker can produce; a checker runs only when one of them is enabled.
CHECKERS = (
    (frozenset({"GMLP001", "GMLP002"}), gating.check),
    (frozenset({"GMLP003"}), dummy_zero.check),
    (frozenset({"GMLP004"}), truthiness.check),
)


def run_checks(source: str, path: str, enabled: frozenset[str]) -> list[Finding]:
    """Parse ``source`` and run every enabled checker. Raises libcst's ParserSyntaxError."""
    context = ModuleContext(source, path)
    collector = Collector(context, enabled)
    for codes, checker in CHECKERS:
        if codes & enabled:
            checker(context, collector)
    return collector.findings
