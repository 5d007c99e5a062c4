"""gmlp-lint never crashes and never lies: files it cannot read, decode or parse are
reported in every format (and the run says so), odd files neither hang nor crash it, and
--fix writes files the way ruff and black do, counting only what it really wrote."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from gmlp_check.lint.parsing import PYTHON
from gmlp_check.lint.registry import rule

from .support import run_cli, run_process, write

TRUTH = rule("GMLP004").invalid[0]  # one GMLP004 with a safe fix
CLEAN = rule("GMLP001").valid[0].source
MISSING_COLON = "def f(p):\n    if p.main_grad\n        return 1\n"  # Python: 2:19


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- every file is checked to be valid Python ---------------------------------------------
def test_a_file_without_main_grad_that_does_not_parse_exits_2(here):
    write(here / "ok.py", CLEAN)
    write(here / "broken.py", "def f(:\n    return 1\n")
    result = run_cli(".")
    assert result.exit_code == 2
    assert "error: broken.py:1:7: cannot parse: invalid syntax" in result.stderr


def test_the_syntax_error_is_placed_where_python_places_it(here):
    write(here / "a.py", MISSING_COLON)
    result = run_cli("a.py")
    assert result.exit_code == 2
    assert "error: a.py:2:19: cannot parse: expected ':'" in result.stderr


def test_a_run_with_errors_never_says_all_checks_passed(here):
    write(here / "broken.py", "def f(:\n")
    result = run_cli("broken.py", "missing.py")
    assert result.exit_code == 2
    assert "All checks passed!" not in result.stdout
    assert "2 files could not be checked" in result.stdout


def test_a_null_byte_is_a_parse_error_with_a_place(here):
    (here / "a.py").write_bytes(b"x = 1\ny = \x00\n")
    result = run_cli("a.py")
    assert result.exit_code == 2
    assert "error: a.py:2:5: cannot parse: the source contains a null byte" in result.stderr


# -- encodings: as Python reads source files (PEP 263) ------------------------------------
def test_a_declared_latin_1_file_is_read_and_fixed_in_latin_1(here):
    header = "# -*- coding: latin-1 -*-\n# café\n"
    path = here / "a.py"
    path.write_bytes((header + TRUTH.source).encode("latin-1"))
    assert run_cli("a.py").exit_code == 1  # read, parsed and flagged
    assert run_cli("--fix", "a.py").exit_code == 0
    assert path.read_bytes() == (header + TRUTH.fixed).encode("latin-1")


def test_a_byte_order_mark_is_kept_by_fixes(here):
    path = here / "a.py"
    path.write_bytes(b"\xef\xbb\xbf" + TRUTH.source.encode())
    assert run_cli("--fix", "a.py").exit_code == 0
    assert path.read_bytes() == b"\xef\xbb\xbf" + TRUTH.fixed.encode()


def test_undeclared_non_utf_8_bytes_are_reported_where_they_are(here):
    (here / "a.py").write_bytes(b"x = 1\ny = 'caf\xe9'\n")
    result = run_cli("a.py")
    assert result.exit_code == 2
    assert "error: a.py:2:9: cannot read: not UTF-8" in result.stderr


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"# coding: klingon\nx = 1\n", "unknown encoding"),
        (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "a UTF-8 byte order mark and a coding line"),
    ],
    ids=["unknown", "bom-and-latin-1"],
)
def test_an_encoding_python_would_refuse_is_reported(here, data, message):
    (here / "a.py").write_bytes(data)
    result = run_cli("a.py")
    assert result.exit_code == 2
    assert f"error: a.py: cannot read: {message}" in result.stderr


def test_non_utf_8_bytes_on_stdin_are_reported_and_echoed_untouched(here):
    data = b"x = 'caf\xe9'  # main_grad\n"
    checked = run_process("-", cwd=here, input_bytes=data)
    assert checked.returncode == 2
    assert b"error: -:1:9: cannot read: not UTF-8" in checked.stderr
    fixed = run_process("--fix", "-", cwd=here, input_bytes=data)
    assert (fixed.returncode, fixed.stdout) == (2, data)


@pytest.mark.parametrize(
    "args", [["-"], ["--fix", "-"], ["--stdin-filename", "a.py"], ["--format", "json", "-"]]
)
def test_a_closed_stdin_is_one_error_line_and_exit_2(here, args):
    closed = subprocess.run(
        [sys.executable, "-m", "gmlp_check.lint", *args],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(0),  # as a shell's `<&-` leaves it
    )
    assert closed.returncode == 2, closed.stderr
    shown = args[-1] if args[0] == "--stdin-filename" else "-"
    error = f"error: {shown}: cannot read: stdin is closed"
    assert closed.stderr.splitlines()[0] == error and "Traceback" not in closed.stderr
    if "--fix" in args:  # stdout is the fixed source; there is none
        assert closed.stdout == ""
    elif "json" in args:
        (entry,) = json.loads(closed.stdout)
        assert entry["code"] is None and entry["message"] == "cannot read: stdin is closed"
    else:
        assert closed.stdout == "1 file could not be checked (errors on stderr).\n"


# -- every format carries the errors --------------------------------------------------------
def test_json_lists_errors_with_a_null_code(here):
    write(here / "a.py", MISSING_COLON)
    write(here / "b.py", TRUTH.source)
    result = run_cli("--format", "json", ".")
    assert result.exit_code == 2
    entries = json.loads(result.stdout)
    assert [(e["path"], e["code"], e["line"]) for e in entries] == [
        ("a.py", None, 2),
        ("b.py", "GMLP004", TRUTH.line),
    ]
    assert (entries[0]["column"], entries[0]["end_column"]) == (19, 19)
    assert entries[0]["message"] == f"cannot parse: expected ':' ({PYTHON})"
    assert set(entries[0]) == set(entries[1])


def test_github_annotates_errors(here):
    write(here / "a.py", MISSING_COLON)
    result = run_cli("--format", "github", "a.py")
    assert result.exit_code == 2
    assert result.stdout == (
        "::error title=gmlp-lint,file=a.py,line=2,col=19,endLine=2,endColumn=19::"
        f"a.py:2:19: cannot parse: expected ':' ({PYTHON})\n"
    )


def test_sarif_reports_a_missing_path_as_an_unsuccessful_execution(here):
    write(here / "a.py", CLEAN)
    result = run_cli("--format", "sarif", "a.py", "missing.py")
    assert result.exit_code == 2
    (invocation,) = json.loads(result.stdout)["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["message"]["text"] == "missing.py: no such file or directory"


def test_sarif_names_files_whose_names_are_not_utf_8_by_their_bytes(here):
    # Such names reach Python as surrogate escapes, which quoting the text could not encode.
    write(here / os.fsdecode(b"caf\xe9.py"), TRUTH.source)
    write(here / os.fsdecode(b"\xff.py"), MISSING_COLON)
    result = run_process("--format", "sarif", ".", cwd=here)
    assert result.returncode == 2, result.stderr
    (run,) = json.loads(result.stdout)["runs"]
    (finding,) = run["results"]
    location = finding["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "caf%E9.py", "uriBaseId": "%SRCROOT%"}
    (error,) = run["invocations"][0]["toolExecutionNotifications"]
    assert error["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "%FF.py"


# -- odd files: no crash, no hang ---------------------------------------------------------
def test_a_file_name_that_is_not_utf_8_is_linted_beside_other_files(here):
    # The run's cross-file facts read every file's module name; one not in UTF-8 crashed it.
    write(here / os.fsdecode(b"caf\xe9.py"), TRUTH.source)
    write(here / "other.py", CLEAN)
    result = run_process(".", cwd=here, input_bytes=b"")  # bytes out: the name is not UTF-8
    assert result.returncode == 1, result.stderr
    assert result.stderr == b"" and result.stdout.startswith(b"caf\xe9.py:2:12: GMLP004 ")


def test_a_symlink_loop_in_a_directory_is_passed_over(here):
    write(here / "pkg" / "a.py", TRUTH.source)
    os.symlink("loop.py", here / "pkg" / "loop.py")
    os.symlink("missing.py", here / "pkg" / "dangling.py")
    result = run_cli("pkg")
    assert result.exit_code == 1
    assert "pkg/a.py" in result.stdout and result.stderr == ""


def test_a_symlink_loop_named_on_the_command_line_is_an_error(here):
    os.symlink("loop.py", here / "loop.py")
    write(here / "a.py", TRUTH.source)
    for output_format in ("text", "sarif"):
        result = run_cli("--format", output_format, "loop.py", "a.py")
        assert result.exit_code == 2
        assert "error: loop.py: cannot read: Too many levels of symbolic links" in result.stderr


def test_a_fifo_in_a_directory_is_passed_over_and_named_is_an_error(here):
    write(here / "pkg" / "a.py", TRUTH.source)
    os.mkfifo(here / "pkg" / "pipe.py")
    walked = run_process("pkg", cwd=here, timeout=30)
    assert walked.returncode == 1 and "pkg/a.py" in walked.stdout
    named = run_process("pkg/pipe.py", "pkg/a.py", cwd=here, timeout=30)
    assert named.returncode == 2
    assert "error: pkg/pipe.py: cannot read: not a regular file" in named.stderr
    assert "pkg/a.py" in named.stdout


def test_a_device_named_on_the_command_line_is_an_error(here):
    result = run_process("/dev/zero", cwd=here, timeout=30)
    assert result.returncode == 2
    assert "error: /dev/zero: cannot read: not a regular file" in result.stderr


def test_an_unreadable_file_is_reported_and_the_rest_is_linted(here):
    write(here / "a.py", TRUTH.source)
    secret = write(here / "secret.py", CLEAN)
    secret.chmod(0)
    result = run_process("secret.py", "a.py", cwd=here, unprivileged=True)
    assert result.returncode == 2
    assert "error: secret.py: cannot read: Permission denied" in result.stderr
    assert "a.py:" in result.stdout and "GMLP004" in result.stdout


def test_an_unreadable_directory_is_reported_and_the_rest_is_linted(here):
    write(here / "pkg" / "a.py", TRUTH.source)
    write(here / "pkg" / "locked" / "b.py", CLEAN)
    (here / "pkg" / "locked").chmod(0)
    try:
        result = run_process("pkg", cwd=here, unprivileged=True)
    finally:
        (here / "pkg" / "locked").chmod(0o755)  # so that pytest can clean up
    assert result.returncode == 2
    assert "error: pkg/locked: cannot read: Permission denied" in result.stderr
    assert "pkg/a.py:" in result.stdout


def test_a_fault_in_one_rule_is_reported_and_the_other_files_are_linted(here, monkeypatch):
    from gmlp_check.lint.rules import dummy_wgrad_not_zeroed as gmlp003

    def broken(context, out):
        raise ValueError("boom")

    monkeypatch.setattr(gmlp003, "check", broken)
    write(here / "a.py", TRUTH.source)
    write(here / "b.py", "def f(p):\n    return p.main_grad\n")
    result = run_cli("-j", "1", "--select", "GMLP003,GMLP004", "a.py", "b.py")
    assert result.exit_code == 2
    assert "error: a.py: internal error, please report it: ValueError: boom" in result.stderr


# -- --fix writes like ruff and black -------------------------------------------------------
def test_fix_writes_through_a_symlink(here):
    target = write(here / "real" / "a.py", TRUTH.source)
    os.symlink("real/a.py", here / "link.py")
    assert run_cli("--fix", "link.py").exit_code == 0
    assert (here / "link.py").is_symlink()
    assert target.read_text() == TRUTH.fixed


def test_fix_keeps_hard_links_inode_and_mode_and_fixes_one_file_once(here):
    path = write(here / "a.py", TRUTH.source)
    os.link(path, here / "b.py")
    path.chmod(0o640)
    before = os.stat(path)
    result = run_cli("--fix", ".")
    assert result.exit_code == 0
    assert "Found 1 error (1 fixed, 0 remaining)." in result.stdout  # one file, two names
    after = os.stat(path)
    assert (after.st_ino, after.st_uid, after.st_gid) == (
        before.st_ino,
        before.st_uid,
        before.st_gid,
    )
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert (here / "b.py").read_text() == TRUTH.fixed
    assert sorted(os.listdir(here)) == ["a.py", "b.py"]  # no temporary file left behind


def test_fix_refuses_a_read_only_file_and_counts_only_what_it_wrote(here):
    writable = write(here / "a.py", TRUTH.source)
    read_only = write(here / "b.py", TRUTH.source)
    read_only.chmod(0o444)
    result = run_cli("--fix", "a.py", "b.py")
    assert result.exit_code == 2
    assert "error: b.py: cannot write the fixes: the file is read-only" in result.stderr
    assert writable.read_text() == TRUTH.fixed
    assert read_only.read_text() == TRUTH.source
    # The unwritten fix is not counted; its finding is still in the file.
    assert "Found 2 errors (1 fixed, 1 remaining)." in result.stdout
    assert f"b.py:{TRUTH.line}:" in result.stdout
    assert "1 file could not be fixed" in result.stdout


def test_a_write_the_system_refuses_is_reported_and_not_counted(here):
    if os.geteuid() != 0:
        pytest.skip("needs root to hand the file to another user")
    other = write(here / "a.py", TRUTH.source)
    os.chown(other, 65534, 65534)  # writable by its owner only, and that is not us
    other.chmod(0o644)
    result = run_process("--fix", "a.py", cwd=here, unprivileged=True)
    assert result.returncode == 2
    assert "error: a.py: cannot write the fixes: Permission denied" in result.stderr
    assert other.read_text() == TRUTH.source
    assert "Found 1 error." in result.stdout and "1 file could not be fixed" in result.stdout


# -- any callee shape: the analyses never assume a call names its callee -----------------
CALLEE_SHAPES = ("make()", "layers[0]", "(lambda: Linear)()", "getattr(te, 'Linear')", "a.b()")
EVERY_TRIGGER = """
import torch


class Block(torch.nn.Module):
    def __init__(self, config, delay_wgrad_compute=False):
        self.linear_fc1 = {callee}(config.hidden, config.ffn)
        self.linear_fc1.weight.register_hook(lambda g: torch.distributed.all_reduce(g))

    def backward_dw(self):
        w = {callee}(self.linear_fc1.weight)
        w.main_grad.add_(w.grad)
        w.grad_added_to_main_grad = True
"""


@pytest.mark.parametrize("callee", CALLEE_SHAPES)
def test_calls_of_any_callee_shape_are_analysed_without_an_internal_error(here, callee):
    write(here / "block.py", EVERY_TRIGGER.format(callee=callee))
    result = run_cli("--no-progress", "--format", "json", "block.py")
    assert result.exit_code in (0, 1), result.stdout
    assert all(f["code"] is not None for f in json.loads(result.stdout)), result.stdout
