"""--fix never writes wrong code: edits land where libcst and Python place the code whatever
the line endings, fixes keep the file's newline style, and a fixed text that would not
compile or would not settle is refused with one error line and nothing written."""

from __future__ import annotations

import os
import stat

import pytest

from gmlp_check.lint import engine, file_lint, lines
from gmlp_check.lint.registry import all_rules, rule

from .support import ALL_CODES, run_cli, run_process

TRUTH = rule("GMLP004").invalid[0]  # one GMLP004 with a safe fix
FIXED_EXAMPLES = [
    pytest.param(example, id=f"{r.code}-invalid-{i}")
    for r in all_rules()
    for i, example in enumerate(r.invalid)
    if example.fixed is not None
]


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def with_endings(text: str, newline: str) -> str:
    return text.replace("\n", newline)


# -- offsets agree with libcst's lines ---------------------------------------------------------
def test_a_lone_carriage_return_does_not_move_the_fix_to_another_line(here):
    # libcst and Python end a line at a lone \r; offsets that counted \n only edited the
    # line above the finding.
    source = "# header\r" + TRUTH.source
    path = here / "a.py"
    path.write_bytes(source.encode())
    result = run_cli("--fix", "a.py")
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == ("# header\r" + TRUTH.fixed).encode()


def test_two_one_line_ifs_after_a_carriage_return_header_are_each_fixed_once(here):
    source = "# header\rdef f(a, b):\n    if a.main_grad: return 1\n    if b.main_grad: return 2\n"
    fixed, applied, remaining = engine.fix_source(source, "a.py", ALL_CODES, unsafe=False)
    assert applied == 2 and remaining == []
    assert fixed == source.replace(".main_grad:", ".main_grad is not None:")


@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028"])
def test_removing_an_unused_suppression_keeps_the_code_after_a_separator(here, separator):
    # str.splitlines ends lines at these; Python does not, so the "line" to delete was wrong.
    path = here / "a.py"
    path.write_text(f"#{separator}\n# gmlp: ignore[GMLP999]\ny = 2\n", newline="")
    result = run_cli("--fix", "a.py")
    assert result.exit_code == 0, result.output
    assert path.read_bytes().decode() == f"#{separator}\ny = 2\n"


def test_line_starts_split_where_python_does():
    text = "a\rb\r\nc\x0cd\u2028e\nf"
    assert lines.split(text) == ["a\r", "b\r\n", "c\x0cd\u2028e\n", "f"]
    assert lines.line_starts(text) == [0, 2, 5, 11]


# -- the file's newline style -------------------------------------------------------------------
@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
@pytest.mark.parametrize("example", FIXED_EXAMPLES)
def test_every_fix_keeps_the_files_line_endings(example, newline):
    source = with_endings(example.source, newline)
    fixed, applied, _ = engine.fix_source(source, "a.py", ALL_CODES, unsafe=True)
    assert applied == 1
    assert fixed == with_endings(example.fixed, newline)


def test_a_crlf_file_is_written_back_crlf(here):
    path = here / "a.py"
    path.write_bytes(with_endings(TRUTH.source, "\r\n").encode())
    assert run_cli("--fix", "a.py").exit_code == 0
    assert path.read_bytes() == with_endings(TRUTH.fixed, "\r\n").encode()


# -- a fixed text is checked before it is written --------------------------------------------
@pytest.mark.parametrize(
    "head",
    [
        b"#!/usr/bin/env python\n# gmlp: ignore[GMLP999] old\n# -*- coding: latin-1 -*-\n",
        b"# gmlp: ignore[GMLP999]\n\n# coding: cp1252\n",
        b"# gmlp: ignore[GMLP999]\n#\n# coding: nosuch\n",
    ],
    ids=["latin-1-under-a-shebang", "cp1252-under-a-blank-line", "unknown-codec"],
)
def test_a_fix_that_would_bring_a_coding_line_into_force_is_refused(here, head):
    # Removing the unused suppression moves the third line, a coding line Python ignores
    # there, to the second, where it decides how the UTF-8 text below is read: "é" would
    # become "Ã©" (or the file unreadable).
    data = head + 'NAME = "é"\n'.encode()
    path = here / "a.py"
    path.write_bytes(data)
    result = run_process("--fix", "a.py", cwd=here)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "error: a.py: a fix would change the encoding Python reads the file in (a coding line "
        "moved into or out of the first two lines), nothing written"
    ]
    assert path.read_bytes() == data
    piped = run_process("--fix", "-", cwd=here, input_bytes=data)
    assert (piped.returncode, piped.stdout) == (2, data)


def test_a_fix_that_moves_a_coding_line_over_ascii_text_is_written(here):
    # The same move over ASCII text changes nothing Python reads: the fix goes ahead.
    path = here / "a.py"
    path.write_bytes(b"#!/usr/bin/env python\n# gmlp: ignore[GMLP999]\n# coding: latin-1\nX = 1\n")
    result = run_process("--fix", "a.py", cwd=here)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == b"#!/usr/bin/env python\n# coding: latin-1\nX = 1\n"


def test_a_fix_in_an_encoding_that_does_not_write_the_text_back_is_refused(here):
    # UTF-7 spells "abc" as "+AGEAYgBj-" too: encoding the fixed text rewrote line 2, which
    # no fix touched, as "abc".
    data = b'# coding: utf-7\nX = "+AGEAYgBj-"\nif p.main_grad:\n    pass\n'
    path = here / "a.py"
    path.write_bytes(data)
    result = run_process("--fix", "a.py", cwd=here)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "error: a.py: cannot write the fixes: utf-7 does not encode the file's text back to its "
        "bytes, so lines no fix touches would change; nothing written"
    ]
    assert path.read_bytes() == data
    # The same file spelled as utf-7 writes it is fixed.
    path.write_bytes(data.replace(b"+AGEAYgBj-", b"abc"))
    assert run_process("--fix", "a.py", cwd=here).returncode == 0
    assert b"if p.main_grad is not None:" in path.read_bytes()


def test_a_fix_that_only_the_compiler_rejects_is_refused(here, monkeypatch):
    # libcst accepts ``return`` at module level, CPython's compiler does not.
    from gmlp_check.lint import fixes

    real = fixes.apply_fixes

    def to_module_return(source, findings, unsafe):
        fixed, count = real(source, findings, unsafe)
        return (fixed + "return 1\n", count) if count else (fixed, count)

    monkeypatch.setattr(file_lint, "apply_fixes", to_module_return)
    path = here / "a.py"
    path.write_text(TRUTH.source)
    result = run_cli("--fix", "a.py")
    assert result.exit_code == 2
    assert result.stderr.count("error:") == 1
    assert "a fix produced invalid code, nothing written" in result.stderr
    assert "'return' outside function" in result.stderr
    assert path.read_text() == TRUTH.source


def test_fixes_that_never_settle_are_refused(here, monkeypatch):
    # Each pass's fix brings a new finding with a fix: the run must stop and write nothing.
    from gmlp_check.lint import fixes

    real = fixes.apply_fixes

    def add_a_finding(source, findings, unsafe):
        fixed, count = real(source, findings, unsafe)
        return (fixed, count) if not count else (fixed + TRUTH.source.replace("def f", "def g"), 1)

    monkeypatch.setattr(file_lint, "apply_fixes", add_a_finding)
    path = here / "a.py"
    path.write_text(TRUTH.source)
    result = run_cli("--fix", "a.py")
    assert result.exit_code == 2
    assert "fixes did not settle" in result.stderr
    assert path.read_text() == TRUTH.source


# -- writing ------------------------------------------------------------------------------------
def test_fix_replaces_the_file_atomically_through_a_symlink_keeping_its_mode(here):
    target = here / "real" / "a.py"
    target.parent.mkdir()
    target.write_text(TRUTH.source)
    target.chmod(0o640)
    os.symlink("real/a.py", here / "link.py")
    assert run_cli("--fix", "link.py").exit_code == 0
    assert (here / "link.py").is_symlink()
    assert target.read_text() == TRUTH.fixed
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(os.listdir(target.parent)) == ["a.py"]  # no temporary file left behind


def test_a_reader_of_the_old_file_sees_it_whole_while_the_fix_writes_a_new_one(here):
    path = here / "a.py"
    path.write_text(TRUTH.source)
    with open(path) as old:
        assert run_cli("--fix", "a.py").exit_code == 0
        assert old.read() == TRUTH.source  # not a mix: the new text went to a new file
    assert path.read_text() == TRUTH.fixed


def test_a_file_in_a_directory_that_takes_no_new_files_is_fixed_in_place(here):
    path = here / "locked" / "a.py"
    path.parent.mkdir()
    path.write_text(TRUTH.source)
    path.parent.chmod(0o555)
    try:
        result = run_process("--fix", "locked/a.py", cwd=here, unprivileged=True)
    finally:
        path.parent.chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert path.read_text() == TRUTH.fixed
    assert os.listdir(path.parent) == ["a.py"]


def test_the_new_file_keeps_the_old_ones_owner_and_group(here):
    if os.geteuid() != 0:
        pytest.skip("needs root to hand the file to another user")
    path = here / "a.py"
    path.write_text(TRUTH.source)
    os.chown(path, 65534, 65534)
    path.chmod(0o664)
    assert run_cli("--fix", "a.py").exit_code == 0
    after = os.stat(path)
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (65534, 65534, 0o664)
    assert path.read_text() == TRUTH.fixed


def test_a_file_saved_by_someone_else_during_the_run_is_not_overwritten(here, monkeypatch):
    path = here / "a.py"
    path.write_text(TRUTH.source)
    edited = TRUTH.source + "# saved by an editor while gmlp-lint ran\n"
    real = engine.process

    def process_then_edit(job, mode):
        result = real(job, mode)
        path.write_text(edited)  # the editor saves after gmlp-lint read the file
        return result

    monkeypatch.setattr(engine, "process", process_then_edit)
    result = run_cli("-j", "1", "--fix", "a.py")
    assert result.exit_code == 2
    assert "error: a.py: cannot write the fixes: the file changed while gmlp-lint ran" in (
        result.stderr
    )
    assert path.read_text() == edited
