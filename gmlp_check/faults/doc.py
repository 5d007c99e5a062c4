"""docs/faults.md, generated from the declarations it documents (the faults, the bug classes,
the diagnosis rules and symptoms): ``python -m gmlp_check.faults.doc`` rewrites it,
``--check`` exits 1 when it is stale (tests/gmlp_check/test_faults_doc.py runs that)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..diagnosis import markdown_rules
from . import FAULTS
from .classes import BUG_CLASSES

DOC = Path(__file__).resolve().parents[2] / "docs" / "faults.md"

INTRO = """# Faults, diagnosis, source pointing and reproductions

(Generated from `gmlp_check/faults/` and `gmlp_check/diagnosis/` by
`python -m gmlp_check.faults.doc`; do not edit by hand.)

`gmlp-check mutants --fused SPEC` proves the checker on a backend: it runs the matrix once
clean and once per fault, and passes when the clean run passes and every applicable fault is
caught. When no fault applies to any selected case nothing is proven: it says so and exits 2.

*Surface* faults wrap whatever module the factory built (our backends, Transformer Engine's
adapters, Megatron's, a user's `module:factory`) and rewrite what the real backend did where
CONTRACT.md speaks: each weight's gradient as it is delivered (after `backward()`, or when
`backward_dw()` fires the hooks registered with
`register_wgrad_accumulation_and_reduce_hooks`), before the engine's hook looks at it, and the
reduce hooks themselves. Each applies to the cases where its bug changes something the
contract fixes. *Policy* faults corrupt one decision of our own backends' main_grad policy
(triton, torch-grouped-mm) and apply to every case there. `fused/` has no switch that exists
only to break it.

A failing case is diagnosed: symptoms read from both sides' observations (which buffers,
stages, flags, dummies and hooks went wrong) are matched against the rules below, in order;
the text, JSON (`diagnosis`) and JUnit (`diagnosis` property) reports carry the result.
`gmlp-check diff --point-source` then lints the definitions the backend ran (its classes and
the autograd functions of one forward pass) with gmlp-lint and lists the findings of the
diagnosed class with file and line. `gmlp-check diff --write-repro DIR` writes each failing case
as one Python file that needs only torch and the backend, embeds the case's data and the fp32
reference's weight gradients, and asserts what the contract asks of the fused side.
"""


def markdown_faults() -> str:
    lines = [
        "| fault | kind | bug class | applies to | caught by | upstream | what it does |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in FAULTS.values():
        caught_by = ", ".join(f"`{o}`" for o in f.observables) or "-"
        lines.append(
            f"| `{f.name}` | {f.kind} | {f.bug_class} | {f.applies_doc} | {caught_by} | "
            f"{f.upstream or 'none known'} | {f.description} |"
        )
    return "\n".join(lines)


def markdown_classes() -> str:
    lines = [
        "| bug class | what goes wrong | CONTRACT.md row | gmlp-lint rules |",
        "|---|---|---|---|",
    ]
    for c in BUG_CLASSES.values():
        rules = ", ".join(c.lint_rules) or "-"
        lines.append(f"| {c.name} | {c.title} | {c.contract or '-'} | {rules} |")
    return "\n".join(lines)


def render() -> str:
    return "\n".join(
        [
            INTRO,
            "## Faults\n",
            markdown_faults(),
            "\n## Bug classes\n",
            markdown_classes(),
            "\n## Diagnosis rules (first match wins)\n",
            markdown_rules(),
            "",
        ]
    )


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        return 0 if DOC.exists() and DOC.read_text() == text else 1
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
