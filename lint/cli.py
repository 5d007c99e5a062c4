"""The gmlp-lint command line: ``gmlp-lint [check] [PATH ...]`` and ``gmlp-lint rule CODE``.

Conventions follow ruff: exit 0 when clean, 1 when findings remain (also after ``--fix``,
and when ``--diff`` shows changes), 2 for usage or configuration errors and for paths that
cannot be read, parsed or (with ``--fix``) written; a reader that closes the pipe early does
not change the status (standard_streams.py). Those are reported on stderr and in the
json, github and sarif formats, and the other files are still linted.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from . import engine
from .cache import ENV_DIR as ENV_CACHE_DIR
from .cache import Cache, default_directory
from .config import (
    NOTHING_SELECTED,
    ConfigError,
    Resolver,
    Selection,
    enabled_codes,
    expand_codes,
    is_excluded,
    only_compiled,
)
from .discovery import collect
from .lines import split as split_lines
from .model import FileError, FileResult
from .progress import Progress
from .registry import CODES, all_rules, rule
from .reporters import Summary, render
from .source import SourceError, describe
from .standard_streams import prepare_standard_streams
from .writing import write_in_place

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C

EPILOG = """\b
Examples:
  gmlp-lint .                            lint every Python file below here
  gmlp-lint --fix ops/fused_mlp.py       apply the safe fixes
  gmlp-lint --diff --unsafe-fixes ops/   show all fixes, write nothing
  gmlp-lint --select GMLP001,GMLP002 --format json src > findings.json
  gmlp-lint - --stdin-filename ops/mlp.py < ops/mlp.py
  gmlp-lint rule GMLP001                 explain a rule, with examples

\b
Configuration: [tool.gmlp-lint] in the nearest pyproject.toml
(select, ignore, per-file-ignores, exclude, analyse-tests: test files a
walk finds are only compiled unless true). Suppress one finding with
`# gmlp: ignore[GMLP001] reason` on its line or the line above.
Exit status: 0 clean, 1 findings remain, 2 usage error or a file that
cannot be read, parsed or written, 130 interrupted; a reader that
closes the pipe early (| head) changes none of these."""


class _Cli(click.Group):
    """``gmlp-lint PATH ...`` means ``gmlp-lint check PATH ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands:
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """gmlp-lint: find main_grad gating bugs in fused grouped-MLP code."""


def _codes(ctx, param, values) -> frozenset[str] | None:
    if not values:
        return None
    selectors = [part for value in values for part in value.split(",")]
    try:
        codes = expand_codes(selectors, f"--{param.name}")
    except ConfigError as error:
        raise click.BadParameter(str(error), ctx=ctx, param=param) from error
    if not codes and param.name == "select":  # selecting nothing would pass every file
        raise click.BadParameter(NOTHING_SELECTED, ctx=ctx, param=param)
    return codes


def _cache_dir(ctx, param, value: str | None) -> Path | None:
    # ``--cache-dir ""`` (an unset variable) was Path(""), the current directory: the cache
    # landed inside the linted tree, which it must stay out of (cache.py).
    if value == "":
        raise click.BadParameter(f"expected a directory name, got {value!r}", ctx, param)
    return None if value is None else Path(value)


def _stdin_filename(ctx, param, value: str | None) -> str | None:
    # ``--stdin-filename ""`` read as "no name given": stdin was left unread and the whole
    # current directory linted instead, exit 0 on a clean tree.
    if value == "":
        raise click.BadParameter("expected a file name, got ''", ctx, param)
    return value


@cli.command("check", epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
# Paths are looked at by discovery, which reports each problem and lints the rest (click's
# own readability check would end the whole run at the first unreadable file).
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@click.option("--fix", is_flag=True, help="Apply safe fixes (unsafe ones too with --unsafe-fixes).")
@click.option(
    "--unsafe-fixes", is_flag=True, help="Also apply (with --fix/--diff) or count unsafe fixes."
)
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "sarif", "github"]),
    default="text",
    show_default=True,
    help="How findings are printed.",
)
@click.option(
    "--select",
    multiple=True,
    callback=_codes,
    metavar="CODES",
    help="Only these rules (or prefixes).",
)
@click.option(
    "--ignore",
    multiple=True,
    callback=_codes,
    metavar="CODES",
    help="Skip these rules (or prefixes).",
)
@click.option(
    "--stdin-filename",
    metavar="PATH",
    callback=_stdin_filename,
    help="Read the source from stdin and report (and configure) it as PATH (no other paths).",
)
@click.option(
    "--force-exclude", is_flag=True, help="Apply excludes to files named on the command line too."
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: one per CPU)."
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr (default: on a terminal, once a run takes 2 s).",
)
@click.option(
    "--no-cache", is_flag=True, help="Lint every file, neither reading nor writing the cache."
)
@click.option(
    "--cache-dir",
    type=click.Path(path_type=str),  # not checked here: an unusable cache is no cache
    callback=_cache_dir,
    metavar="DIR",
    help=f"Where results are cached (default: ${ENV_CACHE_DIR}, else ~/.cache/gmlp-lint).",
)
@click.version_option(package_name="gmlp-check", prog_name="gmlp-lint")
def check(
    paths,
    fix,
    unsafe_fixes,
    diff,
    output_format,
    select,
    ignore,
    stdin_filename,
    force_exclude,
    jobs,
    progress,
    no_cache,
    cache_dir,
) -> None:
    """Lint Python files for breaches of the main_grad contract.

    PATH may be files or directories (default: the current directory); `-` reads stdin.
    `gmlp-lint rule --all` documents every rule."""
    selection = Selection(select, ignore or frozenset())
    mode = engine.Mode(fix=fix or diff, unsafe_fixes=unsafe_fixes)
    options = _Options(output_format, unsafe_fixes, diff, fix)
    options.cache_dir = None if no_cache or mode.fix else (cache_dir or default_directory())
    if "-" in paths and len(paths) > 1:
        raise click.UsageError("`-` (stdin) cannot be combined with other paths")
    if stdin_filename and paths != ("-",) and paths:
        # Refused, not guessed. The paths were linted (and with --fix written) while stdin
        # went unread; ruff reads stdin instead and warns "Ignoring file ... in favor of
        # standard input", but a warning is easily missed and the exit status would then
        # speak for stdin alone while the user believes the files were checked. Refusing
        # loses nothing (stdin unread, nothing written) and matches `- PATH` above.
        raise click.UsageError(
            f"--stdin-filename: names the source read from stdin, so it takes `-` or no "
            f"path, got {paths[0]!r}; lint the paths in a run of their own"
        )
    try:
        if paths == ("-",) or (not paths and stdin_filename):
            status = _check_stdin(stdin_filename, selection, mode, options, force_exclude)
        else:
            status = _check_paths(
                list(paths) or ["."], selection, mode, options, force_exclude, jobs, progress
            )
    except ConfigError as error:
        click.echo(f"error: {error}", err=True)
        status = EXIT_ERROR
    except OSError as error:  # a configuration file or directory that cannot be looked at
        where = f"{error.filename}: " if error.filename else ""
        click.echo(f"error: {where}{describe(error)}", err=True)
        status = EXIT_ERROR
    except KeyboardInterrupt:
        # Fixes are written only after every file is checked, each one whole (signals wait
        # for the write, lint/writing.py): an interrupted run leaves every file as it was or
        # wholly fixed.
        click.echo("error: interrupted", err=True)
        _exit_at_once(EXIT_INTERRUPTED)
    sys.exit(status)


def _exit_at_once(status: int) -> None:
    """End the process now. The analysis of the interrupted file may still be running on its
    thread, inside libcst's parser, where the interpreter's shutdown would abort (SIGABRT)
    or wait for it; nothing is left to write, so the shutdown is skipped."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


# The rules a test file found in a walk gets (``test_scope``): none, so it is only compiled.
NO_CODES: frozenset[str] = frozenset()


class _Options:
    def __init__(self, output_format: str, unsafe_fixes: bool, diff: bool, fix: bool) -> None:
        self.output_format = output_format
        self.unsafe_fixes = unsafe_fixes
        self.diff = diff
        self.fix = fix and not diff
        self.cache_dir: Path | None = None  # None: no cache (asked for, or a fixing run)


def _check_paths(paths, selection, mode, options, force_exclude, workers, progress) -> int:
    files, errors = collect(paths, Resolver(), force_exclude)
    jobs = [
        engine.Job(path, NO_CODES if only else enabled_codes(Path(path), config, selection))
        for path, config, only in files
    ]
    cache = Cache(options.cache_dir) if options.cache_dir is not None else None
    with Progress(len(jobs), progress) as advance:
        results = engine.run(jobs, mode, workers, on_result=advance, cache=cache)
    errors.extend(r.error for r in results if r.error)
    changed = [r for r in results if r.fixed_source is not None]
    fixed = unwritten = 0
    if options.diff:
        for result in changed:
            click.echo(_diff(result), nl=False)
        fixed = sum(r.fixed_count for r in changed)
    elif options.fix:
        for result in changed:
            try:
                write_in_place(result.path, result.fixed_source, result.encoding, result.source)
                fixed += result.fixed_count
            except SourceError as error:
                errors.append(FileError(result.path, error.message))
                result.findings = result.unfixed_findings  # the file on disk still has them
                unwritten += 1
    findings = [f for r in results for f in r.findings]
    _print_errors(errors)
    summary = Summary(
        options.unsafe_fixes, fixed, options.fix, options.diff, len(errors) - unwritten, unwritten
    )
    _report(findings, errors, options, summary, to_stderr=options.diff)
    if errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if findings or (options.diff and changed) else EXIT_CLEAN


def _check_stdin(stdin_filename, selection, mode, options, force_exclude) -> int:
    resolver = Resolver()
    shown = stdin_filename or "-"
    path = Path(stdin_filename) if stdin_filename else Path.cwd() / "-"
    config = resolver.for_path(path) if stdin_filename else resolver.for_directory(Path.cwd())
    # Bytes, decoded as Python would decode the file (PEP 263), and echoed back unchanged.
    # Started with descriptor 0 closed (a shell's `<&-`), Python has no sys.stdin at all.
    data = sys.stdin.buffer.read() if sys.stdin is not None else None
    if force_exclude and stdin_filename and is_excluded(path, config):
        if options.fix and data is not None:
            _echo_bytes(data)
        return EXIT_CLEAN
    if data is None:
        result = FileResult(shown, error=FileError(shown, "cannot read: stdin is closed"))
    else:
        compiled_only = force_exclude and stdin_filename and only_compiled(path, config)
        codes = NO_CODES if compiled_only else enabled_codes(path, config, selection)
        job = engine.Job(shown, codes, data)
        result = engine.process(job, mode)
    errors = [result.error] if result.error else []
    changed = result.fixed_source is not None
    if options.diff:
        if changed:
            click.echo(_diff(result), nl=False)
    elif options.fix and data is not None:
        # An editor piping through us must not lose code: unfixed input comes back as it was.
        _echo_bytes(result.fixed_source.encode(result.encoding) if changed else data)
    _print_errors(errors)
    fixed = result.fixed_count if changed else 0
    summary = Summary(options.unsafe_fixes, fixed, options.fix, options.diff, len(errors))
    _report(result.findings, errors, options, summary, to_stderr=options.diff or options.fix)
    if errors:
        return EXIT_ERROR
    if result.findings or (options.diff and changed):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _echo_bytes(data: bytes) -> None:
    sys.stdout.flush()
    stream = sys.stdout.buffer
    stream.write(data)
    stream.flush()


def _print_errors(errors: list[FileError]) -> None:
    for error in errors:
        click.echo(f"error: {error.location}: {error.message}", err=True)


def _report(findings, errors, options: _Options, summary: Summary, to_stderr: bool) -> None:
    text = render(options.output_format, findings, errors, summary)
    click.echo(text, nl=False, err=to_stderr)


def _diff(result: FileResult) -> str:
    import difflib

    lines = difflib.unified_diff(
        split_lines(result.source),
        split_lines(result.fixed_source),
        fromfile=result.path,
        tofile=result.path,
    )
    return "".join(_diff_line(line) for line in lines)


def _diff_line(line: str) -> str:
    """A diff line ending in a newline; the last line of a file that has none gets the
    marker patch and git apply expect (``\\ No newline at end of file``), without which a
    removed and an added last line read as the same text."""
    if line.endswith("\n"):
        return line
    if line.endswith("\r"):
        return line + "\n"
    return line + "\n\\ No newline at end of file\n"


@cli.command("rule", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's documentation.")
def rule_command(code: str | None, show_all: bool) -> None:
    """Print a rule's documentation with a bad and a good example.

    \b
    Example:
      gmlp-lint rule GMLP001"""
    if show_all:
        click.echo("\n".join(r.documentation() for r in all_rules()), nl=False)
        return
    if code is None:
        raise click.UsageError("give a rule code such as GMLP001, or --all")
    normalized = code.strip().upper()
    if normalized not in CODES:
        raise click.BadParameter(
            f"unknown rule {code!r}; expected one of {', '.join(CODES)}", param_hint="CODE"
        )
    click.echo(rule(normalized).documentation(), nl=False)


def main(argv: list[str] | None = None) -> None:
    prepare_standard_streams()  # `gmlp-lint . | head -1`: the run ends as it would have
    cli.main(args=argv, prog_name="gmlp-lint")
