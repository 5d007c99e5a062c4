"""Issue #19's class-variant corpus (variant_corpus.py, and variant_corpus_blind2.py for the
second blind set's classes, and the others below): every buggy variant is reported on
its ``# bug`` line, and its correct twin gives no finding at all.

``python -m tests.lint.test_variant_corpus`` prints the recall per class (what the
before/after figures in docs/lint-semantics.md were measured with).
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from gmlp_check.lint import engine

from . import (
    variant_corpus,
    variant_corpus_blind2,
    variant_corpus_blind3,
    variant_corpus_blind4,
    variant_corpus_blind5,
    variant_corpus_blind5_heldout,
    variant_corpus_blind6,
    variant_corpus_blind6_heldout,
    variant_corpus_blind7,
    variant_corpus_class1_calls,
    variant_corpus_class4,
    variant_corpus_class5_converse,
    variant_corpus_class5_paths,
    variant_corpus_class6_absorbed,
    variant_corpus_classes12,
    variant_corpus_classes35,
    variant_corpus_classes56,
    variant_corpus_expert_lists,
    variant_corpus_flag_guard,
)
from .support import ALL_CODES

VARIANTS = (
    variant_corpus.VARIANTS
    + variant_corpus_blind2.VARIANTS
    + variant_corpus_blind3.VARIANTS
    + variant_corpus_blind4.VARIANTS
    + variant_corpus_blind5.VARIANTS
    + variant_corpus_blind5_heldout.VARIANTS
    + variant_corpus_blind6.VARIANTS
    + variant_corpus_blind6_heldout.VARIANTS
    + variant_corpus_blind7.VARIANTS
    + variant_corpus_classes12.VARIANTS
    + variant_corpus_classes56.VARIANTS
    + variant_corpus_class4.VARIANTS
    + variant_corpus_class1_calls.VARIANTS
    + variant_corpus_classes35.VARIANTS
    + variant_corpus_class5_converse.VARIANTS
    + variant_corpus_class5_paths.VARIANTS
    + variant_corpus_expert_lists.VARIANTS
    + variant_corpus_class6_absorbed.VARIANTS
    + variant_corpus_flag_guard.VARIANTS
)
# Correct code alone (variant_corpus_class5_converse.py): no rule may report it.
CLEAN = [
    pytest.param(variant_corpus_class5_converse.clean_source(code), id=f"clean-{name}")
    for name, code in variant_corpus_class5_converse.CLEAN
]

CASES = [pytest.param(v, id=f"class{v.cls}-{v.name}") for v in VARIANTS]
BUGS = [
    pytest.param(
        v,
        id=f"class{v.cls}-{v.name}",
        marks=[pytest.mark.xfail(strict=True, reason=v.unseen)] if v.unseen else [],
    )
    for v in VARIANTS
]


def _caught(variant) -> bool:
    findings = engine.lint_source(variant.bug_source, "variant.py", ALL_CODES)
    return any(f.line in variant.bug_lines for f in findings)


def test_every_variant_marks_its_bug_and_has_a_twin():
    names = [v.name for v in VARIANTS]
    assert len(names) == len(set(names))
    for variant in VARIANTS:
        assert variant.bug_lines, variant.name
        assert variant.twin_source != variant.bug_source, variant.name


@pytest.mark.parametrize("variant", BUGS)
def test_buggy_variant_is_reported_on_its_line(variant):
    findings = engine.lint_source(variant.bug_source, "variant.py", ALL_CODES)
    assert {f.line for f in findings} & variant.bug_lines, findings


@pytest.mark.parametrize("variant", CASES)
def test_correct_twin_is_not_reported(variant):
    findings = engine.lint_source(variant.twin_source, "variant.py", ALL_CODES)
    assert [(f.code, f.line) for f in findings] == list(variant.twin_findings)


@pytest.mark.parametrize("source", CLEAN)
def test_clean_snippet_is_not_reported(source):
    assert engine.lint_source(source, "variant.py", ALL_CODES) == []


def main() -> int:
    caught: Counter[int] = Counter()
    total: Counter[int] = Counter()
    flagged_twins = []
    for variant in VARIANTS:
        total[variant.cls] += 1
        caught[variant.cls] += _caught(variant)
        found = engine.lint_source(variant.twin_source, "variant.py", ALL_CODES)
        if [(f.code, f.line) for f in found] != list(variant.twin_findings):
            flagged_twins.append(variant.name)
    for cls in sorted(total):
        print(f"class {cls}: {caught[cls]} of {total[cls]}")
    print(f"all: {sum(caught.values())} of {sum(total.values())}")
    print(f"twins flagged: {len(flagged_twins)} {flagged_twins}")
    flagged_clean = [
        name
        for name, code in variant_corpus_class5_converse.CLEAN
        if engine.lint_source(variant_corpus_class5_converse.clean_source(code), "v.py", ALL_CODES)
    ]
    print(f"clean snippets flagged: {len(flagged_clean)} {flagged_clean}")
    unseen = [v.name for v in VARIANTS if v.unseen]
    print(f"declared unseen: {len(unseen)} {unseen}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
