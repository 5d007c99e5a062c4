"""scripts/lint_history_split.py on a tiny synthetic git history: a development fix caught at
its site, a held-out fix (dated after the cut-off) missed at a wrong site, a head finding
judged in the data file and one left unjudged, and bad input (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gmlp_check.lint.registry import rule

from .test_history_script import commit, line_of, make_repo

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lint_history_split.py"
BUGGY = rule("GMLP001").invalid[0].source
FIXED = rule("GMLP001").valid[0].source
TRUTHINESS = rule("GMLP004").invalid[0].source


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_counts_each_split_and_judges_head_findings(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": BUGGY}, "add the op")
    fix = commit(repo, {"pkg/ops.py": FIXED}, "fix main_grad")
    broken = "def f(:\n    return p.main_grad\n"  # the linter cannot check it
    commit(repo, {"pkg/a.py": TRUTHINESS, "pkg/b.py": TRUTHINESS, "pkg/c.py": broken}, "later")
    site = f"pkg/ops.py:{line_of(BUGGY, 'if accumulate:')}-{line_of(BUGGY, 'out = main_grad')}"
    flagged = rule("GMLP004").invalid[0]
    text = TRUTHINESS.splitlines()[flagged.line - 1].strip().replace('"', '\\"')
    data = tmp_path / "split.toml"
    data.write_text(
        'cutoff = "2026-01-01"\n'
        f'[[fix]]\nrepo = "demo"\ncommit = "{fix}"\ndate = "2025-05-01"\nref = "dev#1"\n'
        f'issue_class = 7\nsites = ["{site}"]\nwhat = ""\n'
        f'[[fix]]\nrepo = "demo"\ncommit = "{fix}"\ndate = "2026-05-01"\nref = "held#2"\n'
        'issue_class = 7\nsites = ["pkg/ops.py:1"]\nwhat = ""\n'
        f'[[head]]\nrepo = "demo"\npath = "pkg/a.py"\ncode = "GMLP004"\ntext = "{text}"\n'
        'verdict = "false"\nreason = "r"\n'
    )
    empty = tmp_path / "judgements.toml"
    empty.write_text("")
    done = run_script(
        "--repo", f"demo={repo / '.git'}", "--data", str(data), "--judgements", str(empty)
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "## development: caught 1 of 1" in out
    assert "## held-out: caught 0 of 1" in out
    assert "| dev#1 | 2025-05-01 | 7 | caught | GMLP001 |" in out
    assert "## Heads: 2 findings, 0 true, 1 false, 1 unjudged" in out
    # A head file the linter could not check is listed, not silently counted as clean.
    assert "## Files at the heads that could not be checked: 1" in out
    assert "- demo pkg/c.py: " in out


def test_bad_input_is_one_line_exit_2(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": FIXED}, "add")
    data = tmp_path / "split.toml"
    data.write_text('[[fix]]\nrepo = "demo"\n')
    done = run_script("--repo", f"demo={repo / '.git'}", "--data", str(data))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "cutoff" in done.stderr
    missing = run_script("--data", str(data))
    assert missing.returncode == 2 and "--repo" in missing.stderr


def test_bench_timings_become_a_speed_section(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": FIXED}, "add")
    data = tmp_path / "split.toml"
    data.write_text('cutoff = "2026-01-01"\n')
    tree = {"files": 3, "default_jobs": {"median_s": 1.5, "min_s": 1.25, "max_s": 2.0, "runs": 3},
            "cpu_s_per_run": 2.75}  # fmt: skip
    warm = {"default_jobs": {"median_s": 0.25, "min_s": 0.2, "max_s": 0.5, "runs": 3},
            "cpu_s_per_run": 0.125}  # fmt: skip
    bench = tmp_path / "bench.json"
    report = {"benchmark": "bench_lint.py --tree T=/t",
              "real_trees": {"T": tree, "W": {**tree, "cached": warm}},
              "machine": {"cpus": 2}}  # fmt: skip
    bench.write_text(json.dumps(report))
    done = run_script("--repo", f"demo={repo / '.git'}", "--data", str(data), "--no-heads",
                      "--bench", str(bench))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "## Speed (scripts/bench_lint.py)" in done.stdout
    # T was timed before the cache existed.
    assert "| 1 | T | 3 | 1.5 s (1.25-2.0) | 2.75 | - | - |" in done.stdout
    assert "| 1 | W | 3 | 1.5 s (1.25-2.0) | 2.75 | 0.25 s (0.2-0.5) | 0.125 |" in done.stdout
    assert "`python scripts/bench_lint.py --tree T=/t` on 2 CPUs" in done.stdout
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    bad = run_script("--repo", f"demo={repo / '.git'}", "--data", str(data), "--no-heads",
                     "--bench", str(broken))  # fmt: skip
    assert bad.returncode == 2 and "--bench" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_each_repository_is_its_own_linter_run(tmp_path):
    # Run facts (lint/project.py) come from the files of the same repository: a gradient-ready
    # hook is reported (GMLP028) where the repository's own DDP uses TE's delayed-wgrad
    # contract, not in another repository linted beside it.
    from .test_delayed_wgrad_facts import DDP, FSDP

    repos = {}
    for name, files in {
        "uses": {"ddp.py": DDP, "fsdp.py": FSDP},
        "plain": {"fsdp.py": FSDP},
    }.items():
        repo = repos[name] = tmp_path / name
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run(["git", "config", "user.email", "t@example.com"], cwd=repo, check=True)
        subprocess.run(["git", "config", "user.name", "t"], cwd=repo, check=True)
        commit(repo, files, "add")
    data = tmp_path / "split.toml"
    data.write_text('cutoff = "2026-01-01"\n')
    empty = tmp_path / "judgements.toml"
    empty.write_text("")
    pairs = [arg for name, repo in repos.items() for arg in ("--repo", f"{name}={repo / '.git'}")]
    done = run_script(*pairs, "--data", str(data), "--judgements", str(empty))
    assert done.returncode == 0, done.stderr
    assert "## Heads: 1 findings, 0 true, 0 false, 1 unjudged" in done.stdout
    assert "| uses | fsdp.py:8 | GMLP028 |" in done.stdout


def test_a_revision_after_the_name_lints_that_revision_with_the_names_verdicts(tmp_path):
    repo = make_repo(tmp_path)
    old = commit(repo, {"pkg/a.py": TRUTHINESS}, "a release with the bug")
    commit(repo, {"pkg/a.py": FIXED}, "head: fixed")
    flagged = rule("GMLP004").invalid[0]
    text = TRUTHINESS.splitlines()[flagged.line - 1].strip().replace('"', '\\"')
    data = tmp_path / "releases.toml"
    data.write_text(
        'cutoff = "2026-01-01"\n'
        f'[[head]]\nrepo = "demo"\npath = "pkg/a.py"\ncode = "GMLP004"\ntext = "{text}"\n'
        'verdict = "true"\nreason = "r"\n'
    )
    empty = tmp_path / "judgements.toml"
    empty.write_text("")
    git_dir = repo / ".git"
    done = run_script(
        "--repo", f"demo@{old[:10]}={git_dir}", "--repo", f"demo={git_dir}",
        "--data", str(data), "--judgements", str(empty),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The release holds the finding (judged by demo's verdict); the head holds none.
    assert "## Heads: 1 findings, 1 true, 0 false, 0 unjudged" in done.stdout
    assert f"| demo@{old[:10]} | pkg/a.py:{flagged.line} | GMLP004 | true |" in done.stdout
    assert f"demo@{old[:10]} `{old[:12]}`" in done.stdout
    bad = run_script("--repo", f"demo@no-such-tag={git_dir}", "--data", str(data))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "'no-such-tag' is not a commit" in bad.stderr


def test_a_fork_takes_its_upstreams_verdict_on_the_same_line(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/a.py": TRUTHINESS}, "the fork carries the upstream's line")
    flagged = rule("GMLP004").invalid[0]
    text = TRUTHINESS.splitlines()[flagged.line - 1].strip().replace('"', '\\"')
    verdict = (
        f'[[head]]\nrepo = "upstream"\npath = "pkg/a.py"\ncode = "GMLP004"\ntext = "{text}"\n'
        'verdict = "true"\nreason = "r"\n'
    )
    empty = tmp_path / "judgements.toml"
    empty.write_text("")
    git_dir = repo / ".git"
    mapped = 'forks = { fork = "upstream" }\n'
    for forks, counts in (
        ("", "0 true, 0 false, 1 unjudged"),
        (mapped, "1 true, 0 false, 0 unjudged"),
    ):
        data = tmp_path / "forks.toml"
        data.write_text(f'cutoff = "2026-01-01"\n{forks}{verdict}')
        done = run_script(
            "--repo", f"fork={git_dir}", "--data", str(data), "--judgements", str(empty)
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"## Heads: 1 findings, {counts}" in done.stdout


def test_context_files_join_the_fix_run_but_not_its_sites(tmp_path):
    # GMLP039 needs the spec and the caller of a slot, in other files than the class: a fix's
    # ``context`` lints them in the same run; only a finding on a site counts.
    example = rule("GMLP039").invalid[0]
    fixed = rule("GMLP039").valid[0]
    others = dict(example.others)
    repo = make_repo(tmp_path)
    commit(repo, {"example.py": example.source, **others}, "add the mixer")
    first = commit(repo, {"example.py": fixed.source}, "give the mixer a backward_dw")
    commit(repo, {"example.py": example.source}, "lose it again")
    second = commit(repo, {"example.py": fixed.source}, "give it back")
    entry = (
        '[[fix]]\nrepo = "demo"\ncommit = "{sha}"\ndate = "2026-05-01"\nref = "held#{n}"\n'
        'issue_class = 6\nsites = ["example.py:1"]\nwhat = ""\n'
    )
    data = tmp_path / "split.toml"
    context = "context = [" + ", ".join(f'"{path}"' for path in sorted(others)) + "]\n"
    data.write_text(
        'cutoff = "2026-01-01"\n'
        + entry.format(sha=first, n=1)
        + entry.format(sha=second, n=2)
        + context
    )
    done = run_script("--repo", f"demo={repo / '.git'}", "--data", str(data), "--no-heads")
    assert done.returncode == 0, done.stderr
    assert "| held#1 | 2026-05-01 | 6 | missed | - |" in done.stdout
    assert "| held#2 | 2026-05-01 | 6 | caught | GMLP039 |" in done.stdout


def test_an_unreadable_heads_from_file_is_named_by_its_option(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/a.py": FIXED}, "add")
    data = tmp_path / "releases.toml"
    data.write_text('cutoff = "2026-01-01"\n')
    broken = tmp_path / "broken.toml"
    broken.write_text("[[head]\n")
    done = run_script(
        "--repo", f"demo={repo / '.git'}", "--data", str(data), "--heads-from", str(broken)
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"--heads-from {broken}: cannot be read as TOML" in done.stderr
