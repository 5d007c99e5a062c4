"""How much work a run's files are, before and after the project facts: what decides
whether they go to the worker processes (``engine``), and which can go before the facts are
known."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import registry
from .class_facts import subclass_files
from .contract_facts import DELAYED_WGRAD_WORDS
from .project import RunFacts
from .slot_facts import candidate_files
from .suppressions import MARKER
from .triggers import may_be_analysed

if TYPE_CHECKING:
    from .file_lint import Job

# The pool decision weighs each file's bytes: CPython's parser alone costs 1 a byte, libcst
# and the rules cost ANALYSIS_WEIGHT a byte (measured: about 25 times CPython's parser).
ANALYSIS_WEIGHT = 25
# Below this much work, starting worker processes (each imports libcst) costs more than it
# saves: about 0.3 s of work on one core.
PARALLEL_MIN_WORK = 3_000_000
# The facts under which the most files are analysed: of all the run's facts, only the
# delayed-wgrad contract's use makes more files analysed (``triggers.mentions_contract``).
EVERY_CONTRACT = RunFacts(delayed_wgrad=DELAYED_WGRAD_WORDS)


def estimate_work(job: Job, analysed: bool | None = None) -> int:
    """How much work the file is, in bytes weighted by what will parse them (``analysed``:
    ``may_be_analysed`` of it, when known)."""
    data = job.data
    if data is None:
        return 0  # unreadable: ``process`` reports it, at no cost
    if analysed is None:
        analysed = bool(job.enabled & registry.codes_in_scope(registry.MODULE)) and (
            may_be_analysed(data, job.run_facts)
        )
    weighty = analysed or MARKER.encode() in data or bool(job.class_facts or job.slot_facts)
    return len(data) * (ANALYSIS_WEIGHT if weighty else 1)


def files_ahead(jobs: Sequence[Job], whatever: list[bool]) -> list[int]:
    """The indices of the files whose lint the project facts cannot change: each names no
    trigger whatever the facts (``whatever``: ``may_be_analysed`` with every fact that makes
    more files analysed) and subclasses no delayed-wgrad class of another file
    (``subclass_files``: the only files given ``class_facts``) and defines no class the run
    may plug into a slot whose backward_dw it calls (``slot_facts.candidate_files``). It is
    compiled, never analysed, and its result does not depend on its job's facts. So is a
    file no enabled rule reads (a test file of a walk: ``test_scope``), whatever it names."""
    files = [(job.path, job.data) for job in jobs if job.data is not None]
    held: set[str] = set()  # files whose facts may be given (none looked for: none)
    if any(job.enabled & registry.codes_reading_subclasses() for job in jobs):
        held = subclass_files(files)
    if any(job.enabled & registry.codes_reading_slots() for job in jobs):
        held |= candidate_files(files)
    module_codes = registry.codes_in_scope(registry.MODULE)
    return [
        i
        for i, job in enumerate(jobs)
        if job.data is not None
        and (
            not job.enabled & module_codes
            or (
                not whatever[i]
                and not job.class_facts  # given by the caller: its facts decide its analysis
                and not job.slot_facts
                and job.path not in held
            )
        )
    ]
