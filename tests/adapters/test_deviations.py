"""The known deviations are data the run trusts: each row of a built-in backend's entry must name
observables the checker has, and cases the matrix holds, or it would silently match nothing."""

import pytest

from gmlp_check import fp8
from gmlp_check.backends import BUILTIN
from gmlp_check.matrix import DTYPES, MatrixSelection, default_matrix
from gmlp_check.observables import NAMES

# Every dtype and every FP8 recipe: rows may name either.
SELECTION = MatrixSelection(dtypes=tuple(DTYPES), fp8=tuple(fp8.RECIPES))
CASE_IDS = [case.id for case in default_matrix(SELECTION)]
ROWS = [(backend, row) for backend, entry in BUILTIN.items() for row in entry.known]


def test_the_entries_carry_known_deviations():
    assert ROWS


@pytest.mark.parametrize(("backend", "row"), ROWS, ids=[f"{b}:{r.cases}" for b, r in ROWS])
def test_each_row_names_known_observables_and_matches_some_case(backend, row):
    assert row.observables and set(row.observables) <= set(NAMES)
    assert row.kind in ("deviation", "bug")
    assert any(row.matches(case_id) for case_id in CASE_IDS), row.cases
