"""The curated half of scripts/lint_history.py: read the judgements file, join it to what
the linter found, count, and render the Markdown report.

The judgements file (TOML; the project's copy is docs/lint-history-judgements.toml) holds
``[[fix]]`` entries (a real main_grad bug fix: repo, commit, sites at the parent, and
optionally pr, bug_class, pattern, what, needs) and ``[[judgement]]`` entries (a human
verdict on one finding: repo, path, code, text of the flagged line, verdict "true" or
"false", reason), and an optional top-level ``preamble`` string printed under the report's
title (scope notes, fixes that cannot be measured). A judgement matches a finding by repo,
path, code and the flagged line's text, so it still applies when the line moves.
"""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

STATUSES = ("caught", "elsewhere", "missed")
REQUIRED = {
    "fix": ("repo", "commit", "sites"),
    "judgement": ("repo", "path", "code", "text", "verdict", "reason"),
}
# The type each key of an entry must hold, and how an error message names it (other keys
# are not checked).
STRING = (str, "a string")
KEY_TYPES = {
    "fix": {
        "repo": STRING,
        "commit": STRING,
        "sites": (list, "an array of strings"),
        "pr": (int, "an integer"),
        "bug_class": STRING,
        "pattern": STRING,
        "what": STRING,
        "needs": STRING,
    },
    "judgement": {key: STRING for key in REQUIRED["judgement"]},
}


class BadJudgements(Exception):
    """The judgements file cannot be used; the message names the entry and the problem."""


def load_judgements(path: Path) -> dict:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise BadJudgements(f"--judgements {path}: cannot read ({error.strerror})") from None
    except UnicodeDecodeError:
        raise BadJudgements(f"--judgements {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise BadJudgements(f"--judgements {path}: not valid TOML ({error})") from None
    for kind, required in REQUIRED.items():
        entries = data.get(kind, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise BadJudgements(f"--judgements {path}: {kind} must be [[{kind}]] tables")
        for number, entry in enumerate(entries, start=1):
            where = f"--judgements {path}: [[{kind}]] #{number}"
            missing = [key for key in required if key not in entry]
            if missing:
                raise BadJudgements(f"{where} lacks {missing[0]!r}")
            check_types(entry, KEY_TYPES[kind], where)
            if kind == "judgement" and entry["verdict"] not in ("true", "false"):
                raise BadJudgements(f"{where}: verdict must be 'true' or 'false'")
            for site in entry.get("sites", []) if kind == "fix" else []:
                if parse_site(site) is None:
                    raise BadJudgements(f"{where}: site {site!r} is not PATH:LINE or PATH:A-B")
    preamble = data.get("preamble", "")
    if not isinstance(preamble, str):
        raise BadJudgements(f"--judgements {path}: preamble must be a string")
    return {
        "fix": data.get("fix", []),
        "judgement": data.get("judgement", []),
        "preamble": preamble,
    }


def check_types(entry: dict, types: dict[str, tuple[type, str]], where: str) -> None:
    """Raise BadJudgements naming the first key of ``entry`` whose value has the wrong type."""
    for key, (wanted, expected) in types.items():
        value = entry.get(key)
        if value is None:
            continue
        # bool is a subclass of int, but ``pr = true`` is no PR number
        wrong = not isinstance(value, wanted) or isinstance(value, bool)
        if wanted is list and not wrong:
            wrong = not all(isinstance(item, str) for item in value)
        if wrong:
            raise BadJudgements(f"{where}: {key} must be {expected}")


def judge_all(repos: list[dict], judgements: list[dict]) -> None:
    """Attach ``judgement`` (None or {verdict, reason}) to every finding in the document."""
    verdicts = {}
    for entry in judgements:
        key = (entry["repo"], entry["path"], entry["code"], entry["text"].strip())
        verdicts[key] = {"verdict": entry["verdict"], "reason": entry["reason"]}
    for repo in repos:
        for finding in history_findings(repo) + repo["head_findings"]:
            key = (repo["name"], finding["path"], finding["code"], finding["text"])
            finding["judgement"] = verdicts.get(key)


def history_findings(repo: dict) -> list[dict]:
    return [
        finding
        for candidate in repo["candidates"]
        for info in candidate["files"]
        for finding in info["parent_findings"] + info["fix_findings"]
    ]


def is_false(finding: dict) -> bool:
    return (finding["judgement"] or {}).get("verdict") == "false"


def pr_number(subject: str) -> int | None:
    match = re.search(r"\(#(\d+)\)\s*$", subject)
    return int(match.group(1)) if match else None


def parse_site(site: str) -> tuple[str, int, int] | None:
    """``PATH:LINE`` or ``PATH:FIRST-LAST`` as (path, first, last); None if malformed."""
    path, _, lines = str(site).rpartition(":")
    first, _, last = lines.partition("-")
    if not path or not first.isdigit() or (last and not last.isdigit()):
        return None
    return path, int(first), int(last or first)


def assess_fix(entry: dict, sha: str, candidate: dict) -> dict:
    """Caught at a site, elsewhere (a finding the fix removed, not judged false), or missed."""
    sites = [parse_site(site) for site in entry["sites"]]
    parent = [f for info in candidate["files"] for f in info["parent_findings"]]
    fixed = [f for info in candidate["files"] for f in info["fix_findings"]]
    survivors = {(f["path"], f["code"], f["text"]) for f in fixed}
    at_site = [
        f for f in parent if any(f["path"] == p and a <= f["line"] <= b for p, a, b in sites)
    ]
    removed = [
        f
        for f in parent
        if f not in at_site
        and (f["path"], f["code"], f["text"]) not in survivors
        and not is_false(f)
    ]
    status = STATUSES[0] if at_site else STATUSES[1] if removed else STATUSES[2]
    return {
        "repo": entry["repo"],
        "commit": sha,
        "pr": entry.get("pr") or pr_number(candidate["subject"]),
        "subject": candidate["subject"],
        "found_by": candidate["found_by"],
        "bug_class": entry.get("bug_class", ""),
        "pattern": entry.get("pattern", ""),
        "sites": entry["sites"],
        "what": entry.get("what", ""),
        "needs": entry.get("needs", ""),
        "status": status,
        "codes": sorted({f["code"] for f in (at_site or removed)}),
        "site_findings": at_site,
        "other_parent_findings": [f for f in parent if f not in at_site],
        "fix_findings": fixed,
    }


def distinct_history(repo: dict) -> list[tuple[dict, str, str]]:
    """Each finding line met anywhere in the candidate history once, with the dates of the
    earliest and latest candidate commit where it was seen (parent or commit side)."""
    seen: dict[tuple, tuple[dict, str, str]] = {}
    for candidate in repo["candidates"]:
        date = candidate["date"]
        for info in candidate["files"]:
            for f in info["parent_findings"] + info["fix_findings"]:
                key = (f["path"], f["code"], f["text"])
                _, first, last = seen.get(key, (f, date, date))
                seen[key] = (f, min(first, date), max(last, date))
    return sorted(seen.values(), key=lambda row: (row[0]["path"], row[0]["line"]))


def summarise(fixes: list[dict], repos: list[dict]) -> dict:
    fixed = [f for fix in fixes for f in fix["fix_findings"]]
    head = [f for repo in repos for f in repo["head_findings"]]
    history = [row[0] for repo in repos for row in distinct_history(repo)]

    def count(findings: list[dict], verdict: str | None) -> int:
        return sum((f["judgement"] or {}).get("verdict") == verdict for f in findings)

    counts = {"fixes": len(fixes)}
    counts.update({status: sum(f["status"] == status for f in fixes) for status in STATUSES})
    for name, findings in (("fix_side", fixed), ("head", head), ("history", history)):
        counts[f"{name}_findings"] = len(findings)
        for verdict, label in (("true", "true"), ("false", "false"), (None, "unjudged")):
            counts[f"{name}_{label}"] = count(findings, verdict)
    return counts


def table(headers: tuple[str, ...], rows: list[tuple]) -> list[str]:
    def line(values: tuple) -> str:
        return (
            "| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in values) + " |"
        )

    body = [line(row) for row in rows] or [line(("(none)",) + ("",) * (len(headers) - 1))]
    return [line(headers), line(("---",) * len(headers)), *body]


def finding_row(repo: str, at: str, finding: dict) -> tuple:
    judged = finding["judgement"] or {"verdict": "unjudged", "reason": ""}
    where = f"{finding['path']}:{finding['line']}"
    return (repo, at, finding["code"], where, f"`{finding['text']}`", *judged.values())


def counted(s: dict, name: str, what: str) -> str:
    return (f"{s[name + '_findings']} {what} ({s[name + '_true']} judged true, "
            f"{s[name + '_false']} false, {s[name + '_unjudged']} unjudged)")  # fmt: skip


def markdown(document: dict) -> str:
    s = document["summary"]
    out = ["# gmlp-lint on the main_grad history", ""]
    out += ["Generated by `scripts/lint_history.py` from `docs/lint-history-judgements.toml`.", ""]
    if document["preamble"]:
        out += [document["preamble"].strip(), ""]
    out += [f"Command: `{document['command']}`", "", "Heads measured:", ""]
    for repo in document["repos"]:
        out.append(
            f"- {repo['name']} `{repo['head']}`: {len(repo['candidates'])} candidate commits, "
            f"{repo['head_files']} head files linted"
        )
    out += [
        "",
        f"**Caught {s['caught']} of {s['fixes']} real main_grad fixes at the right site** "
        f"({s['elsewhere']} caught elsewhere, {s['missed']} missed); "
        f"{counted(s, 'fix_side', 'findings on the fixed versions')}; "
        f"{counted(s, 'head', 'findings at the heads')}; "
        f"{counted(s, 'history', 'distinct finding lines in the whole candidate history')}.",
        "",
        "## Real fixes",
        "",
    ]
    headers = ("repo", "commit", "PR", "found by", "class", "pattern", "site at parent",
               "result", "rules")  # fmt: skip
    rows = [
        (f["repo"], f["commit"][:10], f"#{f['pr']}" if f["pr"] else "", ", ".join(f["found_by"]),
         f["bug_class"], f["pattern"], ", ".join(f["sites"]), f["status"], ", ".join(f["codes"]))
        for f in document["fixes"]
    ]  # fmt: skip
    out += table(headers, rows)
    out += ["", "## What went wrong, and what a rule would need where the site was missed", ""]
    for f in document["fixes"]:
        need = f" **Needs:** {f['needs']}" if f["status"] != "caught" and f["needs"] else ""
        out.append(f"- {f['repo']} {f['commit'][:10]} ({f['status']}): {f['what']}.{need}")
    headers = ("repo", "at", "code", "path:line", "line", "verdict", "why")
    fixed = [finding_row(f["repo"], f["commit"][:10], x) for f in document["fixes"]
             for x in f["fix_findings"]]  # fmt: skip
    head = [finding_row(r["name"], r["head"][:10], x) for r in document["repos"]
            for x in r["head_findings"]]  # fmt: skip
    out += ["", "## Findings on the fixed versions", "", *table(headers, fixed)]
    out += ["", "## Findings at today's heads", "", *table(headers, head)]
    headers = ("repo", "seen", "code", "path:line", "line", "verdict", "why")
    rows = [
        finding_row(repo["name"], f"{first} .. {last}", finding)
        for repo in document["repos"]
        for finding, first, last in distinct_history(repo)
    ]
    out += ["", "## Every finding line in the candidate history (parents and commits)", ""]
    out += table(headers, rows)
    return "\n".join(out) + "\n"
