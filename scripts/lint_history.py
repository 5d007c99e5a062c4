"""Measure gmlp-lint on the main_grad history of real repositories.

    python scripts/lint_history.py --repo TransformerEngine=/path/to/TE.git \\
        --repo Megatron-LM=/path/to/Megatron-LM.git \\
        --judgements docs/lint-history-judgements.toml \\
        --output docs/lint-history.json --markdown docs/lint-history.md

Needs only git directories (bare clones are fine): every file is read with
``git cat-file``, never from a work tree. For each repository it

1. lists the candidate commits: ``git log --no-merges`` with ``-S IDENT`` for each of
   IDENTIFIERS, ``-G`` on their alternation, and ``-i -E --grep`` on GREP_PATTERN, all
   restricted to NON_TEST_PATHSPEC; the fixes named in the judgements file are added;
2. for each candidate, takes the changed non-test Python files that mention an identifier
   (before or after), at the first parent and at the commit, and lints both;
3. lints every non-test Python file of today's head (``--rev NAME=REV``, default HEAD)
   that mentions an identifier;
4. joins the judgements file (TOML, curated by hand: which candidates are real fixes,
   where each bug sat, and a verdict on each finding) and writes the JSON document below,
   plus Markdown tables (stdout or ``--markdown``).

The linter is the ``gmlp-lint`` CLI of this interpreter (``python -m gmlp_check.lint
--format json``), so this script depends on nothing inside the linter.

The judgements file's format is described in scripts/lint_history_judge.py (which joins
it) and at the top of docs/lint-history-judgements.toml.

JSON document (schema "gmlp-lint-history/1"): ``{schema, command, linter, linter_version,
preamble, repos: [{name, head, head_files, head_findings, candidates: [{commit, parent, date,
subject, found_by, errors, files: [{path, parent_path, parent_findings, fix_findings}]}]}],
fixes: [{repo, commit, pr, subject, found_by, bug_class, pattern, sites, what, needs,
status, codes, site_findings, other_parent_findings, fix_findings}], summary}``. A finding
is ``{code, path, line, column, message, text, judgement}``, ``judgement`` null or
``{verdict, reason}``. ``status`` is "caught" (a finding at a site), "elsewhere" (none at a
site, but one the fix removed that is not judged false) or "missed". ``summary`` counts
fixes per status and findings per verdict on the fixed versions, at the heads and over the
distinct finding lines of the whole candidate history.

Exit status: 0 done; 2 bad input (an unreadable git directory or judgements file, a
commit that does not resolve, a linter that cannot run), with one line on stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lint_history_judge import (
    BadJudgements,
    assess_fix,
    judge_all,
    load_judgements,
    markdown,
    summarise,
)

from gmlp_check.lint.test_scope import is_test_file

SCHEMA = "gmlp-lint-history/1"
IDENTIFIERS = ("main_grad", "zero_out_wgrad", "get_dummy_wgrad")
GREP_PATTERN = r"main.?grad|zero_out_wgrad|dummy.?wgrad|grad_added|fuse_wgrad|wgrad.accumulat"
NON_TEST_PATHSPEC = (
    "*.py",
    ":(exclude,glob)**/tests/**",
    ":(exclude,glob)**/test/**",
    ":(exclude,glob)**/test_*.py",
    ":(exclude,glob)**/*_test.py",
    ":(exclude,glob)**/conftest.py",
)
LINTER = (sys.executable, "-m", "gmlp_check.lint")
DEFAULT_JUDGEMENTS = Path(__file__).resolve().parents[1] / "docs" / "lint-history-judgements.toml"
CHUNK = 400  # files per linter call: keeps the command line short
REPO_OPTION = ("--repo", "--rep")  # and the abbreviation argparse accepts


class BadInput(Exception):
    """Reported as one line on stderr with exit status 2."""


def progress(message: str) -> None:
    print(f"lint-history: {message}", file=sys.stderr, flush=True)


def is_non_test_python(path: str) -> bool:
    """The files NON_TEST_PATHSPEC keeps, for ls-tree (no magic): gmlp-lint's own test scope."""
    return path.endswith(".py") and not is_test_file(path.split("/"))


def tree_files(git: Git, rev: str) -> list[str]:
    return [
        p
        for p in git.run("ls-tree", "-r", "--name-only", rev).splitlines()
        if is_non_test_python(p)
    ]


def mentions(blob: bytes | None) -> bool:
    return blob is not None and any(name.encode() in blob for name in IDENTIFIERS)


class Git:
    def __init__(self, name: str, git_dir: str):
        self.name, self.git_dir = name, git_dir
        if not Path(git_dir).is_dir():
            raise BadInput(f"--repo {name}={git_dir}: not a directory (expected NAME=GITDIR)")
        try:
            self.run("rev-parse", "--git-dir")
        except BadInput:
            raise BadInput(f"--repo {name}={git_dir}: not a git directory") from None

    def run(self, *args: str) -> str:
        try:
            done = subprocess.run(
                ["git", f"--git-dir={self.git_dir}", *args], capture_output=True, check=False
            )
        except FileNotFoundError:
            raise BadInput("git: not found on PATH") from None
        if done.returncode != 0:
            first = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
            raise BadInput(f"{self.name}: git {' '.join(args[:2])} failed: {first}")
        return done.stdout.decode(errors="replace")

    def commit(self, rev: str) -> str:
        try:
            return self.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
        except BadInput:
            raise BadInput(f"{self.name}: {rev!r} is not a commit of {self.git_dir}") from None

    def blobs(self, specs: list[str]) -> list[bytes | None]:
        """The contents of ``REV:path`` for each spec (None where it does not exist)."""
        if not specs:
            return []
        out = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", "cat-file", "--batch"],
            input="".join(f"{spec}\n" for spec in specs).encode(),
            capture_output=True,
            check=True,
        ).stdout
        result, at = [], 0
        for _ in specs:
            end = out.index(b"\n", at)
            header = out[at:end].split()
            if header[-1] == b"missing" or header[1] != b"blob":
                result.append(None)
                at = end + 1
                continue
            size = int(header[2])
            result.append(out[end + 1 : end + 1 + size])
            at = end + 1 + size + 1
        return result


@dataclass
class Side:
    """One file version to lint; findings are filled in by lint_all."""

    blob: bytes
    findings: list[dict] = field(default_factory=list)
    error: str | None = None


def candidates(git: Git, head: str) -> dict[str, list[str]]:
    """commit -> how it was found, in the order git log lists them (newest first)."""
    searches = [(f"-S {name}", ["-S", name]) for name in IDENTIFIERS]
    searches.append(("-G", ["-G", "|".join(IDENTIFIERS)]))
    searches.append(("--grep", ["-i", "-E", f"--grep={GREP_PATTERN}"]))
    found: dict[str, list[str]] = {}
    for label, flags in searches:
        listed = git.run(
            "log", "--no-merges", "--format=%H", *flags, head, "--", *NON_TEST_PATHSPEC
        )
        for sha in listed.split():
            found.setdefault(sha, []).append(label)
    return found


def changed_files(git: Git, sha: str) -> tuple[str | None, list[tuple[str | None, str | None]]]:
    """(first parent, [(path at parent, path at commit)]) for the non-test Python files."""
    parents = git.run("rev-list", "--parents", "-n", "1", sha).split()[1:]
    parent = parents[0] if parents else None
    if parent is None:
        return None, [(None, path) for path in tree_files(git, sha)]
    status = git.run("diff", "--name-status", "-M", parent, sha, "--", *NON_TEST_PATHSPEC)
    pairs = []
    for row in status.splitlines():
        kind, *paths = row.split("\t")
        if kind.startswith("R") or kind.startswith("C"):
            pairs.append((paths[0], paths[1]))
        else:
            pairs.append((None if kind == "A" else paths[0], None if kind == "D" else paths[0]))
    return parent, pairs


def lint_all(sides: dict[str, Side]) -> None:
    """Lint every side (keyed by a relative path, ``RUN/...``, RUN a repository or a
    repository at one revision) with the gmlp-lint CLI, one run per RUN (in chunks of
    ``CHUNK`` files): what the linter learns of a run's other files (``lint/project.py``'s
    run facts) comes from the same repository and revision, as when a user lints that
    checkout, never from another one linted beside it."""
    with tempfile.TemporaryDirectory(prefix="lint-history-") as root:
        for key, side in sides.items():
            target = Path(root, key)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(side.blob)
        runs: dict[str, list[str]] = {}
        for key in sides:
            runs.setdefault(key.split("/", 1)[0], []).append(key)
        chunks = [
            keys[start : start + CHUNK]
            for keys in runs.values()
            for start in range(0, len(keys), CHUNK)
        ]
        done_files = 0
        for chunk in chunks:
            progress(f"linting files {done_files + 1}-{done_files + len(chunk)} of {len(sides)}")
            done_files += len(chunk)
            command = [*LINTER, "--format", "json", "--no-progress", *chunk]
            done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
            try:
                found = json.loads(done.stdout) if done.returncode in (0, 1, 2) else None
            except json.JSONDecodeError:
                found = None
            if found is None:
                tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise BadInput(f"gmlp-lint could not run ({' '.join(LINTER)}): {tail}")
            for finding in found:
                side = sides[finding["path"]]
                if finding["code"] is None:  # a file the linter could not parse
                    side.error = finding["message"]
                else:
                    side.findings.append(finding)


def linter_version() -> str:
    done = subprocess.run([*LINTER, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def finding_record(finding: dict, path: str, blob: bytes) -> dict:
    lines = blob.decode(errors="replace").splitlines()
    line = finding["line"]
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return {
        "code": finding["code"],
        "path": path,
        "line": line,
        "column": finding["column"],
        "message": finding["message"],
        "text": text,
    }


def add_side(sides: dict[str, Side], repo: str, blob: bytes | None, path: str | None) -> str | None:
    """Register one file version; the key names its content, so a version that recurs (the
    fix of one commit is often the parent of the next) is linted once."""
    if blob is None or path is None:
        return None
    key = f"{repo}/{hashlib.sha1(blob).hexdigest()[:16]}/{path}"
    sides.setdefault(key, Side(blob))
    return key


def measure_repo(git: Git, head: str, fix_commits: set[str]) -> dict:
    found = candidates(git, head)
    for sha in fix_commits:
        found.setdefault(sha, []).append("judgements")
    progress(f"{git.name}: {len(found)} candidate commits")
    sides: dict[str, Side] = {}
    plans = []  # (candidate record, [(file record, parent key, fix key)])
    for sha, how in found.items():
        parent, pairs = changed_files(git, sha)
        old = git.blobs([f"{parent}:{p}" if parent and p else "" for p, _ in pairs])
        new = git.blobs([f"{sha}:{p}" if p else "" for _, p in pairs])
        meta = git.run("log", "-1", "--format=%ad%x00%s", "--date=short", sha).rstrip("\n")
        date, subject = meta.split("\0", 1)
        record = {"commit": sha, "parent": parent, "date": date, "subject": subject}
        record.update(found_by=how, files=[], errors=[])
        files = []
        for (before, after), old_blob, new_blob in zip(pairs, old, new):
            if not (mentions(old_blob) or mentions(new_blob)):
                continue
            # Each revision's files form a run of their own: what the linter learns across
            # a run's files (lint/project.py's run facts) must not come from another
            # revision's files (a 2026 file reading skip_backward_post_hook made GMLP028
            # report 2021's DDP, written before the delayed-wgrad contract existed).
            keys = [add_side(sides, f"{git.name}@{revision[:12]}", blob, path)
                    for blob, path, revision in ((old_blob, before, parent or ""),
                                                 (new_blob, after, sha))]  # fmt: skip
            files.append(({"path": after or before, "parent_path": before}, *keys))
        plans.append((record, files))
    head_paths = tree_files(git, head)
    head_keys = {}
    for path, blob in zip(head_paths, git.blobs([f"{head}:{p}" for p in head_paths])):
        if mentions(blob):
            head_keys[path] = add_side(sides, f"{git.name}@{head[:12]}", blob, path)
    progress(f"{git.name}: {len(sides)} file versions to lint")
    lint_all(sides)

    def records(key: str | None, path: str | None) -> list[dict]:
        if key is None:
            return []
        side = sides[key]
        return [finding_record(f, path, side.blob) for f in side.findings]

    result = {"name": git.name, "head": head, "candidates": [], "head_files": len(head_keys)}
    for record, files in plans:
        for info, parent_key, fix_key in files:
            info["parent_findings"] = records(parent_key, info["parent_path"])
            info["fix_findings"] = records(fix_key, info["path"])
            for key in (parent_key, fix_key):
                if key and sides[key].error:
                    record["errors"].append(f"{key.split('/', 2)[2]}: {sides[key].error}")
            record["files"].append(info)
        result["candidates"].append(record)
    result["head_findings"] = [f for p, k in head_keys.items() for f in records(k, p)]
    return result


def parse_pairs(values: list[str], option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise BadInput(f"{option} {value!r}: expected NAME=VALUE")
        pairs[name] = rest
    return pairs


def recorded_args(argv: list[str]) -> list[str]:
    """The arguments as run, each ``--repo NAME=GITDIR`` written ``--repo NAME=PATH``: the
    report records how it was made, not where the clones sat on the measuring machine."""
    recorded = []
    after_repo = False
    for word in argv:
        option, equals, value = word.partition("=")
        if after_repo:
            word = f"{option}=PATH"
        elif option in REPO_OPTION and equals:
            word = f"{option}={value.partition('=')[0]}=PATH"
        after_repo = word in REPO_OPTION
        recorded.append(word)
    return recorded


def run(args: argparse.Namespace) -> None:
    repos = parse_pairs(args.repo, "--repo")
    revs = parse_pairs(args.rev, "--rev")
    unknown = sorted(set(revs) - set(repos))
    if unknown:
        raise BadInput(f"--rev {unknown[0]}=...: no --repo named {unknown[0]}")
    for option in ("output", "markdown"):
        target = getattr(args, option)
        if target and not Path(target).resolve().parent.is_dir():
            raise BadInput(f"--{option} {target}: its directory does not exist")
    try:
        judged = load_judgements(Path(args.judgements))
    except BadJudgements as error:
        raise BadInput(str(error)) from None
    gits = {name: Git(name, git_dir) for name, git_dir in repos.items()}
    heads = {name: git.commit(revs.get(name, "HEAD")) for name, git in gits.items()}
    fixes = [entry for entry in judged["fix"] if entry["repo"] in gits]
    fix_shas = [gits[entry["repo"]].commit(entry["commit"]) for entry in fixes]
    measured = []
    for name, git in gits.items():
        mine = {sha for entry, sha in zip(fixes, fix_shas) if entry["repo"] == name}
        measured.append(measure_repo(git, heads[name], mine))
    judge_all(measured, judged["judgement"])
    by_commit = {(r["name"], c["commit"]): c for r in measured for c in r["candidates"]}
    assessed = [
        assess_fix(entry, sha, by_commit[entry["repo"], sha]) for entry, sha in zip(fixes, fix_shas)
    ]
    document = {
        "schema": SCHEMA,
        "command": " ".join(["python", "scripts/lint_history.py", *recorded_args(sys.argv[1:])]),
        "linter": " ".join(["python", *LINTER[1:]]),
        "linter_version": linter_version(),
        "preamble": judged["preamble"],
        "repos": measured,
        "fixes": assessed,
        "summary": summarise(assessed, measured),
    }
    text = markdown(document)
    if args.output:
        Path(args.output).write_text(json.dumps(document, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(text)
    else:
        sys.stdout.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--repo", action="append", default=[], metavar="NAME=GITDIR",
        help="a repository to measure (repeatable; a bare clone is enough)")  # fmt: skip
    add("--rev", action="append", default=[], metavar="NAME=REV",
        help="the head to measure for NAME (default HEAD)")  # fmt: skip
    add("--judgements", default=str(DEFAULT_JUDGEMENTS),
        help="the curated fixes and finding judgements (TOML)")  # fmt: skip
    parser.add_argument("--output", help="write the JSON document here")
    parser.add_argument("--markdown", help="write the Markdown here instead of stdout")
    args = parser.parse_args(argv)
    if not args.repo:
        print("lint-history: error: --repo NAME=GITDIR is required", file=sys.stderr)
        return 2
    try:
        run(args)
    except BadInput as error:
        print(f"lint-history: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
