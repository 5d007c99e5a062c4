"""GMLP016's converse: accumulating where overwriting was needed (Megatron-LM #4849's PR
branch). Kept apart from the rule's module (lint/rules/main_grad_replaced_without_asking.py),
which holds the documentation and asks this only of files that name FSDP (files that set
overwrite_main_grad are left alone here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns

if TYPE_CHECKING:
    from .collector import Collector
    from .module import ModuleContext

CODE = "GMLP016"  # the rule whose findings these are (its page documents them)

RESET_MESSAGE = (
    "`{subject}`'s grad_added_to_main_grad is reset for a new backward in FSDP code that never "
    "sets overwrite_main_grad: where gradients are sharded, main_grad is a fresh bucket each "
    "microbatch and the fused wgrad GEMM accumulates into what it holds; set "
    "`overwrite_main_grad` for the strategies that shard gradients"
)
# Where the per-backward bookkeeping of an FSDP integration runs.
RESET_FUNCTION_WORDS = ("hook", "backward")


def check(context: ModuleContext, out: Collector) -> None:
    """The converse direction (Megatron-LM #4849's PR branch): an FSDP integration's
    pre-backward hook resets ``grad_added_to_main_grad = False`` for each parameter, and
    nothing in the file ever sets ``overwrite_main_grad``, so the producer accumulates into
    buckets that sharded strategies hand out afresh. Only hooks and backward callbacks
    are judged: a reset in ``__init__`` or a ``zero_grad_buffer`` is set-up or zeroing.
    A file that only reads the flag (a config reader, a log line) sets nothing: until
    2026-12-07 any spelling of it silenced the check."""
    if _sets_overwrite(context):
        return
    for unit in context.units:
        if not (unit.survey.spells_grad_added and isinstance(unit.owner, cst.FunctionDef)):
            continue
        if not any(word in unit.name.lower() for word in RESET_FUNCTION_WORDS):
            continue
        for root, _ in unit.expression_roots():
            found = patterns.attribute_set(root, patterns.GRAD_ADDED)
            if found is not None and patterns.is_false_literal(found[1]):
                out.report(CODE, root, RESET_MESSAGE.format(subject=out.text(found[0])))


def _sets_overwrite(context: ModuleContext) -> bool:
    """Some code of the file sets ``X.overwrite_main_grad`` (an assignment or ``setattr``)."""
    if patterns.OVERWRITE not in context.source:
        return False
    return any(
        patterns.attribute_set(root, patterns.OVERWRITE) is not None
        for unit in context.units
        for root, _ in unit.expression_roots()
    )
