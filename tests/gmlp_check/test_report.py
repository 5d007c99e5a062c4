"""Reports: the JSON schema (every documented key, its type), JUnit XML, rerun commands."""

import json
import shlex
import xml.etree.ElementTree as ET

import pytest
import torch

from gmlp_check import report
from gmlp_check.compare import OBSERVABLES
from gmlp_check.runner import run_case
from gmlp_check.scenarios import DEVICE_SIZES, Case, build_cases
from refimpl import GroupedMLP

from .planted import planted

SIZES = DEVICE_SIZES["cpu"]
SETTINGS = report.Settings(fused="tests.gmlp_check.planted:reference", device="cpu", sizes=SIZES)
CASES = build_cases("cpu", keyword="mode=overwrite-fsdp and single=1 and delay=0")


@pytest.fixture(scope="module")
def results():
    """Two passing cases, then the same two with a planted bug that fails them."""
    cpu = torch.device("cpu")
    good = [run_case(c, SIZES, cpu, GroupedMLP) for c in CASES[:2]]
    bad = [run_case(c, SIZES, cpu, planted("empty-expert-skipped")) for c in CASES[:2]]
    return good + bad


def test_json_has_the_documented_schema(results):
    doc = json.loads(json.dumps(report.diff_json(results, SETTINGS), allow_nan=False))
    assert doc["schema"] == "gmlp-check/diff/v1"
    assert doc["fused"] == SETTINGS.fused and doc["device"] == "cpu" and doc["inject"] is None
    assert doc["sizes"] == {"experts": 4, "hidden": 16, "ffn": 12, "tokens": 20, "seed": 0}
    summary = doc["summary"]
    assert (summary["cases"], summary["passed"], summary["failed"]) == (4, 2, 2)
    assert isinstance(summary["duration_s"], float)
    for entry, result in zip(doc["cases"], results):
        assert set(entry) == {"id", "config", "passed", "duration_s", "rerun", "checks"}
        assert entry["id"] == result.case.id
        assert Case(**entry["config"]) == result.case
        assert entry["passed"] is result.passed
        assert entry["checks"]
        for check in entry["checks"]:
            assert set(check) == {"observable", "passed", "max_abs_err", "tolerance", "detail"}
            assert check["observable"] in OBSERVABLES
            assert isinstance(check["passed"], bool) and isinstance(check["detail"], str)
            for key in ("max_abs_err", "tolerance"):
                assert check[key] is None or isinstance(check[key], float)
        assert entry["passed"] == all(c["passed"] for c in entry["checks"])


def test_non_finite_errors_become_null(results):
    doc = report.diff_json(results, SETTINGS)
    nan_checks = [
        c
        for case in doc["cases"]
        for c in case["checks"]
        if not c["passed"] and "NaN" in c["detail"]
    ]
    assert nan_checks and all(c["max_abs_err"] is None for c in nan_checks)
    json.dumps(doc, allow_nan=False)


def test_rerun_command_names_sizes_seed_fault_and_case():
    settings = report.Settings("triton", "cpu", SIZES, inject="no-dummy-grad")
    case_id = CASES[0].id
    words = shlex.split(settings.rerun_command(case_id))
    assert words[:2] == ["gmlp-check", "diff"]
    assert words[words.index("--fused") + 1] == "triton"
    assert words[words.index("--device") + 1] == "cpu"
    assert words[words.index("--inject") + 1] == "no-dummy-grad"
    assert words[words.index("-k") + 1] == case_id
    for option in SIZES.as_options():
        assert option in words


def test_junit_xml_has_one_testcase_per_case_and_failures_with_rerun(results):
    root = ET.fromstring(report.junit_xml(results, SETTINGS))
    suite = root.find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "2"
    testcases = suite.findall("testcase")
    assert [t.get("name") for t in testcases] == [r.case.id for r in results]
    for t, r in zip(testcases, results):
        failure = t.find("failure")
        assert (failure is None) == r.passed
        if failure is not None:
            assert "main_grad" in failure.get("message")
            assert SETTINGS.rerun_command(r.case.id) in failure.text


def test_text_report_lists_cases_failures_and_rerun_lines(results):
    from rich.console import Console

    console = Console(record=True, width=200)
    report.print_table(console, results, SETTINGS)
    report.print_failures(console, results, SETTINGS)
    text = console.export_text()
    assert text.count("FAIL") >= 4  # two rows in the table, two failure sections
    for r in results[2:]:
        assert f"rerun: {SETTINGS.rerun_command(r.case.id)}" in text
    assert "2 passed, 2 failed" in report.summary_line(results, SETTINGS)
