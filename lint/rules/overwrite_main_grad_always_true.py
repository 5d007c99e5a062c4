"""GMLP009: `overwrite_main_grad` set to a constant True, whatever the sharding strategy."""

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

CODE = "GMLP009"
RULE = Rule(
    code=CODE,
    classes=(4,),
    name="overwrite-main-grad-always-true",
    summary=(
        "`param.overwrite_main_grad` is set to a constant True outside any test of how "
        "gradients are sharded."
    ),
    flags=(
        "a constant True assigned to `overwrite_main_grad` (also under a bare `hasattr`) "
        "outside any test of the sharding strategy"
    ),
    explanation="""
        `overwrite_main_grad` tells the producer to write `main_grad = wgrad` instead of
        `main_grad += wgrad`. That is right only when main_grad holds one microbatch's
        gradient at a time: Megatron-FSDP with sharded gradients (ZeRO-2/3,
        `optim_grads` / `optim_grads_params`). With unsharded gradients (ZeRO-1, plain DDP)
        the buffer accumulates over microbatches, and overwriting keeps only the last one.
        Megatron-LM #6357 fixed Megatron-FSDP setting it True for every strategy; integration
        code that sets it True for every parameter that has the attribute repeats the bug.

        Reported: `X.overwrite_main_grad = True` (or `setattr(X, "overwrite_main_grad",
        True)`) unless an enclosing test names the sharding: a strategy, `shard`, `zero`,
        `optim_grads`, or an `overwrite` setting computed elsewhere. `hasattr`/`getattr` on
        the attribute itself and tests of the fusion setting do not count.

        Not seen: True reaching the attribute other than as a literal (`flag = True` then
        `p.overwrite_main_grad = flag`), an annotated assignment
        (`p.overwrite_main_grad: bool = True`), other spellings of the set
        (`p.__dict__.update(overwrite_main_grad=True)`), and sets under an enclosing test whose
        text holds a deciding word for another reason (`if getattr(p, "zero_out_wgrad", False):`
        passes for `zero`). A strategy decided by an early `return` is not seen either: such code is
        reported (suppress it with a reason).
    """,
    fix="""
        Compute the value from the sharding strategy, as Megatron-FSDP does
        (`strategy in ("optim_grads", "optim_grads_params")`), or leave the attribute to the
        code that owns the gradient buffers. No automatic fix: the strategy lives elsewhere.
    """,
    fix_summary="none (derive it from the sharding strategy)",
    valid=(
        Example(
            """
            def configure(params, strategy):
                for param in params:
                    param.overwrite_main_grad = strategy in ("optim_grads", "optim_grads_params")
            """
        ),
        Example(
            """
            def configure(params, sharding_strategy):
                if sharding_strategy != "no_shard":
                    for param in params:
                        param.overwrite_main_grad = True
            """
        ),
    ),
    invalid=(
        Example(
            """
            def expose(module):
                for param in module.parameters(recurse=False):
                    if hasattr(param, "overwrite_main_grad"):
                        param.overwrite_main_grad = True
            """,
            line=4,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`overwrite_main_grad` is set to True whatever the sharding strategy: with unsharded "
    "gradients (ZeRO-1, DDP) every microbatch then overwrites the previous ones in main_grad "
    "(Megatron-LM #6357); set it only for sharded gradients"
)
DECIDING_WORDS = ("strateg", "shard", "zero", "optim_grads", "overwrite")


def check(context: ModuleContext, out: Collector) -> None:
    if "overwrite_main_grad" not in context.source:
        return
    for unit in context.units:
        if not unit.survey.spells_overwrite:
            continue
        for stmt, _ in unit.statements():
            if _sets_true(stmt):
                node = unit.node_for(stmt)
                if node is not None and not _decided(out, node):
                    out.report(CODE, stmt, MESSAGE)


def _sets_true(stmt) -> bool:
    found = patterns.attribute_set(stmt, patterns.OVERWRITE)
    return found is not None and _is_true(found[1])


def _is_true(expr) -> bool:
    return (isinstance(expr, cst.Name) and expr.value == "True") or (
        isinstance(expr, cst.Integer) and expr.value == "1"
    )


def _decided(out: Collector, node) -> bool:
    """Some enclosing test is about the sharding (not the attribute's mere presence)."""
    for stmt_if, _ in node.enclosing_ifs:
        for operand in _operands(stmt_if.test):
            if patterns.is_getattr_of(operand, patterns.OVERWRITE) or _is_hasattr(operand):
                continue
            text = out.context.code(operand).lower()
            if any(word in text for word in DECIDING_WORDS):
                return True
    return False


def _operands(test):
    if isinstance(test, cst.BooleanOperation):
        yield from _operands(test.left)
        yield from _operands(test.right)
    elif isinstance(test, cst.UnaryOperation):
        yield from _operands(test.expression)
    else:
        yield test


def _is_hasattr(expr) -> bool:
    if patterns.callee_name(expr) != "hasattr":
        return False
    args = patterns.positional_args(expr)
    return len(args) == 2 and patterns.string_is(args[1].value, patterns.OVERWRITE)
