"""`gmlp-check mutants`: every injected fault is caught and the un-faulted run is clean."""

import json

import pytest
from click.testing import CliRunner

from gmlp_check.cli import main
from gmlp_check.faults import FAULTS


def run_mutants(*args):
    result = CliRunner().invoke(main, ["mutants", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


# They act only through a quantized copy of the weight: TE's FP8 cases, which our Triton path
# does not run (it declares no FP8 compute), so they apply to none of its cases.
FP8_ONLY = {"flag-from-quantized-copy", "write-through-quantized-copy"}


# It needs an fp32 case (a .grad handed back must have the weight's dtype, so only fp32 can alias
# main_grad): the 16-bit-only triton-cublas-wgrad has none.
FP32_ONLY = {"grad-aliases-main-grad"}


def assert_every_fault_caught(code, doc, not_applicable=FP8_ONLY):
    assert {f["name"] for f in doc["faults"] if not f["applicable"]} == not_applicable
    applicable = [f for f in doc["faults"] if f["applicable"]]
    escaped = [f["name"] for f in applicable if not f["caught"]]
    assert escaped == [], f"faults not caught: {escaped}"
    assert doc["clean"]["failed"] == 0, doc["clean"]["failures"]
    assert [f["name"] for f in doc["faults"]] == list(FAULTS)
    for fault in applicable:
        assert fault["observables"], fault["name"]  # caught by at least one named observable
        assert fault["diagnosed"], (fault["name"], fault["diagnoses"])  # as its own class
    assert doc["passed"] is True and code == 0


def test_every_fault_is_caught_on_cpu():
    code, doc = run_mutants("--device", "cpu")
    assert doc["stop_early"] is True  # the CPU default, stated in the report
    assert doc["clean"]["cases"] == doc["matrix_cases"]
    assert_every_fault_caught(code, doc)


@pytest.mark.gpu
@pytest.mark.parametrize("fused", ["triton", "triton-cublas-wgrad"])
def test_every_fault_is_caught_on_gpu(fused):
    # --stop-early keeps the device time short; `gmlp-check mutants --device cuda` runs the
    # full matrix per fault. triton-cublas-wgrad: the faults at the contract's surface and in
    # the main_grad policy reach the cuBLAS weight-gradient route as they reach the kernel.
    code, doc = run_mutants("--device", "cuda", "--fused", fused, "--stop-early")
    assert doc["fused"] == fused
    sixteen_bit_only = fused == "triton-cublas-wgrad"
    assert_every_fault_caught(code, doc, FP8_ONLY | FP32_ONLY if sixteen_bit_only else FP8_ONLY)


def test_a_fault_caught_only_because_the_clean_run_fails_does_not_count():
    from gmlp_check import fused
    from gmlp_check.mutants import run_mutants

    from .support import MATRIX, checker_for

    cases = [
        c for c in MATRIX
        if c.mode == "overwrite-fsdp" and not c.delay and not c.zero_out and c.microbatches == 2
    ][:2]  # fmt: skip
    assert cases

    def broken_triton(**kwargs):  # the un-faulted side itself is wrong
        from gmlp_check.faults import FAULTS, inject

        return inject(fused.TritonGroupedMLP(**kwargs), FAULTS["alias-gated-on-local-flag"])

    run = run_mutants(checker_for(broken_triton), ["empty-expert-skipped"], cases, stop_early=True)
    assert not run.clean_passed and not run.passed

    run = run_mutants(
        checker_for(fused.TritonGroupedMLP), ["empty-expert-skipped"], cases, stop_early=True
    )
    assert run.clean_passed and run.passed
    (fault,) = run.faults
    assert fault.cases_run == fault.cases_failed == 1  # stopped at the first failing case


def test_a_fault_the_backend_cannot_take_is_not_applicable_not_a_failure():
    from gmlp_check.mutants import run_mutants
    from gmlp_check.refimpl import GroupedMLP

    from .support import MATRIX, checker_for

    run = run_mutants(checker_for(GroupedMLP), ["no-dummy-grad"], MATRIX[:1], stop_early=True)
    (fault,) = run.faults
    assert fault.not_applicable and "main_grad_policy" in fault.not_applicable
    assert fault.cases_run == 0
    # Nothing applied, so nothing is proven: not a pass (the command exits 2).
    assert not run.proven and not run.passed
