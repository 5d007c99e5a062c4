"""Measure gmlp-lint on a dated split of real fixes it was not written from, and judge what
it reports at repository heads.

    python scripts/lint_history_split.py --data docs/lint-history-split.toml \\
        --repo TransformerEngine=/path/TE.git --repo Megatron-LM=/path/Megatron-LM.git ...

The data file (described at its top) lists fixes that docs/lint-history-judgements.toml does
not name, each with its date and the lines where the bug sat, and a cut-off date: fixes
before it are the development split, the others the held-out split. For each fix the files
of its sites are read at the buggy revision (``git cat-file``, bare clones are fine) and
linted, in one run with no other files but the fix's ``context`` ones (what the linter
learns from the other files of a run, ``lint/project.py``'s run facts, comes from them
alone); the fix is caught when a finding lands on a site line. Then every non-test Python
file at each repository's head is linted, and each finding is joined with the data file's
``[[head]]`` verdicts and those of ``--judgements`` (one linter run per repository): the
report counts true, false and unjudged findings. ``--repo NAME@REV=GITDIR`` lints REV (a
tag, a commit) instead of the head, with NAME's verdicts: a repository's releases are judged
with the same verdicts as its head (a data file's fixes are measured on the repositories
named without ``@REV``). A data file's ``forks = {FORK = "UPSTREAM"}`` lets a
fork's line without a verdict of its own take the upstream's verdict on the same line.

``--bench FILE`` (repeatable) adds the real-tree timings of scripts/bench_lint.py's JSON
(``--tree NAME=PATH``), with the command that made them, as a "Speed" section.

Writes Markdown to stdout (or ``--markdown``). Exit status: 0 done; 2 bad input (an
unreadable data file or git directory, a revision that does not resolve, a linter that cannot
run), with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tomllib
from lint_history import BadInput, Git, Side, add_side, lint_all, parse_pairs, tree_files
from lint_history_judge import BadJudgements, load_judgements, parse_site

DOCS = Path(__file__).resolve().parents[1] / "docs"
DEFAULT_DATA = DOCS / "lint-history-split.toml"
DEFAULT_JUDGEMENTS = DOCS / "lint-history-judgements.toml"
DEVELOPMENT, HELD_OUT = "development", "held-out"
# A head file is linted when it names one of these: the rest can yield no rule's finding
# (the linter parses only files naming its triggers; delayed wgrad widens that set).
HEAD_WORDS = (b"main_grad", b"zero_out_wgrad", b"dummy_wgrad", b"skip_backward_post_hook",
              b"backward_dw", b"delay_wgrad_compute", b"_dw(self", b"register_hook(",
              b"register_post_accumulate_grad_hook",  # parsed in a run using the contract
              b"register_wgrad_accumulation_and_reduce_hooks",
              b"accumulat", b"overwrite",  # a def handed an overwrite-or-add switch
              # GMLP039: the specs, and the classes they plug into a slot
              b"ModuleSpec", b"build_module")  # fmt: skip


def load_data(path: Path, option: str = "--data") -> dict:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise BadInput(f"{option} {path}: cannot be read as TOML ({error})") from None
    if not isinstance(data.get("cutoff"), str):
        raise BadInput(f'{option} {path}: expected cutoff = "YYYY-MM-DD" at the top')
    for index, fix in enumerate(data.get("fix", []), 1):
        sites = [parse_site(site) for site in fix.get("sites", [])]
        if not sites or None in sites or not ({"commit", "buggy"} & set(fix)):
            needs = "needs commit or buggy and PATH:LINE sites"
            raise BadInput(f"{option} {path}: fix #{index} {needs}")
    return data


def split_of(fix: dict, cutoff: str) -> str:
    return DEVELOPMENT if fix["date"] < cutoff else HELD_OUT


def buggy_revision(git: Git, fix: dict) -> str:
    if "buggy" in fix:
        return git.commit(fix["buggy"])
    return git.commit(f"{git.commit(fix['commit'])}^")


def measure_fixes(gits: dict[str, Git], fixes: list[dict]) -> list[dict]:
    """Each fix with ``status`` ("caught" or "missed") and the findings at its sites."""
    sides: dict[str, Side] = {}
    plans = []
    for fix in fixes:
        git = gits[fix["repo"]]
        revision = buggy_revision(git, fix)
        sites = [parse_site(site) for site in fix["sites"]]
        # ``context``: more files of the revision for the run's facts (a spec and a caller
        # across files, GMLP039); a finding counts only on a site.
        paths = sorted({path for path, _, _ in sites} | set(fix.get("context", ())))
        keys = {}
        for path, blob in zip(paths, git.blobs([f"{revision}:{p}" for p in paths])):
            if blob is None:
                raise BadInput(f"{fix['ref']}: {path} does not exist at {revision[:12]}")
            # One linter run per revision (``lint_all`` runs each "repository" of the keys
            # apart): a fix's files are linted with the files of its own revision only.
            keys[path] = add_side(sides, f"{fix['repo']}@{revision[:12]}", blob, path)
        plans.append((fix, sites, keys))
    lint_all(sides)
    measured = []
    for fix, sites, keys in plans:
        at_sites = [
            finding
            for path, key in keys.items()
            for finding in sides[key].findings
            if any(p == path and first <= finding["line"] <= last for p, first, last in sites)
        ]
        codes = sorted({finding["code"] for finding in at_sites})
        # A file the linter could not check says nothing about the rules: not a miss.
        unchecked = any(sides[key].error for key in keys.values())
        status = "caught" if at_sites else "not checked" if unchecked else "missed"
        measured.append({**fix, "status": status, "codes": codes})
    return measured


def measure_heads(
    gits: dict[str, Git], verdicts: list[dict], forks: dict[str, str] | None = None
) -> tuple[dict, list[dict], list[dict]]:
    """The head commit of each repository, every finding at the heads with its verdict
    ("true", "false" or None), and the files the linter could not check (with why). A
    repository named ``NAME@REV`` is linted at REV instead of its head, and its findings take
    NAME's verdicts (the same line of the same file judged once, whatever the revision).
    ``forks`` maps a fork's NAME to its upstream's: a line of the fork that has no verdict of
    its own takes the upstream's verdict on the same line of the same file."""
    sides: dict[str, Side] = {}
    keyed = []
    heads = {}
    for name, git in gits.items():
        head = heads[name] = git.commit(name.partition("@")[2] or "HEAD")
        paths = tree_files(git, head)
        for path, blob in zip(paths, git.blobs([f"{head}:{p}" for p in paths])):
            if blob is not None and any(word in blob for word in HEAD_WORDS):
                keyed.append((name, path, add_side(sides, name, blob, path)))
    lint_all(sides)
    judged = {(v["repo"], v["path"], v["code"], v["text"]): v for v in verdicts}
    findings, unchecked = [], []
    for name, path, key in keyed:
        if sides[key].error:
            unchecked.append({"repo": name, "path": path, "error": sides[key].error})
        lines = sides[key].blob.decode(errors="replace").splitlines()
        for finding in sides[key].findings:
            text = lines[finding["line"] - 1].strip() if finding["line"] <= len(lines) else ""
            repo = name.partition("@")[0]
            entry = judged.get((repo, path, finding["code"], text))
            if entry is None and repo in (forks or {}):
                entry = judged.get((forks[repo], path, finding["code"], text))
            verdict = (entry or {}).get("verdict")
            place = {"repo": name, "path": path, "line": finding["line"]}
            findings.append({**place, "code": finding["code"], "text": text, "verdict": verdict})
    return heads, findings, unchecked


def load_bench(path: Path) -> dict:
    try:
        report = json.loads(path.read_text())
        if not isinstance(report["real_trees"], dict) or not report["benchmark"]:
            raise KeyError("real_trees")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BadInput(f"--bench {path}: not a bench_lint.py JSON with --tree ({error})") from None
    return report


def speed_markdown(reports: list[dict]) -> list[str]:
    out = ["## Speed (scripts/bench_lint.py)", "",
           "Every file linted (`--no-cache`), and again with the cache one earlier run filled.", "",
           "| run | tree | .py files | wall median (min-max) | CPU s per run "
           "| cached: wall median (min-max) | cached: CPU s per run | load before/after |",
           "|---|---|---:|---|---:|---|---:|---|"]  # fmt: skip
    for number, report in enumerate(reports, 1):
        load = report.get("machine", {}).get("load_average_1min", {})
        loads = " / ".join(
            f"{load[key]:.2f}" if key in load else "?" for key in ("before", "after")
        )
        for name, tree in report["real_trees"].items():
            cached = tree.get("cached")  # reports of bench_lint.py before the cache: none
            warm, warm_cpu = (_spread(cached), cached["cpu_s_per_run"]) if cached else ("-", "-")
            out.append(f"| {number} | {name} | {tree['files']} | {_spread(tree)} "
                       f"| {tree['cpu_s_per_run']} | {warm} | {warm_cpu} | {loads} |")  # fmt: skip
    commands = sorted({f"python scripts/{report['benchmark']}" for report in reports})
    cpus = sorted({str(report.get("machine", {}).get("cpus")) for report in reports})
    out += ["", f"Command: `{'`, `'.join(commands)}` on {', '.join(cpus)} CPUs.", ""]
    return out


def _spread(figures: dict) -> str:
    wall = figures["default_jobs"]
    return f"{wall['median_s']} s ({wall['min_s']}-{wall['max_s']})"


def markdown(
    fixes: list[dict],
    commits: dict[str, str],
    heads: list[dict],
    cutoff: str,
    unchecked: list[dict] = (),
) -> str:
    out = [f"Dated split (cut-off {cutoff}): fixes not in docs/lint-history-judgements.toml.", ""]
    for split in (DEVELOPMENT, HELD_OUT):
        mine = [fix for fix in fixes if fix["split"] == split]
        caught = sum(fix["status"] == "caught" for fix in mine)
        out += [f"## {split}: caught {caught} of {len(mine)}", "",
                "| fix | date | class | status | codes |", "|---|---|---|---|---|"]  # fmt: skip
        for fix in mine:
            codes = ", ".join(fix["codes"]) or "-"
            out.append(f"| {fix['ref']} | {fix['date']} | {fix['issue_class']} "
                       f"| {fix['status']} | {codes} |")  # fmt: skip
        out.append("")
    if commits:
        listed = ", ".join(f"{name} `{sha[:12]}`" for name, sha in commits.items())
        out += [f"Heads linted: {listed}.", ""]
    count = {v: sum(f["verdict"] == v for f in heads) for v in ("true", "false", None)}
    out += [f"## Heads: {len(heads)} findings, {count['true']} true, {count['false']} false, "
            f"{count[None]} unjudged", "", "| repo | path:line | code | verdict | line |",
            "|---|---|---|---|---|"]  # fmt: skip
    for f in heads:
        text = f["text"].replace("|", "\\|")
        out.append(f"| {f['repo']} | {f['path']}:{f['line']} | {f['code']} "
                   f"| {f['verdict'] or 'unjudged'} | `{text}` |")  # fmt: skip
    if commits:
        out += ["", f"## Files at the heads that could not be checked: {len(unchecked)}", ""]
        out += [f"- {u['repo']} {u['path']}: {u['error']}" for u in unchecked]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> str:
    data = load_data(Path(args.data))
    gits = {name: Git(name, git_dir) for name, git_dir in parse_pairs(args.repo, "--repo").items()}
    fixes = [dict(fix, split=split_of(fix, data["cutoff"])) for fix in data.get("fix", [])]
    skipped = sorted({fix["repo"] for fix in fixes} - set(gits))
    if skipped:
        raise BadInput(f"--repo {skipped[0]}=GITDIR: the data file has fixes in {skipped[0]}")
    try:  # the verdicts on head findings made for the history corpus count here too
        verdicts = load_judgements(Path(args.judgements))["judgement"] + data.get("head", [])
    except BadJudgements as error:
        raise BadInput(str(error)) from None
    for path in args.heads_from:  # another data file's verdicts at heads (its fixes unused)
        verdicts += load_data(Path(path), "--heads-from").get("head", [])
    benches = [load_bench(Path(path)) for path in args.bench]
    commits, heads, unchecked = (
        ({}, [], []) if args.no_heads else measure_heads(gits, verdicts, data.get("forks", {}))
    )
    text = markdown(measure_fixes(gits, fixes), commits, heads, data["cutoff"], unchecked)
    return text + ("\n" + "\n".join(speed_markdown(benches)) if benches else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", default=[], metavar="NAME=GITDIR")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="the split (TOML)")
    parser.add_argument("--judgements", default=str(DEFAULT_JUDGEMENTS),
                        help="verdicts on findings from the history corpus (TOML)")  # fmt: skip
    parser.add_argument("--heads-from", action="append", default=[], metavar="FILE",
                        help="also the [[head]] verdicts of this data file")  # fmt: skip
    parser.add_argument("--no-heads", action="store_true", help="measure the fixes only")
    parser.add_argument("--bench", action="append", default=[], metavar="FILE",
                        help="a bench_lint.py JSON with --tree timings (repeatable)")  # fmt: skip
    parser.add_argument("--markdown", help="write the Markdown here instead of stdout")
    args = parser.parse_args(argv)
    if not args.repo:
        print("lint-history-split: error: --repo NAME=GITDIR is required", file=sys.stderr)
        return 2
    try:
        text = run(args)
    except BadInput as error:
        print(f"lint-history-split: error: {error}", file=sys.stderr)
        return 2
    if args.markdown:
        Path(args.markdown).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
