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
    """``choice`` (one side a buffer, the other None) is an argument of a call in ``root``
    whose other arguments hand it the same buffer, spelled alike (``code``: the module's
    source of a node)."""
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
        values = [arg.value for arg in call.args]
        if not any(value is choice for value in values):
            continue
        return any(value is not choice and code(value) == spelled for value in values)
    return False
