"""The rules' public face: code, name, summary, documentation and examples.

Each rule's documentation and its VALID / INVALID examples live in ``lint/rules/<code>.py``
as plain data (no libcst), so ``gmlp-lint rule``, the SARIF reporter and configuration
checks never pay for the parser. The examples are also the specification a generic test
runs: each INVALID example yields exactly one finding of its rule on ``line`` and, after
fixes, becomes ``fixed``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from functools import cache
from importlib import import_module

CODES = ("GMLP001", "GMLP002", "GMLP003", "GMLP004", "GMLP100")
SUPPRESSION_CODE = "GMLP100"


@dataclass(frozen=True)
class Example:
    source: str
    line: int | None = None  # INVALID: the line of the one expected finding
    fixed: str | None = None  # INVALID: the source after fixes (None: no fix is offered)
    applicability: str | None = None  # INVALID: "safe" or "unsafe" when fixed is given

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", _dedent(self.source))
        if self.fixed is not None:
            object.__setattr__(self, "fixed", _dedent(self.fixed))


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    explanation: str
    fix: str
    valid: tuple[Example, ...]
    invalid: tuple[Example, ...]

    def documentation(self) -> str:
        """Markdown: what the rule flags, why, the fix, and a bad and a good example."""
        bad = self.invalid[0]
        good = self.valid[0]
        return (
            f"# {self.code} ({self.name})\n\n{self.summary}\n\n"
            f"## Why\n\n{_dedent(self.explanation).strip()}\n\n"
            f"## Fix\n\n{_dedent(self.fix).strip()}\n\n"
            f"## Bad\n\n```python\n{bad.source}```\n\n"
            f"## Good\n\n```python\n{good.source}```\n"
        )


def _dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@cache
def rule(code: str) -> Rule:
    if code not in CODES:
        raise KeyError(code)
    module = import_module(f"lint.rules.{code.lower()}")
    return module.RULE


def all_rules() -> list[Rule]:
    return [rule(code) for code in CODES]
