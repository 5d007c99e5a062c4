"""Reports: the JSON schema (every documented key, its type), JUnit XML, rerun commands, and
the statuses of unsupported cases and known deviations."""

import json
import shlex
import xml.etree.ElementTree as ET

import pytest

from gmlp_check import report
from gmlp_check.backends import load
from gmlp_check.deviations import Deviation
from gmlp_check.faults import FAULTS
from gmlp_check.matrix import Case
from gmlp_check.observables import NAMES
from gmlp_check.refimpl import GroupedMLP
from gmlp_check.session import Checker

from .planted import planted
from .support import CPU, MATRIX, SIZES, checker_for, overwrite_case_id

CHECKER = Checker(load("tests.gmlp_check.planted:reference"), CPU, SIZES)
CASES = [c for c in MATRIX if c.mode == "overwrite-fsdp" and c.single and not c.delay]


@pytest.fixture(scope="module")
def results():
    """Two passing cases, then the same two with a planted bug that fails them."""
    assert len(CASES) >= 2
    good = checker_for(GroupedMLP).run_all(CASES[:2])
    bad = checker_for(planted("empty-expert-skipped")).run_all(CASES[:2])
    return good + bad


def test_json_has_the_documented_schema(results):
    doc = json.loads(json.dumps(report.diff_json(results, CHECKER), allow_nan=False))
    assert doc["schema"] == "gmlp-check/diff/v1"
    assert doc["fused"] == CHECKER.backend.spec and doc["device"] == "cpu" and doc["inject"] is None
    assert doc["sizes"] == {"experts": 4, "hidden": 16, "ffn": 12, "tokens": 20, "seed": 0}
    summary = doc["summary"]
    assert (summary["cases"], summary["passed"], summary["failed"]) == (4, 2, 2)
    assert (summary["skipped"], summary["xfailed"], summary["xpassed"]) == (0, 0, 0)
    assert isinstance(summary["duration_s"], float)
    for entry, result in zip(doc["cases"], results):
        assert set(entry) == {
            "id", "config", "passed", "status", "reason", "duration_s", "rerun", "checks",
            "diagnosis", "source",
        }  # fmt: skip
        if result.status == "failed":  # the planted bug, diagnosed as its class
            assert entry["diagnosis"]["classes"][0] == "empty-expert-skipped"
        else:
            assert entry["diagnosis"] is None
        assert entry["status"] == result.status and entry["reason"] is None
        assert entry["id"] == result.case.id
        assert Case(**entry["config"]) == result.case
        assert entry["passed"] is result.passed
        assert entry["checks"]
        for check in entry["checks"]:
            assert set(check) == {"observable", "passed", "max_abs_err", "tolerance", "detail"}
            assert check["observable"] in NAMES
            assert isinstance(check["passed"], bool) and isinstance(check["detail"], str)
            for key in ("max_abs_err", "tolerance"):
                assert check[key] is None or isinstance(check[key], float)
        assert entry["passed"] == all(c["passed"] for c in entry["checks"])


def test_non_finite_errors_become_null(results):
    doc = report.diff_json(results, CHECKER)
    nan_checks = [
        c
        for case in doc["cases"]
        for c in case["checks"]
        if not c["passed"] and "NaN" in c["detail"]
    ]
    assert nan_checks and all(c["max_abs_err"] is None for c in nan_checks)
    json.dumps(doc, allow_nan=False)


def test_rerun_command_names_sizes_seed_fault_and_case():
    checker = Checker(load("triton"), CPU, SIZES, FAULTS["no-dummy-grad"])
    case_id = CASES[0].id
    words = shlex.split(checker.rerun_command(case_id))
    assert words[:2] == ["gmlp-check", "diff"]
    assert words[words.index("--fused") + 1] == "triton"
    assert words[words.index("--device") + 1] == "cpu"
    assert words[words.index("--inject") + 1] == "no-dummy-grad"
    assert words[words.index("-k") + 1] == case_id
    for option in SIZES.as_options():
        assert option in words


def test_junit_xml_has_one_testcase_per_case_and_failures_with_rerun(results):
    root = ET.fromstring(report.junit_xml(results, CHECKER))
    suite = root.find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "2"
    testcases = suite.findall("testcase")
    assert [t.get("name") for t in testcases] == [r.case.id for r in results]
    for t, r in zip(testcases, results):
        failure = t.find("failure")
        assert (failure is None) == r.passed
        if failure is not None:
            assert "main_grad" in failure.get("message")
            assert CHECKER.rerun_command(r.case.id) in failure.text
            assert "diagnosis: likely empty-expert-skipped" in failure.text
            (prop,) = t.find("properties").findall("property")
            assert (prop.get("name"), prop.get("value")) == ("diagnosis", "empty-expert-skipped")
        else:
            assert t.find("properties") is None


def test_text_report_lists_cases_failures_and_rerun_lines(results):
    from rich.console import Console

    console = Console(record=True, width=200)
    report.print_table(console, results, CHECKER)
    report.print_failures(console, results, CHECKER)
    text = console.export_text()
    assert text.count("FAIL") >= 4  # two rows in the table, two failure sections
    for r in results[2:]:
        assert f"rerun: {CHECKER.rerun_command(r.case.id)}" in text
    assert "2 passed, 2 failed" in report.summary_line(results, CHECKER)


# -- known deviations: strict xfail ---------------------------------------------------------------

OVERWRITE = Case.from_id(overwrite_case_id())


def _with_deviation(factory, observables, kind="deviation"):
    checker = checker_for(factory)
    checker.known = (
        Deviation("mode=overwrite-fsdp", observables, "on purpose", "upstream #1", kind),
    )
    return checker.run(OVERWRITE)


def test_a_deviation_failing_exactly_as_listed_is_xfailed_and_ok():
    plain = checker_for(planted("empty-expert-skipped")).run(OVERWRITE)
    failing = tuple(plain.failed_observables)
    assert failing
    result = _with_deviation(planted("empty-expert-skipped"), failing)
    assert result.status == "xfailed" and result.ok
    assert any("known deviation: on purpose [upstream #1]" in line
               for line in result.explanation())  # fmt: skip


def test_a_deviation_that_no_longer_fails_is_xpassed_and_fails_the_run():
    result = _with_deviation(GroupedMLP, ("main_grad.at_hook",))
    assert result.status == "xpassed" and not result.ok


def test_a_deviation_failing_beyond_its_listed_observables_fails():
    result = _with_deviation(planted("empty-expert-skipped"), ("guard_bands",))
    assert result.status == "failed" and not result.ok


def test_deviation_and_skip_statuses_reach_json_and_junit():
    xfailed = _with_deviation(planted("empty-expert-skipped"), tuple(
        checker_for(planted("empty-expert-skipped")).run(OVERWRITE).failed_observables
    ))  # fmt: skip

    def unsupported(**kwargs):
        raise NotImplementedError("not here")

    skipped = checker_for(unsupported).run(OVERWRITE)
    doc = report.diff_json([xfailed, skipped], CHECKER)
    assert [c["status"] for c in doc["cases"]] == ["xfailed", "skipped"]
    assert [c["reason"] for c in doc["cases"]] == ["on purpose", "not here"]
    assert doc["summary"]["xfailed"] == doc["summary"]["skipped"] == 1
    suite = ET.fromstring(report.junit_xml([xfailed, skipped], CHECKER)).find("testsuite")
    assert suite.get("failures") == "0" and suite.get("skipped") == "2"


def test_a_known_upstream_bug_keeps_failing_with_its_write_up():
    failing = tuple(checker_for(planted("empty-expert-skipped")).run(OVERWRITE).failed_observables)
    result = _with_deviation(planted("empty-expert-skipped"), failing, kind="bug")
    assert result.status == "failed" and not result.ok
    assert "known bug: on purpose [upstream #1]" in result.explanation()[-1]
    fixed = _with_deviation(GroupedMLP, failing, kind="bug")
    assert fixed.status == "xpassed" and not fixed.ok
