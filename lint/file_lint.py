"""Linting and fixing the source text of one file.

Every file is compiled by the running Python to check that it is valid (``parsing``).
Files that mention one of the contract's identifiers (``triggers.TRIGGERS``: ``main_grad`` and the
names of the dummy-gradient and delayed-wgrad protocol, which a helper module may use
without ever spelling main_grad; or a hook registration next to a call of a reduction) are
then parsed with libcst and analysed by the rules; the others cost only the compile (a
fraction, and libcst is never imported for them).
Suppression comments are read from any file that has one.

What a file is checked with (its ``Job``) and how the files of a run are shared out between
processes are the engine's (``engine``).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import plain_spellings, registry
from .class_facts import ClassFact
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
from .project import NO_RUN_FACTS, RunFacts
from .slot_facts import SlotFact
from .source import SourceError, check_writable, decode, read_bytes
from .suppressions import apply as apply_suppressions
from .suppressions import parse as parse_suppressions
from .triggers import mentions_contract

MAX_FIX_PASSES = 10


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
