"""The standard streams of every console entry point (gmlp-lint, gmlp-check, `python -m` of
either; lint/standard_streams.py). A reader that closes the pipe early (`gmlp-lint . |
head -1`) is not an error of the run: it carries on silently and exits with the status the
run would have had. Each such run here writes into a real pipe whose read end is already
closed, so every write to it fails with EPIPE, as it does once `head` has exited. And a
file name that is not UTF-8 is printed as its bytes, even where Python's stdout is strict."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gmlp_check.lint.registry import rule

from .gmlp_check.support import overwrite_case_id

BIN = Path(sys.executable).parent
GMLP_LINT = [str(BIN / "gmlp-lint")]  # the console scripts pip installed
GMLP_CHECK = [str(BIN / "gmlp-check")]
LINT_MODULE = [sys.executable, "-m", "gmlp_check.lint"]
CHECK_MODULE = [sys.executable, "-m", "gmlp_check.cli"]  # what `diff --nproc N` runs per rank
ONE_CASE = overwrite_case_id()
REFERENCE = "gmlp_check.refimpl:GroupedMLP"  # a fused side that always agrees, and is fast
SIGNS_OF_A_CRASH = ("Traceback", "Broken pipe", "BrokenPipeError", "Exception ignored")


@contextlib.contextmanager
def closed_pipe():
    """The write end of a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        yield write
    finally:
        os.close(write)


def run_into_closed_pipe(command, *, cwd, stderr_too=False, input_bytes=None):
    """``command`` with stdout (and with ``stderr_too`` stderr) on a closed pipe; (exit
    status, stderr text)."""
    with closed_pipe() as write:
        done = subprocess.run(
            command,
            cwd=cwd,
            stdout=write,
            stderr=write if stderr_too else subprocess.PIPE,
            input=input_bytes,
            timeout=300,
            check=False,
        )
    return done.returncode, (done.stderr or b"").decode(errors="replace")


@pytest.fixture
def trees(tmp_path):
    """A clean tree, one with many findings (more output than a pipe holds), one with a file
    that does not parse."""
    clean, findings, broken = (tmp_path / name for name in ("clean", "findings", "broken"))
    for folder in (clean, findings, broken):
        folder.mkdir()
    (clean / "a.py").write_text(rule("GMLP004").valid[0].source)
    source = rule("GMLP004").invalid[0].source
    for i in range(300):
        (findings / f"m{i}.py").write_text(source)
    (broken / "a.py").write_text("def f(:\n")
    return {"clean": (clean, 0), "findings": (findings, 1), "broken": (broken, 2)}


@pytest.mark.parametrize("entry", [GMLP_LINT, LINT_MODULE], ids=["gmlp-lint", "python-m"])
@pytest.mark.parametrize("tree", ["clean", "findings", "broken"])
@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github"])
def test_gmlp_lint_into_a_closed_pipe_exits_as_the_run_would_have(
    trees, entry, tree, output_format
):
    folder, status = trees[tree]
    command = [*entry, "--no-cache", "--format", output_format, "."]
    returncode, stderr = run_into_closed_pipe(command, cwd=folder)
    assert returncode == status, stderr
    assert not any(sign in stderr for sign in SIGNS_OF_A_CRASH), stderr


@pytest.mark.parametrize(
    ("args", "status"),
    [(["--no-cache", "--diff", "."], 1), (["--no-cache", "--fix", "-"], 0), (["rule", "--all"], 0)],
    ids=["diff", "fix-stdin", "rule-docs"],
)
def test_gmlp_lint_other_outputs_into_a_closed_pipe(trees, args, status):
    folder, _ = trees["findings"]
    source = rule("GMLP004").invalid[0].source.encode()  # stdin, for `--fix -`
    returncode, stderr = run_into_closed_pipe([*GMLP_LINT, *args], cwd=folder, input_bytes=source)
    assert returncode == status, stderr
    assert not any(sign in stderr for sign in SIGNS_OF_A_CRASH), stderr


def test_gmlp_lint_with_stderr_on_the_closed_pipe_too(trees):
    folder, _ = trees["findings"]
    returncode, _ = run_into_closed_pipe(
        [*GMLP_LINT, "--no-cache", ".", "missing.py"], cwd=folder, stderr_too=True
    )
    assert returncode == 2  # a path that cannot be read: the run's own status


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["faults"], 0),
        (["faults", "--format", "json"], 0),
        (["diff", "--device", "cpu", "--list"], 0),
        (["diff", "--device", "cpu", "--fused", REFERENCE, "-k", ONE_CASE], 0),
        (["diff", "--device", "cpu", "--fused", REFERENCE, "-k", ONE_CASE, "--format", "json",
          "--junit-xml", "/dev/stdout"], 0),
        (["diff", "--device", "cpu", "--inject", "dummy-not-zeroed", "-k",
          overwrite_case_id(zero="1")], 1),
        (["bench", "--device", "cpu", "--impl", "refimpl", "--phases", "forward"], 0),
    ],
    ids=["faults", "faults-json", "list", "diff-passed", "diff-json-junit", "diff-failed", "bench"],
)  # fmt: skip
def test_gmlp_check_into_a_closed_pipe_exits_as_the_run_would_have(tmp_path, args, status):
    returncode, stderr = run_into_closed_pipe([*GMLP_CHECK, *args], cwd=tmp_path)
    assert returncode == status, stderr
    assert not any(sign in stderr for sign in SIGNS_OF_A_CRASH), stderr


def test_a_rank_of_gmlp_check_into_a_closed_pipe_with_stderr_too(tmp_path):
    command = [*CHECK_MODULE, "diff", "--device", "cpu", "--fused", REFERENCE, "-k", ONE_CASE]
    returncode, _ = run_into_closed_pipe(command, cwd=tmp_path, stderr_too=True)
    assert returncode == 0


# -- names that are not UTF-8, on a strict stdout ----------------------------------------------
STRICT = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # as a UTF-8 locale other than C.UTF-8


@pytest.mark.parametrize("output_format", ["text", "github"])
def test_gmlp_lint_prints_a_name_that_is_not_utf_8_as_its_bytes(tmp_path, output_format):
    (tmp_path / os.fsdecode(b"caf\xe9.py")).write_text(rule("GMLP004").invalid[0].source)
    done = subprocess.run(
        [*GMLP_LINT, "--no-cache", "--format", output_format, "."],
        cwd=tmp_path, env=STRICT, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert b"caf\xe9.py:2:12: GMLP004" in done.stdout and b"Traceback" not in done.stderr


def test_gmlp_check_prints_a_message_quoting_a_name_that_is_not_utf_8(tmp_path):
    spec = "tests.test_strict_json:fails_naming_a_file"  # its forward names caf<0xe9>.bin
    done = subprocess.run(
        [*GMLP_CHECK, "diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE],
        cwd=tmp_path, capture_output=True, timeout=300, check=False,
        env={**STRICT, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert b"/data/caf\xe9.bin" in done.stdout and b"Traceback" not in done.stderr
