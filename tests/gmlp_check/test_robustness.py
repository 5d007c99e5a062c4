"""gmlp-check under misuse: factories that exit, print or fail oddly, Ctrl-C and SIGTERM at any
point, absurd sizes and expressions, and report files that cannot be written. Each ends with
one line and a documented exit status, never a traceback, and loses nothing that finished."""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from gmlp_check.cli import main
from gmlp_check.refimpl import GroupedMLP

from .support import interrupt_when_waiting, overwrite_case_id

REPO = Path(__file__).resolve().parents[2]
ONE_CASE = overwrite_case_id()
GMLP_CHECK = Path(sys.executable).with_name("gmlp-check")  # the console script pip installed


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def last_line(result) -> str:
    return result.output.strip().splitlines()[-1]


def run_cli(*args, cwd=REPO, **popen):
    """gmlp-check in a child process with SIGINT at its default (CI may start us with it
    ignored, and a child would then inherit that); PYTHONPATH finds this test package."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "GMLP_TEST_DIR": str(cwd)}
    return subprocess.Popen(
        [str(GMLP_CHECK), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **popen,
    )


# -- factories and forwards that exit, print or fail oddly --------------------------------------


def exits_0(**kwargs):
    sys.exit(0)


class ExitingForward(GroupedMLP):
    def forward(self, *args, **kwargs):
        sys.exit(3)


def exits_3_in_forward(**kwargs):
    return ExitingForward(**kwargs)


class Unprintable(RuntimeError):
    def __str__(self):
        raise ValueError("no text")


def raises_unprintable(**kwargs):
    raise Unprintable


def interrupted_while_built(**kwargs):
    raise KeyboardInterrupt


class PrintingForward(GroupedMLP):
    def forward(self, *args, **kwargs):
        print("forward says hello")
        os.write(1, b"and writes to fd 1\n")
        return super().forward(*args, **kwargs)


def prints(**kwargs):
    print("factory says hello")
    return PrintingForward(**kwargs)


def test_a_factory_calling_sys_exit_is_one_line_exit_2():
    result = invoke("diff", "--device", "cpu", "--fused", f"{__name__}:exits_0", "-k", ONE_CASE)
    assert result.exit_code == 2, result.output
    assert last_line(result).startswith(f"Error: --fused {__name__}:exits_0: the factory called")
    assert "sys.exit(0)" in last_line(result)


def test_a_forward_calling_sys_exit_stops_the_run_naming_the_case():
    spec = f"{__name__}:exits_3_in_forward"
    result = invoke("diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE)
    assert result.exit_code == 2, result.output
    assert last_line(result) == (
        f"Error: --fused {spec}: called sys.exit(3) in case {ONE_CASE}; a factory or a forward "
        "must raise an Exception, never exit"
    )


def test_an_exception_whose_str_fails_is_still_reported():
    spec = f"{__name__}:raises_unprintable"
    result = invoke("diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE)
    assert result.exit_code == 2, result.output
    assert "Unprintable: <exception str() failed>" in last_line(result)
    assert "Traceback" not in result.output


def test_a_printing_factory_leaves_stdout_to_the_json_document():
    process = run_cli("diff", "--device", "cpu", "--fused", f"{__name__}:prints", "-k", ONE_CASE,
                      "--format", "json")  # fmt: skip
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, out + err
    assert json.loads(out)["summary"]["passed"] == 1
    assert "factory says hello" in err and "and writes to fd 1" in err


@pytest.fixture
def user_package(tmp_path):
    """A package in the working directory, for the pytest plugin and for import-time faults."""
    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "exiting.py").write_text("import sys\n\n\ndef make(**kwargs):\n    sys.exit(0)\n")
    (package / "interrupting.py").write_text("raise KeyboardInterrupt\n")
    return tmp_path


def test_under_pytest_a_factory_calling_sys_exit_is_a_usage_error_not_internalerror(user_package):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--gmlp-fused", "userpkg.exiting:make", "--gmlp-device", "cpu"],
        cwd=user_package, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(user_package), str(REPO)])},
    )  # fmt: skip
    assert out.returncode == 4, out.stdout + out.stderr
    assert "INTERNALERROR" not in out.stdout + out.stderr
    assert "the factory called sys.exit(0)" in out.stderr


# -- Ctrl-C and SIGTERM -------------------------------------------------------------------------


def test_ctrl_c_while_the_factory_is_built_exits_130():
    spec = f"{__name__}:interrupted_while_built"
    result = invoke("diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE)
    assert result.exit_code == 130, result.output
    assert result.output.strip() == "gmlp-check: interrupted"


def test_ctrl_c_while_the_factory_module_is_imported_exits_130(user_package):
    process = run_cli("diff", "--device", "cpu", "--fused", "userpkg.interrupting:make",
                      cwd=user_package)  # fmt: skip
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, out + err
    assert err.strip() == "gmlp-check: interrupted" and out == ""


def _loaded(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _signal_during_start_up(sig: int):
    """``gmlp-check diff`` sent ``sig`` while it imports torch: (exit status, stdout, stderr)."""
    process = run_cli("diff", "--device", "cpu")
    deadline = time.monotonic() + 120
    # Torch's library mapped: the process is importing, long before a case runs.
    while not _loaded(process.pid, "libtorch") and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(sig)
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def test_ctrl_c_during_start_up_is_one_line_exit_130():
    returncode, out, err = _signal_during_start_up(signal.SIGINT)
    assert returncode == 130, out + err
    assert "Traceback" not in err and err.strip().endswith("interrupted")


def test_sigterm_during_start_up_is_one_line_exit_143():
    # Before the commands install their SIGTERM handler (torch loading), SIGTERM killed the
    # process silently; `timeout 1 gmlp-check ...` now ends as Ctrl-C does, with 128 + 15.
    returncode, out, err = _signal_during_start_up(signal.SIGTERM)
    assert returncode == 143, out + err
    assert err.strip() == "gmlp-check: interrupted" and "Traceback" not in err


def slow_at_relu(**kwargs):
    """Runs the cases before the first relu one, then waits there to be stopped."""
    if kwargs.get("activation") == "relu":
        Path(os.environ["GMLP_TEST_DIR"], "waiting").touch()
        time.sleep(300)
    return GroupedMLP(**kwargs)


def test_sigterm_reports_and_writes_what_finished_and_exits_143(tmp_path):
    junit = tmp_path / "diff.xml"
    process = run_cli("diff", "--device", "cpu", "--fused", f"{__name__}:slow_at_relu",
                      "--dtype", "fp32", "--mode", "off", "--format", "json",
                      "--junit-xml", str(junit), cwd=tmp_path)  # fmt: skip
    out, err = interrupt_when_waiting(process, tmp_path, "a relu case")
    assert process.returncode == 143, out + err
    document = json.loads(out)
    finished = [case["id"] for case in document["cases"]]
    assert document["interrupted"] is True and finished
    assert all("act=relu" not in case_id for case_id in finished)
    written = [c.get("name") for c in ET.parse(junit).getroot().findall("testsuite/testcase")]
    assert written == finished
    assert re.fullmatch(rf"interrupted after {len(finished)} of \d+ cases", err.splitlines()[-1])


# -- absurd inputs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    ["(" * 5000 + "act=relu" + ")" * 5000, "not " * 5000 + "act=relu"],
    ids=["parentheses", "not"],
)
def test_a_5000_deep_k_expression_is_one_line_exit_2(expression):
    result = invoke("diff", "--device", "cpu", "-k", expression, "--list")
    assert result.exit_code == 2, result.output
    assert "nest deeper than 100 levels" in last_line(result)
    assert "Traceback" not in result.output and len(last_line(result)) < 300


def test_a_5000_term_k_chain_selects_without_recursing():
    expression = " or ".join(["act=nosuch"] * 5000 + ["act=relu"])
    listed = invoke("diff", "--device", "cpu", "-k", expression, "--list")
    assert listed.exit_code == 0, listed.output
    assert (
        listed.output.splitlines()
        == invoke("diff", "--device", "cpu", "-k", "act=relu", "--list").output.splitlines()
    )


@pytest.mark.parametrize(
    "option, value",
    [("--tokens", "1000000000000"), ("--hidden", "10000000"), ("--experts", "100000000")],
)
def test_sizes_that_cannot_fit_are_refused_up_front(option, value):
    started = time.monotonic()
    result = invoke("diff", "--device", "cpu", option, value, "-k", ONE_CASE)
    assert result.exit_code == 2, result.output
    line = last_line(result)
    assert line.startswith("Error: --experts ") and f"{option} {value}" in line
    assert "needs at least" in line and "the cpu device has" in line
    assert time.monotonic() - started < 60  # refused, not attempted


# -- report files at the end of a run -----------------------------------------------------------


@pytest.mark.parametrize("path", ["{tmp}/outdir/", "/proc/junit.xml", "/sys/junit.xml"])
def test_an_unwritable_junit_path_is_refused_before_the_run(tmp_path, path):
    path = path.format(tmp=tmp_path)
    result = invoke("diff", "--device", "cpu", "-k", ONE_CASE, "--junit-xml", path)
    assert result.exit_code == 2, result.output
    assert last_line(result).startswith(f"Error: --junit-xml {path!r}: ")
    assert "passed" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "outdir").exists()


def test_an_empty_junit_path_is_refused_not_ignored():
    # ``--junit-xml ""`` (an unset variable) ran the cases and wrote no report, exit 0.
    result = invoke("diff", "--device", "cpu", "-k", ONE_CASE, "--junit-xml", "")
    assert result.exit_code == 2, result.output
    assert last_line(result) == "Error: --junit-xml: expected a file name, got ''"
    assert "passed" not in result.output


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_junit_write_that_fails_after_the_run_keeps_the_report_and_exits_2(tmp_path):
    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full: every write fails
    result = invoke("diff", "--device", "cpu", "-k", ONE_CASE, "--junit-xml", str(full))
    assert result.exit_code == 2, result.output
    assert "1 case: 1 passed, 0 failed" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: --junit-xml {str(full)!r}: cannot be written (No space left on device)"
    )
    assert stat.S_ISCHR(full.stat().st_mode)


def test_junit_xml_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "results.xml"
    link = tmp_path / "latest.xml"
    link.symlink_to(target.name)
    result = invoke("diff", "--device", "cpu", "-k", ONE_CASE, "--junit-xml", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert ET.parse(target).getroot().find("testsuite/testcase").get("name") == ONE_CASE
