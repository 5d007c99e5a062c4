"""GMLP063: a local that is main_grad or, where that is missing, a fresh tensor, written and
never handed back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
fresh_fallback = LazyModule("..analysis.fresh_fallback", __package__)

CODE = "GMLP063"
RULE = Rule(
    code=CODE,
    classes=(2,),
    name="main-grad-fallback-dropped",
    summary=(
        "A local is the parameter's main_grad, or a freshly allocated tensor where main_grad "
        "is missing; the weight gradient is written into it and it is never handed back to "
        "the parameter: on that path the gradient is lost."
    ),
    flags=(
        "`g = X.main_grad if ... else zeros(...)` (or two bindings of `g`, one to "
        "`X.main_grad`, one to an allocation chosen on whether main_grad is there), `g` then "
        "handed to a GEMM or given an in-place write, with no assignment's value mentioning "
        "it, not returned and not handed to another call"
    ),
    explanation="""
        Issue #19, class 2 (a tensor standing in for the parameter's main_grad, fresh on
        some path). A backward that meets a parameter whose main_grad is not allocated yet
        makes one and stores it (`if w.main_grad is None: w.main_grad = zeros(...)`), then
        writes `w.main_grad`. Blind corpus 16's PaddleFleet expert path bound it to a local
        instead (`main_grad = w.main_grad if w.main_grad is not None else zeros(...)`) and
        handed the local to the GEMM: where main_grad was missing, the gradient is
        accumulated into a tensor nobody keeps.

        Seen: per function, a local some binding of which is `X.main_grad` (or
        `getattr(X, "main_grad")`) and another an allocation (`zeros`, `zeros_like`,
        `empty`, `full`, ...), as two arms of one conditional expression or two
        assignments, the allocation chosen on a test of whether main_grad is there (naming
        `main_grad`, `None` or `hasattr`: a scratch buffer chosen on an overwrite switch
        is GMLP001's); written when handed to a GEMM (a callee named with `gemm`,
        `matmul` or `gmm`, ending in `mm`, or taking `out=`; a kernel named for adding, `accum` or
        `param_grad_add`) or given an in-place method (`add_`); reported at the binding
        that allocates when the function never keeps the local: no assignment whose value
        mentions it (`g = buf.to(dt)` handed back keeps it), no `return` / `yield` of it,
        no other call given it.

        Not seen: the local kept through a helper that stores it (any other call given it
        counts as keeping it, so this is silent, as is a logging call), allocations by
        helpers of other names,
        a fresh tensor made by copying (`clone`: GMLP053's), writes in helpers called
        with the local by a name that says no GEMM.
    """,
    fix="""
        Allocate into the parameter (`if X.main_grad is None: X.main_grad = zeros(...)`)
        and write `X.main_grad`, or bind the fresh tensor back after the write. No
        automatic fix.
    """,
    fix_summary="none (allocate into the parameter, or bind the fresh tensor back)",
    valid=(
        Example(
            """
            def bwd_weight(self, x, dy, weight):
                if weight.main_grad is None:
                    weight.main_grad = torch.zeros(weight.shape, dtype=torch.float32)
                gemm(x, dy, weight.main_grad, accumulate=True)
            """
        ),
        Example(
            """
            def bwd_weight(self, x, dy, weight):
                main_grad = weight.main_grad if weight.main_grad is not None else torch.zeros(
                    weight.shape, dtype=torch.float32
                )
                gemm(x, dy, main_grad, accumulate=True)
                weight.main_grad = main_grad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def bwd_weight(self, x, dy, weight):
                main_grad = weight.main_grad if weight.main_grad is not None else torch.zeros(
                    weight.shape, dtype=torch.float32
                )
                gemm(x, dy, main_grad, accumulate=True)
            """,
            line=2,
        ),
    ),
)


MESSAGE = (
    "`{name}` is `{owner}.main_grad`, or where that is missing a fresh tensor; the gradient "
    "is written into it and it is never handed back, so on that path the gradient is "
    "lost: allocate into `{owner}.main_grad`, or bind `{name}` back after the write"
)


def check(context: ModuleContext, out: Collector) -> None:
    for unit in context.units:
        if not unit.survey.spells_main_grad:
            continue
        for found in fresh_fallback.fresh_fallbacks(unit):
            message = MESSAGE.format(name=found.name, owner=found.owner)
            out.report(CODE, found.binding, message)
