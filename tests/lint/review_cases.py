"""What the review tests share: a reviewer's cases kept as files under ``fixtures/<dir>``
(``fa-*`` correct code a first version flagged, ``miss-*`` buggy code, ``hit-*`` / ``ok-*``
controls, ``crash-*`` odd syntax), and the codes each reports with every rule on."""

from __future__ import annotations

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES, FIXTURES


def case_files(directory: str) -> list[str]:
    return sorted(path.name for path in (FIXTURES / directory).glob("*.py"))


def case_codes(directory: str, name: str) -> set[str]:
    source = (FIXTURES / directory / name).read_text()
    return {f.code for f in engine.lint_source(source, name, ALL_CODES)}


def review_tests(directory: str, expected: dict[str, set[str]], reviewed: frozenset[str]):
    """The tests of a review's module, bound to its cases: every expectation names a case;
    each case reports exactly its recorded codes (``expected``; a file not named there
    reports nothing); correct code a first version flagged (``fa-*``) stays clean of the
    reviewed rules. A module assigns them to names starting with ``test_``."""
    files = case_files(directory)

    def test_every_expectation_names_a_case():
        assert set(expected) <= set(files)

    @pytest.mark.parametrize("name", files)
    def test_case_reports_the_recorded_codes(name):
        assert case_codes(directory, name) == expected.get(name, set())

    @pytest.mark.parametrize("name", [n for n in files if n.startswith("fa-")])
    def test_correct_code_is_clean_of_the_reviewed_rules(name):
        assert not case_codes(directory, name) & reviewed

    return (
        test_every_expectation_names_a_case,
        test_case_reports_the_recorded_codes,
        test_correct_code_is_clean_of_the_reviewed_rules,
    )
