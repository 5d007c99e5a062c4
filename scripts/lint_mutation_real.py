"""Real code under the mutation corpus's rewrites: does gmlp-lint still report a real bug
once its code is respelled without changing what it does, and does respelled correct code
stay clean? (Issue #19: "design for the class of bug, not the instance"; the other
measurements hold the rules to the exact text of real commits.)

    python scripts/lint_mutation_real.py --data docs/lint-history-split.toml \\
        --repo TransformerEngine=/path/TE.git --repo Megatron-LM=/path/Megatron-LM.git ... \\
        --output docs/lint-mutation-real.json --markdown docs/lint-mutation-real.md

Material, every file linted alone (no other file's run facts, so some findings of a whole
run are not there to start with):

* **bugs**: each fix of the ``--data`` files (its buggy revision) whose site file, linted
  alone, has a finding on a site line; and each finding judged true at a head
  (``[[head]]`` of the data files, ``[[judgement]]`` of ``--judgements``, matched by path,
  code and line text at the repository's head). The finding's line gets a ``# bug`` mark.
* **clean**: files at the heads that name ``main_grad`` and give no finding alone, up to
  ``--clean N`` per repository (the largest first: the most code to respell).

Each mutation of ``tests/lint/mutations.py`` is applied to the whole file. A bug is kept
when a finding of one of its codes lands on a marked line of the mutant; a clean file's
mutant is a false alarm when it gives any finding. A mutant that does not compile, or a
mutation that changes nothing, is counted apart (``broken``, ``n/a``).

Writes JSON (``--output``) and Markdown (``--markdown``, else stdout); progress on stderr.
Exit status: 0 done; 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tomllib
from lint_history import BadInput, Git, parse_pairs
from lint_history_judge import parse_site
from lint_history_split import buggy_revision

from gmlp_check.lint import engine, registry
from gmlp_check.lint.source import SourceError
from tests.lint.mutations import MARK, MUTATIONS, mutate

SCHEMA = "gmlp-lint-mutation-real/1"
DOCS = Path(__file__).resolve().parents[1] / "docs"
CODES = frozenset(rule.code for rule in registry.all_rules())
KEPT, LOST, NA, BROKEN, CLEAN, FALSE_ALARM = "kept", "lost", "n/a", "broken", "clean", "false alarm"


def progress(message: str) -> None:
    print(f"lint-mutation-real: {message}", file=sys.stderr, flush=True)


def lint(text: str, path: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return engine.lint_source(text, path, CODES)
    except SourceError:
        return None


def marked(text: str, lines: set[int]) -> str | None:
    """``text`` with a ``# bug`` comment at the end of each of ``lines``; None where a line
    cannot take one (a backslash continuation, inside a string: the file stops compiling)."""
    physical = text.splitlines(keepends=True)
    for line in lines:
        body = physical[line - 1]
        stripped = body.rstrip("\r\n")
        if stripped.endswith("\\"):
            return None
        physical[line - 1] = f"{stripped}  {MARK}{body[len(stripped) :]}"
    out = "".join(physical)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(out, "<marked>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return out


def mark_lines(text: str) -> set[int]:
    return {i for i, line in enumerate(text.splitlines(), 1) if MARK in line}


def bug_outcomes(text: str, path: str, codes: set[str]) -> dict[str, str]:
    """Each mutation's outcome for the marked file ``text`` whose bug ``codes`` report."""
    out = {}
    for name in MUTATIONS:
        try:
            mutant = mutate(name, text)
        except Exception as error:  # a mutation that cannot handle real code: its limit
            out[name] = f"{BROKEN}: {type(error).__name__}"
            continue
        if mutant is None:
            out[name] = NA
            continue
        findings = lint(mutant, path)
        if findings is None:
            out[name] = BROKEN
            continue
        lines = mark_lines(mutant)
        out[name] = KEPT if any(f.code in codes and f.line in lines for f in findings) else LOST
    return out


def clean_outcomes(text: str, path: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in MUTATIONS:
        try:
            mutant = mutate(name, text)
        except Exception as error:
            out[name] = f"{BROKEN}: {type(error).__name__}"
            continue
        if mutant is None:
            out[name] = NA
            continue
        findings = lint(mutant, path)
        if findings is None:
            out[name] = BROKEN
        elif findings:
            out[name] = [FALSE_ALARM, [f"{f.code}:{f.line}" for f in findings]]
        else:
            out[name] = CLEAN
    return out


def bug_case(ref: str, text: str, path: str, lines_wanted) -> dict | None:
    """A bug case from a file and a predicate on findings (``lines_wanted(finding)``)."""
    findings = lint(text, path)
    if not findings:
        return None
    hits = [f for f in findings if lines_wanted(f)]
    if not hits:
        return None
    lines = {f.line for f in hits}
    text_marked = marked(text, lines)
    if text_marked is None:
        return None
    codes = {f.code for f in hits}
    after = lint(text_marked, path) or []
    if not any(f.code in codes and f.line in lines for f in after):
        return None  # the mark itself changed what is reported
    return {"ref": ref, "path": path, "codes": sorted(codes), "lines": sorted(lines),
            "outcomes": bug_outcomes(text_marked, path, codes)}  # fmt: skip


def fix_cases(gits: dict[str, Git], data: list[dict]) -> list[dict]:
    cases = []
    for fix in (f for d in data for f in d.get("fix", [])):
        git = gits.get(fix["repo"])
        if git is None:
            continue
        revision = buggy_revision(git, fix)
        sites = [parse_site(site) for site in fix["sites"]]
        for path in sorted({p for p, _, _ in sites}):
            (blob,) = git.blobs([f"{revision}:{path}"])
            if blob is None:
                continue
            spans = [(a, b) for p, a, b in sites if p == path]
            progress(f"fix {fix['ref']} {path}")

            def on_site(f, spans=spans) -> bool:
                return any(a <= f.line <= b for a, b in spans)

            case = bug_case(fix["ref"], blob.decode("utf-8", "replace"), path, on_site)
            if case is not None:
                cases.append({"kind": "fix", **case})
    return cases


def head_cases(gits: dict[str, Git], verdicts: list[dict]) -> list[dict]:
    by_file: dict[tuple[str, str], list[dict]] = {}
    for verdict in verdicts:
        if verdict.get("verdict") == "true" and verdict.get("repo") in gits:
            by_file.setdefault((verdict["repo"], verdict["path"]), []).append(verdict)
    cases = []
    for (repo, path), judged in sorted(by_file.items()):
        (blob,) = gits[repo].blobs([f"HEAD:{path}"])
        if blob is None:
            continue
        text = blob.decode("utf-8", "replace")
        physical = text.splitlines()
        wanted = {(v["code"], v["text"].strip()) for v in judged}
        progress(f"head {repo} {path}")

        def at_judged(f, physical=physical, wanted=wanted) -> bool:
            return (f.code, physical[f.line - 1].strip()) in wanted

        case = bug_case(f"{repo} head", text, path, at_judged)
        if case is not None:
            cases.append({"kind": "head", **case})
    return cases


def clean_cases(gits: dict[str, Git], per_repo: int) -> list[dict]:
    from lint_history import tree_files

    cases = []
    for repo, git in sorted(gits.items()):
        paths = tree_files(git, "HEAD")
        blobs = git.blobs([f"HEAD:{p}" for p in paths])
        named = sorted(((len(b), p, b) for p, b in zip(paths, blobs) if b and b"main_grad" in b),
                       reverse=True)  # fmt: skip
        taken = 0
        for _, path, blob in named:
            if taken >= per_repo:
                break
            text = blob.decode("utf-8", "replace")
            if lint(text, path) != []:
                continue  # a finding already (judged elsewhere), or not checkable
            progress(f"clean {repo} {path}")
            cases.append({"kind": "clean", "ref": f"{repo} head", "path": path,
                          "outcomes": clean_outcomes(text, path)})  # fmt: skip
            taken += 1
    return cases


def tallies(cases: list[dict]) -> dict[str, dict[str, int]]:
    table: dict[str, Counter] = {name: Counter() for name in MUTATIONS}
    for case in cases:
        for name, outcome in case["outcomes"].items():
            label = outcome[0] if isinstance(outcome, list) else outcome.split(":")[0]
            table[name][f"{'clean' if case['kind'] == 'clean' else 'bug'}:{label}"] += 1
    return {name: dict(count) for name, count in table.items()}


def markdown(report: dict) -> str:
    lines = ["| mutation | bugs kept | bugs lost | clean mutants with a finding | n/a | broken |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, count in report["tallies"].items():
        bug_total = count.get(f"bug:{KEPT}", 0) + count.get(f"bug:{LOST}", 0)
        clean_total = count.get(f"clean:{CLEAN}", 0) + count.get(f"clean:{FALSE_ALARM}", 0)
        na = count.get(f"bug:{NA}", 0) + count.get(f"clean:{NA}", 0)
        broken = count.get(f"bug:{BROKEN}", 0) + count.get(f"clean:{BROKEN}", 0)
        lines.append(f"| {name} | {count.get(f'bug:{KEPT}', 0)} of {bug_total} | "
                     f"{count.get(f'bug:{LOST}', 0)} | {count.get(f'clean:{FALSE_ALARM}', 0)} of "
                     f"{clean_total} | {na} | {broken} |")  # fmt: skip
    lost = [f"- {c['ref']} `{c['path']}` {','.join(c['codes'])} lines {c['lines']}: {name}"
            for c in report["cases"] if c["kind"] != "clean"
            for name, o in c["outcomes"].items() if o == LOST]  # fmt: skip
    alarms = [f"- {c['ref']} `{c['path']}`: {name} {o[1]}"
              for c in report["cases"] if c["kind"] == "clean"
              for name, o in c["outcomes"].items() if isinstance(o, list)]  # fmt: skip
    summary = report["summary"]
    head = (f"Bugs: {summary['bugs']} ({summary['kept']} kept of {summary['bug_mutants']} "
            f"mutants). Clean files: {summary['clean']} ({summary['false_alarms']} mutants with "
            f"a finding of {summary['clean_mutants']}).")  # fmt: skip
    return "\n".join([head, "", *lines, "", "Lost:", *(lost or ["- none"]),
                      "", "Findings on clean mutants:", *(alarms or ["- none"]), ""])  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    gits = {name: Git(name, path) for name, path in parse_pairs(args.repo, "--repo").items()}
    data, verdicts = [], []
    for path in args.data:
        try:
            loaded = tomllib.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise BadInput(f"--data {path}: cannot be read as TOML ({error})") from None
        data.append(loaded)
        verdicts += loaded.get("head", [])
    try:
        verdicts += tomllib.loads(Path(args.judgements).read_text()).get("judgement", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise BadInput(f"--judgements {args.judgements}: cannot be read ({error})") from None
    cases = fix_cases(gits, data) + head_cases(gits, verdicts) + clean_cases(gits, args.clean)
    bug_results = [o for c in cases if c["kind"] != "clean" for o in c["outcomes"].values()]
    clean_results = [o for c in cases if c["kind"] == "clean" for o in c["outcomes"].values()]
    summary = {
        "bugs": sum(c["kind"] != "clean" for c in cases),
        "bug_mutants": sum(o in (KEPT, LOST) for o in bug_results),
        "kept": bug_results.count(KEPT),
        "clean": sum(c["kind"] == "clean" for c in cases),
        "clean_mutants": sum(o == CLEAN or isinstance(o, list) for o in clean_results),
        "false_alarms": sum(isinstance(o, list) for o in clean_results),
    }
    return {"schema": SCHEMA, "command": ["python", "scripts/lint_mutation_real.py", *sys.argv[1:]],
            "summary": summary, "tallies": tallies(cases), "cases": cases}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", default=[], metavar="NAME=GITDIR")
    parser.add_argument("--data", action="append", default=[], metavar="TOML")
    parser.add_argument("--judgements", default=str(DOCS / "lint-history-judgements.toml"))
    parser.add_argument("--clean", type=int, default=8, metavar="N",
                        help="clean files per repository (default 8)")  # fmt: skip
    parser.add_argument("--output", metavar="JSON")
    parser.add_argument("--markdown", metavar="FILE")
    args = parser.parse_args(argv)
    if args.clean < 0:
        parser.error("--clean: expected a count >= 0")
    try:
        report = run(args)
    except BadInput as error:
        print(f"lint-mutation-real: {error}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    if args.markdown:
        Path(args.markdown).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
