"""Which GEMM destinations are a weight's gradient buffer (issue #19, class 3).

Megatron-style code accumulates the weight gradient into ``param.main_grad``. Frameworks
without main_grad (ColossalAI's tensor-parallel linears, older Megatron forks, DeepSpeed's
fp16 paths) hand the same fused kernels the Parameter's own ``.grad``:
``fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(x, dy, weight.grad)``. Either way the
gradient is delivered by the write, and a backward that also returns it hands autograd a
second copy (autograd adds a returned gradient into ``.grad``; Megatron's hook adds ``.grad``
into main_grad).

``.grad`` is a destination here only for a GEMM that adds into what it is given (a name
with ``accum``, ``param_grad_add``) or one handed it as ``out=``: a plain GEMM given
``.grad`` positionally reads it.
"""

from __future__ import annotations

import libcst as cst

from . import patterns
from .cfg import Node
from .module import Unit

# Words of a fused kernel that adds its product into the buffer it is handed
# (``wgrad_gemm_accum_fp32``, Paddle's ``fused_linear_param_grad_add``).
ADDING_KERNEL_WORDS = ("accum", "param_grad_add")
# The text that makes a file without main_grad worth this look (``lint/triggers.py``).
KERNEL_TRIGGER = "gemm_accum"


def adds_into_argument(call: cst.Call) -> bool:
    name = (patterns.callee_name(call) or "").lower()
    return any(word in name for word in ADDING_KERNEL_WORDS)


def holds_main_grad(unit: Unit, holders: frozenset[int], expr, node: Node) -> bool:
    """``expr`` is a main_grad: ``w.main_grad``, ``getattr(w, "main_grad")``, or a local
    every binding of which reaching ``node`` is one of ``holders`` (``Deliveries.holders``)."""
    if patterns.main_grad_owner(expr) is not None:
        return True
    if type(expr) is cst.Name:
        defs = unit.reaching.reaching(expr.value, node)
        return bool(defs) and all(d.index in holders for d in defs)
    return False


def holds_grad(unit: Unit, expr, node: Node) -> bool:
    """``expr`` is a tensor's ``.grad``: ``w.grad``, or a local every binding of which
    reaching ``node`` is ``<something>.grad`` (``grad = weight_origin.grad``)."""
    if _is_grad_attribute(expr):
        return True
    if type(expr) is cst.Name:
        defs = unit.reaching.reaching(expr.value, node)
        return bool(defs) and all(d.kind == "assign" and _is_grad_attribute(d.value) for d in defs)
    return False


def _is_grad_attribute(expr) -> bool:
    # ``ctx.grad`` is the context's own field, not a weight's buffer
    return (
        type(expr) is cst.Attribute
        and expr.attr.value == patterns.GRAD
        and not (type(expr.value) is cst.Name and expr.value.value == "ctx")
    )
