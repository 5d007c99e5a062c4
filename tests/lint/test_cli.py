"""The gmlp-lint command line: exit codes, formats, selection, configuration, suppressions,
fixes, stdin, the rule subcommand, progress and parallel runs."""

from __future__ import annotations

import json
import os
import stat

import pytest

from gmlp_check.lint import engine, file_lint
from gmlp_check.lint.registry import CODES, rule

from .support import run_cli, write, write_plain_bulk

GATE = rule("GMLP001").invalid[0]  # one GMLP001 with an unsafe fix
TRUTH = rule("GMLP004").invalid[0]  # one GMLP004 with a safe fix
CLEAN = rule("GMLP001").valid[0].source
NO_MAIN_GRAD = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A small project: one clean file, one GMLP001, one GMLP004; cwd is its root."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pkg" / "clean.py", CLEAN)
    write(tmp_path / "pkg" / "gate.py", GATE.source)
    write(tmp_path / "pkg" / "truth.py", TRUTH.source)
    write(tmp_path / "pkg" / "plain.py", NO_MAIN_GRAD)
    return tmp_path


def findings_json(result) -> list[dict]:
    return json.loads(result.stdout)


# -- exit codes -----------------------------------------------------------------------
def test_clean_files_exit_0(tmp_path):
    write(tmp_path / "a.py", CLEAN)
    write(tmp_path / "b.py", NO_MAIN_GRAD)
    result = run_cli(str(tmp_path))
    assert result.exit_code == 0
    assert "All checks passed!" in result.stdout


def test_findings_exit_1_in_ruff_style_text(tree):
    result = run_cli("pkg")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"pkg/gate.py:{GATE.line}:" in result.stdout
    gate_line = next(line for line in lines if line.startswith("pkg/gate.py:"))
    assert " GMLP001 " in gate_line
    truth_line = next(line for line in lines if line.startswith("pkg/truth.py:"))
    assert " GMLP004 [*] " in truth_line  # safe fix available
    assert "Found 2 errors." in result.stdout
    assert "[*] 1 fixable with the `--fix` option." in result.stdout
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option." in result.stdout


def test_missing_path_exits_2_but_the_rest_is_linted(tree):
    result = run_cli("pkg/gate.py", "nowhere.py")
    assert result.exit_code == 2
    assert "nowhere.py: no such file or directory" in result.stderr
    assert "GMLP001" in result.stdout


def test_unparseable_file_exits_2_and_other_files_are_still_linted(tree):
    write(tree / "pkg" / "broken.py", "def f(p:\n    return p.main_grad\n")
    result = run_cli("pkg")
    assert result.exit_code == 2
    assert "error: pkg/broken.py:1:6: cannot parse: '(' was never closed" in result.stderr
    assert "GMLP001" in result.stdout and "GMLP004" in result.stdout


def test_unreadable_encoding_exits_2(tree):
    (tree / "pkg" / "latin.py").write_bytes(b"x = 'caf\xe9'  # main_grad\n")
    result = run_cli("pkg/latin.py")
    assert result.exit_code == 2
    assert "not UTF-8" in result.stderr


def test_files_without_main_grad_are_still_checked_by_pythons_parser(tmp_path):
    write(tmp_path / "broken_without_main_grad.py", "def f(:\n")
    assert run_cli(str(tmp_path)).exit_code == 2  # libcst is not loaded: test_isolation


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--select", "GMLP9"], "unknown rule selector"),
        (["--ignore", "E501"], "unknown rule selector"),
        (["--format", "xml"], "Invalid value for '--format'"),
        (["-j", "0"], "Invalid value for '-j'"),
        (["-", "pkg"], "cannot be combined"),
        (["--no-such-option"], "No such option"),
    ],
)
def test_usage_errors_exit_2(tree, args, message):
    result = run_cli(*args)
    assert result.exit_code == 2
    assert message in result.stderr


# -- formats --------------------------------------------------------------------------
def test_json_format_is_a_stable_list_with_columns_from_1(tree):
    result = run_cli("--format", "json", "pkg")
    assert result.exit_code == 1
    findings = findings_json(result)
    assert [f["code"] for f in findings] == ["GMLP001", "GMLP004"]
    keys = {
        "code",
        "path",
        "line",
        "column",
        "end_line",
        "end_column",
        "message",
        "fixable",
        "fix_applicability",
    }
    for finding in findings:
        assert set(finding) == keys
        source_line = (tree / finding["path"]).read_text().splitlines()[finding["line"] - 1]
        flagged = source_line[finding["column"] - 1 : finding["end_column"] - 1]
        assert flagged in ("accumulate", "param.main_grad")
    assert findings[0]["fix_applicability"] == "unsafe" and findings[0]["fixable"]
    assert findings[1]["fix_applicability"] == "safe"


def test_json_format_of_a_clean_run_is_an_empty_list(tmp_path):
    write(tmp_path / "a.py", CLEAN)
    result = run_cli("--format", "json", str(tmp_path))
    assert (result.exit_code, findings_json(result)) == (0, [])


def test_sarif_format_for_github_code_scanning(tree):
    write(tree / "pkg" / "broken.py", "def f(p:\n    return p.main_grad\n")
    result = run_cli("--format", "sarif", "pkg")
    assert result.exit_code == 2
    log = json.loads(result.stdout)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gmlp-lint"
    rules = {r["id"]: r for r in driver["rules"]}
    assert set(rules) == set(CODES)
    for descriptor in rules.values():
        assert descriptor["shortDescription"]["text"]
        assert descriptor["fullDescription"]["text"]
        assert "## Bad" in descriptor["help"]["markdown"] and descriptor["help"]["text"]
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["GMLP001", "GMLP004"]
    location = results[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/gate.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == GATE.line
    assert driver["rules"][results[0]["ruleIndex"]]["id"] == "GMLP001"
    assert run["invocations"][0]["executionSuccessful"] is False
    assert "broken.py" in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]


def test_github_format_annotations(tree):
    result = run_cli("--format", "github", "pkg/truth.py")
    assert result.exit_code == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith(
        f"::error title=gmlp-lint (GMLP004),file=pkg/truth.py,line={TRUTH.line},col="
    )
    assert "::pkg/truth.py:" in line and "GMLP004" in line.split("::", 2)[2]


# -- selection and configuration -----------------------------------------------------
def test_select_and_ignore_take_codes_and_prefixes(tree):
    codes = lambda *args: {f["code"] for f in findings_json(run_cli("--format", "json", *args))}  # noqa: E731
    assert codes("pkg") == {"GMLP001", "GMLP004"}
    assert codes("--select", "GMLP004", "pkg") == {"GMLP004"}
    assert codes("--select", "GMLP00", "--ignore", "GMLP004", "pkg") == {"GMLP001"}
    assert codes("--select", "GMLP001,GMLP004", "pkg") == {"GMLP001", "GMLP004"}
    assert codes("--ignore", "GMLP", "pkg") == set()
    assert run_cli("--ignore", "GMLP", "pkg").exit_code == 0


def test_config_select_and_ignore(tree):
    write(tree / "pyproject.toml", '[tool.gmlp-lint]\nselect = ["GMLP0"]\nignore = ["GMLP001"]\n')
    result = run_cli("--format", "json", "pkg")
    assert [f["code"] for f in findings_json(result)] == ["GMLP004"]
    # A command-line --select replaces the configuration's selection.
    result = run_cli("--format", "json", "--select", "GMLP001", "pkg")
    assert [f["code"] for f in findings_json(result)] == ["GMLP001"]


def test_config_per_file_ignores(tree):
    write(
        tree / "pyproject.toml", '[tool.gmlp-lint.per-file-ignores]\n"pkg/gate.py" = ["GMLP001"]\n'
    )
    result = run_cli("--format", "json", "pkg")
    assert [f["path"] for f in findings_json(result)] == ["pkg/truth.py"]


def test_config_exclude_and_force_exclude(tree):
    write(tree / "pyproject.toml", '[tool.gmlp-lint]\nexclude = ["pkg/gate.py"]\n')
    walked = findings_json(run_cli("--format", "json", "pkg"))
    assert [f["path"] for f in walked] == ["pkg/truth.py"]
    named = findings_json(run_cli("--format", "json", "pkg/gate.py"))
    assert [f["code"] for f in named] == ["GMLP001"]  # named explicitly: linted anyway
    forced = run_cli("--format", "json", "--force-exclude", "pkg/gate.py")
    assert (forced.exit_code, findings_json(forced)) == (0, [])


def test_excluded_directory_named_explicitly_is_linted_unless_forced(tree):
    write(tree / "pyproject.toml", '[tool.gmlp-lint]\nexclude = ["pkg"]\n')
    assert findings_json(run_cli("--format", "json", ".")) == []
    named = findings_json(run_cli("--format", "json", "pkg"))
    assert {f["path"] for f in named} == {"pkg/gate.py", "pkg/truth.py"}
    forced = run_cli("--format", "json", "--force-exclude", "pkg")
    assert (forced.exit_code, findings_json(forced)) == (0, [])


def test_excludes_still_apply_below_a_named_directory(tree):
    write(tree / "pyproject.toml", '[tool.gmlp-lint]\nexclude = ["pkg/gate.py"]\n')
    named = findings_json(run_cli("--format", "json", "pkg"))
    assert [f["path"] for f in named] == ["pkg/truth.py"]


def test_built_in_excludes_skip_virtualenvs(tree):
    write(tree / ".venv" / "lib" / "site.py", GATE.source)
    paths = {f["path"] for f in findings_json(run_cli("--format", "json", "."))}
    assert paths == {"pkg/gate.py", "pkg/truth.py"}


@pytest.mark.parametrize("configured", [True, False])
@pytest.mark.parametrize(
    "named", [".venv/lib/site-packages/megatron", ".venv", "build/tools", "build"]
)
def test_a_directory_named_inside_a_built_in_exclude_is_linted(tree, configured, named):
    # Installed code is checked by naming it (`gmlp-lint .venv/.../site-packages/megatron`);
    # built-in names above the named directory must not make that a silent empty run.
    if configured:
        write(tree / "pyproject.toml", "[tool.gmlp-lint]\n")
    write(tree / named / "layer.py", GATE.source)
    write(tree / named / "__pycache__" / "stale.py", GATE.source)  # still skipped below it
    walked = run_cli("--format", "json", named)
    assert {f["path"] for f in findings_json(walked)} == {f"{named}/layer.py"}
    forced = run_cli("--format", "json", "--force-exclude", named)
    assert (forced.exit_code, findings_json(forced)) == (0, [])


def test_nearest_pyproject_with_a_table_wins(tree):
    write(tree / "pyproject.toml", '[tool.gmlp-lint]\nignore = ["GMLP004"]\n')
    write(tree / "pkg" / "pyproject.toml", '[project]\nname = "no-table-here"\n')
    write(tree / "sub" / "pyproject.toml", '[tool.gmlp-lint]\nignore = ["GMLP001"]\n')
    write(tree / "sub" / "gate.py", GATE.source)
    write(tree / "sub" / "truth.py", TRUTH.source)
    found = {(f["path"], f["code"]) for f in findings_json(run_cli("--format", "json", "."))}
    assert found == {("pkg/gate.py", "GMLP001"), ("sub/truth.py", "GMLP004")}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[tool.gmlp-lint]\nselct = ["GMLP001"]\n', "unknown key 'selct'"),
        ('[tool.gmlp-lint]\nignore = ["X1"]\n', "unknown rule selector 'X1'"),
        ('[tool.gmlp-lint]\nexclude = "tests"\n', "expected a list of strings"),
        ('[tool.gmlp-lint]\nanalyse-tests = "yes"\n', "analyse-tests: expected true or false"),
        ("[tool.gmlp-lint\n", "invalid TOML"),
    ],
)
def test_bad_configuration_exits_2_naming_the_problem(tree, table, message):
    write(tree / "pyproject.toml", table)
    result = run_cli("pkg")
    assert result.exit_code == 2
    assert message in result.stderr and "pyproject.toml" in result.stderr


# -- suppressions ---------------------------------------------------------------------
def test_suppression_on_the_line_or_the_line_above(tmp_path):
    lines = TRUTH.source.splitlines()
    flagged = TRUTH.line - 1
    same = [
        *lines[:flagged],
        lines[flagged] + "  # gmlp: ignore[GMLP004] value test",
        *lines[flagged + 1 :],
    ]
    indent = lines[flagged][: len(lines[flagged]) - len(lines[flagged].lstrip())]
    above = [*lines[:flagged], f"{indent}# gmlp: ignore[GMLP004] value test", *lines[flagged:]]
    two_above = [
        *lines[:flagged],
        f"{indent}# gmlp: ignore[GMLP004]",
        f"{indent}pass",
        *lines[flagged:],
    ]
    write(tmp_path / "same.py", "\n".join(same) + "\n")
    write(tmp_path / "above.py", "\n".join(above) + "\n")
    write(tmp_path / "two_above.py", "\n".join(two_above) + "\n")
    result = run_cli("--format", "json", str(tmp_path))
    found = {(os.path.basename(f["path"]), f["code"]) for f in findings_json(result)}
    # Too far away: the finding stays and the suppression is reported as unused.
    assert found == {("two_above.py", "GMLP004"), ("two_above.py", "GMLP100")}


def test_unused_suppression_is_reported_and_fixable(tmp_path):
    path = write(tmp_path / "a.py", "x = 1  # gmlp: ignore[GMLP001] no longer needed\n")
    result = run_cli("--format", "json", str(path))
    (finding,) = findings_json(result)
    assert (finding["code"], finding["line"], finding["fix_applicability"]) == (
        "GMLP100",
        1,
        "safe",
    )
    assert run_cli("--ignore", "GMLP100", str(path)).exit_code == 0
    assert run_cli("--fix", str(path)).exit_code == 0
    assert path.read_text() == "x = 1\n"


def test_suppressing_a_rule_that_is_turned_off_is_not_reported(tmp_path):
    path = write(tmp_path / "a.py", "x = 1  # gmlp: ignore[GMLP001] kept for later\n")
    assert run_cli("--ignore", "GMLP001", str(path)).exit_code == 0


def test_suppression_text_inside_a_string_is_not_a_suppression(tmp_path):
    lines = TRUTH.source.splitlines()
    lines.insert(TRUTH.line - 1, '    note = "# gmlp: ignore[GMLP004]"')
    path = write(tmp_path / "a.py", "\n".join(lines) + "\n")
    assert [f["code"] for f in findings_json(run_cli("--format", "json", str(path)))] == ["GMLP004"]


# -- fixes ----------------------------------------------------------------------------
def test_fix_applies_safe_fixes_and_exits_1_while_unsafe_ones_remain(tree):
    gate, truth = tree / "pkg" / "gate.py", tree / "pkg" / "truth.py"
    os.chmod(truth, 0o750)
    result = run_cli("--fix", "pkg")
    assert result.exit_code == 1
    assert truth.read_text() == TRUTH.fixed
    assert stat.S_IMODE(os.stat(truth).st_mode) == 0o750  # rewritten in place, same mode
    assert gate.read_text() == GATE.source  # unsafe: left alone
    assert "Found 2 errors (1 fixed, 1 remaining)." in result.stdout


def test_unsafe_fixes_apply_the_rest_and_exit_0(tree):
    result = run_cli("--fix", "--unsafe-fixes", "pkg")
    assert result.exit_code == 0
    assert (tree / "pkg" / "gate.py").read_text() == GATE.fixed
    assert (tree / "pkg" / "truth.py").read_text() == TRUTH.fixed
    assert run_cli("pkg").exit_code == 0


def test_diff_shows_fixes_without_writing(tree):
    result = run_cli("--diff", "--unsafe-fixes", "pkg")
    assert result.exit_code == 1
    assert "--- pkg/gate.py\n+++ pkg/gate.py\n" in result.stdout
    assert "+    if op.accumulate_into_main_grad:" not in result.stdout  # indentation kept:
    assert "+        if op.accumulate_into_main_grad:" in result.stdout
    assert "Would fix 2 errors (0 remaining)." in result.stderr
    assert (tree / "pkg" / "gate.py").read_text() == GATE.source
    clean = run_cli("--diff", "pkg/clean.py")
    assert (clean.exit_code, clean.stdout) == (0, "")


def test_fixes_that_would_not_parse_are_refused(monkeypatch, tmp_path):
    def break_it(source, findings, unsafe):
        return source + "def (:\n", 1

    monkeypatch.setattr(file_lint, "apply_fixes", break_it)
    path = write(tmp_path / "a.py", TRUTH.source)
    result = run_cli("--fix", str(path))
    assert result.exit_code == 2
    assert "a fix produced invalid code" in result.stderr
    assert path.read_text() == TRUTH.source


# -- stdin ----------------------------------------------------------------------------
def test_stdin_with_dash(tree):
    result = run_cli("-", stdin=GATE.source)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"-:{GATE.line}:")


def test_stdin_filename_names_the_file_and_picks_its_configuration(tree):
    write(tree / "pyproject.toml", '[tool.gmlp-lint.per-file-ignores]\n"pkg/*" = ["GMLP004"]\n')
    named = run_cli("--stdin-filename", "pkg/new.py", stdin=TRUTH.source)
    assert (named.exit_code, named.stdout.strip()) == (0, "All checks passed!")
    other = run_cli("--stdin-filename", "other/new.py", "-", stdin=TRUTH.source)
    assert other.exit_code == 1 and other.stdout.startswith("other/new.py:")


def test_an_empty_stdin_filename_is_a_usage_error(tree):
    # '' read as "no name": stdin was left unread and the whole directory linted instead.
    result = run_cli("--stdin-filename", "", stdin=TRUTH.source)
    assert result.exit_code == 2, result.output
    assert "'--stdin-filename': expected a file name, got ''" in result.stderr


@pytest.mark.parametrize("fix", [False, True], ids=["check", "fix"])
def test_stdin_filename_with_paths_is_a_usage_error(tree, fix):
    # The paths were linted (and fixed in place) and stdin silently left unread. ruff reads
    # stdin and warns that it ignores the paths; here, as `- PATH` already is, the mix is
    # refused: one error line, exit 2, stdin unread, no file written, nothing on stdout.
    args = ["--fix"] if fix else []
    result = run_cli(*args, "--stdin-filename", "pkg/new.py", "pkg/truth.py", stdin=GATE.source)
    assert result.exit_code == 2
    assert result.stdout == ""
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert "--stdin-filename" in error and "'pkg/truth.py'" in error
    assert (tree / "pkg" / "truth.py").read_text() == TRUTH.source
    assert run_cli("--stdin-filename", "pkg/new.py", "-", stdin=GATE.source).exit_code == 1


def test_stdin_fix_prints_the_fixed_source(tree):
    result = run_cli("--fix", "-", stdin=TRUTH.source)
    assert result.exit_code == 0
    assert result.stdout == TRUTH.fixed
    assert "1 fixed" in result.stderr


def test_stdin_unparseable_exits_2_and_fix_echoes_the_source(tree):
    broken = "def f(p:\n    return p.main_grad\n"
    result = run_cli("--fix", "-", stdin=broken)
    assert (result.exit_code, result.stdout) == (2, broken)
    assert "cannot parse" in result.stderr


# -- the rule subcommand, help, version --------------------------------------------------
@pytest.mark.parametrize("code", ["GMLP001", "GMLP002", "GMLP003", "GMLP004", "gmlp100"])
def test_rule_prints_documentation_with_a_bad_and_a_good_example(code):
    result = run_cli("rule", code)
    assert result.exit_code == 0
    documented = rule(code.upper())
    assert result.stdout.startswith(f"# {code.upper()} ({documented.name})")
    assert "## Bad" in result.stdout and documented.invalid[0].source in result.stdout
    assert "## Good" in result.stdout and documented.valid[0].source in result.stdout


def test_rule_all_and_rule_errors():
    assert run_cli("rule", "--all").stdout.count("## Bad") == len(CODES)
    unknown = run_cli("rule", "GMLP999")
    assert unknown.exit_code == 2 and "unknown rule 'GMLP999'" in unknown.stderr
    assert run_cli("rule").exit_code == 2


def test_help_shows_an_example(tree):
    for args in (["--help"], ["check", "--help"], ["-h"]):
        result = run_cli(*args)
        assert result.exit_code == 0
        assert "Examples:" in result.stdout and "gmlp-lint --fix" in result.stdout
    assert "gmlp-lint rule GMLP001" in run_cli("rule", "--help").stdout


def test_version():
    result = run_cli("--version")
    assert result.exit_code == 0 and result.stdout.startswith("gmlp-lint, version ")


def test_explicit_check_subcommand_is_the_default(tree):
    assert run_cli("check", "pkg").stdout == run_cli("pkg").stdout


# -- progress and parallelism ------------------------------------------------------------
def test_progress_bar_on_request(tree):
    result = run_cli("--progress", "pkg")
    assert "gmlp-lint" in result.stderr and "100%" in result.stderr
    assert run_cli("--no-progress", "pkg").stderr == ""


def test_parallel_run_matches_serial_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    count = 30
    for i in range(count):
        write(tmp_path / f"m{i:02d}.py", (GATE.source, TRUTH.source, CLEAN)[i % 3])
    write_plain_bulk(tmp_path, engine.PARALLEL_MIN_WORK)  # enough work for the pool
    serial = run_cli("--format", "json", "-j", "1", ".")
    parallel = run_cli("--format", "json", "-j", "2", ".")
    assert serial.exit_code == parallel.exit_code == 1
    assert findings_json(parallel) == findings_json(serial)
    assert len(findings_json(serial)) == 2 * count // 3


def test_engine_uses_a_process_pool_only_for_enough_work(tmp_path, monkeypatch):
    pools = []
    real = engine._run_pool

    def spy(*args):
        pools.append(len(args[0]))
        return real(*args)

    monkeypatch.setattr(engine, "_run_pool", spy)
    few = [write(tmp_path / f"few{i}.py", TRUTH.source) for i in range(30)]
    bulk = write_plain_bulk(tmp_path / "bulk", engine.PARALLEL_MIN_WORK)
    codes = frozenset({"GMLP004"})
    engine.run([engine.Job(str(p), codes) for p in few], engine.Mode(), workers=2)
    assert pools == []  # 30 files, but little work: serial
    paths = few + bulk
    results = engine.run([engine.Job(str(p), codes) for p in paths], engine.Mode(), workers=2)
    assert pools == [len(paths)]
    assert [len(r.findings) for r in results] == [1] * len(few) + [0] * len(bulk)


def test_chunks_balance_work_and_start_with_the_heaviest():
    work = [1, 1, 1, 1, 50, 1, 1, 30, 1, 1]
    chunks = engine.chunks_by_work(work, 4)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(work)))
    loads = [sum(work[i] for i in chunk) for chunk in chunks]
    assert loads == sorted(loads, reverse=True) and 4 in chunks[0]


def test_stdin_filename_honours_force_exclude(tree):
    write(tree / "pyproject.toml", '[tool.gmlp-lint]\nexclude = ["generated"]\n')
    args = ("--force-exclude", "--stdin-filename", "generated/ops.py")
    checked = run_cli(*args, stdin=TRUTH.source)
    assert (checked.exit_code, checked.stdout) == (0, "")
    fixed = run_cli("--fix", *args, stdin=TRUTH.source)
    assert (fixed.exit_code, fixed.stdout) == (0, TRUTH.source)  # passed through untouched
    assert run_cli("--stdin-filename", "generated/ops.py", stdin=TRUTH.source).exit_code == 1
