"""Issue #19, classes 5 and 6: the variant corpus in ``fixtures/deferred_variants``.

Each folder there is one run of gmlp-lint (its files linted together, so a base class may
sit in another file than its subclass). A line that must be reported carries
``# expect: CODE``; a folder whose name ends in ``_ok`` is the correct twin of a buggy one
and carries no expectation. The test is generated from the folders: adding a case is adding
a folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES, FIXTURES

CORPUS = FIXTURES / "deferred_variants"
EXPECT = re.compile(r"#\s*expect:\s*(GMLP\d+)")
CASES = sorted(p for p in CORPUS.iterdir() if p.is_dir())


def expected(case: Path) -> set[tuple[str, int, str]]:
    found = set()
    for path in case.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for code in EXPECT.findall(line):
                found.add((path.relative_to(case).as_posix(), number, code))
    return found


def lint_case(case: Path) -> set[tuple[str, int, str]]:
    paths = sorted(str(p) for p in case.rglob("*.py"))
    jobs = [engine.Job(path, ALL_CODES) for path in paths]
    results = engine.run(jobs, engine.Mode(), workers=1)
    assert all(r.error is None for r in results), [r.error for r in results]
    return {
        (Path(f.path).relative_to(case).as_posix(), f.line, f.code)
        for r in results
        for f in r.findings
    }


def test_the_corpus_has_buggy_cases_and_correct_twins():
    buggy = [c for c in CASES if expected(c)]
    twins = [c for c in CASES if c.name.endswith("_ok")]
    assert len(buggy) >= 10 and len(twins) >= 8
    assert not any(expected(c) for c in twins)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_variant_is_reported_exactly_where_expected(case):
    assert lint_case(case) == expected(case)
