"""Linting and fixing source text, one file or many.

Every file is compiled by the running Python to check that it is valid (``parsing``).
Files that mention one of the contract's identifiers (``triggers.TRIGGERS``: ``main_grad`` and the
names of the dummy-gradient and delayed-wgrad protocol, which a helper module may use
without ever spelling main_grad; or a hook registration next to a call of a reduction) are
then parsed with libcst and analysed by the rules; the others cost only the compile (a
fraction, and libcst is never imported for them).
Suppression comments are read from any file that has one.

This module is the one owner of parallelism: when there is enough work the files go to a
process pool here (``pool.Workers``), and nowhere else (the pre-commit hooks run with
``require_serial``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace

from . import plain_spellings, registry
from .cache import Cache
from .class_facts import ClassFact, class_facts
from .fixes import apply_fixes
from .model import FileError, FileResult, Finding
from .parsing import (
    analysis_error,
    kept_from_collector,
    no_collections,
    run_deep,
    syntax_error,
    trusted_parse,
)
from .pool import Workers, available_cpus, chunks_by_work, gather, run_alone
from .project import NO_RUN_FACTS, RunFacts, run_facts
from .slot_facts import SlotFact, slot_facts
from .source import SourceError, check_writable, decode, read_bytes
from .suppressions import apply as apply_suppressions
from .suppressions import parse as parse_suppressions
from .triggers import may_be_analysed, mentions_contract
from .workload import EVERY_CONTRACT, PARALLEL_MIN_WORK, estimate_work, files_ahead

MAX_FIX_PASSES = 10
# Chunks per worker: enough that the last ones are small (no worker idles long at the end),
# few enough that handing them out costs nothing measurable.
CHUNKS_PER_WORKER = 8


@dataclass(frozen=True)
class Job:
    """One file to lint and all its findings depend on besides the linter itself: every
    field is part of its cache key (``cache.Cache.key``)."""

    path: str
    enabled: frozenset[str]
    data: bytes | None = None  # the file's bytes (stdin's, or read by ``run``); else read here
    # Functions and layer classes of the run's files known by what they do
    # (``project.run_facts``).
    run_facts: RunFacts = NO_RUN_FACTS
    # Delayed-wgrad classes of the other files (``class_facts``), given only to a file that
    # subclasses one of them: such a file is analysed even when it names no trigger.
    class_facts: tuple[ClassFact, ...] = ()
    # Classes of this file that the run plugs into a slot whose backward_dw it calls, with
    # no backward_dw (``slot_facts``): such a file is analysed even when it names no trigger.
    slot_facts: tuple[SlotFact, ...] = ()


@dataclass(frozen=True)
class Mode:
    fix: bool = False
    unsafe_fixes: bool = False


def lint_source(
    source: str,
    path: str,
    enabled: frozenset[str],
    facts: RunFacts = NO_RUN_FACTS,
    classes: tuple[ClassFact, ...] = (),
    slots: tuple[SlotFact, ...] = (),
) -> list[Finding]:
    """The findings in ``source``, sorted; ``facts`` are what the run knows of the
    functions and layer classes of its files (``project.RunFacts``), ``classes`` the
    delayed-wgrad classes of those files that this one subclasses, ``slots`` its classes
    the run plugs into a slot whose backward_dw it calls. Raises SourceError when it is not
    valid Python."""
    checked = enabled
    mentions = mentions_contract(source, facts)
    if not mentions and (classes or slots):  # only the rules reading them need it
        readers = registry.codes_reading_subclasses() if classes else frozenset()
        if slots:
            readers = readers | registry.codes_reading_slots()
        checked = enabled & readers
    analysed = (mentions or classes or slots) and checked & registry.codes_in_scope(registry.MODULE)
    findings: list[Finding] = []
    if analysed:
        with no_collections():
            error = analysis_error(source, path)
            if error is not None:
                raise error
            findings = run_deep(lambda: _run_checks(source, path, checked, facts, classes, slots))
    else:
        error = syntax_error(source, path)
        if error is not None:
            raise error
    suppressions = parse_suppressions(source)
    if suppressions:
        findings = apply_suppressions(findings, suppressions, path, enabled)
    return sorted(findings, key=lambda f: (f.line, f.column, f.code))


def _run_checks(source: str, path: str, enabled, facts, classes=(), slots=()) -> list[Finding]:
    """Parse ``source`` and run every enabled rule's check on it."""
    import libcst

    from .analysis import patterns
    from .analysis.collector import Collector
    from .analysis.module import ModuleContext

    # The rules read the plain spelling of attribute stores, reads and tensor methods.
    plain = plain_spellings.rewrite(source)

    def checks(module: libcst.Module) -> list[Finding]:
        with patterns.children_kept():  # one tree, walked many times
            context = ModuleContext(plain.text, path, facts, classes, module, slots)
            out = Collector(context, enabled)
            for check in registry.module_checks(enabled):
                check(context, out)
            return out.findings

    try:
        with trusted_parse():  # Python compiled the text (``lint_source`` asked it first)
            module = libcst.parse_module(plain.text)
        with kept_from_collector():  # the tree: freed as soon as the analysis is
            found = checks(module)
        return [plain.in_original(finding) for finding in found] if plain.changed else found
    except libcst.ParserSyntaxError as error:
        # Python accepted the file (``lint_source`` asked it first): syntax libcst lacks.
        first = str(error).strip().splitlines()[0]
        raise SourceError(
            f"cannot analyse: libcst cannot parse it: {first}", error.raw_line, error.raw_column + 1
        ) from error
    except RecursionError as error:
        raise SourceError("cannot analyse: too deeply nested") from error
    except MemoryError as error:
        raise SourceError("cannot analyse: out of memory") from error


def fix_source(
    source: str,
    path: str,
    enabled: frozenset[str],
    unsafe: bool,
    facts: RunFacts = NO_RUN_FACTS,
    classes: tuple[ClassFact, ...] = (),
    slots: tuple[SlotFact, ...] = (),
) -> tuple[str, int, list[Finding]]:
    """Apply fixes until none applies (or MAX_FIX_PASSES). Returns the new text, the number
    of fixes applied and the findings that remain. Raises SourceError if the input is not
    valid Python, or if a fix would make it invalid."""
    fixed, applied, remaining, _ = _fix(source, path, enabled, unsafe, facts, classes, slots)
    return fixed, applied, remaining


def _fix(
    source, path, enabled, unsafe, facts=NO_RUN_FACTS, classes=(), slots=()
) -> tuple[str, int, list[Finding], list[Finding]]:
    """fix_source's answer and the findings of ``source`` itself."""
    current = source
    applied = 0
    original = findings = lint_source(current, path, enabled, facts, classes, slots)
    for _ in range(MAX_FIX_PASSES):
        candidate, count = apply_fixes(current, findings, unsafe)
        if count == 0:
            break
        try:
            next_findings = lint_source(candidate, path, enabled, facts, classes, slots)
        except SourceError as error:
            raise SourceError(
                f"a fix produced invalid code, nothing written ({error.message})"
            ) from error
        current, findings = candidate, next_findings
        applied += count
    else:
        # Still fixable after the last pass: the fixes feed each other, and a text that
        # keeps changing is not one to write.
        if apply_fixes(current, findings, unsafe)[1]:
            raise SourceError(
                f"fixes did not settle after {MAX_FIX_PASSES} passes, nothing written"
            )
    return current, applied, findings, original


def process(job: Job, mode: Mode) -> FileResult:
    """Lint (and with ``mode.fix`` fix, in memory) one file."""
    result = FileResult(job.path)
    try:
        data = job.data if job.data is not None else read_bytes(job.path)
        source = decode(data)
        result.source, result.encoding = source.text, source.encoding
        if mode.fix:
            fixed, count, findings, original = _fix(
                source.text,
                job.path,
                job.enabled,
                mode.unsafe_fixes,
                job.run_facts,
                job.class_facts,
                job.slot_facts,
            )
            if fixed != source.text:
                check_writable(fixed, source, data)
                result.fixed_source = fixed
                result.fixed_count = count
            result.unfixed_findings = original
        else:
            findings = lint_source(
                source.text, job.path, job.enabled, job.run_facts, job.class_facts, job.slot_facts
            )
    except SourceError as error:
        result.error = FileError(job.path, error.message, error.line, error.column)
        return result
    except Exception as error:  # a fault in one rule must not cost the other files
        result.error = FileError(
            job.path, f"internal error, please report it: {type(error).__name__}: {error}"
        )
        return result
    result.findings = findings
    return result


def _process_chunk(jobs: list[Job], mode: Mode) -> list[FileResult]:
    return [process(job, mode) for job in jobs]


def run(
    jobs: Sequence[Job],
    mode: Mode,
    workers: int | None = None,
    on_result: Callable[[FileResult], None] | None = None,
    cache: Cache | None = None,
) -> list[FileResult]:
    """Results in the order of ``jobs``. Each file is read once, here: the project facts,
    the cache key and the lint all see the same bytes (a file edited during the run cannot
    be stored under the key of its old text). Files the cache knows (plain lint runs only)
    are not linted again; the others go to a process pool when there is enough work and
    ``workers`` allows it."""
    jobs = [_with_data(job) for job in jobs]
    workers = workers or available_cpus()
    early: Workers | None = None
    ahead: dict[Future, list[int]] = {}
    try:
        cold = cache is None or mode.fix or cache.holds_nothing()
        if cold and workers > 1 and len(jobs) > 1:
            early, ahead = _start_early(jobs, mode, workers)
        if len(jobs) > 1:
            jobs = with_project_facts(jobs)
        results: list[FileResult | None] = [None] * len(jobs)
        keys: dict[int, str] = {}
        if cache is not None and not mode.fix:
            for i, job in enumerate(jobs):
                if job.data is None:
                    continue
                keys[i] = cache.key(job)
                if early is not None:
                    continue  # the pool started on every file: none is read back
                findings = cache.load(keys[i], job.path)
                if findings is not None:
                    results[i] = FileResult(job.path, findings)
                    if on_result is not None:
                        on_result(results[i])
        todo = [i for i, result in enumerate(results) if result is None]
        # The chunks given ahead name files by their index in ``jobs``: that holds only while
        # every file is still to lint (an early start reads nothing back from the cache).
        assert early is None or len(todo) == len(jobs)
        done = _lint([jobs[i] for i in todo], mode, workers, on_result, early, ahead)
    except BaseException:
        if early is not None:
            early.stop()
        raise
    for i, result in zip(todo, done):
        results[i] = result
        if i in keys and result.error is None:
            cache.store(keys[i], result.findings)  # type: ignore[union-attr]
    if cache is not None:
        cache.save()
    return results  # type: ignore[return-value]


def _start_early(
    jobs: Sequence[Job], mode: Mode, workers: int
) -> tuple[Workers | None, dict[Future, list[int]]]:
    """When every job will be linted (no cache, or one that holds nothing yet: a first
    run, whose entries are still written) and they are work enough for the pool even
    before the project facts add any (they only add: a file the facts make analysed weighs
    more), the pool, started now, and the chunks of files already given to it (by the
    indices of ``jobs``). Its workers load the parser and the rules while this process works
    out the facts, on the cores it leaves idle, and compile the files whose lint the facts
    cannot change (``workload.files_ahead``); then the rest is theirs. Megatron-LM's tree:
    the facts take this process about 0.5 s, and 1,248 of its 1,344 files can go ahead."""
    module_codes = registry.codes_in_scope(registry.MODULE)
    whatever = [
        job.data is not None
        and bool(job.enabled & module_codes)  # else only compiled (a test file of a walk)
        and may_be_analysed(job.data, EVERY_CONTRACT)
        for job in jobs
    ]
    analysed = [w and may_be_analysed(job.data, job.run_facts) for job, w in zip(jobs, whatever)]
    if sum(map(estimate_work, jobs, analysed)) < PARALLEL_MIN_WORK:
        return None, {}
    codes = frozenset().union(*(job.enabled for job, a in zip(jobs, analysed) if a))
    pool = Workers(workers, codes & registry.codes_in_scope(registry.MODULE))
    if mode.fix:  # a fix's passes lint new text: none is given ahead
        return pool, {}
    ahead = files_ahead(jobs, whatever)
    work = [len(jobs[i].data) for i in ahead]  # type: ignore[arg-type]
    return pool, {
        pool.submit(_process_chunk, [jobs[ahead[k]] for k in chunk], mode): [
            ahead[k] for k in chunk
        ]
        for chunk in chunks_by_work(work, pool.count * CHUNKS_PER_WORKER)
    }


def _with_data(job: Job) -> Job:
    if job.data is not None:
        return job
    try:
        return replace(job, data=read_bytes(job.path))
    except SourceError:
        return job  # ``process`` reads it again and reports why it cannot


def _lint(
    jobs: Sequence[Job],
    mode: Mode,
    workers: int,
    on_result,
    early: Workers | None = None,
    ahead: dict[Future, list[int]] | None = None,
) -> list[FileResult]:
    """Lint ``jobs``, in ``early`` when it was started (``ahead``: the chunks of them it was
    already given)."""
    results: list[FileResult | None] = [None] * len(jobs)
    given = {i for chunk in (ahead or {}).values() for i in chunk}
    work = []  # a chunk given ahead is not weighed again
    if workers > 1 and len(jobs) > 1:
        work = [0 if i in given else estimate_work(job) for i, job in enumerate(jobs)]
    if early is not None or sum(work) >= PARALLEL_MIN_WORK:
        _run_pool(jobs, work, mode, workers, results, on_result, early, ahead)
    else:
        for i, job in enumerate(jobs):
            results[i] = process(job, mode)
            if on_result is not None:
                on_result(results[i])
    return results  # type: ignore[return-value]


def with_project_facts(jobs: Sequence[Job]) -> list[Job]:
    """The jobs (their bytes already read), told what the rules need to know about the
    other files of the run."""
    facts = run_facts((job.path, job.data) for job in jobs if job.data is not None)
    if facts:
        jobs = [replace(job, run_facts=job.run_facts | facts) for job in jobs]
    files = [(job.path, job.data) for job in jobs if job.data is not None]
    # Only what an enabled rule reads is paid for.
    if any(job.enabled & registry.codes_reading_subclasses() for job in jobs):
        facts_by_path = class_facts(files, facts.eager_layers)
        jobs = [
            replace(job, class_facts=facts_by_path[job.path]) if job.path in facts_by_path else job
            for job in jobs
        ]
    if any(job.enabled & registry.codes_reading_slots() for job in jobs):
        slots_by_path = slot_facts(files, facts.eager_layers)
        jobs = [
            replace(job, slot_facts=slots_by_path[job.path]) if job.path in slots_by_path else job
            for job in jobs
        ]
    return list(jobs)


def _run_pool(jobs, work, mode, workers, results, on_result, pool=None, ahead=None) -> None:
    """The jobs' results, linted by ``pool`` (started here when None); ``ahead``: chunks
    already given to it, by the indices of ``jobs``."""
    futures: dict[Future, list[int]] = {}
    given: set[int] = set()
    later: list[list[int]] = []
    for future, chunk in (ahead or {}).items():
        given.update(chunk)
        # Not started yet: handed out again after the others, small chunks that even out
        # the end of the run (the analysed files' chunks are up to 100 times heavier).
        if future.cancel():
            later.append(chunk)
        else:
            futures[future] = chunk
    left = [i for i in range(len(jobs)) if i not in given]
    chunks = [
        [left[k] for k in chunk]
        for chunk in chunks_by_work([work[i] for i in left], workers * CHUNKS_PER_WORKER)
    ]
    if pool is None:
        pool = Workers(min(workers, len(chunks)))
    try:
        for chunk in chunks + later:
            futures[pool.submit(_process_chunk, [jobs[i] for i in chunk], mode)] = chunk
    except BaseException:
        pool.stop()
        raise
    gather(pool, futures, results, on_result, lambda i: _process_alone(jobs[i], mode))


def _process_alone(job: Job, mode: Mode) -> FileResult:
    """``process(job)`` in a process of its own: after a worker died (a crash in native
    code), each file it may have held is redone alone, so the one that kills its process is
    one error line and the others are linted."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return run_alone(_process_chunk, [job], mode)[0]
    except BrokenProcessPool:
        message = "internal error, please report it: the process checking it crashed"
        return FileResult(job.path, error=FileError(job.path, message))
