"""What a blind corpus's tests share: a variant's findings as (code, line) pairs, its
outcome ("caught": a finding on a ``# bug`` line that the twin does not carry; "near": a
finding elsewhere in the buggy snippet that the twin lacks; "missed": neither), the corpus's
shape, and the per-class table that ``python -m tests.lint.test_blindN_corpus`` prints."""

from __future__ import annotations

from collections import Counter

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES

# name: (outcome, findings on the buggy snippet, findings on the twin), findings as (code, line)
Outcomes = dict[str, tuple[str, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]]


def pairs(source: str) -> tuple[tuple[str, int], ...]:
    found = engine.lint_source(source, "variant.py", ALL_CODES)
    return tuple(sorted((f.code, f.line) for f in found))


def outcome(variant) -> str:
    bug, twin = pairs(variant.bug_source), pairs(variant.twin_source)
    # A finding the twin carries on the same line is about the code around the bug (a real
    # issue the twin keeps), not the bug: it does not count as catching it.
    if any(line in variant.bug_lines and (code, line) not in twin for code, line in bug):
        return "caught"
    return "near" if set(bug) - set(twin) else "missed"


def recorded_form(variant) -> tuple:
    """(outcome, findings on the buggy snippet, findings on the twin): what ``Outcomes``
    records for a variant, computed now."""
    return outcome(variant), pairs(variant.bug_source), pairs(variant.twin_source)


def shape_problems(variants, outcomes: Outcomes, per_class: tuple[int, int]) -> list[str]:
    """What is wrong with a corpus's shape: duplicate names, a class outside 1-8 or with
    another number of variants than ``per_class`` allows, a variant without a ``# bug``
    line, or one the recorded outcomes do not name."""
    problems = []
    names = [v.name for v in variants]
    if len(names) != len(set(names)):
        problems.append("duplicate names")
    counts = Counter(v.cls for v in variants)
    low, high = per_class
    problems += [f"class {c}: {n} variants" for c, n in counts.items() if not low <= n <= high]
    problems += [f"class {c} outside 1-8" for c in counts if c not in range(1, 9)]
    for variant in variants:
        if not variant.bug_lines or variant.twin_source == variant.bug_source:
            problems.append(f"{variant.name}: no bug line, or the twin is the bug")
        if variant.unseen or variant.twin_findings:
            problems.append(f"{variant.name}: a blind variant carries no expectations")
    if set(outcomes) != set(names):
        problems.append(f"outcomes differ from the variants: {set(outcomes) ^ set(names)}")
    return problems


def print_table(variants) -> None:
    counts: dict[str, Counter[int]] = {k: Counter() for k in ("caught", "near", "missed")}
    total: Counter[int] = Counter()
    twins: Counter[int] = Counter()
    for variant in variants:
        result = outcome(variant)
        twin = pairs(variant.twin_source)
        total[variant.cls] += 1
        counts[result][variant.cls] += 1
        twins[variant.cls] += bool(twin)
        print(
            f"class {variant.cls} {variant.name}: {result}"
            f" bug_lines={sorted(variant.bug_lines)}"
            f" bug_findings={list(pairs(variant.bug_source))} twin={list(twin)}"
        )
    for cls in sorted(total):
        print(
            f"class {cls}: {counts['caught'][cls]} caught + {counts['near'][cls]} near"
            f" of {total[cls]}, {counts['missed'][cls]} missed, {twins[cls]} twins reported"
        )
    print(
        f"all: {sum(counts['caught'].values())} caught + {sum(counts['near'].values())} near"
        f" of {sum(total.values())}, {sum(twins.values())} twins reported"
    )


def split_shape_problems(development, held_out, outcomes: Outcomes) -> list[str]:
    """``shape_problems`` for a corpus split before measuring: 16 development variants, two
    per class, and 8 held out, one per class."""
    problems = shape_problems(development + held_out, outcomes, (3, 3))
    if (len(development), len(held_out)) != (16, 8):
        problems.append(f"{len(development)} development and {len(held_out)} held out")
    if sorted(v.cls for v in held_out) != list(range(1, 9)):
        problems.append("the held-out part is not one variant per class")
    return problems


def print_split_tables(development, held_out) -> None:
    """The per-class tables of a split corpus, development then held out."""
    print("development:")
    print_table(development)
    print("held out:")
    print_table(held_out)


def split_corpus_tests(development, held_out, outcomes: Outcomes):
    """The tests of a split corpus's module, bound to that corpus: its shape, and each
    variant's outcome and findings against the recorded ones. A module assigns them to
    module-level names starting with ``test_`` for pytest to collect."""
    by_name = {v.name: v for v in development + held_out}

    def test_corpus_shape():
        assert split_shape_problems(development, held_out, outcomes) == []

    @pytest.mark.parametrize("name", sorted(by_name))
    def test_variant_outcome_and_findings_are_the_recorded_ones(name):
        assert recorded_form(by_name[name]) == outcomes[name]

    return test_corpus_shape, test_variant_outcome_and_findings_are_the_recorded_ones
