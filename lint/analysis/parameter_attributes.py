"""Reads and put-backs of a weight's per-parameter attributes (main_grad and its flags) on a
plain name or an item of one (``w.main_grad``, ``getattr(w, "zero_out_wgrad", False)``,
``weights[i].main_grad = ...``), for GMLP015 to match against the fresh bindings those
names read (fresh_bindings.py)."""

from __future__ import annotations

import libcst as cst

from . import patterns

# The per-parameter attributes a fresh object does not carry.
PER_PARAMETER = ("main_grad", "grad_added_to_main_grad", "overwrite_main_grad", "zero_out_wgrad")


# Transformer Engine's helpers that read one of them off the Parameter they are handed
# (transformer_engine/pytorch/ops/_common.py), by the attribute each reads.
STATE_READERS = {
    "get_main_grad_from_param": "main_grad",
    "get_accumulate_flag_in_param": "overwrite_main_grad",
}


def put_backs(root):
    """(owner name, "main_grad") for each ``name.main_grad = ...`` (or ``setattr(name,
    "main_grad", ...)``): the buffer put back. (A flag set on the new object is no put-back:
    Megatron's hooks read the Parameter's.)"""
    if isinstance(root, (cst.Assign, cst.AnnAssign)):
        for target in patterns.assignment_targets(root):
            if patterns.is_attr(target, patterns.MAIN_GRAD) and _is_owner(target.value):
                yield target.value, patterns.MAIN_GRAD
    elif isinstance(root, cst.Expr):
        found = patterns.attribute_set(root, patterns.MAIN_GRAD)
        if found is not None and _is_owner(found[0]):
            yield found[0], patterns.MAIN_GRAD


def _is_owner(expr) -> bool:
    """A plain name, or an item of one (``weights[i]``)."""
    return isinstance(expr, cst.Name) or (
        isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name)
    )


def reads(root):
    """(owner name, attribute) for each read of a per-parameter attribute on a plain name in
    ``root``; an assignment's targets are writes, not reads."""
    targets = set()
    if isinstance(root, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        for target in patterns.assignment_targets(root):
            targets.add(id(target))
    for sub in patterns.walk(root):
        if id(sub) in targets:
            continue
        if isinstance(sub, cst.Attribute) and sub.attr.value in PER_PARAMETER:
            if _is_owner(sub.value):
                yield sub.value, sub.attr.value
        elif patterns.callee_name(sub) in STATE_READERS:
            args = patterns.positional_args(sub)
            if args and _is_owner(args[0].value):
                yield args[0].value, STATE_READERS[patterns.callee_name(sub)]
        elif patterns.callee_name(sub) in ("getattr", "hasattr") and isinstance(sub.func, cst.Name):
            args = patterns.positional_args(sub)
            if len(args) >= 2 and _is_owner(args[0].value):
                word = patterns.string_value(args[1].value)
                if word in PER_PARAMETER:
                    yield args[0].value, word
