"""`gmlp-check mutants`: every injected fault is caught and the un-faulted run is clean."""

import json

import pytest
from click.testing import CliRunner

from fused.faults import FAULTS
from gmlp_check.cli import main


def run_mutants(*args):
    result = CliRunner().invoke(main, ["mutants", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def assert_every_fault_caught(code, doc):
    escaped = [f["name"] for f in doc["faults"] if not f["caught"]]
    assert escaped == [], f"faults not caught: {escaped}"
    assert doc["clean"]["failed"] == 0, doc["clean"]["failures"]
    assert [f["name"] for f in doc["faults"]] == list(FAULTS)
    for fault in doc["faults"]:
        assert fault["observables"], fault["name"]  # caught by at least one named observable
    assert doc["passed"] is True and code == 0


def test_every_fault_is_caught_on_cpu():
    code, doc = run_mutants("--device", "cpu")
    assert doc["stop_early"] is True  # the CPU default, stated in the report
    assert doc["clean"]["cases"] == doc["matrix_cases"]
    assert_every_fault_caught(code, doc)


@pytest.mark.gpu
def test_every_fault_is_caught_on_gpu():
    # --stop-early keeps the device time short; `gmlp-check mutants --device cuda` runs the
    # full matrix per fault.
    code, doc = run_mutants("--device", "cuda", "--stop-early")
    assert_every_fault_caught(code, doc)


def test_a_fault_caught_only_because_the_clean_run_fails_does_not_count():
    import torch

    from gmlp_check.mutants import mutants_json, run_mutants
    from gmlp_check.scenarios import DEVICE_SIZES, build_cases
    from refimpl import GroupedMLP

    from .planted import planted

    cases = build_cases("cpu", keyword="mode=overwrite-fsdp and delay=0 and zero=0 and mb=2")
    sizes = DEVICE_SIZES["cpu"]
    faults = {"empty-expert-skipped": "empty expert skipped in overwrite mode"}
    cpu = torch.device("cpu")

    def broken_clean(fault):  # the "clean" side itself is wrong
        return planted("alias-gated-on-local-flag") if fault is None else planted(fault)

    run = run_mutants(faults, cases, sizes, cpu, stop_early=True, make_factory=broken_clean)
    assert all(f.caught for f in run.faults) and not run.clean_passed and not run.passed
    assert mutants_json(run, "cpu", sizes)["passed"] is False

    def honest(fault):
        return GroupedMLP if fault is None else planted(fault)

    run = run_mutants(faults, cases, sizes, cpu, stop_early=True, make_factory=honest)
    assert run.passed
    (fault,) = run.faults
    assert fault.cases_run == fault.cases_failed == 1  # stopped at the first failing case
