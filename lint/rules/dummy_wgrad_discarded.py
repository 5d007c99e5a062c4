"""GMLP018: the dummy wgrads built by the main_grad bookkeeping are replaced by None."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)

CODE = "GMLP018"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="dummy-wgrad-discarded",
    summary=(
        "The weight gradients returned by the main_grad bookkeeping (a flag set and a dummy "
        "made) are overwritten with None before they are handed back."
    ),
    flags=(
        "`grads = None` / `[None] * n` / `(None,) * n` reached by a binding of `grads` from "
        "the module's bookkeeping helper or a dummy-wgrad call, where `grads` is returned"
    ),
    explanation="""
        Issue #19, class 3 (flags without the rest of the contract). A producer that wrote a
        weight's gradient into main_grad sets `grad_added_to_main_grad = True` and hands
        autograd a dummy gradient, so that the AccumulateGrad node runs and Megatron's DDP
        hook fires for that weight. Replacing those dummies with None afterwards keeps the
        flag but drops the dummy: with overlapped gradient reduction the hook that counts
        the weight as ready never fires, or (with delayed wgrad) fires on a stale `.grad`.
        Transformer Engine #2142: GroupedLinear built the dummies with
        `handle_custom_ddp_from_mcore` and then, under delayed wgrad, set
        `wgrad_list = [None] * ctx.num_gemms`.

        Seen: within one function, a binding of a name from a call of a function that sets
        `grad_added_to_main_grad` or makes a dummy wgrad, defined in the same module or at
        the top level of another file linted in the same run (or from a
        `*dummy*` call, also inside a list comprehension), followed on some path (reaching
        definitions over the control-flow graph) by a rebinding of that name to None or a
        list or tuple of None, where the name is returned (or stored into what is returned).

        Not seen: dummies dropped by a helper of another file, or by assigning into the
        list item by item; whether the path that drops them is one Megatron's hooks use.
    """,
    fix="""
        Keep the dummies where the bookkeeping made them: make the None only on the paths
        where no bookkeeping ran (no wgrad fusion), or move the bookkeeping to where the
        wgrad is written (for delayed wgrad, `backward_dw`). No automatic fix.
    """,
    fix_summary="none (keep the dummy the bookkeeping made)",
    valid=(
        Example(
            """
            def finish(ctx, weights, wgrads):
                if ctx.fuse_wgrad_accumulation:
                    wgrads = [mark_main_grad(w, g) for w, g in zip(weights, wgrads)]
                else:
                    wgrads = [None] * len(weights)
                return wgrads


            def mark_main_grad(weight, wgrad):
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=zero)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def finish(ctx, weights, wgrads):
                if ctx.fuse_wgrad_accumulation:
                    wgrads = [mark_main_grad(w, g) for w, g in zip(weights, wgrads)]
                if ctx.delay_wgrad_compute:
                    wgrads = [None] * len(weights)
                return wgrads


            def mark_main_grad(weight, wgrad):
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=zero)
            """,
            line=5,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{name}` is set to None here after line {line} filled it with the bookkeeping's dummy "
    "gradients (grad_added_to_main_grad was set): the flag stays, the dummy is dropped, and "
    "Megatron's hook for these weights does not fire as it should"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "None" not in context.source:
        return
    helpers = context.bookkeeping_helpers
    if not helpers and "dummy" not in context.source:
        return
    for unit in context.units:
        if unit.survey.calls & helpers or any("dummy" in c for c in unit.survey.calls):
            _check_unit(unit, helpers, out)


def _check_unit(unit: Unit, helpers: frozenset[str], out: Collector) -> None:
    handed = wgrad.handed_back(unit) | unit.returned_names
    for late in unit.graph.defs:
        if late.kind != "assign" or late.name not in handed or not _only_none(late.value):
            continue
        for early in unit.reaching.reaching(late.name, late.node):
            if early.kind == "assign" and _from_bookkeeping(early.value, helpers):
                line = unit.context.line_of(early.node.owner)
                out.report(CODE, late.node.owner, MESSAGE.format(name=late.name, line=line))
                break


def _from_bookkeeping(value, helpers: frozenset[str]) -> bool:
    if value is None:
        return False
    for sub in patterns.walk(value):
        name = patterns.callee_name(sub)
        if name is not None and (name in helpers or "dummy" in name):
            return True
    return False


def _only_none(value) -> bool:
    """None, ``[None] * n``, ``(None,) * n``, ``[None, None]``, ``[None for _ in ...]``."""
    if value is None:
        return False
    if isinstance(value, cst.Name):
        return value.value == "None"
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return _only_none(value.left) or _only_none(value.right)
    if isinstance(value, (cst.List, cst.Tuple)):
        return bool(value.elements) and all(_only_none(e.value) for e in value.elements)
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return _only_none(value.elt)
    return False
