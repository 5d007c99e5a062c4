"""scripts/lint_history.py on a tiny synthetic git history: a GMLP001-shaped bug and its fix
(caught at the declared site; "elsewhere" when declared at a wrong site), a harmless later
change declared as a fix (missed), a buggy test file (never linted: not product code), a
judged finding at head, and bad input (exit 2, one line, nothing written)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gmlp_check.lint.registry import rule

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lint_history.py"

# The rules' own shapes: main_grad becomes the output only under the flag that
# overwrite_main_grad switched off, its fix, and a truthiness test of main_grad.
BUGGY = rule("GMLP001").invalid[0].source
FIXED = rule("GMLP001").valid[0].source
TRUTHINESS = rule("GMLP004").invalid[0].source


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(source_lines(text)) + "\n")
        git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def source_lines(text: str) -> list[str]:
    """The lines of a file written by commit(): dedented, leading newline dropped."""
    return textwrap.dedent(text).lstrip("\n").splitlines()


def line_of(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(source_lines(text), 1) if fragment in line)


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "demo"
    repo.mkdir()
    git(repo, "init", "-q")
    return repo


def test_reports_a_fix_caught_at_its_site_and_a_missed_one(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": BUGGY, "tests/test_ops.py": TRUTHINESS}, "add the op")
    fix = commit(repo, {"pkg/ops.py": FIXED}, "use the op-level flag for main_grad")
    later = commit(repo, {"pkg/ops.py": FIXED + "\n# main_grad comes from DDP\n"}, "comment")
    site = f"pkg/ops.py:{line_of(BUGGY, 'if accumulate:')}-{line_of(BUGGY, 'out = main_grad')}"
    judgements = tmp_path / "judgements.toml"
    judgements.write_text(
        f'[[fix]]\nrepo = "demo"\ncommit = "{fix[:10]}"\nsites = ["{site}"]\n'
        f'[[fix]]\nrepo = "demo"\ncommit = "{later}"\nsites = ["pkg/ops.py:3"]\n'
        f'[[fix]]\nrepo = "demo"\ncommit = "{fix}"\nsites = ["pkg/ops.py:1"]\n'
    )
    output = tmp_path / "history.json"
    done = run_script("--repo", f"demo={repo / '.git'}", "--judgements", str(judgements),
                      "--output", str(output))  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(output.read_text())
    assert report["schema"] == "gmlp-lint-history/1"
    caught, missed, elsewhere = report["fixes"]
    assert (caught["commit"], caught["status"], caught["codes"]) == (fix, "caught", ["GMLP001"])
    assert [f["path"] for f in caught["site_findings"]] == ["pkg/ops.py"]
    assert caught["fix_findings"] == []
    assert (missed["commit"], missed["status"], missed["codes"]) == (later, "missed", [])
    # The same fix declared with a wrong site: the finding the fix removed counts elsewhere.
    assert (elsewhere["status"], elsewhere["codes"]) == ("elsewhere", ["GMLP001"])
    (repo_report,) = report["repos"]
    assert repo_report["head"] == later and repo_report["head_findings"] == []
    linted = {f["path"] for c in repo_report["candidates"] for f in c["files"]}
    assert linted == {"pkg/ops.py"}  # the buggy tests/ file is never product code
    summary = report["summary"]
    counts = (summary["caught"], summary["elsewhere"], summary["missed"])
    assert counts == (1, 1, 1) and summary["history_findings"] == 1
    assert "Caught 1 of 3" in done.stdout and "| demo |" in done.stdout


def test_joins_a_judgement_to_a_finding_at_head(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/fetch.py": TRUTHINESS}, "fetch main_grad")
    text = source_lines(TRUTHINESS)[line_of(TRUTHINESS, "if not") - 1].strip()
    judgements = tmp_path / "judgements.toml"
    judgements.write_text(
        'preamble = "Scope: the demo repository."\n'
        f'[[judgement]]\nrepo = "demo"\npath = "pkg/fetch.py"\ncode = "GMLP004"\n'
        f'text = "{text}"\nverdict = "true"\nreason = "bool() of a tensor"\n'
    )
    output = tmp_path / "history.json"
    done = run_script("--repo", f"demo={repo / '.git'}", "--judgements", str(judgements),
                      "--output", str(output), "--markdown", str(tmp_path / "h.md"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (finding,) = json.loads(output.read_text())["repos"][0]["head_findings"]
    assert (finding["code"], finding["line"]) == ("GMLP004", line_of(TRUTHINESS, "if not"))
    assert finding["judgement"] == {"verdict": "true", "reason": "bool() of a tensor"}
    report = (tmp_path / "h.md").read_text()
    assert "| true | bool() of a tensor |" in report and "Scope: the demo repository." in report


def test_each_revision_is_its_own_run_for_the_facts_learned_across_files(tmp_path):
    # GMLP028 needs a run fact another file gives (the run reads skip_backward_post_hook).
    # The hook file, unchanged from its first commit to head, is reported at head, where
    # the contract file sits beside it, and not at its first commit, where nothing uses it.
    hooks = rule("GMLP028").invalid[0].source + "\n# main_grad: the DDP side\n"
    ((_, contract),) = rule("GMLP028").invalid[0].others
    repo = make_repo(tmp_path)
    first = commit(repo, {"pkg/hooks.py": hooks}, "grad-ready hooks")
    te = textwrap.dedent(contract).lstrip("\n") + "# main_grad: the TE side\n"
    head = commit(repo, {"pkg/te.py": te}, "te")
    output = tmp_path / "history.json"
    done = run_script("--repo", f"demo={repo / '.git'}", "--output", str(output))
    assert done.returncode == 0, done.stderr
    (repo_report,) = json.loads(output.read_text())["repos"]
    assert repo_report["head"] == head
    assert [f["code"] for f in repo_report["head_findings"]] == ["GMLP028"]
    (at_first,) = [c for c in repo_report["candidates"] if c["commit"] == first]
    assert [f["path"] for f in at_first["files"]] == ["pkg/hooks.py"]
    assert json.dumps(at_first).count("GMLP028") == 0


def test_records_the_command_without_the_git_directories(tmp_path):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": FIXED}, "op")
    output = tmp_path / "history.json"
    done = run_script("--repo", f"demo={repo / '.git'}", f"--repo=again={repo / '.git'}",
                      "--output", str(output), "--markdown", str(tmp_path / "h.md"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    command = json.loads(output.read_text())["command"]
    assert command.endswith(
        f"lint_history.py --repo demo=PATH --repo=again=PATH --output {output} "
        f"--markdown {tmp_path / 'h.md'}"
    )
    assert f"Command: `{command}`" in (tmp_path / "h.md").read_text()


# Judgements files whose values have the wrong TOML type.
BADLY_TYPED = {
    "fix_number": "fix = 3\n",
    "text_number": (
        '[[judgement]]\nrepo = "demo"\npath = "pkg/ops.py"\ncode = "GMLP001"\ntext = 5\n'
        'verdict = "true"\nreason = "r"\n'
    ),
    "sites_string": '[[fix]]\nrepo = "demo"\ncommit = "HEAD"\nsites = "pkg/ops.py:1"\n',
}


@pytest.mark.parametrize(
    ("args", "names"),
    [
        ([], "--repo"),
        (["--repo", "demo"], "--repo"),
        (["--repo", "demo={missing}"], "--repo demo="),
        (["--repo", "demo={plain}"], "not a git directory"),
        (["--repo", "demo={git}", "--judgements", "{missing}"], "--judgements"),
        (["--repo", "demo={git}", "--judgements", "{bad_toml}"], "not valid TOML"),
        (["--repo", "demo={git}", "--judgements", "{bad_commit}"], "is not a commit"),
        (["--repo", "demo={git}", "--rev", "other=HEAD"], "--rev other"),
        (["--repo", "demo={git}", "--judgements", "{fix_number}"], "fix must be [[fix]] tables"),
        (
            ["--repo", "demo={git}", "--judgements", "{text_number}"],
            "[[judgement]] #1: text must be a string",
        ),
        (
            ["--repo", "demo={git}", "--judgements", "{sites_string}"],
            "[[fix]] #1: sites must be an array of strings",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, names):
    repo = make_repo(tmp_path)
    commit(repo, {"pkg/ops.py": FIXED}, "op")
    (tmp_path / "plain").mkdir()
    (tmp_path / "bad.toml").write_text("[[fix]\n")
    (tmp_path / "commit.toml").write_text(
        '[[fix]]\nrepo = "demo"\ncommit = "0000beef"\nsites = []\n'
    )
    for name, text in BADLY_TYPED.items():
        (tmp_path / f"{name}.toml").write_text(text)
    places = {"missing": tmp_path / "nowhere", "plain": tmp_path / "plain",
              "git": repo / ".git", "bad_toml": tmp_path / "bad.toml",
              "bad_commit": tmp_path / "commit.toml",
              **{name: tmp_path / f"{name}.toml" for name in BADLY_TYPED}}  # fmt: skip
    output = tmp_path / "out.json"
    done = run_script(*[a.format(**places) for a in args], "--output", str(output))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and names in done.stderr
    assert "Traceback" not in done.stderr and not output.exists()
