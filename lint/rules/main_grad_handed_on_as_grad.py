"""GMLP031: main_grad itself handed on as the weight's `.grad`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)

CODE = "GMLP031"
# Functions that produce a weight gradient (as GMLP016 judges producers).
PRODUCER_WORDS = ("backward", "wgrad", "grad_weight", "weight_grad", "_dw")
RULE = Rule(
    code=CODE,
    name="main-grad-handed-on-as-grad",
    summary=(
        "An autograd `backward` returns main_grad itself (or a name or view bound to it) as a "
        "gradient, or a weight-gradient producer sets `param.grad` to it."
    ),
    flags=(
        "`return ..., w.main_grad` / a local every binding of which is main_grad or a view of "
        "it, returned by a function named `backward`; `p.grad = <main_grad>` in a function "
        "named for producing the weight gradient or one that marks `grad_added_to_main_grad`"
    ),
    explanation="""
        Issue #19, class 2 (the second half: paths that return main_grad itself as
        `.grad`). Autograd adds what backward returns into `param.grad`, and Megatron's hook
        then adds `.grad` into main_grad unless the flag is set: main_grad handed on as the
        gradient is counted twice, or, with the flag set, autograd holds an fp32 alias of the
        buffer that later steps zero or overwrite under it.

        Seen: in a function named `backward`, a returned element (of a tuple or list) that
        is `X.main_grad`, `getattr(X, "main_grad")`, a main_grad fetch, or a local whose every
        binding reaching the `return` is one of those or a view of one (`.view`, `.data`,
        slicing); and `P.grad = <such a value>` in a function named `*backward*`, `*wgrad*`,
        `*grad_weight*`, `*weight_grad*`, `*_dw`, or one that marks
        `grad_added_to_main_grad`. (GMLP005 reports a GEMM result written into main_grad and
        returned under the mark.)

        Not seen: main_grad returned through a helper of another file or a container filled
        elsewhere; optimizers and grad-buffer code that set `.grad = main_grad` on purpose
        (they are not producers and are left alone).
    """,
    fix="""
        Hand back a dummy (`get_dummy_wgrad(...)` / `torch.zeros_like(param)`) with
        `grad_added_to_main_grad = True`, or None where the hook allows it. No automatic fix.
    """,
    fix_summary="none (hand back a dummy, not main_grad)",
    valid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = weight.main_grad
                general_gemm(x, dy, out=wgrad, accumulate=True)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """
        ),
        Example(
            """
            def copy_model_grads(params):
                for param in params:
                    param.grad = param.main_grad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = weight.main_grad
                general_gemm(x, dy, out=wgrad, accumulate=True)
                weight.grad_added_to_main_grad = True
                return None, wgrad
            """,
            line=6,
        ),
        Example(
            """
            def finish_wgrad(weight, wgrad):
                weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
                weight.grad = weight.main_grad.view(weight.shape)
            """,
            line=4,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
RETURNED = (
    "`{value}` is main_grad itself, returned as a gradient: autograd puts it in `.grad`, "
    "where Megatron's hook adds it to main_grad again (or holds an alias of the buffer); "
    "hand back a dummy"
)
ASSIGNED = (
    "`{target}` is set to main_grad itself: the hook adds it to main_grad again (or `.grad` "
    "aliases the buffer); hand back a dummy"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "main_grad" not in context.source:
        return
    for unit in context.units:
        if unit.survey.spells_main_grad and isinstance(unit.owner, cst.FunctionDef):
            _check_unit(unit, out)


def _check_unit(unit: Unit, out: Collector) -> None:
    is_backward = unit.name == "backward"
    producer = _producer(unit)
    for root, node in unit.expression_roots():
        if is_backward and isinstance(root, cst.Return) and root.value is not None:
            for element in wgrad.elements(root.value):
                if _holds(unit, element, node, set()):
                    out.report(CODE, element, RETURNED.format(value=out.text(element)))
        elif producer and isinstance(root, cst.Assign) and _holds(unit, root.value, node, set()):
            for target in root.targets:
                if patterns.is_attr(target.target, "grad"):
                    out.report(CODE, root, ASSIGNED.format(target=out.text(target.target)))


def _producer(unit: Unit) -> bool:
    current: Unit | None = unit
    while current is not None:
        if any(word in current.name.lower() for word in PRODUCER_WORDS):
            return True
        current = current.parent
    return unit.survey.spells_grad_added


def _holds(unit: Unit, expr, node, seen: set[str]) -> bool:
    """``expr`` is main_grad storage itself: the buffer, a view of it, or a local every
    binding of which reaching ``node`` is one."""
    if patterns.is_main_grad_direct(expr):
        return True
    if isinstance(expr, cst.Subscript):
        return _holds(unit, expr.value, node, seen)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in patterns.VIEW_ATTRS and _holds(unit, expr.value, node, seen)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        name = expr.func.attr.value
        return name in patterns.VIEW_METHODS and _holds(unit, expr.func.value, node, seen)
    if isinstance(expr, cst.Name) and expr.value not in seen:
        defs = unit.reaching.reaching(expr.value, node)
        seen = seen | {expr.value}
        return bool(defs) and all(
            d.kind == "assign" and d.value is not None and _holds(unit, d.value, d.node, seen)
            for d in defs
        )
    return False
