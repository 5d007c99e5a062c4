"""GMLP049: a bookkeeping flag set to True only under a test that it already holds."""

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
gates = LazyModule("..analysis.gates", __package__)

CODE = "GMLP049"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="flag-set-only-when-set",
    summary=(
        "`X.grad_added_to_main_grad = True` runs only under a test that the flag is already "
        "true (`getattr(X, 'grad_added_to_main_grad', False)`, `X.grad_added_to_main_grad`): "
        "the assignment can never change it, so the weight's bookkeeping is never done."
    ),
    flags=(
        "a test of an `if` (or one operand of its `and` chain) that requires "
        "`X.grad_added_to_main_grad` to be true (the attribute, `getattr` of it with a false "
        "or no default, or spelled `X.f if hasattr(X, 'f') else False`, `bool(...)` of these, "
        "`is True` / `== True`), whose body sets "
        "`X.grad_added_to_main_grad = True` (or by `setattr`) on the same `X`"
    ),
    explanation="""
        Issue #19, class 3 (flags without writes); blind corpus 8's TE `_LayerNormLinear`
        variant. Megatron's DDP resets `grad_added_to_main_grad` to False when it zeroes the
        grad buffers, and a producer that has written the weight gradient into main_grad
        sets it to True so that the grad-accumulation hook does not add the dummy `.grad`
        again. The producer asks whether the Parameter takes part in that protocol with
        `hasattr(X, "grad_added_to_main_grad")`. Asking the flag's value instead
        (`getattr(X, "grad_added_to_main_grad", False)`) makes the branch run only where the
        flag is already set: at the first microbatch after a reset it is False, so the flag
        is never set, no dummy wgrad is returned (the branch that returns it is skipped), and
        the hook acts as if nothing had been written into main_grad.

        Seen: the flag's value required by an `if` test or by one operand of an `and` chain
        of it, and an assignment of `True` to the same flag of the same object (same source
        text) anywhere in that `if`'s body, outside nested functions.

        Left alone: a body that clears the flag first (`= False`) or rebinds the object's
        name (`for w in ...`): the set may then change it.

        Not seen: the test and
        the assignment in different functions, the value read into a local first
        (`done = getattr(...)`), `or` chains, and other flags.
    """,
    fix="""
        Ask whether the Parameter carries the flag: `hasattr(X, "grad_added_to_main_grad")`.
        No automatic fix (it changes which path runs).
    """,
    fix_summary="none (test `hasattr(X, 'grad_added_to_main_grad')`)",
    valid=(
        Example(
            """
            def finish(weight, main_grad):
                if hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    return torch.zeros_like(main_grad)
                return None
            """
        ),
        Example(
            """
            def finish(weight, main_grad):
                if not getattr(weight, "grad_added_to_main_grad", False):
                    weight.grad_added_to_main_grad = True
                return torch.zeros_like(main_grad)
            """
        ),
        Example(
            """
            def hook(param):
                if param.grad is not None and not param.grad_added_to_main_grad:
                    param.main_grad.add_(param.grad.data)
                param.grad = None
            """
        ),
    ),
    invalid=(
        Example(
            """
            def finish(ctx, weight, main_grad):
                if ctx.fuse_wgrad and getattr(weight, "grad_added_to_main_grad", False):
                    weight.grad_added_to_main_grad = True
                    return torch.zeros_like(main_grad)
                return None
            """,
            line=2,
        ),
        Example(
            """
            def finish(weight, main_grad):
                if weight.grad_added_to_main_grad:
                    if weight.requires_grad:
                        setattr(weight, "grad_added_to_main_grad", True)
                    return torch.zeros_like(main_grad)
                return None
            """,
            line=2,
        ),
    ),
)


MESSAGE = (
    "`{flag}` is set to True only under this test that it is already true, so it is never "
    "set: after Megatron's reset the weight's bookkeeping is skipped; ask "
    '`hasattr({subject}, "grad_added_to_main_grad")`'
)


def check(context: ModuleContext, out: Collector) -> None:
    if patterns.GRAD_ADDED not in context.source:
        return
    for unit in context.units:
        for stmt, _ in unit.statements():
            if type(stmt) is not cst.If:
                continue
            for operand in gates.and_operands(stmt.test):
                subject = _required_true(operand)
                if subject is None:
                    continue
                text = out.context.code(subject).strip()
                if _sets_true(stmt.body, text, out) and not _changes(stmt.body, subject, out):
                    out.report(
                        CODE,
                        operand,
                        MESSAGE.format(flag=f"{text}.{patterns.GRAD_ADDED}", subject=text),
                    )


def _required_true(expr):
    """The object whose flag ``expr`` requires to be true, else None."""
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if type(target.operator) in (cst.Is, cst.Equal) and patterns.is_true_literal(
            target.comparator
        ):
            expr = expr.left
    if type(expr) is cst.Call and patterns.callee_name(expr) == "bool" and len(expr.args) == 1:
        expr = expr.args[0].value
    if type(expr) is cst.IfExp and patterns.is_false_literal(expr.orelse):
        expr = expr.body  # ``X.flag if hasattr(X, "flag") else False``: getattr spelled out
    if patterns.is_attr(expr, patterns.GRAD_ADDED):
        return expr.value
    if type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "getattr":
        args = expr.args
        if (
            2 <= len(args) <= 3
            and patterns.string_value(args[1].value) == patterns.GRAD_ADDED
            and (len(args) == 2 or patterns.is_false_literal(args[2].value))
        ):
            return args[0].value
    return None


def _sets_true(body, subject: str, out: Collector) -> bool:
    """``subject.grad_added_to_main_grad = True`` (or ``setattr``) somewhere in ``body``
    (``walk`` does not enter nested functions and classes)."""
    for node in patterns.walk(body):
        if type(node) is cst.Assign and patterns.is_true_literal(node.value):
            for target in node.targets:
                flag = target.target
                if (
                    patterns.is_attr(flag, patterns.GRAD_ADDED)
                    and out.context.code(flag.value).strip() == subject
                ):
                    return True
        if type(node) is cst.Call and patterns.callee_name(node) == "setattr":
            args = node.args
            if (
                len(args) == 3
                and patterns.string_value(args[1].value) == patterns.GRAD_ADDED
                and patterns.is_true_literal(args[2].value)
                and out.context.code(args[0].value).strip() == subject
            ):
                return True
    return False


def _changes(body, subject, out: Collector) -> bool:
    """The body clears the flag first (``= False``) or rebinds the object's name (``for w in
    ...``, ``w = ...``): the set that follows may then change it."""
    root = subject
    while type(root) in (cst.Attribute, cst.Subscript):
        root = root.value
    name = root.value if type(root) is cst.Name else None
    text = out.context.code(subject).strip()
    for node in patterns.walk(body):
        if type(node) is cst.Assign:
            for target in node.targets:
                flag = target.target
                if (
                    patterns.is_attr(flag, patterns.GRAD_ADDED)
                    and patterns.is_false_literal(node.value)
                    and out.context.code(flag.value).strip() == text
                ):
                    return True
                if type(flag) is cst.Name and flag.value == name:
                    return True
        elif type(node) is cst.For and name in _bound_names(node.target):
            return True
    return False


def _bound_names(target) -> set[str]:
    return {n.value for n in patterns.walk(target) if type(n) is cst.Name}
