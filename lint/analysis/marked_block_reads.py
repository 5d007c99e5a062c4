"""Which weights a marking block reads its per-parameter attributes from (GMLP007): the
block that sets ``X.grad_added_to_main_grad = True`` (with the ``hasattr`` test guarding
it) reads ``zero_out_wgrad``, ``grad_added_to_main_grad`` and main_grad from X or another
weight it marks too. A read from another weight, or from a stand-in of the marked weight
(restored, quantized, gathered: analysis/provenance.py), mixes two objects' settings; a
block every read of which names one other weight is that weight's, and the mark is the
one that is off. Found here; the rule's module (lint/rules/main_grad_flag_from_other_weight.py)
words and reports them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import block_weight, function_bindings, patterns, provenance, wgrad

if TYPE_CHECKING:
    from .provenance import Provenance
    from .wgrad import Mark

# What a found read is (``BlockRead.kind``):
MISPLACED = "misplaced"  # every read names one other weight: the mark is on the wrong one
OTHER_WEIGHT = "other weight"  # a read from a weight the block does not mark
STAND_IN = "stand-in"  # a read from an object standing in for the marked weight

# Callee words of grouped (per-expert) GEMMs: MindSpeed's gmm / npu_groupmatmul, TE's and
# torch's grouped GEMMs.
GROUPED_GEMM_WORDS = ("gmm", "groupmatmul", "grouped_gemm", "grouped_mm", "grouped_matmul")


@dataclass(frozen=True)
class BlockRead:
    """A read of a marking block that names the wrong object: ``owner`` is the object read
    from (for ``MISPLACED``, the weight whose block it is), ``subject`` the weight it should
    be read from (for ``MISPLACED``, the weight marked), ``what`` the attribute read."""

    kind: str
    owner: cst.BaseExpression
    subject: cst.BaseExpression
    what: str | None = None


def grouped_gemm_code(unit) -> bool:
    """The function runs a grouped GEMM: its weights are experts' weights. Megatron sets
    ``zero_out_wgrad`` only on the shared embedding / output weight, never on an expert's,
    so reading it from an expert weight's stand-in answers what the Parameter would."""
    calls = set(unit.survey.calls)
    # The file's own functions it calls run the GEMM for it just as well (one level).
    for other in unit.context.units:
        owner = other.owner
        if isinstance(owner, cst.FunctionDef) and owner.name.value in calls:
            calls.update(other.survey.calls)
    return any(word in call.lower() for call in calls for word in GROUPED_GEMM_WORDS)


def wrong_reads(
    mark: Mark, objects: Provenance, experts: bool, aliases=None
) -> Iterator[BlockRead]:
    """The reads of ``mark``'s block that name the wrong object, in the order they are
    reported: a ``MISPLACED`` mark alone, else each foreign or stand-in read. ``experts``:
    the function runs a grouped GEMM (``zero_out_wgrad`` reads are left alone);
    ``aliases``: the function's local aliases, whose other names of a marked weight
    count as that weight."""
    marked = {wgrad.stem(mark.subject)}
    subjects = {wgrad.stem(mark.subject): mark.subject}
    statements = list(wgrad.block_statements(mark.block))
    for stmt in statements:
        other = wgrad.marked_subject(stmt)
        if other is not None:
            marked.add(wgrad.stem(other))
            subjects.setdefault(wgrad.stem(other), other)
    if None in marked:
        return
    roots = [s for s in statements if not isinstance(s, cst.BaseCompoundStatement)]
    roots += [getattr(s, "test", None) for s in statements if isinstance(s, cst.If)]
    if mark.guard is not None:
        roots.append(mark.guard.test)
    reads = [read for root in roots if root is not None for read in _reads(root)]
    owner = block_weight.owner_of_block(
        reads,
        marked,
        lambda o: aliases is not None and any(aliases.same(o, s) for s in subjects.values()),
    )
    if owner is not None and len(marked) == 1:
        # Every read names one other weight: the block is that weight's, the mark is off.
        yield BlockRead(MISPLACED, owner, mark.subject)
        return
    for root in roots:
        if root is None:
            continue
        for what, owner in _reads(root):
            if experts and what == patterns.ZERO_OUT:
                continue
            word = wgrad.stem(owner)
            if aliases is not None and any(aliases.same(owner, s) for s in subjects.values()):
                continue  # another name for a marked weight (``s = weight``)
            if word is not None and word not in marked:
                yield BlockRead(OTHER_WEIGHT, owner, mark.subject, what)
            elif word is not None and objects.differ(subjects[word], owner):
                if objects.of(owner) == provenance.PARAMETER and what == patterns.MAIN_GRAD:
                    # The block reads the Parameter's main_grad and marks the stand-in beside
                    # it (``weight.grad_added_to_main_grad = True`` after a GEMM into
                    # ``weight_og.main_grad``, blind corpus 26): the mark is what is off.
                    yield BlockRead(MISPLACED, owner, subjects[word])
                    return
                yield BlockRead(STAND_IN, owner, subjects[word], what)


def _reads(root) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(what, owner) for each per-parameter attribute read in ``root`` (an attribute
    assigned, ``u.zero_out_wgrad = False``, is written there, not read)."""
    stores = {id(t) for t in _stored(root)}
    for sub in patterns.walk(root):
        if id(sub) in stores:
            continue
        if patterns.is_attr(sub, patterns.MAIN_GRAD):
            yield "main_grad", sub.value
        elif patterns.is_attr(sub, patterns.ZERO_OUT):
            yield "zero_out_wgrad", sub.value
        elif patterns.callee_name(sub) in ("getattr", "hasattr") and isinstance(sub.func, cst.Name):
            args = patterns.positional_args(sub)
            if len(args) < 2:
                continue
            for word in (patterns.ZERO_OUT, patterns.GRAD_ADDED, patterns.MAIN_GRAD):
                if patterns.string_is(args[1].value, word):
                    yield word, args[0].value


def _stored(root) -> Iterator[cst.CSTNode]:
    """The attributes and items ``root`` assigns or deletes (not an augmented assignment's:
    it reads them too)."""
    for sub in patterns.walk(root):
        kind = type(sub)
        if kind is cst.Assign:
            for target in sub.targets:
                yield from function_bindings.target_chains(target.target)
        elif kind is cst.AnnAssign or kind is cst.Del:
            yield from function_bindings.target_chains(sub.target)
