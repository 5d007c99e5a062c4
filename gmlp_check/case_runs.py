"""The steps ``diff`` and ``mutants`` share: build the checker and select the cases, list them
(``--list``), compile their kernels first, run them under a progress bar on stderr; and the
console and exit codes their reports end with. The commands themselves, their options and
what each reports are in cli.py."""

from __future__ import annotations

import click
from rich.console import Console

from .lint.json_text import dumps as json_text
from .options import RunOptions
from .streams import progress_bar, stdout_to_stderr

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2


def stdout_console() -> Console:
    """A terminal keeps its own width; logs and pipes get lines wide enough for case ids."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def checker_and_cases(values: dict, can_launch: bool = False):
    """The checker a command's options build and the cases they select; the checker's notes
    (an axis skipped on this device, say) go to stderr where this process reports."""
    from .errors import UsageError
    from .session import Checker

    workers = values.get("compile_workers")
    if workers is not None and workers < 0:  # checked here too, so --list does not take it
        raise UsageError(f"--compile-workers: expected a count >= 0, got {workers}")
    options = RunOptions.from_values(values)
    with stdout_to_stderr():  # a factory that prints while it is loaded or tried
        checker = Checker.from_options(options, can_launch=can_launch)
        cases = checker.select(options)
    if checker.reports:
        for note in checker.notes:
            click.echo(note, err=True)
    return checker, cases


def print_list(cases, fmt: str) -> None:
    """``--list``: the selected case ids, one a line, or with their settings as JSON."""
    if fmt == "json":
        click.echo(json_text([{"id": c.id, "config": c.config()} for c in cases]))
    else:
        for c in cases:
            click.echo(c.id)


def warm_up(checker, cases, workers: int | None, show: bool = True) -> None:
    """Compile the cases' kernels in parallel first, when the backend compiles on first use
    and this machine has not (gmlp_check.warmup), with its own progress bars."""
    from . import warmup

    plan = checker.warm_up_plan(cases, workers)
    if plan is None:
        return
    console = Console(stderr=True) if show else Console(stderr=True, quiet=True)
    with progress_bar(console) as progress, stdout_to_stderr(), warmup.workers(plan) as pool:
        finding = progress.add_task("finding kernels", total=len(plan.cases), case="")
        jobs = warmup.find_kernels(
            plan, checker.backend, lambda n: progress.update(finding, advance=n)
        )
        label = f"compiling on {min(plan.workers, len(jobs))} workers"
        compiling = progress.add_task(label, total=len(jobs), case="")
        warmup.compile_kernels(plan, jobs, lambda n: progress.update(compiling, advance=n), pool)


def run_with_progress(checker, cases, label: str, show: bool = True):
    """Run every case with a progress bar on stderr (``show``), stdout kept for the report;
    (results, the interrupt that stopped the run or None)."""
    results = []
    console = Console(stderr=True) if show else Console(stderr=True, quiet=True)
    with progress_bar(console) as progress, stdout_to_stderr():
        task = progress.add_task(label, total=len(cases), case="")

        def advance(result) -> None:
            results.append(result)
            progress.update(task, advance=1, case=result.case.id)

        try:
            checker.run_all(cases, advance)
        except KeyboardInterrupt as exc:
            return results, exc
    return results, None
