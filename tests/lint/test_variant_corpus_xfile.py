"""Issue #19, classes 6 and 5 across files (variant_corpus_class6_xfile.py,
variant_corpus_class6_slots.py, variant_corpus_class6_lists.py,
variant_corpus_class5_xfile.py): each case's files are
written to a temporary tree and linted together as one run, all rules on. A buggy case must
be reported exactly on its ``# expect: CODE`` lines, by that rule; its correct twin must give
no finding at all.

``python -m tests.lint.test_variant_corpus_xfile`` prints how many buggy cases are caught
(any expected line reported by its rule) and which twins are flagged: the before/after
figures in docs/lint-semantics.md.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES
from .variant_corpus_class5_xfile import CASES as CLASS5
from .variant_corpus_class6_lists import CASES as LISTS
from .variant_corpus_class6_slots import CASES as SLOTS
from .variant_corpus_class6_xfile import CASES as CLASS6

CASES = CLASS6 + SLOTS + LISTS + CLASS5

EXPECT = re.compile(r"#\s*expect:\s*(GMLP\d+)")


def expected(files: dict[str, str]) -> set[tuple[str, int, str]]:
    return {
        (path, number, code)
        for path, text in files.items()
        for number, line in enumerate(text.splitlines(), start=1)
        for code in EXPECT.findall(line)
    }


def lint_files(files: dict[str, str]) -> set[tuple[str, int, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        jobs = [engine.Job(str(root / path), ALL_CODES) for path in sorted(files)]
        results = engine.run(jobs, engine.Mode(), workers=1)
        assert all(r.error is None for r in results), [r.error for r in results]
        return {
            (Path(f.path).relative_to(root).as_posix(), f.line, f.code)
            for r in results
            for f in r.findings
        }


def test_every_case_marks_its_bug_and_has_a_twin():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert expected(case.files("bug")), case.name
        assert not expected(case.files("twin")), case.name
        assert len(case.bug) > 1 and set(case.bug) == set(case.twin), case.name
    assert {case.weak_spot for case in CLASS6} == {"a", "b", "c", "d"}
    assert {case.weak_spot for case in SLOTS} == {"s"}
    assert {case.weak_spot for case in LISTS} == {"l"}
    assert {case.weak_spot for case in CLASS5} == {"e", "f"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_buggy_case_is_reported_exactly_where_expected(case):
    files = case.files("bug")
    assert lint_files(files) == expected(files)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_correct_twin_is_not_reported(case):
    assert lint_files(case.files("twin")) == set()


def main() -> int:
    for title, cases in (
        ("class 6", CLASS6),
        ("class 6 slots", SLOTS),
        ("class 6 lists", LISTS),
        ("class 5", CLASS5),
        ("all", CASES),
    ):
        print(f"-- {title}")
        _report(cases)
    return 0


def _report(cases) -> None:
    caught, exact, flagged = [], [], []
    for case in cases:
        files = case.files("bug")
        found, wanted = lint_files(files), expected(files)
        if found & wanted:
            caught.append(case.name)
        if found == wanted:
            exact.append(case.name)
        if lint_files(case.files("twin")):
            flagged.append(case.name)
    print(f"caught: {len(caught)} of {len(cases)} (exactly as expected: {len(exact)})")
    print(f"missed: {[c.name for c in cases if c.name not in caught]}")
    print(f"twins flagged: {len(flagged)} {flagged}")


if __name__ == "__main__":
    sys.exit(main())
