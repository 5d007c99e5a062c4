"""Progress on a terminal: shown once a run has taken a while (one slow file is enough),
never for a quick run, never when stderr is not a terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys

from gmlp_check.lint.registry import rule

from .support import run_process, write

TRUTH = rule("GMLP004").invalid[0]


def slow_file(path, functions: int = 1500) -> None:
    """One file whose analysis takes seconds (about 2.5 s of CPU per 1,000 functions)."""
    write(path, "".join(TRUTH.source.replace("def f", f"def f{i}") for i in range(functions)))


def stderr_on_a_terminal(*args: str, cwd) -> tuple[int, str]:
    """Run gmlp-lint with stderr on a pseudo-terminal; its exit status and what it showed."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "gmlp_check.lint", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    shown = b""
    while True:  # drain as it runs: a full terminal buffer would stall the run
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            shown += chunk
        elif process.poll() is not None:
            break
    os.close(leader)
    return process.wait(timeout=60), shown.decode(errors="replace")


def test_a_slow_run_on_a_terminal_shows_progress(tmp_path):
    slow_file(tmp_path / "slow.py", 2500)  # well past the 2 s delay on a fast machine too
    status, shown = stderr_on_a_terminal("-j", "1", "slow.py", cwd=tmp_path)
    assert status == 1
    assert "gmlp-lint" in shown and "1/1" in shown


def test_a_quick_run_on_a_terminal_shows_none(tmp_path):
    write(tmp_path / "a.py", TRUTH.source)
    status, shown = stderr_on_a_terminal("a.py", cwd=tmp_path)
    assert (status, shown) == (1, "")


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    slow_file(tmp_path / "slow.py")
    result = run_process("-j", "1", "slow.py", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "")
