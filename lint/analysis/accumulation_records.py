"""GMLP016 on an accumulator that records whether it holds a gradient (blind corpus 17, YaFSDP's
``Narrow.backward``: ``if not ctx.metaparam.grad_accumulation: <buffer>.copy_(g) else:
<buffer>.add_(g)``, then ``ctx.metaparam.grad_accumulation = True``).

Such a record is what the next microbatch asks before it writes: False means the buffer is
fresh and may be replaced, True that it holds earlier microbatches' gradient and must be
added to. A function that sets the record after writing the buffer makes that promise for
the buffer's owner, so

- writing it by replacing, in a function that never reads the record, drops every earlier
  microbatch (the copy-or-add choice was lost: class 4);
- reading the record on one object and setting it on a part of it (or the converse), or
  through another attribute path from the same root (``ctx.metaparam.param`` for
  ``ctx.metaparam``), leaves the record that is asked False for ever: every microbatch
  replaces (class 1, the wrong object, with class 4's effect). Unrelated spellings may be
  aliases of one object and are left alone.

A record is an attribute set to ``True`` whose name says accumulation (``*accumulat*``, not
a fusion setting such as ``gradient_accumulation_fusion``),
in a file that never spells main_grad (main_grad's own ``grad_added_to_main_grad`` is the
DDP hook's, which producers set without reading). Only writes into storage reached through
the record's owner (its text a prefix of the destination's) count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from ..triggers import is_record_name
from . import patterns, tensor_writes
from .zeroed_accumulation import is_reset

if TYPE_CHECKING:
    from .module import Unit

NEVER_READ = (
    "this replaces `{target}`'s contents ({how}), and the function then records "
    "`{record} = True` without reading it: a microbatch after the first replaces what the "
    "earlier ones accumulated; copy while the record is False, add once it is True"
)
OTHER_OBJECT = (
    "`{record}` is set here, but the copy-or-add choice reads `{asked}`: that record stays "
    "False, and every microbatch replaces what the earlier ones accumulated; set the "
    "record the choice reads"
)


def findings(unit: Unit) -> Iterator[tuple[cst.CSTNode, str]]:
    """(node, message) for the two shapes of the module's text."""
    records = list(_records(unit))
    if not records:
        return
    read = _read_records(unit)
    for stmt, owner, name in records:
        asked = [text for text, attr in read if attr == name]
        if not asked:
            yield from _unasked_replaces(unit, owner, f"{owner}.{name}")
            continue
        # Set on a part of the object the choice asks, or through another path from the
        # same root (``ctx.metaparam.param`` or ``ctx.param`` beside ``ctx.metaparam``): the
        # record asked stays False. Two unrelated spellings may be one object (``meta =
        # ctx.metaparam``, two loop variables) and are left alone.
        for text in asked:
            other = text.rpartition(".")[0]
            if other != owner and _same_root_paths(owner, other):
                yield stmt, OTHER_OBJECT.format(record=f"{owner}.{name}", asked=text)
                break


def _records(unit: Unit) -> Iterator[tuple[cst.Assign, str, str]]:
    """(statement, owner text, attribute) for ``owner.attr = True`` with attr a record."""
    code = unit.context.code
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Assign or not patterns.is_true_literal(stmt.value):
            continue
        for target in stmt.targets:
            attr = target.target
            if type(attr) is cst.Attribute and is_record_name(attr.attr.value):
                yield stmt, code(attr.value).strip(), attr.attr.value


def _read_records(unit: Unit) -> list[tuple[str, str]]:
    """(text, attribute) of every record attribute the function reads (not assigns)."""
    code = unit.context.code
    assigned: set[int] = set()
    found = []
    for stmt, _ in unit.statements():
        if type(stmt) is cst.Assign:
            assigned.update(id(t.target) for t in stmt.targets)
    for root, _ in unit.expression_roots():
        for sub in patterns.walk(root):
            if (
                type(sub) is cst.Attribute
                and id(sub) not in assigned
                and is_record_name(sub.attr.value)
            ):
                found.append((code(sub).strip(), sub.attr.value))
    return found


def _unasked_replaces(unit: Unit, owner: str, record: str):
    code = unit.context.code
    prefix = owner + "."
    for root, node in unit.expression_roots():
        for dest, kind, at, how in tensor_writes.writes(root, tensor_writes.Buffers(unit, node)):
            # a reset (``zero_()``, ``fill_``) starts afresh: it carries no microbatch's values
            if kind != "replace" or type(at) is cst.Assign or is_reset(how):
                continue
            target = code(dest).strip()
            # a gradient buffer of the owner (``meta.grad_buffer``), not its data
            if target.startswith(prefix) and "grad" in target[len(prefix) :]:
                yield at, NEVER_READ.format(target=target, how=how, record=record)


def _same_root_paths(a: str, b: str) -> bool:
    """One object and a part of it (``meta``, ``meta.param``), or two attribute paths from
    one root name (``ctx.metaparam``, ``ctx.param``)."""
    if a.startswith(b + ".") or b.startswith(a + "."):
        return True
    return "." in a and "." in b and a.split(".")[0] == b.split(".")[0]
