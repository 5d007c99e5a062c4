"""What torch's (and Transformer Engine's) writing calls do to a tensor they are handed:
which in-place methods replace its contents and which add to them, which calls replace
their ``out=``, and which keyword switches a write from replacing to adding. The vocabulary
``tensor_writes`` reads a statement's writes with."""

from __future__ import annotations

import libcst as cst

from . import patterns

# GEMMs that replace their ``out=`` unless told to accumulate: torch's have no such switch,
# Transformer Engine's ``general_gemm`` / ``general_grouped_gemm`` default to
# ``accumulate=False``. Any other function of ``torch`` given ``out=`` replaces it too
# (``torch.sum(dw, 0, out=mg)``; the add family is ``SCALED_ADDS`` and ``ADD_WORD``'s).
# ``te_general_gemm``: Megatron-LM's wrapper of TE's general_gemm, which hard-codes
# ``accumulate=False`` (megatron/core/extensions/transformer_engine.py).
REPLACING_GEMMS = frozenset(
    {"matmul", "mm", "bmm", "general_gemm", "general_grouped_gemm", "te_general_gemm"}
)
ACCUMULATE_KEYWORDS = ("accumulate", "beta")
# Methods of a tensor that replace its contents (all of them, or the rows or elements they
# index), and those that add to them; torch's in-place methods that write given values.
# Those that copy another tensor's values in are a gradient's delivery; the others reset.
COPYING_METHODS = frozenset({"copy_", "index_copy_", "masked_scatter_"})
REPLACING_METHODS = COPYING_METHODS | {"zero_", "fill_", "index_fill_", "masked_fill_"}
ACCUMULATING_METHODS = frozenset(
    {"add_", "sub_", "addmm_", "baddbmm_", "addmv_", "addr_", "addcmul_", "addcdiv_"}
    | {"index_add_", "scatter_add_"}
)
# Methods that replace unless a keyword asks them to add: ``index_put_(..., accumulate=True)``,
# ``put_(..., accumulate=True)``, ``scatter_(..., reduce="add")``.
SWITCHED_METHODS = {"index_put_": "accumulate", "put_": "accumulate", "scatter_": "reduce"}
# Pointwise kernels written as functions that take their destination as an argument
# (``triton_copy(src, dst)``, ``torch.add(a, b, out=a)``, ``fused_add(a, b, a)``): known by
# what the call does with its arguments, the name only saying copy or add.
COPY_WORD, ADD_WORD = "copy", "add"
# torch's list kernels that replace each tensor of their first argument and take no other
# (``_foreach_copy_`` and ``_foreach_add_`` are the copy and add spellings above).
REPLACING_FOREACH = frozenset({"_foreach_zero_"})
# torch's kernels computing ``beta * input + alpha * (a @ b)``: into their own input they add,
# unless ``beta=0`` discards what the input held (then they replace it, as a GEMM with
# ``accumulate=False`` does); into an ``out=`` that is not their input they replace.
SCALED_ADDS = frozenset({"addmm", "addbmm", "baddbmm", "addmv", "addr"})


def literal_off(value) -> bool:
    if patterns.is_false_literal(value):
        return True
    return isinstance(value, (cst.Integer, cst.Float)) and float(value.value) == 0.0


def copying_method(call):
    """(destination, method) for a method call that replaces its receiver's contents (or
    the rows it indexes) with another tensor's values: ``copy_``, ``index_copy_``,
    ``masked_scatter_``, and ``index_put_`` / ``put_`` / ``scatter_`` not asked to add."""
    method = patterns.method_call(call)
    if method is None:
        return None
    name = method[1]
    if name in COPYING_METHODS:
        return method
    if name in SWITCHED_METHODS and switched_method_kind(call, SWITCHED_METHODS[name]) == "replace":
        return method
    return None


def switched_method_kind(call, keyword: str) -> str:
    """The kind of write: a replacement unless ``keyword`` is given and not literally off
    (``accumulate=False``, ``reduce=None``); a value the code computes may ask for adding,
    so it is not a replacement to report."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            off = literal_off(arg.value)  # False, None or 0
            return "replace" if off else "accumulate"
    return "replace"


def replaces_out(call) -> bool:
    """A call with no accumulate switch that replaces its ``out=``: a GEMM of
    ``REPLACING_GEMMS`` or any function of ``torch`` (``torch.cat``, ``torch.nn.functional.x``)."""
    name = patterns.callee_name(call) or ""
    if name in REPLACING_GEMMS:
        return True
    if name.rstrip("_") in SCALED_ADDS or ADD_WORD in name.lower():
        return False  # may add into its ``out=`` (``torch.addmm(mg, a, b, **{"out": mg})``)
    root = call.func
    while type(root) is cst.Attribute:
        root = root.value
    return type(root) is cst.Name and root.value == "torch" and type(call.func) is cst.Attribute
