"""The snippets the mutation tests mutate: every buggy snippet that exists today with what it
must stay (reported by its rule) and every correct one (clean).

* the class-variant corpora (variant_corpus*.py): each buggy variant a rule catches today,
  with the codes reported on its ``# bug`` lines, and its correct twin;
* each rule's own examples (lint/rules/*.py): every INVALID example (its line gets a ``# bug``
  mark) and every VALID one, linted with the other files of the run the example names.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gmlp_check.lint import engine
from gmlp_check.lint.class_facts import class_facts
from gmlp_check.lint.project import NO_RUN_FACTS, run_facts
from gmlp_check.lint.registry import MODULE, all_rules
from gmlp_check.lint.slot_facts import slot_facts

from . import (
    variant_corpus,
    variant_corpus_blind2,
    variant_corpus_blind3,
    variant_corpus_blind4,
    variant_corpus_blind5,
    variant_corpus_blind5_heldout,
    variant_corpus_blind6,
    variant_corpus_blind6_heldout,
)
from .mutations import MARK
from .support import ALL_CODES


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    codes: frozenset[str]  # buggy: the rules that report it; empty: correct code
    others: tuple[tuple[str, str], ...] = ()

    @property
    def buggy(self) -> bool:
        return bool(self.codes)


def classes(case: Case, source: str):
    """The delayed-wgrad classes of the case's other files, as the engine gives them."""
    if not case.others:
        return ()
    files = [(path, text.encode()) for path, text in case.others]
    return class_facts([*files, ("example.py", source.encode())]).get("example.py", ())


def facts(case: Case, source: str):
    """What the run knows of the functions of the case and its other files, as the engine
    gives it to the case's file (GMLP028 needs a run fact from another file)."""
    if not case.others:
        return NO_RUN_FACTS
    files = [(path, text.encode()) for path, text in case.others]
    return run_facts([*files, ("example.py", source.encode())])


def slots(case: Case, source: str):
    """The case's classes its other files plug into a slot whose backward_dw they call
    (GMLP039), as the engine gives them to the case's file."""
    if not case.others:
        return ()
    files = [(path, text.encode()) for path, text in case.others]
    return slot_facts([*files, ("example.py", source.encode())]).get("example.py", ())


def lint(case: Case, source: str):
    return engine.lint_source(
        source,
        "example.py",
        ALL_CODES,
        facts(case, source),
        classes(case, source),
        slots(case, source),
    )


def bug_lines(source: str) -> frozenset[int]:
    return frozenset(i for i, line in enumerate(source.splitlines(), start=1) if MARK in line)


def _mark_line(source: str, line: int) -> str:
    lines = source.splitlines(keepends=True)
    text = lines[line - 1].rstrip("\n")
    lines[line - 1] = f"{text}  {MARK}\n" if "#" not in text else f"{text} bug\n"
    return "".join(lines)


@cache
def cases() -> tuple[Case, ...]:
    found = []
    corpora = variant_corpus.VARIANTS + variant_corpus_blind2.VARIANTS
    corpora += variant_corpus_blind3.VARIANTS + variant_corpus_blind4.VARIANTS
    corpora += variant_corpus_blind5.VARIANTS + variant_corpus_blind5_heldout.VARIANTS
    corpora += variant_corpus_blind6.VARIANTS + variant_corpus_blind6_heldout.VARIANTS
    for variant in corpora:
        name = f"class{variant.cls}-{variant.name}"
        found.append(Case(f"{name}-twin", variant.twin_source, frozenset()))
        if variant.unseen:
            continue
        lines = variant.bug_lines
        findings = engine.lint_source(variant.bug_source, "variant.py", ALL_CODES)
        codes = frozenset(f.code for f in findings if f.line in lines)
        found.append(Case(name, variant.bug_source, codes))
    for rule in all_rules():
        if rule.scope != MODULE:
            continue
        for index, example in enumerate(rule.invalid):
            source = _mark_line(example.source, example.line)
            found.append(
                Case(f"{rule.code}-invalid-{index}", source, frozenset({rule.code}), example.others)
            )
        for index, example in enumerate(rule.valid):
            found.append(
                Case(f"{rule.code}-valid-{index}", example.source, frozenset(), example.others)
            )
    return tuple(found)
