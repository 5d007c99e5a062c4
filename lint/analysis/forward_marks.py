"""``grad_added_to_main_grad = True`` in an autograd Function's ``forward``.

The forward runs before any weight gradient exists: nothing has written main_grad yet, so a
mark there tells Megatron's hook that main_grad holds this microbatch's gradient while it
holds the last one's (or zeros), and the hook drops the real `.grad` the backward returns
(blind corpus 25: a DeepGEMM linear marking its weight as it saves it). A forward that
touches main_grad itself (reads ``w.main_grad`` or fetches it), or calls a function of the
file that does or a callee named for the weight gradient (``wgrad_gemm_accum_fp32``), is
left alone (review 28: a Function whose forward is the deferred wgrad pass).
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
    if any(_touches_main_grad(sub) for sub in patterns.walk(owner)):
        return []
    # a call that may write it: a function of the file that touches main_grad, or a callee
    # named for the weight gradient (review 28: a forward that is the deferred wgrad pass)
    writers = _main_grad_functions(unit.context)
    for sub in patterns.walk(owner):
        if type(sub) is cst.Call:
            name = patterns.callee_name(sub) or ""
            if name in writers or any(w in name.lower() for w in WRITER_WORDS):
                return []
    return wgrad.marks(unit)


WRITER_WORDS = ("wgrad", "accum", "main_grad", "weight_grad")


def _touches_main_grad(node) -> bool:
    return patterns.is_main_grad_direct(node) or patterns.is_main_grad_fetch(node)


def _main_grad_functions(context) -> set[str]:
    return {
        stmt.name.value
        for stmt in context.module.body
        if type(stmt) is cst.FunctionDef
        and any(_touches_main_grad(sub) for sub in patterns.walk(stmt.body))
    }
