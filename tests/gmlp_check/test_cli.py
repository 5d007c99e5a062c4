"""The gmlp-check command line: exit codes 0/1/2, --format json, --junit-xml, rerun lines."""

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from gmlp_check.backends import BUILTIN
from gmlp_check.cli import main
from gmlp_check.faults import FAULTS
from gmlp_check.refimpl import GroupedMLP

from .support import MATRIX, overwrite_case_id

REPO = Path(__file__).resolve().parents[2]
# A few triton cases that run in seconds on CPU: overwrite and accumulate, delayed, single.
FEW = "mode=overwrite-fsdp and delay=1 and zero=1 and dtype=fp32"
OVERWRITE_CASE = overwrite_case_id()


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_help_shows_examples():
    for command in ([], ["diff"], ["faults"], ["mutants"]):
        result = invoke(*command, "--help")
        assert result.exit_code == 0
        assert "Example" in result.output


def test_list_prints_the_matrix_ids():
    result = invoke("diff", "--device", "cpu", "--list")
    assert result.exit_code == 0
    assert result.stdout.split() == [c.id for c in MATRIX]


def test_clean_cases_exit_0_with_json():
    result = invoke("diff", "--device", "cpu", "-k", FEW, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gmlp-check/diff/v1" and doc["fused"] == "triton"
    assert doc["summary"]["failed"] == 0 and doc["summary"]["cases"] == len(doc["cases"]) >= 2
    assert all(case["passed"] for case in doc["cases"])


def test_a_mismatch_exits_1_with_table_failures_and_a_rerun_line_that_reruns_it():
    result = invoke("diff", "--device", "cpu", "--inject", "empty-expert-skipped", "-k", FEW)
    assert result.exit_code == 1, result.output
    assert "FAIL" in result.stdout
    rerun_lines = [ln.strip() for ln in result.stdout.splitlines() if "rerun: " in ln]
    assert rerun_lines
    words = shlex.split(rerun_lines[0].split("rerun: ", 1)[1])
    assert words[:2] == ["gmlp-check", "diff"] and "--inject" in words
    again = invoke(*words[1:], "--format", "json")
    assert again.exit_code == 1
    doc = json.loads(again.stdout)
    assert doc["summary"] == {**doc["summary"], "cases": 1, "failed": 1}
    assert doc["cases"][0]["id"] == words[words.index("-k") + 1]


def test_junit_xml_is_written(tmp_path):
    path = tmp_path / "diff.xml"
    result = invoke(
        "diff", "--device", "cpu", "--inject", "no-dummy-grad", "-k", FEW, "--junit-xml", str(path)
    )
    assert result.exit_code == 1
    suite = ET.parse(path).getroot().find("testsuite")
    assert int(suite.get("failures")) >= 1
    assert suite.find("testcase/failure") is not None


def test_a_user_factory_is_a_fused_spec():
    spec = "tests.gmlp_check.planted:"
    ok = invoke("diff", "--fused", spec + "reference", "--device", "cpu", "--mode", "off")
    assert ok.exit_code == 0, ok.output
    bad = invoke(
        "diff",
        *("--fused", spec + "alias_gated_on_local_flag", "--device", "cpu"),
        *("--mode", "overwrite-fsdp"),
    )
    assert bad.exit_code == 1
    assert "main_grad" in bad.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_is_a_usage_error():
    result = invoke("diff", "--device", "cuda")
    assert result.exit_code == 2
    assert "--device cuda: no CUDA GPU is available" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--fused", "nosuchpackage.mlp:make"], "cannot import module 'nosuchpackage.mlp'"),
        (["--fused", "not a spec"], "--fused: expected one of " + ", ".join(BUILTIN)),
        (["--fused", "tests.gmlp_check.planted:nothing"], "has no attribute 'nothing'"),
        (["--inject", "nosuch"], "--inject: expected one of " + ", ".join(FAULTS)),
        (
            ["--inject", "no-dummy-grad", "--fused", "tests.gmlp_check.planted:reference"],
            "--inject no-dummy-grad: GroupedMLP takes no main_grad_policy",
        ),
        (["--experts", "1"], "--experts: expected an int >= 2"),
        (["--hidden", "0"], "--hidden: expected an int >= 1"),
        (["--tokens", "-5"], "--tokens: expected an int >= 1"),
        (["--ffn", "many"], "'many' is not a valid integer"),
        (["--seed", "-1"], "--seed: expected an int >= 0"),
        (["-k", "mode=off and"], "-k 'mode=off and': expression ends early"),
        (["-k", "act=nosuch"], "no case of the matrix matches"),
        (["--dtype", "bf16"], "--dtype bf16: --fused triton refuses it here: triton on CPU"),
        (["--dtype", "fp64"], "'fp64' is not one of"),
        (["--fused", "torch-grouped-mm"], "--fused torch-grouped-mm: refuses every dtype on cpu"),
        (["--junit-xml", "/nonexistent/dir/x.xml"], "--junit-xml"),
    ],
)
def test_usage_errors_exit_2_with_a_message_naming_the_option(args, message):
    result = invoke("diff", "--device", "cpu", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["diff", "mutants"])
def test_a_negative_compile_workers_is_refused_with_list_too(command):
    result = invoke(command, "--device", "cpu", "--compile-workers", "-1", "--list")
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        "Error: --compile-workers: expected a count >= 0, got -1"
    )
    assert "mode=" not in result.stdout


def test_faults_lists_every_fault():
    result = invoke("faults", "--format", "json")
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert [f["name"] for f in listed] == list(FAULTS)
    assert all(f["bug_class"] == FAULTS[f["name"]].bug_class for f in listed)
    text = invoke("faults")
    assert all(name in text.stdout for name in FAULTS)


def test_mutants_exit_0_when_every_selected_fault_is_caught():
    result = invoke(
        "mutants",
        "--device",
        "cpu",
        "--fault",
        "empty-expert-skipped",
        "--fault",
        "delayed-wgrad-dropped",
        "-k",
        FEW,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gmlp-check/mutants/v1" and doc["passed"] is True
    # In the registry's order, whatever the order on the command line.
    assert [f["name"] for f in doc["faults"]] == ["empty-expert-skipped", "delayed-wgrad-dropped"]
    assert all(f["caught"] and f["observables"] for f in doc["faults"])
    assert doc["stop_early"] is True and doc["clean"]["failed"] == 0


def test_mutants_exit_1_when_a_fault_escapes_the_selection():
    # No case of this selection uses output-into-main-grad, where a missing dummy would show.
    result = invoke(
        "mutants", "--device", "cpu", "--fault", "no-dummy-grad", "-k", "mode=off and delay=1"
    )
    assert result.exit_code == 1, result.output
    assert "NO" in result.stdout and "0 of 1 applicable faults caught" in result.stdout


def test_mutants_rejects_unknown_faults():
    result = invoke("mutants", "--device", "cpu", "--fault", "nosuch")
    assert result.exit_code == 2
    assert "--fault: expected names from" in result.output


def test_module_invocation_works():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-m", "gmlp_check.cli", "diff", "--device", "cpu", "-k", OVERWRITE_CASE],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 case: 1 passed, 0 failed" in out.stdout


# -- bad fused sides and other user errors: one line, exit 2, never a traceback -----------------


def returns_none(**kwargs):
    return None


def raises(**kwargs):
    raise RuntimeError("cannot build this\n" + "1.0 2.0 3.0\n" * 200)


class _NoHooks(torch.nn.Module):
    def forward(self, x, splits, probs=None):
        return x

    def backward_dw(self):
        pass


def lacks_the_hook_method(**kwargs):
    return _NoHooks()


@pytest.mark.parametrize(
    "spec, message",
    [
        (f"{__name__}:returns_none", "the factory returned NoneType, expected a torch.nn.Module"),
        (f"{__name__}:raises", "the factory failed to build a fp32 module on cpu (RuntimeError"),
        ("os:getcwd", "the factory failed to build a fp32 module on cpu (TypeError"),
        (
            f"{__name__}:lacks_the_hook_method",
            "has no register_wgrad_accumulation_and_reduce_hooks(), which the module:factory "
            "protocol requires",
        ),
    ],
)
def test_a_broken_factory_is_one_line_exit_2(spec, message):
    result = invoke("diff", "--device", "cpu", "--fused", spec, "-k", FEW)
    assert result.exit_code == 2, result.output
    error = result.output.strip().splitlines()[-1]
    assert error.startswith("Error: --fused ") and message in error
    assert "Traceback" not in result.output and "1.0 2.0" not in result.output


def none_when_single(**kwargs):
    """Breaks the protocol for a single grouped weight only: selection passes, a case fails."""
    return None if kwargs.get("single_grouped_weight") else GroupedMLP(**kwargs)


@pytest.mark.parametrize("command", [["diff"], ["mutants", "--fault", "empty-expert-skipped"]])
def test_a_factory_broken_mid_run_is_one_line_exit_2(command):
    spec = f"{__name__}:none_when_single"
    case = overwrite_case_id(single="1")
    result = invoke(*command, "--device", "cpu", "--fused", spec, "-k", case)
    assert result.exit_code == 2, result.output
    error = result.output.strip().splitlines()[-1]
    assert error == (
        f"Error: --fused {spec}: the factory returned NoneType, expected a torch.nn.Module"
    )
    assert "Traceback" not in result.output


def test_failure_details_keep_the_type_and_first_line_only():
    def huge(**kwargs):
        raise ValueError("bad shape\n" + "0.5 " * 5000)

    from .support import checker_for

    result = checker_for(huge).run(MATRIX[0])
    (check,) = result.checks
    assert check.detail.startswith("ValueError: bad shape")
    assert "0.5" not in check.detail and len(check.detail) < 400


def test_a_factory_package_in_the_working_directory_is_found(tmp_path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mlp.py").write_text(
        "from gmlp_check.refimpl import GroupedMLP\n\n"
        "def make(**kw):\n    return GroupedMLP(**kw)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", "from gmlp_check.cli import main; main()", "diff", "--device",
         "cpu", "--fused", "mypkg.mlp:make", "-k", OVERWRITE_CASE],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 case: 1 passed" in out.stdout


def interrupted_at_relu(**kwargs):
    from gmlp_check.refimpl import GroupedMLP

    if kwargs.get("activation") == "relu":
        raise KeyboardInterrupt
    return GroupedMLP(**kwargs)


def test_ctrl_c_reports_what_finished_writes_the_junit_xml_and_exits_130(tmp_path):
    path = tmp_path / "diff.xml"
    spec = f"{__name__}:interrupted_at_relu"
    result = invoke("diff", "--device", "cpu", "--fused", spec, "--dtype", "fp32",
                    "--mode", "off", "--junit-xml", str(path))  # fmt: skip
    assert result.exit_code == 130, result.output
    assert "interrupted after" in result.output
    cases = ET.parse(path).getroot().findall("testsuite/testcase")
    assert cases and all("act=relu" not in c.get("name") for c in cases)


def test_report_files_get_the_umask_mode(tmp_path):
    path = tmp_path / "diff.xml"
    result = invoke("diff", "--device", "cpu", "-k", OVERWRITE_CASE, "--junit-xml", str(path))
    assert result.exit_code == 0, result.output
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_host_tensors_name_their_device_whatever_the_default_device():
    # Training scripts set torch.set_default_device("cuda"); "meta" stands in for it here: a
    # host-side tensor made without a device would land there and fail to pin or copy.
    from gmlp_check.options import RunOptions
    from gmlp_check.session import Checker

    options = RunOptions(device="cpu", k=OVERWRITE_CASE.replace("bias=0", "bias=1"))
    checker = Checker.from_options(options)
    torch.set_default_device("meta")
    try:
        result = checker.run(checker.select(options)[0])
    finally:
        torch.set_default_device(None)
    assert result.status == "passed", result.explanation()
