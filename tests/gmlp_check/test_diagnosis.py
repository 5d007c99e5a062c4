"""The diagnosis names the bug class of failures it did not see during calibration: the
planted bugs of tests/gmlp_check/planted.py (the reference with one decision changed, written
plainly, independent of the fault injection the mutants tests calibrate with)."""

import pytest

from gmlp_check.diagnosis import RULES, markdown_rules
from gmlp_check.faults.classes import BUG_CLASSES

from .planted import BUGS, planted
from .support import MATRIX, checker_for

# planted bug -> the class its failures must be diagnosed as
PLANTED_CLASS = {
    "alias-gated-on-local-flag": "main-grad-write-lost",
    "bookkeeping-gated-on-local-flag": "bookkeeping-not-set",
    "delayed-wgrad-dropped": "delayed-wgrad-dropped",
    "dummy-not-zeroed": "dummy-not-zeroed",
    "overwrite-accumulate-swapped": "overwrite-accumulate-swapped",
    "fsdp-main-grad-not-fetched": "fsdp-main-grad-not-fetched",
    "empty-expert-skipped": "empty-expert-skipped",
    "group-offsets-shifted": "wrong-group-offsets",
    "no-dummy-grad": "no-dummy-grad",
}


def test_every_planted_bug_has_a_class():
    assert set(PLANTED_CLASS) == set(BUGS)


@pytest.mark.parametrize("bug", BUGS)
def test_a_planted_bug_is_diagnosed_as_its_class(bug):
    cases = [c for c in MATRIX if c.dtype == "fp32" and c.activation == "swiglu"]
    results = checker_for(planted(bug)).run_all(cases)
    failed = [r for r in results if r.status == "failed"]
    assert failed
    likely = {r.diagnosis.likely for r in failed}
    assert PLANTED_CLASS[bug] in likely, likely
    first = failed[0].diagnosis
    assert PLANTED_CLASS[bug] in first.classes, (failed[0].case.id, first)


def test_rules_name_declared_classes_and_the_table_shows_each():
    table = markdown_rules()
    for rule in RULES:
        assert rule.classes and all(c in BUG_CLASSES for c in rule.classes)
        assert rule.classes[0] in table
        assert (len(rule.classes) > 1) == bool(rule.why)
