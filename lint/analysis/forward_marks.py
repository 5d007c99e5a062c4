"""``grad_added_to_main_grad = True`` in an autograd Function's ``forward``.

The forward runs before any weight gradient exists: nothing has written main_grad yet, so a
mark there tells Megatron's hook that main_grad holds this microbatch's gradient while it
holds the last one's (or zeros), and the hook drops the real `.grad` the backward returns
(blind corpus 25: a DeepGEMM linear marking its weight as it saves it). A forward that
touches main_grad itself (reads ``w.main_grad`` or fetches it) is left alone.
"""

from __future__ import annotations

import libcst as cst

from . import patterns, wgrad
from .module import Unit


def premature_marks(unit: Unit) -> list[wgrad.Mark]:
    """The marks of ``unit`` when it is an autograd Function's ``forward(ctx, ...)`` that
    writes no main_grad."""
    owner = unit.owner
    if not isinstance(owner, cst.FunctionDef) or owner.name.value != "forward":
        return []
    params = owner.params.params
    if not params or params[0].name.value != "ctx":
        return []
    if any(
        patterns.is_main_grad_direct(sub) or patterns.is_main_grad_fetch(sub)
        for sub in patterns.walk(owner)
    ):
        return []
    return wgrad.marks(unit)
