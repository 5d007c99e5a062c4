"""``gmlp-check bench --from FILE``: print or draw a document an earlier run wrote.

A run stopped part-way leaves a document with "complete": false holding the workloads it
finished; this shows those."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from . import report, saved_fields
from .phases import PHASES

# The top-level fields the table and the plot read; "complete" is optional (absent: complete).
REQUIRED_FIELDS = (
    "comparable",
    "environment",
    "settings",
    "shapes",
    "results",
    "ratios",
    "targets",
    "wall_s",
)


def _not_json(name: str) -> None:
    # Python reads NaN and Infinity, which JSON has not and a bench run never writes
    # (report.json_bytes refuses them): --format json could not print them back.
    raise ValueError(f"{name} is not a JSON value")


def load(path: Path | str) -> dict:
    """The document at ``path``; click.UsageError (exit 2) naming --from otherwise."""
    if not str(path):  # ``--from ""``: not Path(""), the current directory ("'.': Is a directory")
        raise click.UsageError("--from: expected a file name, got ''")
    path = Path(path)
    try:
        doc = json.loads(path.read_text(), parse_constant=_not_json)
    except OSError as error:
        raise click.UsageError(f"--from {str(path)!r}: cannot read: {error.strerror}") from None
    except ValueError as error:  # not UTF-8, not JSON, or NaN / Infinity
        raise click.UsageError(f"--from {str(path)!r}: not a JSON document ({error})") from None
    except RecursionError:  # json recurses on nested arrays and objects
        raise click.UsageError(f"--from {str(path)!r}: JSON nested too deeply to read") from None
    if not isinstance(doc, dict) or doc.get("schema") != report.SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise click.UsageError(
            f"--from {str(path)!r}: expected a {report.SCHEMA} document, got {got!r}"
        )
    missing = [field for field in REQUIRED_FIELDS if field not in doc]
    if missing:
        raise click.UsageError(
            f"--from {str(path)!r}: not a whole {report.SCHEMA} document, "
            f"missing {', '.join(map(repr, missing))}"
        )
    problem = saved_fields.top_level_problem(doc)
    if problem is None:
        doc = with_layouts(doc)
        problem = saved_fields.rows_problem(doc)
    if problem is not None:
        raise click.UsageError(f"--from {str(path)!r}: not a {report.SCHEMA} document: {problem}")
    return doc


def with_layouts(doc: dict) -> dict:
    """The document with a weight layout on every result, ratio and target row: documents
    written before one run could time both layouts name theirs once, in the settings."""
    layout = doc["settings"].get("weights", "single") if isinstance(doc["settings"], dict) else None
    for field in ("results", "ratios", "targets"):
        for row in doc[field]:
            if isinstance(row, dict):
                row.setdefault("weights", layout)
    return doc


def show(path: Path | str, plot: str | None, output_format: str) -> None:
    doc = load(path)
    if plot is not None:
        from gmlp_check.files import OutputError, write_output

        from .plot import render_png

        if not any(row["phase"] in PHASES for row in doc["results"]):
            raise click.UsageError(f"--from {str(path)!r}: --plot: no result of a phase to draw")
        try:
            write_output("--plot", plot, render_png(doc))
        except OutputError as error:
            raise click.UsageError(str(error)) from None
        click.echo(f"wrote {plot}", err=True)
    if output_format == "json":
        report.print_json(doc)
    elif plot is None:
        report.print_tables(doc, Console(width=180))
