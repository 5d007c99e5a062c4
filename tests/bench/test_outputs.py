"""`gmlp-check bench`'s --output and --plot checked before anything is measured and written
safely after (gmlp_check.files); sizes that cannot fit and printing implementations."""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gmlp_check.cli import main
from gmlp_check.refimpl import GroupedMLP

from ..gmlp_check.support import interrupt_when_waiting

REPO = Path(__file__).resolve().parents[2]
QUICK = ["--device", "cpu", "--shape", "tiny", "--warmup", "1", "--repeats", "1", "--no-progress",
         "--impl", "refimpl", "--phases", "forward", "--load", "uniform"]  # fmt: skip


def bench(*args: str):
    return CliRunner().invoke(main, ["bench", *args])


def last_line(result) -> str:
    return result.output.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "option, path",
    [
        ("--output", "/proc/bench.json"),
        ("--output", "/sys/bench.json"),
        ("--output", "{tmp}/outdir/"),
        ("--plot", "/proc/bench.png"),
    ],
)
def test_an_unwritable_output_is_refused_before_measuring(tmp_path, option, path):
    path = path.format(tmp=tmp_path)
    result = bench(*QUICK, option, path)
    assert result.exit_code == 2, result.output
    assert last_line(result).startswith(f"Error: {option} {path!r}: ")
    assert "Traceback" not in result.output and "forward" not in result.stdout
    assert not (tmp_path / "outdir").exists()


def test_output_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "bench-latest.json"
    link = tmp_path / "bench.json"
    link.symlink_to(target.name)
    result = bench(*QUICK, "--output", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and json.loads(target.read_text())["complete"] is True


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_an_output_write_that_fails_after_the_run_keeps_the_table_and_exits_2(tmp_path):
    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full: every write fails
    result = bench(*QUICK, "--output", str(full))
    assert result.exit_code == 2, result.output
    assert "forward" in result.stdout  # the table
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: --output {str(full)!r}: cannot be written (No space left on device)"
    )
    assert stat.S_ISCHR(full.stat().st_mode)


def test_tokens_that_cannot_fit_are_refused_up_front():
    result = bench(*QUICK, "--tokens", "1000000000000")
    assert result.exit_code == 2, result.output
    assert "--tokens" in result.output and "needs at least" in last_line(result)
    assert "the cpu device has" in last_line(result)


def prints(**kwargs):
    print("factory says hello")
    return GroupedMLP(**kwargs)


def test_an_implementation_that_prints_leaves_stdout_to_the_json_document():
    args = [a if a != "refimpl" else f"{__name__}:prints" for a in QUICK]
    result = bench(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["complete"] is True
    assert "factory says hello" in result.stderr


def slow_on_the_skewed_load(**kwargs):
    """Builds for the uniform load's workload, then waits to be stopped on the skewed one
    (the second workload): --output then holds the first alone."""
    marker = Path(os.environ["GMLP_TEST_DIR"], "built")
    if marker.exists():
        Path(os.environ["GMLP_TEST_DIR"], "waiting").touch()
        time.sleep(300)
    marker.touch()
    return GroupedMLP(**kwargs)


def test_sigterm_keeps_the_finished_workloads_in_output_and_exits_143(tmp_path):
    output = tmp_path / "bench.json"
    args = [a if a != "refimpl" else f"{__name__}:slow_on_the_skewed_load" for a in QUICK]
    args[args.index("uniform")] = "both"
    env = {**os.environ, "PYTHONPATH": str(REPO), "GMLP_TEST_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "gmlp_check.cli", "bench", *args, "--output", str(output)]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    out, err = interrupt_when_waiting(process, tmp_path, "the second workload")
    assert process.returncode == 143, out + err
    assert err.strip().splitlines()[-1] == "gmlp-check: interrupted"
    document = json.loads(output.read_text())
    assert document["complete"] is False
    assert {r["load"] for r in document["results"]} == {"uniform"}
