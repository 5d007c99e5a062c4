"""scripts/lint_mutation_real.py on a tiny synthetic git history: a fix whose buggy file stays
reported under the mutations, a head finding judged true, a clean file whose mutants are
linted, and bad input (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gmlp_check.lint.registry import rule

from .test_history_script import commit, line_of, make_repo

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lint_mutation_real.py"
BUGGY = rule("GMLP001").invalid[0].source
FIXED = rule("GMLP001").valid[0].source
TRUTHINESS = rule("GMLP004").invalid[0].source


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_bugs_kept_and_clean_files_measured(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": BUGGY}, "add the op")
    fix = commit(repo, {"pkg/ops.py": FIXED, "pkg/t.py": TRUTHINESS}, "fix main_grad")
    site = f"pkg/ops.py:{line_of(BUGGY, 'if accumulate:')}-{line_of(BUGGY, 'out = main_grad')}"
    flagged = rule("GMLP004").invalid[0]
    text = TRUTHINESS.splitlines()[flagged.line - 1].strip().replace('"', '\\"')
    data = tmp_path / "split.toml"
    data.write_text(
        'cutoff = "2026-01-01"\n'
        f'[[fix]]\nrepo = "demo"\ncommit = "{fix}"\ndate = "2025-05-01"\nref = "dev#1"\n'
        f'issue_class = 7\nsites = ["{site}"]\nwhat = ""\n'
        f'[[head]]\nrepo = "demo"\npath = "pkg/t.py"\ncode = "GMLP004"\ntext = "{text}"\n'
        'verdict = "true"\nreason = "r"\n'
    )
    empty = tmp_path / "judgements.toml"
    empty.write_text("")
    out = tmp_path / "out.json"
    done = run_script(
        "--repo", f"demo={repo / '.git'}", "--data", str(data), "--judgements", str(empty),
        "--clean", "1", "--output", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["schema"] == "gmlp-lint-mutation-real/1"
    kinds = {(case["kind"], case["path"]) for case in report["cases"]}
    assert kinds == {("fix", "pkg/ops.py"), ("head", "pkg/t.py"), ("clean", "pkg/ops.py")}
    fix_case = next(case for case in report["cases"] if case["kind"] == "fix")
    assert fix_case["codes"] == ["GMLP001"]
    # The renames apply to any snippet with locals; GMLP001 follows them (its own tests say so).
    assert fix_case["outcomes"]["rename-locals"] == "kept"
    summary = report["summary"]
    assert summary["bugs"] == 2 and summary["clean"] == 1
    assert summary["bug_mutants"] >= 2 and summary["clean_mutants"] >= 1
    assert "Bugs: 2" in done.stdout and "| rename-locals |" in done.stdout


def test_bad_input_is_one_line_exit_2(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": FIXED}, "add")
    data = tmp_path / "split.toml"
    data.write_text("not toml [")
    done = run_script("--repo", f"demo={repo / '.git'}", "--data", str(data))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "--data" in done.stderr
    missing = run_script("--repo", f"demo={tmp_path / 'nowhere'}")
    assert missing.returncode == 2 and "--repo" in missing.stderr
    negative = run_script("--repo", f"demo={repo / '.git'}", "--clean", "-1")
    assert negative.returncode == 2 and "--clean" in negative.stderr
