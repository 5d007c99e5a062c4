"""The gmlp-check command line: ``diff``, ``faults``, ``mutants`` (and ``bench``, added by
``gmlp_check.bench`` through ``main.add_command``).

Exit codes follow ruff and pytest: 0 clean, 1 mismatches (or a fault not caught), 2 usage or
environment error (bad option, no GPU for --device cuda, an unloadable --fused spec).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .scenarios import (
    ACTIVATION_NAMES,
    DTYPES,
    MODES,
    Case,
    Sizes,
)

FORMATS = ("text", "json")


def _usage(message: str) -> click.UsageError:
    return click.UsageError(message)


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[case]}", style="dim"),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def _stdout_console() -> Console:
    """A terminal keeps its own width; logs and pipes get lines wide enough for case ids."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def _suite(fused: str, inject: str | None, device: str, experts, hidden, ffn, tokens, seed):
    from .runner import UsageError
    from .suite import DiffSuite

    try:
        return DiffSuite.create(
            fused,
            device,
            inject=inject,
            experts=experts,
            hidden=hidden,
            ffn=ffn,
            tokens=tokens,
            seed=seed,
        )
    except UsageError as exc:
        raise _usage(str(exc)) from None


def _cases(suite, dtype, activation, mode, keyword) -> list[Case]:
    from .runner import UsageError

    try:
        return suite.cases(dtype, activation, mode, keyword)
    except UsageError as exc:
        raise _usage(str(exc)) from None


def matrix_options(fn: Callable) -> Callable:
    """Options that choose the device, the cases and their sizes (diff and mutants)."""
    options = [
        click.option(
            "--device",
            type=click.Choice(["auto", "cuda", "cpu"]),
            default="auto",
            show_default=True,
            help="auto: the GPU if there is one, else the CPU through Triton's interpreter.",
        ),
        click.option(
            "--mode",
            type=click.Choice(list(MODES)),
            multiple=True,
            help="Only these output-into-main-grad modes (repeatable).",
        ),
        click.option(
            "--dtype",
            type=click.Choice(list(DTYPES)),
            multiple=True,
            help="Dtypes to run (repeatable; the first is the default for the contract part). "
            "Default: fp32, fp16 on CPU; bf16, fp16, fp32 on CUDA.",
        ),
        click.option(
            "--activation",
            type=click.Choice(list(ACTIVATION_NAMES)),
            multiple=True,
            help="Activations to run (repeatable).",
        ),
        click.option(
            "-k",
            "keyword",
            metavar="EXPR",
            help="Select cases whose id matches EXPR: substrings combined with and/or/not, "
            "e.g. -k 'mode=overwrite and delay=1'. A full case id runs that case.",
        ),
        click.option("--experts", type=int, help="Experts G [CPU 4, CUDA 8]."),
        click.option("--hidden", type=int, help="Hidden size [CPU 16, CUDA 256]."),
        click.option("--ffn", type=int, help="FFN size per expert [CPU 12, CUDA 320]."),
        click.option("--tokens", type=int, help="Tokens T per microbatch [CPU 20, CUDA 1000]."),
        click.option("--seed", type=int, default=0, show_default=True, help="Data seed."),
        click.option(
            "--list", "list_only", is_flag=True, help="Print the selected case ids and exit."
        ),
        click.option(
            "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option(
    "--fused",
    default="triton",
    show_default=True,
    metavar="SPEC",
    help="The fused side: triton, torch-grouped-mm, or package.module:factory (a callable "
    "taking refimpl.GroupedMLP's keyword arguments).",
)
@click.option(
    "--inject",
    metavar="FAULT",
    help="Run the triton backend with a fault injected (see `gmlp-check faults`).",
)
@matrix_options
@click.option(
    "--junit-xml",
    type=click.Path(dir_okay=False),
    help="Also write the results as JUnit XML to this file.",
)
def diff(
    fused: str,
    inject: str | None,
    device: str,
    mode: Sequence[str],
    dtype: Sequence[str],
    activation: Sequence[str],
    keyword: str | None,
    experts: int | None,
    hidden: int | None,
    ffn: int | None,
    tokens: int | None,
    seed: int,
    list_only: bool,
    fmt: str,
    junit_xml: str | None,
) -> None:
    """Run the scenario matrix of refimpl against a fused backend and compare everything.

    Both sides get identical weights, inputs, output gradients and main_grad contents (NaN
    sentinels where every element must be written, random values where it must accumulate,
    guard bands around every buffer); outputs, gradients, main_grad at every stage, the
    bookkeeping flags, the dummy gradients and the DDP hook are compared. Exit 0 when every
    case passes, 1 on any mismatch, 2 on a usage or environment error.

    \b
    Examples:
      gmlp-check diff --device cpu --dtype fp32 -k 'mode=overwrite-fsdp'
      gmlp-check diff --fused torch-grouped-mm --device cuda --junit-xml diff.xml
      gmlp-check diff --fused mypkg.mlp:make_grouped_mlp --format json > diff.json
    """
    from . import report
    from .runner import run_cases

    suite = _suite(fused, inject, device, experts, hidden, ffn, tokens, seed)
    cases = _cases(suite, dtype, activation, mode, keyword)
    if list_only:
        _print_list(cases, fmt)
        return
    if junit_xml and not os.path.isdir(os.path.dirname(os.path.abspath(junit_xml))):
        raise _usage(f"--junit-xml {junit_xml!r}: the directory does not exist")
    settings = suite.settings
    err = Console(stderr=True)
    with _progress(err) as progress:
        task = progress.add_task("diff", total=len(cases), case="")

        def advance(result) -> None:
            progress.update(task, advance=1, case=result.case.id)

        results = run_cases(cases, suite.sizes, suite.device, suite.factory, advance)

    if junit_xml:
        with open(junit_xml, "wb") as f:
            f.write(report.junit_xml(results, settings))
    if fmt == "json":
        click.echo(json.dumps(report.diff_json(results, settings), indent=2))
    else:
        out = _stdout_console()
        report.print_table(out, results, settings)
        report.print_failures(out, results, settings)
        out.print(report.summary_line(results, settings), highlight=False)
    sys.exit(0 if all(r.passed for r in results) else 1)


def _print_list(cases: Sequence[Case], fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps([{"id": c.id, "config": c.config()} for c in cases], indent=2))
    else:
        for c in cases:
            click.echo(c.id)


def _fault_table() -> dict[str, object]:
    from fused.faults import FAULTS

    return FAULTS


@main.command()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
def faults(fmt: str) -> None:
    """List the faults the triton backend can inject (one per bug class of CONTRACT.md).

    \b
    Example:
      gmlp-check faults
      gmlp-check diff --inject dummy-not-zeroed -k 'zero=1'
    """
    table_data = _fault_table()
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {"name": f.name, "bug_class": f.bug_class, "description": f.description}
                    for f in table_data.values()
                ],
                indent=2,
            )
        )
        return
    table = Table(
        title="faults injectable with gmlp-check diff --inject NAME", title_justify="left"
    )
    table.add_column("name", no_wrap=True)
    table.add_column("bug class (CONTRACT.md)")
    table.add_column("what the fused path does instead")
    for f in table_data.values():
        table.add_row(f.name, f.bug_class, f.description)
    _stdout_console().print(table)


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
@matrix_options
def mutants(
    fault_names: Sequence[str],
    stop_early: bool | None,
    device: str,
    mode: Sequence[str],
    dtype: Sequence[str],
    activation: Sequence[str],
    keyword: str | None,
    experts: int | None,
    hidden: int | None,
    ffn: int | None,
    tokens: int | None,
    seed: int,
    list_only: bool,
    fmt: str,
) -> None:
    """Prove the checker: run the matrix on the triton backend once without a fault and once
    per injected fault, and report which observables caught each fault.

    Exit 0 only if the un-faulted run is clean and every fault is caught, 1 otherwise, 2 on a
    usage or environment error.

    \b
    Examples:
      gmlp-check mutants                           # all faults, default matrix
      gmlp-check mutants --fault empty-expert-skipped --full-matrix
      gmlp-check mutants --device cuda --format json > mutants.json
    """
    from .mutants import mutants_json, run_mutants
    from .runner import fault_names as known_faults

    suite = _suite("triton", None, device, experts, hidden, ffn, tokens, seed)
    cases = _cases(suite, dtype, activation, mode, keyword)
    if list_only:
        _print_list(cases, fmt)
        return
    names = known_faults()
    unknown = [f for f in fault_names if f not in names]
    if unknown:
        raise _usage(f"--fault: expected names from {', '.join(names)}, got {unknown}")
    if stop_early is None:
        stop_early = suite.device.type == "cpu"
    selected = {
        name: f.bug_class for name, f in _fault_table().items() if name in (fault_names or names)
    }

    err = Console(stderr=True)
    with _progress(err) as progress:
        tasks = {None: progress.add_task("un-faulted", total=len(cases), case="")}
        for name in selected:
            tasks[name] = progress.add_task(name, total=len(cases), case="")

        def advance(fault, result) -> None:
            progress.update(tasks[fault], advance=1, case=result.case.id)
            if fault is not None and stop_early and not result.passed:
                progress.update(tasks[fault], completed=len(cases))

        run = run_mutants(
            selected, cases, suite.sizes, suite.device, stop_early=stop_early, on_result=advance
        )

    if fmt == "json":
        click.echo(json.dumps(mutants_json(run, suite.device.type, suite.sizes), indent=2))
    else:
        _print_mutants(run, suite.device.type, suite.sizes)
    sys.exit(0 if run.passed else 1)


def _print_mutants(run, device: str, sizes: Sizes) -> None:
    from .report import Settings

    out = _stdout_console()
    scope = (
        "each fault stopped at its first failing case (--stop-early)"
        if run.stop_early
        else "every case for every fault (--full-matrix)"
    )
    table = Table(
        title=f"gmlp-check mutants: triton on {device}, {run.matrix_cases} cases; {scope}",
        title_justify="left",
    )
    table.add_column("fault", no_wrap=True)
    table.add_column("caught")
    table.add_column("cases failed / run", justify="right")
    table.add_column("caught by (observable: failing cases)")
    table.add_column("first failing case", overflow="fold")
    for f in run.faults:
        table.add_row(
            f.name,
            "[green]yes[/green]" if f.caught else "[bold red]NO[/bold red]",
            f"{f.cases_failed} / {f.cases_run}",
            ", ".join(f"{o}: {n}" for o, n in f.observables.most_common()) or "-",
            f.first_case or "-",
        )
    out.print(table)
    clean_failures = [r for r in run.clean if not r.passed]
    settings = Settings(fused="triton", device=device, sizes=sizes)
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
                f"    rerun: {settings.rerun_command(r.case.id)}", markup=False, soft_wrap=True
            )
    else:
        out.print(f"un-faulted run: {len(run.clean)} of {len(run.clean)} cases pass")
    caught = sum(f.caught for f in run.faults)
    verdict = "[green]PASS[/green]" if run.passed else "[bold red]FAIL[/bold red]"
    out.print(f"{verdict}: {caught} of {len(run.faults)} faults caught")


from gmlp_check.bench.cli import bench  # noqa: E402

main.add_command(bench)


if __name__ == "__main__":
    main()
