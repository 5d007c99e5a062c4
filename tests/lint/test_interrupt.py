"""Ctrl-C stops gmlp-lint at once, in one process or with workers: exit 130, one line, no
traceback, no worker left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gmlp_check.lint.registry import rule

from .support import write

TRUTH = rule("GMLP004").invalid[0]
STOP_WITHIN_S = 5


def slow_files(directory, count: int) -> None:
    """Files whose analysis takes seconds each (libcst and every rule on many functions)."""
    body = "".join(TRUTH.source.replace("def f", f"def f{i}") for i in range(1500))
    for n in range(count):
        write(directory / f"slow{n}.py", body)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_exits_130_promptly_and_ends_the_workers(tmp_path, jobs):
    slow_files(tmp_path, 4)
    process = subprocess.Popen(
        [sys.executable, "-m", "gmlp_check.lint", "-j", jobs, "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal gives a command
        # A terminal's command takes Ctrl-C; a suite started as a shell's background job
        # passes SIGINT on ignored, and the run would then never be interrupted.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(3)  # libcst imported, files being analysed
    assert process.poll() is None, "the run ended before it could be interrupted"
    sent = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    try:
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert time.monotonic() - sent < STOP_WITHIN_S
    assert process.returncode == 130
    assert stderr == "error: interrupted\n"
    time.sleep(0.5)
    assert not group_alive(process.pid), "a worker outlived the run"


def test_workers_end_when_the_parent_is_killed_by_sigterm(tmp_path):
    # SIGTERM (``timeout``, a CI job's limit) kills the parent with no clean-up. Its workers,
    # waiting on a queue no one writes to, ran on for ever holding stdout and stderr open:
    # whatever read the run's output waited for them.
    slow_files(tmp_path, 4)
    process = subprocess.Popen(
        [sys.executable, "-m", "gmlp_check.lint", "-j", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(3)  # workers started, files being analysed
    assert process.poll() is None, "the run ended before it could be stopped"
    process.send_signal(signal.SIGTERM)  # the parent alone, as `kill PID` does
    try:
        process.communicate(timeout=30)  # returns once every holder of the pipes is gone
    finally:
        if group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == -signal.SIGTERM
    time.sleep(0.5)
    assert running_in_group(process.pid) == [], "a worker outlived the run"


def running_in_group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run: a killed worker whose parent died
    first is left to init to reap, and a container's init may not, so zombies are not
    counted."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found
