"""What ``diff`` writes besides the report on stdout: the report files (``--junit-xml``), the
reproductions of failing cases (``--write-repro``, ``--repro-embed``) and the source lines a
diagnosis points at (``--point-source``). ``--repro-embed`` is checked before any case runs;
the rest is written after the report is printed, so a failure there loses nothing else: one
line and exit 2."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .case_runs import EXIT_USAGE
from .files import OutputError, write_output


def write_reports(files: dict[str, tuple[str, bytes]]) -> None:
    """Write each report file (option -> (path, content)), after the report itself was
    printed: a failure now loses nothing else and is one line and exit 2."""
    for option, (path, data) in files.items():
        try:
            write_output(option, path, data)
        except OutputError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(EXIT_USAGE)


def point_sources(results, checker) -> None:
    """--point-source: each diagnosed failing case gets the gmlp-lint findings of its
    diagnosed class in the code the backend ran (gmlp_check.source_pointing)."""
    from .source_pointing import point_case

    for result in results:
        found = result.diagnosis
        if result.status == "failed" and found is not None and found.classes:
            result.source = point_case(
                checker.backend, result.case, checker.sizes, checker.device, found.classes
            )


def check_repro_embed(package: str, write_repro: str | None, spec: str | None) -> None:
    """Before any case runs: --repro-embed needs --write-repro and a package holding the
    factory whose modules can be embedded."""
    from . import backends, repro, repro_embed

    if not write_repro:
        raise click.UsageError("--repro-embed: needs --write-repro DIR")
    try:
        repro.factory_source(backends.resolve(spec or "triton"), package)
    except (repro_embed.EmbedError, backends.BackendError) as exc:
        raise click.UsageError(f"--repro-embed {package}: {exc}") from None


def write_repros(directory: Path, results, checker, embed: str | None) -> None:
    """--write-repro: each failing case as a standalone reproduction in ``directory``
    (gmlp_check.repro), its path on stderr."""
    from . import repro

    for result in results:
        if result.status == "failed":
            try:
                path = repro.write(
                    directory,
                    result,
                    checker.backend.spec,
                    checker.sizes,
                    checker.device,
                    checker.precision(result.case),
                    embed,
                )
            except OSError as exc:  # after the report: one line, exit 2, as write_reports
                reason = exc.strerror or type(exc).__name__
                click.echo(f"Error: --write-repro {str(directory)!r}: {reason}", err=True)
                sys.exit(EXIT_USAGE)
            click.echo(_naming(f"reproduction of {result.case.id}: ", path), err=True)
            if hint := repro.size_hint(path):
                click.echo(f"  {hint}", err=True)


def _naming(text: str, path: Path) -> bytes:
    """``text`` then ``path`` as a line's bytes for stderr: the path as it is on disk.

    A directory name that is not UTF-8 (byte 0xff in it) reaches Python as surrogate escapes
    (PEP 383), which stderr's backslashreplace printed as the six characters of an escape:
    a path that names no file, on the line the user copies to run the reproduction. The
    name's own bytes are written instead (os.fsencode), as ``ls`` prints them."""
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace") + os.fsencode(path)
