"""Issue #19, "design for the class of bug, not the instance": every buggy snippet that has a
correct twin today (the variant corpora, each rule's examples), mutated without changing
what it does (tests/lint/mutations.py), must still be reported by the rule that reports it,
and every correct snippet's mutant must stay clean. The ids are generated from the data:
``<mutation>-<snippet>``. Known misses and false alarms, with why, are strict xfails
(mutation_expected.py).

``python -m tests.lint.mutation_table`` prints the per-rule table of docs/lint-semantics.md.
"""

from __future__ import annotations

import pytest

from .mutation_cases import cases
from .mutation_expected import FALSE_ALARMS, MISSES
from .mutation_table import CAUGHT, CLEAN, outcome
from .mutations import MUTATIONS, mutate


def _mutants():
    for case in cases():
        for name in MUTATIONS:
            mutant = mutate(name, case.source)
            if mutant is not None:
                yield case, name, mutant


MUTANTS = list(_mutants())


def _expected_miss(case, name) -> str:
    for code in sorted(case.codes):
        reason, ids = MISSES.get((name, code), ("", frozenset()))
        if case.id in ids:
            return reason
    return ""


def _param(case, name, mutant, reason):
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, mutant, id=f"{name}-{case.id}", marks=marks)


BUGGY = [
    _param(case, name, mutant, _expected_miss(case, name))
    for case, name, mutant in MUTANTS
    if case.buggy
]
CORRECT = [
    _param(case, name, mutant, FALSE_ALARMS.get((name, case.id), ""))
    for case, name, mutant in MUTANTS
    if not case.buggy
]


@pytest.mark.parametrize(("case", "mutant"), BUGGY)
def test_buggy_mutant_is_reported_by_its_rule(case, mutant):
    assert outcome(case, mutant) == CAUGHT


@pytest.mark.parametrize(("case", "mutant"), CORRECT)
def test_correct_mutant_stays_clean(case, mutant):
    assert outcome(case, mutant) == CLEAN


def test_every_expectation_names_a_mutant_that_exists():
    made = {(name, case.id) for case, name, _ in MUTANTS}
    for (name, _code), (_reason, ids) in MISSES.items():
        assert name in MUTATIONS
        assert {(name, i) for i in ids} <= made, (name, ids - {i for n, i in made if n == name})
    assert set(FALSE_ALARMS) <= made


def test_every_buggy_snippet_is_reported_before_mutation():
    for case in cases():
        if case.buggy:
            assert outcome(case, case.source) == CAUGHT, case.id
        else:
            assert outcome(case, case.source) == CLEAN, case.id


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_every_mutation_applies_somewhere(name):
    applied = [case.id for case, mutation, _ in MUTANTS if mutation == name]
    assert len(applied) >= 2, name
