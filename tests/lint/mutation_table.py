"""What each rule makes of each mutation of its snippets: ``python -m tests.lint.mutation_table``
prints the table of docs/lint-semantics.md's "Mutations" section (per rule and mutation:
caught, missed, false alarms), ``--misses`` lists every miss and false alarm by id.

A buggy mutant is caught when a rule that reports the original reports it on a ``# bug``
line; a mutant of correct code is a false alarm when it gives any finding at all.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

from .mutation_cases import Case, bug_lines, cases, lint
from .mutations import MUTATIONS, mutate

CAUGHT, MISSED, CLEAN, FALSE_ALARM = "caught", "missed", "clean", "false alarm"


def outcome(case: Case, mutant: str) -> str:
    findings = lint(case, mutant)
    if not case.buggy:
        return FALSE_ALARM if findings else CLEAN
    lines = bug_lines(mutant)
    hit = any(f.code in case.codes and f.line in lines for f in findings)
    return CAUGHT if hit else MISSED


def results() -> list[tuple[Case, str, str]]:
    """(case, mutation, outcome) for every mutation that applies to a case."""
    found = []
    for case in cases():
        for name in MUTATIONS:
            mutant = mutate(name, case.source)
            if mutant is not None:
                found.append((case, name, outcome(case, mutant)))
    return found


def table(found) -> str:
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for case, name, result in found:
        rules = sorted(case.codes) or ["correct"]
        counts[(rules[0], name)][result] += 1
    rules = sorted({rule for rule, _ in counts}, key=lambda r: (r == "correct", r))
    header = "| rule | " + " | ".join(MUTATIONS) + " | all |"
    lines = [header, "|---" * (len(MUTATIONS) + 2) + "|"]
    for rule in rules:
        cells = []
        total: Counter = Counter()
        for name in MUTATIONS:
            count = counts.get((rule, name), Counter())
            total += count
            cells.append(_cell(rule, count))
        lines.append(f"| {rule} | " + " | ".join(cells) + f" | {_cell(rule, total)} |")
    return "\n".join(lines) + "\n"


def _cell(rule: str, count: Counter) -> str:
    if not count:
        return ""
    if rule == "correct":
        return f"{count[FALSE_ALARM]}/{sum(count.values())}" if count[FALSE_ALARM] else "ok"
    return f"{count[CAUGHT]}/{count[CAUGHT] + count[MISSED]}"


def main(argv: list[str]) -> int:
    found = results()
    print(table(found))
    buggy = [r for c, _, r in found if c.buggy]
    correct = [r for c, _, r in found if not c.buggy]
    print(
        f"buggy mutants: {buggy.count(CAUGHT)} caught of {len(buggy)}; "
        f"correct mutants: {correct.count(FALSE_ALARM)} false alarms of {len(correct)}"
    )
    if "--misses" in argv:
        for case, name, result in found:
            if result in (MISSED, FALSE_ALARM):
                print(f"{result}: {case.id} {name} {sorted(case.codes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
