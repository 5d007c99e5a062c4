"""GMLP013: main_grad chosen as the wgrad destination, but the GEMM never sees that choice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.cfg import Def
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)

CODE = "GMLP013"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="main-grad-destination-never-written",
    summary=(
        "A name is bound to main_grad as the wgrad destination, but no GEMM that takes that "
        "name ever receives this binding: the GEMM runs only where the name holds scratch."
    ),
    flags=(
        "a main_grad destination (a name bound to main_grad or a list of them) that reaches "
        "no GEMM, while the GEMM reading that name sees only other bindings"
    ),
    explanation="""
        The destination of the weight-gradient GEMM is often chosen first
        (`wgrad_list = [w.main_grad for w in weights]` under the fusion setting, scratch
        buffers otherwise) and the GEMM called afterwards. If the GEMM ended up inside the
        scratch branch, the main_grad path chooses its destination and never writes it:
        main_grad keeps stale values and the gradient is lost (Transformer Engine #1488 in
        GroupedLinear).

        Reported: a binding of a name to main_grad (directly, as a view, or as a list of
        main_grads) from which no GEMM-like call (a `gemm`/`matmul`/`*mm` call or one with
        `out=`) that reads the name can be reached, while such a call exists and reads the
        name's other bindings. A binding to the same buffer that reaches the GEMM (`mg =
        w.main_grad` read by a test, then bound again before the call) writes the destination.

        Not seen: a destination filled item by item (`wgrad_list.append(w.main_grad)`), made of
        views (`[w.main_grad.view(-1) for w in weights]`) or kept on an attribute
        (`ctx.dst = [...]`); a main_grad binding not under an `if` (the main_grad path that follows
        an early `return` of the scratch path); a GEMM that says neither gemm, matmul nor mm and
        takes no `out=` (`run_wgrad(x, dy, wgrad_list)`), or one in a helper or another function:
        with no GEMM reading the name in the function itself, nothing is reported.
    """,
    fix="""
        Call the GEMM where both bindings reach it (dedent it out of the `else`). No
        automatic fix.
    """,
    fix_summary="none (call the GEMM after the choice)",
    valid=(
        Example(
            """
            def wgrads(ctx, weights, x, dy):
                if ctx.fuse_wgrad_accumulation:
                    wgrad_list = [w.main_grad for w in weights]
                else:
                    wgrad_list = [torch.empty(w.size(), dtype=w.dtype) for w in weights]
                grouped_gemm(x, dy, wgrad_list)
                return wgrad_list
            """
        ),
    ),
    invalid=(
        Example(
            """
            def wgrads(ctx, weights, x, dy):
                if ctx.fuse_wgrad_accumulation:
                    wgrad_list = [w.main_grad for w in weights]
                else:
                    wgrad_list = [torch.empty(w.size(), dtype=w.dtype) for w in weights]
                    grouped_gemm(x, dy, wgrad_list)
                return wgrad_list
            """,
            line=3,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{name}` is bound to main_grad here, but no GEMM that reads `{name}` receives this "
    "binding (the GEMM at line {line} sees only its other bindings): main_grad is chosen as "
    "the destination and never written"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "main_grad" not in context.source:
        return
    for unit in context.units:
        if unit.survey.spells_main_grad:
            _check_unit(unit, out)


def _check_unit(unit: Unit, out: Collector) -> None:
    candidates = [d for d in unit.graph.defs if _binds_main_grad(d)]
    if not candidates:
        return
    readers: dict[str, list] = {}
    for root, node in unit.expression_roots():
        for sub in patterns.walk(root):
            if isinstance(sub, cst.Call) and wgrad.looks_like_gemm(sub):
                for arg in sub.args:
                    for name in patterns.read_names(arg.value):
                        readers.setdefault(name.value, []).append((sub, node))
    reaching = unit.reaching
    for d in candidates:
        gemms = readers.get(d.name)
        if not gemms:
            continue
        received = [r for _, node in gemms for r in reaching.reaching(d.name, node)]
        if d in received:
            continue
        # The same buffer bound again on the way to the GEMM (``mg = w.main_grad`` read by a
        # test, then ``mg = w.main_grad`` before the call): the destination is written.
        code = unit.context.code(d.value)
        if any(r.value is not None and unit.context.code(r.value) == code for r in received):
            continue
        # Or carried on by a binding that reads it (``main_grad = main_grad if fuse else
        # None``: the buffer the GEMM gets is this one).
        if any(_carries(unit, r, d) for r in received):
            continue
        call, _ = gemms[0]
        line = unit.context.line_of(call)
        out.report(CODE, d.node.owner, MESSAGE.format(name=d.name, line=line))


def _carries(unit: Unit, later: Def, d: Def) -> bool:
    """The binding ``later`` reads the name ``d`` binds, where ``d`` reaches it."""
    if later.value is None:
        return False
    names = {n.value for n in patterns.read_names(later.value)}
    return d.name in names and d in unit.reaching.reaching(d.name, later.node)


def _binds_main_grad(d: Def) -> bool:
    if d.kind != "assign" or d.value is None or not d.node.enclosing_ifs:
        return False
    value = d.value
    if isinstance(value, (cst.List, cst.Tuple)):
        return bool(value.elements) and all(
            patterns.is_main_grad_direct(e.value) for e in value.elements
        )
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return patterns.is_main_grad_direct(value.elt)
    return patterns.is_main_grad_direct(value)
