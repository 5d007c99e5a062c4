"""The text report of ``gmlp-check mutants``."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .mutants import MutantsRun
from .session import Checker


def print_mutants(out: Console, run: MutantsRun, checker: Checker) -> None:
    scope = (
        "each fault stopped at its first failing case (--stop-early)"
        if run.stop_early
        else "every case for every fault (--full-matrix)"
    )
    table = Table(
        title=f"gmlp-check mutants: {checker.backend.spec} on {checker.device.type}, "
        f"{run.matrix_cases} cases; {scope}",
        title_justify="left",
    )
    table.add_column("fault", no_wrap=True)
    table.add_column("caught")
    table.add_column("cases failed / run", justify="right")
    table.add_column("caught by (observable: failing cases)")
    table.add_column("diagnosed as")
    table.add_column("first failing case", overflow="fold")
    for f in run.faults:
        if f.not_applicable is not None:
            table.add_row(f.name, "[yellow]n/a[/yellow]", "-", f.not_applicable, "-", "-")
            continue
        table.add_row(
            f.name,
            "[green]yes[/green]" if f.caught else "[bold red]NO[/bold red]",
            f"{f.cases_failed} / {f.cases_run}",
            ", ".join(f"{o}: {n}" for o, n in f.observables.most_common()) or "-",
            ", ".join(f"{c}: {n}" for c, n in f.diagnoses.most_common()) or "-",
            f.first_case or "-",
        )
    out.print(table)
    clean_failures = [r for r in run.clean if not r.ok]
    if clean_failures:
        out.print(
            f"[bold red]the un-faulted run is not clean[/bold red]: {len(clean_failures)} of "
            f"{len(run.clean)} cases fail, so the faults' results prove nothing"
        )
        for r in clean_failures:
            out.print(
                f"  {r.case.id}: {', '.join(r.failed_observables)}", markup=False, soft_wrap=True
            )
            out.print(
                f"    rerun: {checker.rerun_command(r.case.id)}", markup=False, soft_wrap=True
            )
    else:
        out.print(f"un-faulted run: {len(run.clean)} of {len(run.clean)} cases pass")
    applicable = run.applicable
    caught = sum(f.caught for f in applicable)
    if not run.proven:
        out.print("[bold red]NOTHING PROVEN[/bold red]: 0 applicable faults")
        return
    verdict = "[green]PASS[/green]" if run.passed else "[bold red]FAIL[/bold red]"
    out.print(f"{verdict}: {caught} of {len(applicable)} applicable faults caught")
