"""Weight gradients a backward gets back from a kernel or a product and hands back itself
(issue #19, class 3: GMLP032's reading of which calls write main_grad).

``dx, dw, db = npu_gmm_backward([dy], [x], [weight], ...)`` (MindSpeed's NPU grouped matmul,
blind corpus 23) is handed the weight but returns its gradient: it writes no main_grad, and
``return dx[0], dw[0]`` hands back a computed weight gradient just as ``return dy.t() @ x``
does."""

from __future__ import annotations

import libcst as cst

from ..wgrad_words import names_weight_gradient
from . import patterns, wgrad


def returns_weight_gradient(root) -> bool:
    """``dx, dw, db = npu_gmm_backward([dy], [x], [weight], ...)``: a kernel handed the weight
    that returns its gradient among others into a local named for it, and is handed no
    main_grad, no output keyword (``out=``) and no ``*`` / ``**`` arguments (other keywords,
    ``group_list=``, say how to compute)."""
    if type(root) is not cst.Assign or type(root.value) is not cst.Call:
        return False
    if any(
        arg.star or (arg.keyword is not None and _names_output(arg.keyword.value))
        for arg in root.value.args
    ):
        return False  # ``gemm(x, dy, **kwargs)``, ``out=``: the output may be main_grad
    if any(
        patterns.spells(sub, patterns.MAIN_GRAD)
        for arg in root.value.args
        for sub in (arg.value, *patterns.walk(arg.value))
    ):
        return False
    for target in root.targets:
        target = target.target
        if type(target) is not cst.Tuple:
            continue  # ``wgrad = gemm(x, dy, w)`` may be a wrapper that writes and returns it
        if any(
            type(e.value) is cst.Name and names_weight_gradient(e.value.value)
            for e in target.elements
        ):
            return True
    return False


# Keyword words that may name where a kernel writes (``out``, ``output``, ``out_wgrad``,
# ``main_grad``, ``c``, ``d`` in cuBLAS's naming, ``accumulate`` into something handed).
OUTPUT_KEYWORDS = ("out", "dest", "result", "main_grad", "accum", "buffer")


def _names_output(keyword: str) -> bool:
    lowered = keyword.lower()
    return lowered in ("c", "d") or any(w in lowered for w in OUTPUT_KEYWORDS)


def weight_gradients_from_products(function) -> set[str]:
    """Locals named for a weight gradient (``dw``, ``wgrad``) bound by the function from a
    product, alone or unpacked from one call's results."""
    found: set[str] = set()
    for sub in patterns.walk(function.body):
        if type(sub) is not cst.Assign or not wgrad.has_product(sub.value):
            continue
        for target in sub.targets:
            target = target.target
            names = (
                [e.value for e in target.elements]
                if type(target) in (cst.Tuple, cst.List)
                else [target]
            )
            found.update(
                n.value for n in names if type(n) is cst.Name and names_weight_gradient(n.value)
            )
    return found


def hands_back(value, names: set[str]) -> bool:
    """The returned value, or an element of a returned tuple, is one of ``names`` (or an
    item of it: ``dw[0]``)."""
    elements = [e.value for e in value.elements] if type(value) is cst.Tuple else [value]
    for element in elements:
        if type(element) is cst.Subscript:
            element = element.value
        if type(element) is cst.Name and element.value in names:
            return True
    return False
