"""What a value copied into main_grad holds (GMLP016's replacing copies,
``producer_overwrites``): the tensor a reshape chain starts from, and whether the value
already holds main_grad's contents or puts back a gradient kept earlier, which makes the
copy no microbatch's replacing delivery."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import patterns, wgrad

if TYPE_CHECKING:
    from . import tensor_writes


# Methods that hand back the same values in another shape, layout or dtype
# (``grad_weight.view(-1, n)``, ``wgrad.t().contiguous()``, ``wgrad.to(dtype)``).
RESHAPING = frozenset(
    {"view", "view_as", "reshape", "reshape_as", "t", "transpose", "contiguous", "to", "float",
     "flatten", "unflatten"}
)  # fmt: skip


def reshaped_from(expr):
    """The tensor ``expr`` reshapes (``grad_weight`` of ``grad_weight.view(-1, n)``)."""
    while (
        type(expr) is cst.Call
        and type(expr.func) is cst.Attribute
        and expr.func.attr.value in RESHAPING
    ):
        expr = expr.func.value
    return expr


# Words of a function or a value that put back a gradient kept earlier: a copy, not a
# microbatch's delivery.
RESTORE_WORDS = ("restore", "saved", "backup", "snapshot", "stash", "checkpoint", "load")


def restoring(value, buffers: tensor_writes.Buffers) -> bool:
    """The function's name, the copied value or what it is bound from says restore. (A
    binding that computes a product is no restore, whatever it calls on the way: MindSpeed's
    ``GMMFunction.builder.load().npu_gmm(...)`` loads a kernel.)"""
    unit = buffers.unit
    texts = [unit.name, unit.context.code(value)]
    if type(value) is cst.Name:
        defs = unit.reaching.reaching(value.value, buffers.node)
        texts += [
            unit.context.code(d.value)
            for d in defs
            if d.value is not None and not wgrad.has_product(d.value)
        ]
    return any(word in text.lower() for text in texts for word in RESTORE_WORDS)


def from_main_grad(value, buffers: tensor_writes.Buffers) -> bool:
    """``value`` mentions main_grad, or is a local some reaching binding of which does
    (``g = w.main_grad.clone()``): what it holds already includes main_grad's contents."""
    if patterns.MAIN_GRAD in buffers.unit.context.code(value):
        return True
    if type(value) is cst.Name:
        defs = buffers.unit.reaching.reaching(value.value, buffers.node)
        code = buffers.unit.context.code
        return any(d.value is not None and patterns.MAIN_GRAD in code(d.value) for d in defs)
    return False


def reads_destination(value, dest, buffers: tensor_writes.Buffers) -> bool:
    """The copied value reads the buffer it replaces, as written (``grad.copy_(grad.float()
    + wgrad)``): what it holds already includes the old contents."""
    code = buffers.unit.context.code
    text = code(dest).strip()
    return any(code(sub).strip() == text for sub in patterns.walk(value))
