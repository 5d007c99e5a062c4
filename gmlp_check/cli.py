"""The gmlp-check command line: ``diff``, ``faults``, ``mutants`` and ``bench``.

Exit codes follow ruff and pytest: 0 clean, 1 mismatches (or a fault not caught), 2 usage or
environment error (bad option, no GPU for --device cuda, an unloadable --fused spec, a factory
that breaks the protocol, calls sys.exit or raises another BaseException that is not an
Exception, sizes that cannot fit in memory, --megatron real without megatron-core or CUDA, a
crashed rank, a report file that cannot be written); an interrupted run exits 128 + the
signal's number, 130 on Ctrl-C and 143 on SIGTERM, after reporting what finished
(gmlp_check.interrupts). A reader that closes the pipe early changes none of these
(gmlp_check.lint.standard_streams). Stdout holds the report alone: what a factory or a forward
prints goes to stderr (gmlp_check.streams). Report files are checked before the run and
written after the report is printed (gmlp_check.files).

``diff --nproc N`` outside torchrun starts N workers running the same command
(gmlp_check.engines.launcher); inside a launch (RANK and WORLD_SIZE set, by our launcher or by
torchrun) the command is one rank. Every rank runs every case; rank 0 alone prints and writes
reports, and every rank exits with the same code.

The steps diff and mutants share (select, list, warm up and run the cases) are in case_runs.py;
what diff writes besides its report (JUnit XML, reproductions, source pointing) in
diff_outputs.py.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from . import faults as fault_registry
from .case_runs import (
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    checker_and_cases,
    print_list,
    run_with_progress,
    stdout_console,
    warm_up,
)
from .diff_outputs import check_repro_embed, point_sources, write_reports, write_repros
from .files import OutputError, check_directory, check_output
from .interrupts import exit_code, sigterm_interrupts
from .lint.json_text import dumps as json_text
from .options import COMPILE_WORKERS, DIFF, FUSED, MATRIX, click_options, to_argv
from .streams import progress_bar, stdout_to_stderr

FORMATS = ("text", "json")


def usage_errors(command: Callable) -> Callable:
    """Run a command so that a UsageError of the checker is click's: one line, exit 2. It may
    come mid-run, too (a factory that breaks the protocol only for some cases). A report path
    that cannot be written is one, too, when it is checked before the run."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        from .errors import UsageError

        try:
            return command(*args, **kwargs)
        except (UsageError, OutputError) as exc:
            raise click.UsageError(str(exc)) from None

    return run


class Commands(click.Group):
    """gmlp-check's commands: Ctrl-C or SIGTERM anywhere in a command (loading a factory,
    selecting cases) ends it with one "interrupted" line and 128 + the signal's number
    (gmlp_check.interrupts); a command that handles the interrupt itself reports first."""

    def invoke(self, ctx: click.Context):
        with sigterm_interrupts():
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt as exc:
                click.echo("gmlp-check: interrupted", err=True)
                sys.exit(exit_code(exc))


def worker_command(values: dict, fmt: str, junit_xml: str | None) -> list[str]:
    """What each rank runs: this diff command again, with the options the user gave."""
    command = [sys.executable, "-m", "gmlp_check.cli", "diff", *to_argv(DIFF, values)]
    command += ["--format", fmt]
    if junit_xml:
        command += ["--junit-xml", junit_xml]
    return command


def _quiet_stdout() -> None:
    """Ranks other than 0 print nothing on stdout (a JSON report there must come from rank 0
    alone): whatever a library prints goes to stderr instead."""
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True
)
list_option = click.option(
    "--list", "list_only", is_flag=True, help="Print the selected case ids and exit."
)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gmlp-check")
def main() -> None:
    """Check a fused grouped MLP against the main_grad contract (CONTRACT.md).

    \b
    Examples:
      gmlp-check diff                         # triton backend, GPU if present, else CPU
      gmlp-check diff --fused mypkg.mlp:make --device cuda --format json
      gmlp-check diff --inject empty-expert-skipped -k 'mode=overwrite'
      gmlp-check mutants                      # prove every injected fault is caught
    """


@main.command()
@click_options((*DIFF, COMPILE_WORKERS))
@list_option
@format_option
@click.option(
    "--junit-xml", type=click.Path(dir_okay=False), help="Also write the results as JUnit XML."
)
@click.option(
    "--write-repro",
    type=click.Path(file_okay=False),
    help="Write each failing case into this directory as a standalone Python reproduction "
    "(needs only torch and the backend).",
)
@click.option(
    "--repro-embed",
    metavar="PACKAGE",
    help="With --write-repro: embed the modules of PACKAGE that the factory imports (your "
    "adapter around the library under test) into each reproduction, so that it needs only "
    "torch and that library. gmlp-check's own adapters are always embedded.",
)
@click.option(
    "--point-source",
    is_flag=True,
    help="For each diagnosed failing case, run gmlp-lint on the Python files the backend ran "
    "and list the findings of the diagnosed class (file:line).",
)
@usage_errors
def diff(
    list_only: bool,
    fmt: str,
    junit_xml: str | None,
    write_repro: str | None,
    repro_embed: str | None,
    point_source: bool,
    **values,
) -> None:
    """Run the scenario matrix of the reference against a fused backend and compare everything.

    Both sides get identical weights, inputs, output gradients and main_grad contents (NaN
    sentinels where every element must be written, random values where it must accumulate,
    guard bands around every buffer); outputs, gradients, main_grad at every stage, the
    bookkeeping flags, the dummy gradients and the post-backward hook are compared. Exit 0
    when every case passes (or is unsupported, or a known deviation), 1 on any mismatch, 2 on
    a usage or environment error (a report file that cannot be written included), 130 on
    Ctrl-C and 143 on SIGTERM (the cases that finished are still reported). A reader that
    closes the pipe early (| head) changes none of these.

    \b
    Under --megatron real each case runs under the real megatron-core DDP / Megatron-FSDP
    configurations of its mode (--engine-configs), two training steps each, and what the
    engines hold after finish_grad_sync is compared with the reference's data-parallel mean.
    --nproc N runs N ranks, one per GPU: gmlp-check starts them itself, or run it under
    torchrun --nproc-per-node N.

    \b
    Examples:
      gmlp-check diff --device cpu --dtype fp32 -k 'mode=overwrite-fsdp'
      gmlp-check diff --fused torch-grouped-mm --device cuda --junit-xml diff.xml
      gmlp-check diff --fused mypkg.mlp:make_grouped_mlp --format json > diff.json
      gmlp-check diff --megatron real --nproc 2 --format json > real.json
      torchrun --nproc-per-node 2 -m gmlp_check.cli diff --megatron real
    """
    from . import report

    if junit_xml is not None:  # '' too: check_output refuses it (it was silently no report)
        check_output("--junit-xml", junit_xml)
    if write_repro is not None:
        check_directory("--write-repro", write_repro)
    if write_repro and values.get("inject"):
        raise click.UsageError(
            "--write-repro: reproduces the backend's own behaviour; an injected fault (--inject) "
            "lives in gmlp_check and cannot be written out"
        )
    if repro_embed is not None:
        check_repro_embed(repro_embed, write_repro, values.get("fused"))
    checker, cases = checker_and_cases(values, can_launch=True)
    if list_only:
        if checker.reports:
            print_list(cases, fmt)
        return
    if checker.needs_launch:
        from .engines.launcher import launch

        sys.exit(launch(worker_command(values, fmt, junit_xml), checker.nproc))
    if not checker.reports:
        _quiet_stdout()
    warm_up(checker, cases, values.get("compile_workers"), checker.reports)
    try:
        results, interrupted = run_with_progress(checker, cases, "diff", checker.reports)
    finally:
        checker.close()
    if checker.reports:
        if point_source:
            point_sources(results, checker)
        if fmt == "json":
            document = report.diff_json(results, checker)
            document["interrupted"] = interrupted is not None
            click.echo(json_text(document))
        else:
            out = stdout_console()
            report.print_table(out, results, checker)
            report.print_failures(out, results, checker)
            out.print(report.summary_line(results, checker), highlight=False)
        if junit_xml:
            write_reports({"--junit-xml": (junit_xml, report.junit_xml(results, checker))})
        if write_repro:
            write_repros(Path(write_repro), results, checker, repro_embed)
    if interrupted is not None:
        if checker.reports:
            click.echo(f"interrupted after {len(results)} of {len(cases)} cases", err=True)
        sys.exit(exit_code(interrupted))
    sys.exit(EXIT_OK if all(r.ok for r in results) else EXIT_MISMATCH)


@main.command()
@format_option
def faults(fmt: str) -> None:
    """List the faults that can be injected: surface faults (any backend) and policy faults
    (backends with a main_grad policy); docs/faults.md has the full table.

    \b
    Example:
      gmlp-check faults
      gmlp-check diff --inject dummy-not-zeroed -k 'zero=1'
    """
    table_data = fault_registry.FAULTS
    if fmt == "json":
        rows = [
            {
                "name": f.name,
                "bug_class": f.bug_class,
                "description": f.description,
                "kind": f.kind,
                "upstream": f.upstream,
                "applies_to": f.applies_doc,
            }
            for f in table_data.values()
        ]
        click.echo(json_text(rows))
        return
    table = Table(
        title="faults injectable with gmlp-check diff --inject NAME", title_justify="left"
    )
    table.add_column("name", no_wrap=True)
    table.add_column("kind")
    table.add_column("bug class (docs/faults.md)")
    table.add_column("applies to")
    table.add_column("what the fused path does instead")
    for f in table_data.values():
        table.add_row(f.name, f.kind, f.bug_class, f.applies_doc, f.description)
    stdout_console().print(table)


@main.command()
@click.option(
    "--fault",
    "fault_names",
    multiple=True,
    metavar="FAULT",
    help="Only these faults (repeatable; default: all, see `gmlp-check faults`).",
)
@click.option(
    "--stop-early/--full-matrix",
    default=None,
    help="Stop a fault's run at its first failing case (default on CPU), or run every case "
    "of the matrix for every fault (default on CUDA). Each fault starts from the same first "
    "case either way; the un-faulted run always covers the whole matrix.",
)
@click_options((FUSED, *MATRIX, COMPILE_WORKERS))
@list_option
@format_option
@usage_errors
def mutants(
    fault_names: Sequence[str], stop_early: bool | None, list_only: bool, fmt: str, **values
) -> None:
    """Prove the checker: run the matrix once without a fault and once per injected fault,
    and report which observables caught each fault.

    Exit 0 only if the un-faulted run is clean and every applicable fault is caught, 1
    otherwise, 2 on a usage or environment error or when no fault applies (nothing proven),
    130 on Ctrl-C and 143 on SIGTERM.

    \b
    Examples:
      gmlp-check mutants                           # all faults, default matrix
      gmlp-check mutants --fault empty-expert-skipped --full-matrix
      gmlp-check mutants --device cuda --format json > mutants.json
    """
    from .mutants import mutants_json, run_mutants
    from .mutants_report import print_mutants

    unknown = [f for f in fault_names if f not in fault_registry.FAULTS]
    if unknown:
        known = ", ".join(fault_registry.FAULTS)
        raise click.UsageError(f"--fault: expected names from {known}, got {unknown}")
    # Mutants run many faults over the whole matrix: always on the emulated engine.
    checker, cases = checker_and_cases({**values, "megatron": "emulated"})
    if list_only:
        print_list(cases, fmt)
        return
    if stop_early is None:
        stop_early = checker.device.type == "cpu"
    warm_up(checker, cases, values.get("compile_workers"))
    # In the registry's order, whatever the order on the command line.
    names = [name for name in fault_registry.FAULTS if not fault_names or name in fault_names]
    with progress_bar(Console(stderr=True)) as progress:
        tasks = {None: progress.add_task("un-faulted", total=len(cases), case="")}
        for name in names:
            tasks[name] = progress.add_task(name, total=len(cases), case="")

        def advance(fault, result) -> None:
            progress.update(tasks[fault], advance=1, case=result.case.id)
            if fault is not None and stop_early and not result.ok:
                progress.update(tasks[fault], completed=len(cases))

        with stdout_to_stderr():
            run = run_mutants(checker, names, cases, stop_early=stop_early, on_result=advance)
    if fmt == "json":
        click.echo(json_text(mutants_json(run, checker)))
    else:
        print_mutants(stdout_console(), run, checker)
    if not run.proven:
        click.echo(
            f"--fused {checker.backend.spec}: no fault applies to the selected cases, so "
            "nothing was proven (see `gmlp-check faults` for what each fault needs)",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_OK if run.passed else EXIT_MISMATCH)


def _add_bench() -> None:
    from gmlp_check.bench.cli import bench

    main.add_command(bench)


_add_bench()


if __name__ == "__main__":  # the ranks `diff --nproc N` starts, torchrun's too
    from .lint.standard_streams import prepare_standard_streams

    prepare_standard_streams()
    main()
