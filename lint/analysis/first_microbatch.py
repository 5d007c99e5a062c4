"""Transformer Engine's other accumulate-or-overwrite switch, beside overwrite_main_grad: on a
step's first microbatch the GEMM overwrites main_grad (``accumulate = fuse_wgrad_accumulation
and not is_first_microbatch``). Like overwrite_main_grad it may choose only the GEMM's
accumulate flag, never whether main_grad is the output or the bookkeeping runs (GMLP001,
GMLP002: the flag it downgrades is followed by the same taint)."""

from __future__ import annotations

import libcst as cst

from .patterns import spells, walk

FIRST_MICROBATCH = "is_first_microbatch"


def accumulates_after_first(node: cst.CSTNode) -> bool:
    """``not is_first_microbatch`` (also of ``ctx.`` / ``getattr``): the accumulate half of
    the switch. Only the negation is the downgrade: a plain test on the switch guards much
    else (weight caches, workspace updates)."""
    return (
        type(node) is cst.UnaryOperation
        and type(node.operator) is cst.Not
        and any(spells(sub, FIRST_MICROBATCH) for sub in walk(node.expression))
    )
