"""Linting and fixing source text, one file or many.

This module is the one owner of parallelism: when many files need parsing they go to a
process pool here, and nowhere else (the pre-commit hooks run with ``require_serial``).
Files without ``main_grad`` (and without a suppression comment) are never parsed, and the
parser (libcst) is imported only when some file needs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .fixes import apply_fixes
from .model import FileResult, Finding
from .suppressions import MARKER
from .suppressions import apply as apply_suppressions
from .suppressions import parse as parse_suppressions

TRIGGER = "main_grad"
CHECK_CODES = frozenset({"GMLP001", "GMLP002", "GMLP003", "GMLP004"})
MAX_FIX_PASSES = 10
# Below this many files to parse, starting worker processes costs more than it saves.
PARALLEL_THRESHOLD = 24


class ParseFailure(Exception):
    """The file is not valid Python (as far as libcst can tell)."""


@dataclass(frozen=True)
class Job:
    path: str
    enabled: frozenset[str]
    source: str | None = None  # given for stdin; read from ``path`` otherwise


@dataclass(frozen=True)
class Mode:
    fix: bool = False
    unsafe_fixes: bool = False


def needs_analysis(source: str) -> bool:
    return TRIGGER in source or MARKER in source


def lint_source(source: str, path: str, enabled: frozenset[str]) -> list[Finding]:
    findings: list[Finding] = []
    if TRIGGER in source and enabled & CHECK_CODES:
        findings = _run_checks(source, path, enabled)
    suppressions = parse_suppressions(source)
    if suppressions:
        findings = apply_suppressions(findings, suppressions, path, enabled)
    return sorted(findings, key=lambda f: (f.line, f.column, f.code))


def _run_checks(source: str, path: str, enabled: frozenset[str]) -> list[Finding]:
    import libcst

    from .checks import run_checks

    try:
        return run_checks(source, path, enabled)
    except libcst.ParserSyntaxError as error:
        raise ParseFailure(_describe_syntax_error(error)) from error
    except RecursionError as error:
        raise ParseFailure("too deeply nested to analyse") from error


def _describe_syntax_error(error) -> str:
    first = str(error).strip().splitlines()[0]
    return f"cannot parse: {first}"


def fix_source(
    source: str, path: str, enabled: frozenset[str], unsafe: bool
) -> tuple[str, int, list[Finding]]:
    """Apply fixes until none applies (or MAX_FIX_PASSES). Returns the new text, the number
    of fixes applied and the findings that remain. Raises ParseFailure if the input does
    not parse; a pass whose output would not parse is dropped (and reported as a failure)."""
    current = source
    applied = 0
    findings = lint_source(current, path, enabled)
    for _ in range(MAX_FIX_PASSES):
        candidate, count = apply_fixes(current, findings, unsafe)
        if count == 0:
            break
        try:
            _check_parses(candidate)
            next_findings = lint_source(candidate, path, enabled)
        except ParseFailure as error:
            raise ParseFailure(f"a fix produced invalid code, nothing written ({error})") from error
        current, findings = candidate, next_findings
        applied += count
    return current, applied, findings


def _check_parses(source: str) -> None:
    import libcst

    try:
        libcst.parse_module(source)
    except libcst.ParserSyntaxError as error:
        raise ParseFailure(_describe_syntax_error(error)) from error


def read_source(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8")


def process(job: Job, mode: Mode) -> FileResult:
    """Lint (and with ``mode.fix`` fix, in memory) one file."""
    result = FileResult(job.path)
    try:
        source = job.source if job.source is not None else read_source(job.path)
    except OSError as error:
        result.error = f"cannot read: {error.strerror or error}"
        return result
    except UnicodeDecodeError as error:
        result.error = f"cannot read: not UTF-8 ({error.reason} at byte {error.start})"
        return result
    result.source = source
    try:
        if mode.fix:
            fixed, count, findings = fix_source(source, job.path, job.enabled, mode.unsafe_fixes)
            if fixed != source:
                result.fixed_source = fixed
                result.fixed_count = count
        else:
            findings = lint_source(source, job.path, job.enabled)
    except ParseFailure as error:
        result.error = str(error)
        return result
    result.findings = findings
    return result


def _process_chunk(jobs: list[Job], mode: Mode) -> list[FileResult]:
    return [process(job, mode) for job in jobs]


def _quick_result(job: Job) -> FileResult | None:
    """A clean result for a file that cannot hold a finding, without decoding or parsing it;
    None when the file has to be looked at properly."""
    if job.source is not None:
        return None
    try:
        with open(job.path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None  # ``process`` reports it
    if TRIGGER.encode() in data or MARKER.encode() in data:
        return None
    return FileResult(job.path)


def run(
    jobs: Sequence[Job],
    mode: Mode,
    workers: int | None = None,
    on_result: Callable[[FileResult], None] | None = None,
) -> list[FileResult]:
    """Results in the order of ``jobs``; files that need parsing go to a process pool when
    there are enough of them and ``workers`` allows it."""
    results: list[FileResult | None] = [None] * len(jobs)
    pending: list[int] = []
    for i, job in enumerate(jobs):
        quick = _quick_result(job)
        if quick is None:
            pending.append(i)
        else:
            results[i] = quick
            if on_result is not None:
                on_result(quick)
    workers = workers or available_cpus()
    if workers > 1 and len(pending) >= PARALLEL_THRESHOLD:
        _run_pool(jobs, pending, mode, workers, results, on_result)
    else:
        for i in pending:
            results[i] = process(jobs[i], mode)
            if on_result is not None:
                on_result(results[i])
    return results  # type: ignore[return-value]


def available_cpus() -> int:
    """CPUs this process may run on (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _run_pool(jobs, pending, mode, workers, results, on_result) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    size = max(1, len(pending) // (workers * 4))
    chunks = [pending[i : i + size] for i in range(0, len(pending), size)]
    with ProcessPoolExecutor(max_workers=min(workers, len(chunks))) as pool:
        futures = {
            pool.submit(_process_chunk, [jobs[i] for i in chunk], mode): chunk for chunk in chunks
        }
        for future in as_completed(futures):
            for i, result in zip(futures[future], future.result()):
                results[i] = result
                if on_result is not None:
                    on_result(result)
