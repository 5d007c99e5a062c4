"""A pyproject.toml gmlp-lint cannot use, and a selection that selects nothing, are one
error line and exit 2: never a traceback, never a silent "All checks passed!"."""

from __future__ import annotations

import pytest

from gmlp_check.lint.registry import rule

from .support import run_process, write

TRUTH = rule("GMLP004").invalid[0]

BROKEN = {
    "not-utf-8": b'[tool.gmlp-lint]\nselect = ["GMLP\xff"]\n',
    "tool-is-a-number": b"tool = 1\n",
    "tool-gmlp-lint-is-a-number": b"[tool]\ngmlp-lint = 1\n",
    "deep-arrays-in-another-tool": b"[tool.other]\nx = " + b"[" * 5000 + b"]" * 5000 + b"\n",
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_configuration_that_cannot_be_used_is_one_line_and_exit_2(tmp_path, name):
    (tmp_path / "pyproject.toml").write_bytes(BROKEN[name])
    write(tmp_path / "a.py", TRUTH.source)
    result = run_process("a.py", cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and "pyproject.toml" in line


@pytest.mark.parametrize("select", ["", ",", " "])
def test_selecting_nothing_on_the_command_line_is_a_usage_error(tmp_path, select):
    write(tmp_path / "a.py", TRUTH.source)
    result = run_process("--select", select, "a.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "--select" in result.stderr and "no rule selected" in result.stderr
    assert "All checks passed" not in result.stdout


def test_selecting_nothing_in_the_configuration_is_an_error(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.gmlp-lint]\nselect = []\n")
    write(tmp_path / "a.py", TRUTH.source)
    result = run_process("a.py", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "select" in line and "no rule selected" in line
