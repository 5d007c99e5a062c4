"""GMLP010: main_grad marked for CPU offloading."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import UNSAFE, Edit, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
copyable = LazyModule("..analysis.copyable", __package__)

CODE = "GMLP010"
RULE = Rule(
    code=CODE,
    classes=(),
    name="main-grad-offloaded",
    summary="A parameter's main_grad is marked for CPU offloading.",
    flags=(
        "an offload marker on main_grad (`p.main_grad.weight_offloading = True`, main_grad "
        "passed to an `*offload*` call)"
    ),
    explanation="""
        main_grad must be the destination itself: the wgrad GEMM writes into it and
        Megatron's gradient buffer reads it. Marked for activation offloading, it is copied
        to the host after forward and a copy comes back for backward, so the GEMM
        accumulates into the copy and the real buffer never sees the gradient
        (Transformer Engine #1026 in Linear, LayerNormLinear and LayerNormMLP, #1034 in
        GroupedLinear: "convergence issues with CPU offloading").

        Reported: an assignment to an attribute of `X.main_grad` whose name contains
        `offload`, and `X.main_grad` passed to a call whose name contains `offload`.

        Not seen: main_grad marked through a local (`mg = w.main_grad` then
        `mg.weight_offloading = True`; a local handed to an `*offload*` call is seen), through
        `setattr(w.main_grad, "weight_offloading", True)`, inside a list or tuple
        (`mark_offload([w.main_grad, x])`), by a call whose result is kept
        (`handle = mark_offload(w.main_grad)`), or by an offload handler whose method does not say
        offload (`offload_handler.push(w.main_grad)`); main_grad saved for backward inside an
        offloading context (`with cpu_offload_context(): ctx.save_for_backward(w.main_grad)`);
        marking done by helpers of other files.
    """,
    fix="""
        Remove the marking (unsafe: make sure the backward still re-attaches the device
        main_grad to the parameter). A statement that does more than mark main_grad (binds a
        name, marks another tensor too, calls something else) is reported without a fix.
    """,
    fix_summary="remove the marking (unsafe)",
    valid=(
        Example(
            """
            def mark_for_offload(weight, weight_fp8, fuse_wgrad_accumulation):
                weight.weight_offloading = True
                if weight_fp8 is not None:
                    weight_fp8.weight_offloading = True
            """
        ),
    ),
    invalid=(
        Example(
            """
            def mark_for_offload(weight, fuse_wgrad_accumulation):
                weight.weight_offloading = True
                if fuse_wgrad_accumulation:
                    weight.main_grad.weight_offloading = True
            """,
            line=4,
            fixed="""
            def mark_for_offload(weight, fuse_wgrad_accumulation):
                weight.weight_offloading = True
                if fuse_wgrad_accumulation:
                    pass
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def mark_for_offload(weights, fuse_wgrad_accumulation):
                for w in weights:
                    mark_activation_offload(w)
                    mark_activation_offload(w.main_grad)
            """,
            line=4,
            fixed="""
            def mark_for_offload(weights, fuse_wgrad_accumulation):
                for w in weights:
                    mark_activation_offload(w)
            """,
            applicability="unsafe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "main_grad is marked for CPU offloading: the wgrad GEMM then accumulates into a copy "
    "that comes back from the host and the real buffer never receives the gradient; "
    "main_grad must stay the destination itself"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "offload" not in context.source:
        return
    for unit in context.units:
        if not unit.survey.spells_main_grad:
            continue
        flagged: list[tuple[cst.CSTNode, tuple]] = []
        for stmt, suite in unit.statements():
            if _marks_main_grad(stmt, partial(_holds_main_grad, unit, stmt=stmt)):
                flagged.append((stmt, suite))
        for stmt, suite in flagged:
            holds = partial(_holds_main_grad, unit, stmt=stmt)
            fix = _removal(out, stmt, suite, flagged) if _only_marks(stmt, holds) else None
            out.report(CODE, stmt, MESSAGE, fix)


def _holds_main_grad(unit, arg, *, stmt) -> bool:
    """``arg`` is a local every binding of which reaching ``stmt`` is main_grad
    (``mg = w.main_grad``; ``mark_offload(mg)``)."""
    if type(arg) is not cst.Name:
        return False
    node = unit.node_for(stmt)
    defs = unit.reaching.reaching(arg.value, node) if node is not None else []
    return bool(defs) and all(
        d.value is not None and patterns.main_grad_owner(d.value) is not None for d in defs
    )


def _marks_main_grad(stmt, holds=lambda arg: False) -> bool:
    if isinstance(stmt, cst.Assign):
        return any(
            isinstance(t.target, cst.Attribute)
            and "offload" in t.target.attr.value
            and patterns.main_grad_owner(t.target.value) is not None
            for t in stmt.targets
        )
    if isinstance(stmt, cst.Expr):
        for sub in patterns.walk(stmt.value):
            if "offload" in (patterns.callee_name(sub) or "") and any(
                patterns.main_grad_owner(arg.value) is not None or holds(arg.value)
                for arg in sub.args
            ):
                return True
    return False


def _only_marks(stmt, holds) -> bool:
    """Whether removing ``stmt`` removes the marking and nothing else. A statement that also
    binds a name (``flag = w.main_grad.offloading = True``), offloads something else
    (``mark_activation_offload(w, w.main_grad)``: ``w`` must stay marked), calls something
    else around or inside the marking (``log(mark_offload(w.main_grad))``,
    ``w.main_grad.offloading = compute(w)``) keeps its finding but gets no fix: deleting it
    wrote code that no longer did those things."""
    if isinstance(stmt, cst.Assign):
        target = stmt.targets[0].target
        owner = patterns.main_grad_owner(target.value) if type(target) is cst.Attribute else None
        return (
            len(stmt.targets) == 1
            and copyable.is_plain_path(owner)
            and copyable.is_inert(stmt.value)
        )
    call = stmt.value if isinstance(stmt, cst.Expr) else None
    if type(call) is not cst.Call or "offload" not in (patterns.callee_name(call) or ""):
        return False
    if not copyable.is_plain_path(call.func):
        return False
    for arg in call.args:
        if arg.star:
            return False
        held = copyable.is_plain_path(patterns.main_grad_owner(arg.value)) or holds(arg.value)
        if not held and not (arg.keyword is not None and copyable.is_inert(arg.value)):
            return False
    return True


def _removal(out: Collector, stmt, suite, flagged) -> Fix | None:
    """Delete the statement's line; the first of a suite made only of flagged statements
    becomes ``pass`` so the suite stays valid."""
    line_node = next(
        (s for s in suite if isinstance(s, cst.SimpleStatementLine) and stmt in s.body), None
    )
    if line_node is None or len(line_node.body) != 1:
        return None
    context = out.context
    start, before = out.line_start(stmt)
    if before.strip():
        return None
    _, _, end_line, _ = context.span(stmt)
    end = context.line_starts[end_line] if end_line < len(context.line_starts) else None
    if end is None:
        return None
    mine = {id(s) for s, other in flagged if other is suite}
    lines = [s for s in suite if isinstance(s, cst.SimpleStatementLine)]
    only_flagged = len(lines) == len(suite) and all(
        len(s.body) == 1 and id(s.body[0]) in mine for s in lines
    )
    if only_flagged and lines[0] is line_node:
        return Fix("Replace the marking with `pass`", (out.replace(stmt, "pass"),), UNSAFE)
    return Fix("Remove the marking", (Edit(start, end, ""),), UNSAFE)
