"""Odd and hostile sources: every file is judged by the running Python's compiler, a file
that cannot be read, compiled or analysed is one error line, and the rest of the run is
still linted (in one process or in a pool)."""

from __future__ import annotations

import sys

import pytest

from gmlp_check.lint.parsing import PYTHON
from gmlp_check.lint.registry import rule

from .support import run_cli, run_process, write, write_plain_bulk

TRUTH = rule("GMLP004").invalid[0]  # one GMLP004 with a safe fix


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- reading ------------------------------------------------------------------------------------
def test_a_file_with_carriage_return_endings_only_is_linted(here):
    (here / "a.py").write_bytes(TRUTH.source.replace("\n", "\r").encode())
    result = run_cli("a.py")
    assert result.exit_code == 1, result.output
    assert f"a.py:{TRUTH.line}:" in result.stdout and "GMLP004" in result.stdout


NOT_TEXT = [(codec, f"{codec!r} is not a text encoding") for codec in ("rot13", "hex", "base64")]
NOT_TEXT += [("zlib", "'zlib' is not a text encoding"), ("uu", "'uu' is not a text encoding")]
# punycode does turn bytes into text, but no Python source is valid punycode.
NOT_TEXT += [("punycode", "not punycode as declared")]


@pytest.mark.parametrize(("codec", "message"), NOT_TEXT, ids=[c for c, _ in NOT_TEXT])
def test_a_coding_line_naming_a_codec_that_cannot_decode_source_is_one_error(here, codec, message):
    (here / "a.py").write_bytes(f"# coding: {codec}\nx = 1  # main_grad\n".encode())
    write(here / "b.py", TRUTH.source)
    result = run_cli("a.py", "b.py")
    assert result.exit_code == 2
    assert result.stderr == f"error: a.py: cannot read: {message}\n"
    assert "b.py:" in result.stdout


def test_a_latin_1_byte_on_the_coding_line_itself_is_read(here):
    data = b"# -*- coding: latin-1 -*- caf\xe9\n" + TRUTH.source.encode()
    (here / "a.py").write_bytes(data)
    result = run_cli("--fix", "a.py")
    assert result.exit_code == 0, result.output
    assert (here / "a.py").read_bytes() == data.replace(TRUTH.source.encode(), TRUTH.fixed.encode())


# -- the compiler's answer, with or without main_grad ----------------------------------------------
COMPILER_ONLY = {
    "duplicate-argument": ("def f(a, a):\n    pass\n", "duplicate argument 'a'"),
    "nonlocal-at-module-level": ("nonlocal x\n", "nonlocal declaration not allowed"),
    "walrus-in-comprehension-iterable": (
        "y = [i for i in (j := [1])]\n",
        "assignment expression cannot be used in a comprehension iterable",
    ),
    "break-outside-loop": ("break\n", "'break' outside loop"),
    "return-at-module-level": ("return 1\n", "'return' outside function"),
    "unknown-future": ("from __future__ import braces_please\n", "future feature"),
}


@pytest.mark.parametrize("mentions", ["", "# main_grad\n"], ids=["plain", "main_grad"])
@pytest.mark.parametrize("case", sorted(COMPILER_ONLY))
def test_what_only_the_compiler_rejects_is_a_parse_error(here, case, mentions):
    source, message = COMPILER_ONLY[case]
    write(here / "a.py", mentions + source)
    result = run_cli("a.py")
    assert result.exit_code == 2
    assert "cannot parse: " in result.stderr and message in result.stderr
    assert f"({PYTHON})" in result.stderr


@pytest.mark.parametrize("mentions", ["", "# main_grad\n"], ids=["plain", "main_grad"])
def test_a_null_byte_is_a_parse_error_with_or_without_main_grad(here, mentions):
    (here / "a.py").write_bytes(mentions.encode() + b"x = 1\x00\n")
    result = run_cli("a.py")
    assert result.exit_code == 2
    assert "cannot parse: the source contains a null byte" in result.stderr


def test_a_python_3_12_f_string_is_valid_whatever_python_runs(here):
    write(here / "a.py", 'x = {\'a\': 1}\ny = f"{x["a"]}"  # main_grad\n')
    result = run_cli("a.py")
    assert result.exit_code == 0, result.output


def test_an_f_string_libcst_rejects_too_is_judged_by_the_running_python_and_says_which(here):
    write(here / "a.py", 'y = f"{x["a"}"  # main_grad\n')
    result = run_cli("a.py")
    assert result.exit_code == 2
    assert "cannot parse: " in result.stderr and f"({PYTHON})" in result.stderr


def test_syntax_warnings_of_linted_files_do_not_reach_stderr(here):
    write(here / "a.py", 'import re\npattern = re.compile("\\d+")  # main_grad\n')
    write(here / "b.py", 'pattern = "\\d+"\nassert (pattern, 1)\n')
    result = run_process("-j", "1", "a.py", "b.py", cwd=here)
    assert (result.returncode, result.stderr) == (0, "")


# -- deep nesting: one error line, the rest still linted -------------------------------------------
HOSTILE = {
    "parentheses-2000": "x = " + "(" * 2000 + "1" + ")" * 2000 + "  # main_grad\n",
    "lambdas-5000": "f = " + "lambda: " * 5000 + "1  # main_grad\n",
    "unary-minus-5000": "x = " + "-" * 5000 + "1  # main_grad\n",
}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_deeply_nested_files_are_one_error_line_each_and_the_rest_is_linted(here, jobs):
    for name, source in HOSTILE.items():
        (here / f"{name}.py").write_text(source)
    write(here / "z.py", TRUTH.source)
    if jobs == "2":  # enough work that the files go to a process pool
        write_plain_bulk(here / "bulk", 3_000_000)
    result = run_process("-j", jobs, ".", cwd=here, timeout=120)
    assert result.returncode == 2, result.stderr
    errors = result.stderr.splitlines()
    assert sorted(line.split(":")[1].strip() for line in errors) == sorted(
        f"{name}.py" for name in HOSTILE
    )
    assert all("cannot parse" in line or "cannot analyse" in line for line in errors)
    assert "Traceback" not in result.stderr
    assert f"z.py:{TRUTH.line}:" in result.stdout


@pytest.mark.parametrize(
    "chain", ["x = p.main_grad" + ".b" * 1000, "x = p.main_grad" + " + b" * 1000]
)
def test_a_thousand_long_chain_that_python_accepts_is_analysed(here, chain):
    write(here / "a.py", "def f(p):\n    " + chain + "\n    return x\n")
    result = run_cli("a.py")
    assert result.exit_code == 0, result.output


def test_a_four_thousand_long_chain_is_judged_quickly(here):
    write(here / "a.py", "def f(p):\n    x = p.main_grad" + ".b" * 4000 + "\n    return x\n")
    result = run_process("a.py", cwd=here, timeout=15)
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr


def test_a_worker_that_dies_costs_one_error_line_and_the_rest_is_linted(here, monkeypatch):
    # No known input crashes the parser any more; a crash in native code is simulated by a
    # worker that kills itself on one file (workers are forked, so they inherit the patch).
    import faulthandler
    import os
    import resource
    import signal

    from gmlp_check.lint import engine

    real = engine.process

    def crash_on_doomed(job, mode):
        if job.path.endswith("doomed.py"):
            # No core file (a CI disk may be small) and no faulthandler dump in the log.
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            faulthandler.disable()
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(job, mode)

    monkeypatch.setattr(engine, "process", crash_on_doomed)
    write(here / "doomed.py", TRUTH.source)
    write(here / "z.py", TRUTH.source)
    write_plain_bulk(here / "bulk", 3_000_000)  # enough work for the process pool
    result = run_cli("-j", "2", ".")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: doomed.py: internal error, please report it: the process checking it crashed\n"
    )
    assert f"z.py:{TRUTH.line}:" in result.stdout


def test_a_deep_helper_that_reads_overwrite_main_grad_is_one_error_line(here):
    # The run first looks for helpers returning overwrite_main_grad in every file.
    write(here / "a.py", "def f(p):\n    return p.overwrite_main_grad + " + "-" * 5000 + "1\n")
    write(here / "b.py", TRUTH.source)
    result = run_process("a.py", "b.py", cwd=here)
    assert result.returncode == 2
    assert result.stderr.startswith("error: a.py: cannot parse: nested too deeply")
    assert len(result.stderr.splitlines()) == 1
    assert f"b.py:{TRUTH.line}:" in result.stdout


def test_under_a_tight_address_space_limit_the_analysis_runs_without_its_big_stack(here):
    # The analysis thread's 512 MiB stack cannot be mapped under a 300 MB limit (ulimit -v).
    import resource
    import subprocess

    write(here / "a.py", TRUTH.source)
    limit = 300 * 2**20

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    result = subprocess.run(
        [sys.executable, "-m", "gmlp_check.lint", "a.py"],
        cwd=here,
        capture_output=True,
        text=True,
        preexec_fn=limited,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (1, "")
    assert f"a.py:{TRUTH.line}:" in result.stdout


def test_the_analysis_runs_with_the_collector_off_and_turns_it_back_on(monkeypatch):
    # Seen from inside a rule's check: the collector while the file is analysed.
    import gc

    from gmlp_check.lint import engine, registry

    seen = []
    monkeypatch.setattr(
        registry, "module_checks", lambda enabled: [lambda *_: seen.append(gc.isenabled())]
    )
    assert gc.isenabled()
    engine.lint_source(TRUTH.source, "a.py", frozenset({"GMLP004"}))
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off_after_the_analysis():
    import gc

    from gmlp_check.lint import engine

    gc.disable()
    try:
        findings = engine.lint_source(TRUTH.source, "a.py", frozenset({"GMLP004"}))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert [f.line for f in findings] == [TRUTH.line]


def test_the_parsed_tree_is_freed_by_reference_counting_not_by_the_collector():
    # The analysis' cycles (units and their context, graph nodes) point into libcst's tree;
    # the collector frees only those cycles, and the tree then goes by reference counting:
    # none of its nodes is among what the collector finds (kept here with DEBUG_SAVEALL).
    import gc

    import libcst

    from gmlp_check.lint import engine

    source = TRUTH.source + "".join(
        f"def f{i}(w):\n    if w.main_grad is not None:\n        w.main_grad.add_(w.grad)\n"
        for i in range(100)
    )
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        findings = engine.lint_source(source, "a.py", frozenset({"GMLP004"}))
        gc.collect(0)  # whatever the analysis left to the collector
        found = [o for o in gc.garbage if isinstance(o, libcst.CSTNode)]
        cycles = len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert [f.line for f in findings] == [TRUTH.line]
    assert cycles > 1_000  # the analysis' own cycles were collected
    assert found == []
    assert gc.get_freeze_count() == 0  # nothing left out of the collector's reach


def test_objects_a_caller_froze_stay_frozen_through_the_analysis():
    import gc

    from gmlp_check.lint import engine

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        findings = engine.lint_source(TRUTH.source, "a.py", frozenset({"GMLP004"}))
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()
    assert [f.line for f in findings] == [TRUTH.line]


def test_libcsts_node_checks_are_off_while_it_parses_and_on_again_after(monkeypatch):
    # Each Name node libcst builds would run its check; the parse (and analysis) of a file
    # with main_grad code and no finding runs none, and a node built by hand afterwards is
    # checked as before.
    import libcst

    from gmlp_check.lint import engine, triggers

    checked = []
    original = libcst.Name._validate
    monkeypatch.setattr(
        libcst.Name, "_validate", lambda node: checked.append(node.value) or original(node)
    )
    valid = rule("GMLP004").valid[0].source
    assert triggers.mentions_contract(valid)
    assert engine.lint_source(valid, "a.py", frozenset({"GMLP004"})) == []
    assert checked == []
    with pytest.raises(libcst.CSTValidationError):
        libcst.Name("not an identifier")
    assert checked == ["not an identifier"]


def test_a_libcst_whose_node_hook_does_more_than_check_keeps_it_while_parsing(monkeypatch):
    # A libcst version whose __post_init__ does other work: that hook stays on.
    import libcst

    from gmlp_check.lint import engine

    built = []

    def post_init(node) -> None:
        built.append(type(node).__name__)
        node._validate()

    monkeypatch.setattr(libcst.CSTNode, "__post_init__", post_init)
    engine.lint_source(TRUTH.source, "a.py", frozenset({"GMLP004"}))
    assert "Name" in built
