"""GMLP057: a weight marked written into main_grad on a path that never asked whether it
takes a weight gradient, in a function that asks elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
requires_guards = LazyModule("..analysis.requires_guards", __package__)

CODE = "GMLP057"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="mark-without-requires-grad",
    summary=(
        "`X.grad_added_to_main_grad = True` reached on a path that never tested that the "
        "weight takes a gradient, in a function that tests it elsewhere, in a block that reads "
        "main_grad: a frozen weight, which has none, is marked and its dummy sized from it."
    ),
    flags=(
        "a `grad_added_to_main_grad = True` mark under no `if` whose test requires the "
        "weight's requires-grad switch (`ctx.fc1_weight_requires_grad`, "
        "`ctx.requires_wgrad`; in the `else` of its negation too) and "
        "after no `if not <switch>: return`, in a block that also reads main_grad (a dummy "
        "sized from it), in a function that reads such a switch; reported at the innermost "
        "test guarding the mark"
    ),
    explanation="""
        Issue #19, class 3 (flags without writes). A weight that does not require a
        gradient (frozen, as LoRA and partial fine-tuning freeze base weights) gets no
        weight-gradient GEMM, so nothing is written into its main_grad, and Megatron
        allocates no main_grad for it. Producers such as Transformer Engine's
        `_LayerNormMLP.backward` therefore mark `grad_added_to_main_grad` and build the
        dummy only under `if ctx.fc1_weight_requires_grad:`. A refactor that folds that
        test into an `elif` (blind corpus 12: `if ctx.fuse_wgrad_accumulation and
        hasattr(w, "grad_added_to_main_grad"):` first, `elif ... or not
        ctx.fc1_weight_requires_grad:` after) marks the frozen weight and sizes a dummy
        from a main_grad that is None.

        Seen: a function that reads a requires-grad switch of a weight (an attribute or
        name spelling `requires_grad` with `weight` or `wgrad` in it, or `requires_wgrad`);
        each mark setting the flag to `True` there that is nested in no `if` requiring the
        switch (its body when the test reads it unnegated, its `else` when negated) and is
        dominated by no `if` that leaves when the switch is off, where the block around the
        mark reads main_grad (`torch.zeros(fc1_weight_main_grad.shape, ...)`: a frozen
        weight has none, so that read fails). A block that sizes its dummy from the weight
        (Transformer Engine's ops: `get_dummy_wgrad(list(w.size()), ...)`) marks a frozen
        weight harmlessly and is left alone. Reported at the test of the
        innermost `if` around the mark, where the switch belongs (at the mark when there is
        none). The weight's own `X.requires_grad` does not make a function one that reads a
        switch (Megatron's linear reads it into `wgrad_compute` and marks the weight
        whatever it says: a deferred wgrad is computed later), but as a guard it counts
        (Transformer Engine 1.x's `if weight.requires_grad:`), as do a local assigned from
        a switch (`wgrad_needed = ctx.requires_wgrad`), one expert's item of a switch
        (`ctx.weights_requires_grad[i]`), `is True` / `== True`, and an early `continue`.
        The block's main_grad read may be the fetch `X.get_main_grad()`.

        Not seen: the switch tested by the caller (a helper given only the weight), or
        spelled with other words; which weight a switch belongs to (any weight's switch
        counts).
    """,
    fix="""
        Test the weight's requires-grad switch on the path that marks it (`if
        ctx.fc1_weight_requires_grad and ctx.fuse_wgrad_accumulation and hasattr(...)`).
        No automatic fix.
    """,
    fix_summary="none (mark only where the weight takes a gradient)",
    valid=(
        Example(
            """
            def _handle_fc1_wgrad(ctx, weight, main_grad, wgrad):
                if ctx.fc1_weight_requires_grad:
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        wgrad = torch.zeros(main_grad.shape, dtype=weight.dtype)
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                else:
                    wgrad = None
                return wgrad
            """
        ),
        Example(
            """
            def finish(ctx, weight, wgrad):
                if not ctx.requires_wgrad:
                    return None
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    return torch.zeros_like(weight)
                return wgrad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def _handle_fc1_wgrad(ctx, weight, main_grad, wgrad):
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    wgrad = torch.zeros(main_grad.shape, dtype=weight.dtype)
                elif ctx.fuse_wgrad_accumulation or not ctx.fc1_weight_requires_grad:
                    wgrad = None
                return wgrad
            """,
            line=2,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{weight}.grad_added_to_main_grad` is set on a path that never tests `{switch}`, which "
    "this function reads: a weight that takes no gradient has no main_grad to size the "
    "dummy from, and is marked though nothing was written for it; test `{switch}` here"
)


def check(context: ModuleContext, out: Collector) -> None:
    if patterns.GRAD_ADDED not in context.source or "requires" not in context.source:
        return
    for unit in context.units:
        if not unit.survey.spells_grad_added or type(unit.owner) is not cst.FunctionDef:
            continue
        for found in requires_guards.unguarded_marks(unit):
            out.report(
                CODE,
                found.anchor,
                MESSAGE.format(weight=out.context.code(found.weight).strip(), switch=found.switch),
            )
