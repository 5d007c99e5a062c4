"""A conditional handed to a GEMM as its accumulator input beside the same buffer as output.

DeepGEMM's ``fp8_gemm_nt(a, b, d, c=d if accumulate else None)`` computes ``d = a @ b (+ c)``:
``d`` is the destination on every path and the conditional only says whether the old
contents are added, as cuBLAS's ``C`` operand or TE's ``accumulate=`` do. So a choice
between main_grad and None there is an accumulate switch, not a choice of destination, and
a flag that ``overwrite_main_grad`` switched off belongs in it (GMLP001 judges only where
the gradient goes).
"""

from __future__ import annotations

import libcst as cst

from . import patterns


def is_accumulator_input(root: cst.CSTNode, choice: cst.IfExp, code) -> bool:
    """``choice`` (one side a buffer, the other None) is a keyword argument, not an output
    (``c=``, not ``out=``: ``torch.addmm(mg, a, b, out=mg if acc else None)`` chooses the
    destination, review 28), of a call whose other arguments hand it the same buffer,
    spelled alike (``code``: the module's source of a node)."""
    if patterns.is_none_like(choice.orelse):
        buffer = choice.body
    elif patterns.is_none_like(choice.body):
        buffer = choice.orelse
    else:
        return False
    spelled = code(buffer)
    for call in patterns.walk(root):
        if not isinstance(call, cst.Call):
            continue
        own = next((arg for arg in call.args if arg.value is choice), None)
        if own is None:
            continue
        # handed by a keyword that names no output (``c=``, not ``out=``): the choice is the
        # accumulator input beside the destination, not the destination itself
        if own.keyword is None or own.keyword.value.lower() in OUTPUT_KEYWORDS:
            return False
        return any(arg is not own and code(arg.value) == spelled for arg in call.args)
    return False


OUTPUT_KEYWORDS = frozenset({"out", "output", "dest", "destination", "d"})
