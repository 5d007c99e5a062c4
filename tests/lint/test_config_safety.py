"""A pyproject.toml gmlp-lint cannot use, and a selection that selects nothing, are one
error line and exit 2: never a traceback, never a silent "All checks passed!"."""

from __future__ import annotations

import os

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


def _directory(path):
    path.mkdir()


def _fifo(path):
    os.mkfifo(path)


def _broken_symlink(path):
    path.symlink_to("nowhere.toml")


def _symlink_loop(path):
    path.with_name("loop.toml").symlink_to(path.name)
    path.symlink_to("loop.toml")


NOT_A_FILE = {
    "directory": (_directory, "a directory, not a file"),
    "fifo": (_fifo, "a FIFO, not a file"),
    "broken-symlink": (_broken_symlink, "a broken symbolic link (its target 'nowhere.toml'"),
    "symlink-loop": (_symlink_loop, "a symbolic link loop"),
}


@pytest.mark.parametrize("name", sorted(NOT_A_FILE))
@pytest.mark.parametrize("stdin", [False, True], ids=["paths", "stdin"])
def test_a_pyproject_that_is_not_a_file_is_one_line_and_exit_2(tmp_path, name, stdin):
    # It was taken as absent: the parent's configuration (here one that ignores the rule) or
    # the defaults applied, silently. A FIFO must not be opened (it would wait for a writer):
    # the timeout turns that hang into a failure.
    make, what = NOT_A_FILE[name]
    write(tmp_path / "pyproject.toml", '[tool.gmlp-lint]\nignore = ["GMLP004"]\n')
    project = tmp_path / "project"
    write(project / "a.py", TRUTH.source)
    make(project / "pyproject.toml")
    if stdin:
        args, data = ("-", "--stdin-filename", "a.py"), TRUTH.source.encode()
    else:
        args, data = ("a.py",), None
    result = run_process(*args, cwd=project, timeout=20, input_bytes=data)
    stderr = result.stderr.decode() if stdin else result.stderr
    assert result.returncode == 2, result.stdout
    (line,) = stderr.splitlines()
    assert line.startswith(f"error: {project / 'pyproject.toml'}: {what}")
    assert line.endswith("expected a TOML file")


def test_a_pyproject_that_starts_with_a_bom_is_read_as_ruff_reads_it(tmp_path):
    # ruff's TOML parser (the toml crate, as cargo's) skips a leading UTF-8 BOM; tomllib
    # reports "Invalid statement (at line 1, column 1)", which names no cause.
    (tmp_path / "pyproject.toml").write_bytes(
        b'\xef\xbb\xbf[tool.gmlp-lint]\nignore = ["GMLP004"]\n'
    )
    write(tmp_path / "a.py", TRUTH.source)
    result = run_process("a.py", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    assert "All checks passed!" in result.stdout


def test_only_one_bom_is_skipped_and_error_offsets_still_count_it(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(b"\xef\xbb\xbf\xef\xbb\xbfx = 1\n")
    write(tmp_path / "a.py", TRUTH.source)
    result = run_process("a.py", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "invalid TOML" in line
    (tmp_path / "pyproject.toml").write_bytes(b"\xef\xbb\xbfx = '\xff'\n")
    (line,) = run_process("a.py", cwd=tmp_path).stderr.splitlines()
    assert line.endswith("not UTF-8 (invalid start byte, byte 8)")
