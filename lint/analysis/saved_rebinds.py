"""A weight rebound to a fresh copy in ``forward`` and handed to ``backward`` as the weight
(issue #19, class 2 across autograd's saved-tensor boundary).

``weight = weight.contiguous().clone()`` in an autograd Function's ``forward``, then
``ctx.save_for_backward(..., weight, ...)`` (or ``ctx.weight = weight``), while the
``backward`` beside it reads ``weight.main_grad`` or one of its flags from the name it
unpacks at that position (or from ``ctx.weight``). The copy carries none of what Megatron
gave the Parameter: reading main_grad raises, and a flag set on it is one no hook reads.
Within one function GMLP015 sees the rebinding reach the read; here the read is in the
sibling ``backward``, so the save and the unpacking connect them (same number of plain
items, same position).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import parameter_attributes, patterns
from .cfg import Def
from .module import Unit
from .saved import SAVE_CALLS, is_restored, target_of

FORWARD, BACKWARD = "forward", "backward"
CTX = "ctx"


@dataclass(frozen=True)
class SavedCopy:
    fresh: Def  # the rebinding in forward
    attribute: str  # the per-parameter attribute backward reads from the restored copy
    read: cst.CSTNode  # that read, for the message's line


def saved_copy_reads(unit: Unit, fresh: set[Def]) -> Iterator[SavedCopy]:
    """For a ``forward`` whose rebindings ``fresh`` reach a save call or a ``ctx``
    attribute: the reads of main_grad or its flags that the sibling ``backward`` makes from
    the restored name."""
    if unit.name != FORWARD or not fresh:
        return
    backward = _sibling_backward(unit)
    if backward is None:
        return
    saved, kept = _handed_over(unit, fresh)
    if not saved and not kept:
        return
    restored = _restored_positions(backward)
    for root, node in backward.expression_roots():
        for owner, attribute in parameter_attributes.reads(root):
            if isinstance(owner, cst.Name):
                defs = backward.reaching.reaching(owner.value, node)
                # another binding reaching the read (the Parameter swapped back in from
                # ``ctx`` under the condition that made the copy) may be what is read
                if not defs or any(d.index not in restored for d in defs):
                    continue
                for d in defs:
                    at = restored.get(d.index)
                    for saved_at, copies in saved.items() if at is not None else ():
                        if _matches(saved_at, at):
                            yield from (SavedCopy(f, attribute, owner) for f in copies)
        for sub in patterns.walk(root):
            if (
                isinstance(sub, cst.Attribute)
                and sub.attr.value in parameter_attributes.PER_PARAMETER
            ):
                held = patterns.attribute_of(sub.value, CTX)
                for fresh_def in kept.get(held, ()) if held else ():
                    yield SavedCopy(fresh_def, sub.attr.value, sub)


def _sibling_backward(unit: Unit) -> Unit | None:
    """The ``backward`` defined beside ``forward``: in the same class, or at the same level."""
    holder = unit.context.class_of(unit)
    body = holder.body.body if holder is not None else (unit.parent.body if unit.parent else ())
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == BACKWARD:
            return unit.context.unit_of(stmt)
    return None


def _handed_over(
    unit: Unit, fresh: set[Def]
) -> tuple[dict[tuple[int, int | None], list[Def]], dict[str, list[Def]]]:
    """(position, number of plain items) of each save call's argument, and the name of each
    ``ctx`` attribute, that a rebinding of ``fresh`` reaches."""
    saved: dict[tuple[int, int | None], list[Def]] = {}
    kept: dict[str, list[Def]] = {}
    for root, node in unit.expression_roots():
        if isinstance(root, cst.Assign) and isinstance(root.value, cst.Name):
            reaching = [d for d in unit.reaching.reaching(root.value.value, node) if d in fresh]
            for target in root.targets:
                held = patterns.attribute_of(target.target, CTX)
                if held and reaching:
                    kept.setdefault(held, []).extend(reaching)
        for call in patterns.walk(root):
            if type(call) is not cst.Call or patterns.callee_name(call) not in SAVE_CALLS:
                continue
            args = [a for a in call.args if a.keyword is None]
            count = None if any(a.star for a in args) else len(args)
            for i, arg in enumerate(args):
                if arg.star:
                    break
                if isinstance(arg.value, cst.Name):
                    for d in unit.reaching.reaching(arg.value.value, node):
                        if d in fresh:
                            saved.setdefault((i, count), []).append(d)
    return saved, kept


def _restored_positions(backward: Unit) -> dict[int, tuple[int, int | None]]:
    """Definition index -> (position, number of items) for each name backward unpacks from
    the saved tensors (an indexed read ``ctx.saved_tensors[i]`` matches any count)."""
    found: dict[int, tuple[int, int | None]] = {}
    for d in backward.graph.defs:
        owner = d.node.owner
        if d.kind != "assign" or not isinstance(owner, cst.Assign):
            continue
        if not is_restored(owner.value, backward, d.node):
            continue
        target = target_of(owner, d.name)
        if target is not None and target[1] is not None:
            found[d.index] = (target[1], target[2])
    return found


def _matches(saved_at: tuple[int, int | None], restored_at: tuple[int, int | None]) -> bool:
    """An unpacking of n items matches a save of n; an indexed read matches any save."""
    return saved_at[0] == restored_at[0] and restored_at[1] in (None, saved_at[1])
