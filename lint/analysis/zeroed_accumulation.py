"""main_grad zeroed, then a weight gradient added into it: together, an overwrite.

An accumulating write (``main_grad.add_(dw)``, ``npu_add_quant_gmm_(main_grad, x, dy)``,
``wgrad_gemm_accum_fp32(x, dy, main_grad)``, ``torch.addmm(mg, a, b, out=mg)``) keeps what
earlier microbatches put into main_grad. The same function resetting that storage first
(``zero_()``, ``fill_(...)``, ``torch._foreach_zero_``) on a path to the add makes the pair
replace main_grad's contents: only the last microbatch survives, as with
``accumulate=False``. Judged by what the two writes do to one storage (the text of
``grad_storage.storage_root`` of each destination), whatever the function is named: a
function that adds a product it computes into main_grad is producing the weight gradient.
A reset with no add after it (Megatron's ``zero_grad_buffer``), or an add of a gradient
computed elsewhere (``main_grad.add_(p.grad)``, a once-per-step consolidation), is not one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from ..wgrad_words import PRODUCT_WORDS
from . import grad_storage, paths, patterns, tensor_writes, wgrad

if TYPE_CHECKING:
    from .module import Unit

# The resets: replacing writes that put no gradient in (copies are deliveries, judged
# elsewhere). ``how`` as tensor_writes.writes names them.
RESETS = frozenset({"zero_", "fill_", "_foreach_zero_(...)"})
# ... and of those, the words that say the product is added into an argument.
ADD_WORDS = ("accum", "add")


def resets_before_adds(unit: Unit) -> Iterator[tuple[cst.Call, cst.BaseExpression]]:
    """(reset call, its destination) for each reset of main_grad storage from which a path
    of the function reaches an add of a computed product into the same storage."""
    resets, adds = [], []
    for root, node in unit.expression_roots():
        buffers = tensor_writes.Buffers(unit, node)
        for dest, kind, call, how in (*tensor_writes.writes(root, buffers), *_kernels(root)):
            if not buffers.main_grad(dest):
                continue
            keys = _storage_keys(unit, dest)
            if kind == "replace" and is_reset(how):
                resets.append((call, dest, node, keys))
            elif kind == "accumulate" and _computes(call):
                adds.append((call, node, keys))
    for call, dest, node, keys in resets:
        later = [n.index for c, n, k in adds if k & keys and n is not node]
        ahead = any(k & keys and n is node and _before(call, c) for c, n, k in adds)
        if ahead or (later and paths.reaches(node, later)):
            yield call, dest


def _storage_keys(unit: Unit, dest) -> frozenset[str]:
    """The storages a destination is (the text of each one's ``storage_root``): one, or
    each element of a list display (``torch._foreach_zero_([w.main_grad])``)."""
    items = [e.value for e in dest.elements] if type(dest) in (cst.List, cst.Tuple) else [dest]
    return frozenset(unit.context.code(grad_storage.storage_root(e)).strip() for e in items)


def _kernels(root):
    """Kernels named for adding a product into an argument (``wgrad_gemm_accum_fp32(x, dy,
    w.main_grad)``, ``npu_groupmatmul_add_fp32(x, dy, groups, w.main_grad)``): an
    accumulating write into each positional argument (main_grad storage is sorted out by
    the caller)."""
    for sub in patterns.walk(root):
        if type(sub) is not cst.Call:
            continue
        name = (patterns.callee_name(sub) or "").lower()
        # Not ``...mm``: ``addmm(input, a, b)`` returns its sum, ``input`` is not written.
        if any(w in name for w in PRODUCT_WORDS) and any(w in name for w in ADD_WORDS):
            for arg in sub.args:
                if arg.keyword is None and not arg.star:
                    yield arg.value, "accumulate", sub, name


def is_reset(how: str) -> bool:
    """A write (by ``tensor_writes.writes``' ``how``) that resets its destination."""
    return how in RESETS or how.startswith("_foreach_zero_")


def _computes(call) -> bool:
    """The write computes a product: a GEMM-like kernel (by its name, ``out=``), or an add
    of an operand that is a product (``mg.add_(dy.t() @ x)``, ``mg += torch.mm(a, b)``)."""
    if type(call) is cst.Call:
        if wgrad.looks_like_gemm(call):
            return True
        operands = [arg.value for arg in call.args]
    elif type(call) is cst.AugAssign:
        operands = [call.value]
    else:
        return False
    return any(wgrad.has_product(operand) for operand in operands)


def _before(a, b) -> bool:
    """``a`` is evaluated before ``b`` in one statement (``mg.zero_().add_(dw)``): ``a``
    sits inside ``b``'s receiver."""
    return any(sub is a for sub in patterns.walk(b)) and a is not b
