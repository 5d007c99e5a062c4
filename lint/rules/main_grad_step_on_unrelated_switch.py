"""GMLP006: main_grad bookkeeping or re-attachment nested under an unrelated feature switch."""

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
gates = LazyModule("..analysis.gates", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)
module = LazyModule("..analysis.module", __package__)
branches = LazyModule("..analysis.branches", __package__)
writing_helpers = LazyModule("..analysis.writing_helpers", __package__)
allocation_marks = LazyModule("..analysis.allocation_marks", __package__)

CODE = "GMLP006"
RULE = Rule(
    code=CODE,
    classes=(7,),
    name="main-grad-step-on-unrelated-switch",
    summary=(
        "`grad_added_to_main_grad = True`, or re-attaching a parameter's main_grad, happens "
        "only under a test about something else (a feature switch such as CPU offloading)."
    ),
    flags=(
        "`grad_added_to_main_grad = True` or a main_grad re-attachment nested under a test "
        "that is not about weights or gradients (`if runner.gtp_remat:`, "
        "`if ctx.cpu_offloading:`); `X.grad_added_to_main_grad = True` directly in the body "
        "of an `if` that asks whether X's main_grad is missing (`X.main_grad is None`, "
        "`not hasattr(X, 'main_grad')`, `getattr(X, 'main_grad', None) is None`) that only "
        "allocates it, X marked nowhere else in the function"
    ),
    explanation="""
        Whether a weight's gradient went into main_grad, and so whether the DDP hook must be
        told (`grad_added_to_main_grad = True`), is decided by the op-level setting, not by
        which optional feature is on. The same holds for handing a parameter back the
        main_grad buffer that forward saved (`weight.main_grad = main_grad`): later code on
        the fused path reads `weight.main_grad` whether or not the feature is on.

        * Megatron-LM #6373: after a CUDA-graph replay had accumulated every wgrad into
          main_grad, `grad_added_to_main_grad` was set only inside `if runner.gtp_remat:`;
          the other parameters kept the flag False and their contributions were dropped.
        * Transformer Engine #2371: the main_grad fetched in forward (for Megatron-FSDP) was
          re-attached only inside `if ctx.cpu_offloading:`, so without offloading the
          backward sized its dummy from, and wrote into, a stale or missing main_grad.

        A test counts as related when it names a gradient, a weight, a parameter,
        accumulation, fusion, FSDP, delay, overwrite or zero_out in any spelling, or only
        asks whether something is None; a local counts by what it was bound to as well as by
        its name (`f = ctx.fuse_wgrad_accumulation; if f:` is related, `r = runner.gtp_remat;
        if r:` is not); anything else is a feature switch. A re-attachment
        is checked in modules that fetch main_grad from Megatron-FSDP (they call
        `get_main_grad` or test `__fsdp_param__`: before that, the parameter kept its own
        main_grad and the saved buffer was the same tensor), and only when a later read of
        the same weight's main_grad sits outside the switch and the weight object does not
        itself exist only under the switch.

        The same slip with a test about main_grad itself: the mark set where main_grad is
        first allocated (`if weight.main_grad is None: weight.main_grad = zeros(...);
        weight.grad_added_to_main_grad = True`, then the GEMM into it after the `if`: blind
        corpus 22, PaddleFormers' expert weight gradient). The write runs on every
        microbatch, the mark on the first alone. Seen: the mark's innermost enclosing `if`,
        on its body side, tests that the same weight's main_grad is missing, its body binds
        that main_grad to a fresh buffer (an allocator: `zeros`, `empty`, `ones`, `full`,
        `zeros_like`, `new_zeros`...) and touches it no other way, and the function marks
        the weight nowhere else. Left alone: a body that writes the first gradient into the
        buffer or binds main_grad to the gradient itself, a redundant mark beside one after
        the write. The test may be an `or` of such tests on one weight (`not hasattr(w,
        "main_grad") or w.main_grad is None`). Not seen: main_grad allocated by `setattr` or
        read through a local.

        Not seen: a switch that is not an enclosing `if` (an early `if not runner.gtp_remat:
        return` before the mark, a `while`) or whose test names a related word anyway
        (`if runner.offload_weights:` says weight); a mark made by a helper called under the
        switch, or set to a value other than the literal `True` (`= done`; a loop putting back
        the marks a CUDA-graph capture recorded, `for p, v in
        runner.groundtruth_grad_added_to_main_grad.items(): p.grad_added_to_main_grad = v`, is
        seen: blind corpus 10); marks on `ctx`, where
        forward records whether the parameter has the attribute; a mark made only in the
        `else` / `elif` of an unrelated switch (the switch's path may hand on a real gradient
        that needs no mark: `if ctx.fp8: <real wgrad> elif fuse: <write; mark>`). Left alone:
        a switch whose body also writes that weight's main_grad (itself, or by calling a
        helper of the file that writes the main_grad of the weight it is handed:
        `analysis/writing_helpers.py`), or whose other path marks it too, and re-attachments
        in modules that never mention Megatron-FSDP.
    """,
    fix="""
        Move the statement out of the unrelated `if` (keep the op-level and `hasattr`
        guards). No automatic fix: which guards to keep needs a reader.
    """,
    fix_summary="none (move it out of the unrelated `if`)",
    valid=(
        Example(
            """
            def after_replay(runner):
                for param in runner.params_to_backprop:
                    if hasattr(param, "grad_added_to_main_grad"):
                        param.grad_added_to_main_grad = True
                if runner.gtp_remat:
                    for param in runner.params_to_backprop:
                        param.grad = None
            """
        ),
        Example(
            """
            def restore(ctx, weight):
                main_grad = ctx.main_grad
                if ctx.cpu_offloading:
                    weight = ctx.weight_object
                if ctx.requires_wgrad and ctx.fuse_wgrad_accumulation:
                    weight.main_grad = main_grad
                return weight.main_grad.shape
            """
        ),
        Example(
            """
            def wgrad(ctx, x, dy, weight):
                if ctx.fp8_enable:
                    grad_weight = fp8_gemm(dy, x)
                elif ctx.fuse_wgrad_accumulation:
                    fused_matmul_add(x, dy, weight.main_grad)
                    weight.grad_added_to_main_grad = True
                    grad_weight = None
                else:
                    grad_weight = dy.t() @ x
                return grad_weight
            """
        ),
        Example(
            """
            def _accumulate(x, dy, weight):
                grouped_gemm(x, dy, weight.main_grad, accumulate=True)


            def backward(ctx, x, dy, weight):
                if ctx.use_gmm:
                    _accumulate(x, dy, weight)
                    weight.grad_added_to_main_grad = True
                    return None
                return dy.t() @ x
            """
        ),
        Example(
            """
            def compute_expert_w_grad(input_t, dout_t, weight=None):
                if hasattr(weight, "main_grad"):
                    if weight.main_grad is None:
                        weight.main_grad = paddle.zeros(shape=weight.shape, dtype=paddle.float32)
                    kitchen_gemm(input_t, dout_t, weight.main_grad, accumulate=True)
                    weight.grad_added_to_main_grad = True
                else:
                    weight.grad = kitchen_gemm(input_t, dout_t)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def after_replay(runner):
                if runner.gtp_remat:
                    for param in runner.params_to_backprop:
                        param.grad = None
                        if hasattr(param, "grad_added_to_main_grad"):
                            param.grad_added_to_main_grad = True
                return (None,) * len(runner.params_to_backprop)
            """,
            line=6,
        ),
        Example(
            """
            def save(ctx, weight):
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                ctx.main_grad = weight.main_grad


            def restore(ctx, weight):
                main_grad = ctx.main_grad
                if ctx.cpu_offloading:
                    weight = ctx.weight_object
                    if ctx.requires_wgrad and ctx.fuse_wgrad_accumulation:
                        weight.main_grad = main_grad
                return weight.main_grad.shape
            """,
            line=12,
        ),
        Example(
            """
            def compute_expert_w_grad(input_t, dout_t, weight=None):
                if hasattr(weight, "main_grad"):
                    if weight.main_grad is None:
                        weight.main_grad = paddle.zeros(shape=weight.shape, dtype=paddle.float32)
                        weight.grad_added_to_main_grad = True
                    kitchen_gemm(input_t, dout_t, weight.main_grad, accumulate=True)
                else:
                    weight.grad = kitchen_gemm(input_t, dout_t)
            """,
            line=5,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MARK = (
    "`grad_added_to_main_grad` is set only under `{guard}`, a switch unrelated to where the "
    "gradient went: without it the DDP hook sees the flag False and drops or re-adds this "
    "weight's gradient; set it wherever main_grad received the gradient"
)
ALLOCATION = (
    "`grad_added_to_main_grad` is set only where main_grad is allocated (`if {guard}:`): the "
    "write into main_grad runs on every microbatch, the mark on the first alone, so from "
    "the second on the hook adds the real gradient into main_grad again"
)
REATTACH = (
    "main_grad is re-attached to `{subject}` only under `{guard}`, a switch unrelated to the "
    "fused path, while `{subject}.main_grad` is read later regardless: without it that read "
    "sees a stale or missing buffer; re-attach on the fused path itself"
)


FSDP_WORDS = ("get_main_grad", "__fsdp_param__")


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" not in source:
        return
    # Re-attaching matters where forward fetched the buffer from Megatron-FSDP: before
    # that, the parameter kept its own main_grad and the saved one was the same tensor.
    fsdp = any(word in source for word in FSDP_WORDS)
    for unit in context.units:
        if unit.survey.spells_main_grad or unit.survey.spells_grad_added:
            _check_unit(unit, out, fsdp)


def _check_unit(unit: Unit, out: Collector, fsdp: bool) -> None:
    restored = _restored_marks(unit) if unit.survey.spells_grad_added else {}
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.BaseCompoundStatement):
            continue
        subject = wgrad.marked_subject(stmt) or restored.get(id(stmt))
        reattached = _reattached(stmt) if subject is None and fsdp else None
        if subject is None and reattached is None:
            continue
        node = unit.node_for(stmt)
        if node is None or not node.enclosing_ifs:
            continue
        innermost = node.enclosing_ifs[0]
        if subject is not None and allocation_marks.under_allocation(unit, subject, innermost):
            test = innermost[0].test
            out.report(CODE, stmt, ALLOCATION.format(guard=out.text(test)))
            continue
        guards = gates.unrelated_guards(unit, node)
        if not guards:
            continue
        guard = guards[-1].stmt
        if subject is not None:
            # A mark in the ``else`` / ``elif`` of a switch is left alone: the switch's own path
            # may hand on a real gradient that needs no mark (``if ctx.fp8: <real wgrad> elif
            # fuse: <write; mark>``), which its text alone does not tell from a forgotten one.
            word = wgrad.stem(subject)
            if (
                guards[-1].side == "body"
                and not unit.context.shared(writing_helpers.WritingHelpers).writes_main_grad_of(
                    guard.body, word
                )
                and not _marked_otherwise(unit, guard, word)
            ):
                out.report(CODE, stmt, MARK.format(guard=out.text(guard.test)))
        elif not _made_under(unit, reattached, node, guards[-1].stmt) and _read_later_outside(
            unit, reattached, stmt, guards[-1].stmt
        ):
            message = REATTACH.format(subject=out.text(reattached), guard=out.text(guard.test))
            out.report(CODE, stmt, message)


def _restored_marks(unit: Unit) -> dict[int, cst.BaseExpression]:
    """id(statement) -> X for ``X.grad_added_to_main_grad = v`` in a loop that walks recorded
    marks (``for p, v in runner.groundtruth_grad_added_to_main_grad.items():``): a CUDA-graph
    replay putting back the marks its capture made, which is marking as much as ``= True``."""
    found: dict[int, cst.BaseExpression] = {}
    # marks saved by this function itself (``saved = {p: p.grad_added_to_main_grad ...}``
    # before a warm-up, put back after it) restore old values, not a write made elsewhere
    saved_here = {
        t.target.value
        for stmt, _ in unit.statements()
        if type(stmt) is cst.Assign
        for t in stmt.targets
        if type(t.target) is cst.Name and patterns.GRAD_ADDED in unit.context.code(stmt.value)
    }
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.For or patterns.GRAD_ADDED not in unit.context.code(stmt.iter):
            continue
        if any(type(n) is cst.Name and n.value in saved_here for n in patterns.walk(stmt.iter)):
            continue
        bound = {n.value for n in patterns.walk(stmt.target) if type(n) is cst.Name}
        for inner, _ in module.iter_statements(module.suite_body(stmt.body)):
            set_ = patterns.attribute_set(inner, patterns.GRAD_ADDED)
            if set_ is not None and type(set_[1]) is cst.Name and set_[1].value in bound:
                found[id(inner)] = set_[0]
    return found


def _marked_otherwise(unit: Unit, guard: cst.If, word: str | None) -> bool:
    """The path that skips the switch's body marks the same weight too: its ``else``, or,
    when the body ends in a jump (``if switch: ...; mark; return``), the statements after
    the ``if``. The mark then does not depend on the switch."""
    if isinstance(guard.orelse, cst.Else):
        other = module.suite_body(guard.orelse.body)
    elif guard.orelse is None and branches.ends_in_jump(module.suite_body(guard.body)):
        suite = next((s for stmt, s in unit.statements() if stmt is guard), ())
        other = branches.after(guard, suite)
    else:
        return False
    return any(
        (subject := wgrad.marked_subject(stmt)) is not None and wgrad.stem(subject) == word
        for stmt, _ in module.iter_statements(other)
    )


def _reattached(stmt: cst.CSTNode) -> cst.BaseExpression | None:
    """X for ``X.main_grad = <a buffer kept elsewhere>`` (or ``setattr(X, "main_grad",
    ...)``): not None, not a fetch, not a view of X's own main_grad."""
    if isinstance(stmt, cst.Assign) and len(stmt.targets) != 1:
        return None
    found = patterns.attribute_set(stmt, patterns.MAIN_GRAD)
    if found is None:
        return None
    subject, value = found
    if patterns.is_none_like(value) or wgrad.main_grad_owners(value):
        return None
    if any(patterns.is_main_grad_fetch(sub) for sub in patterns.walk(value)):
        return None
    return subject


def _made_under(unit: Unit, subject, node, guard: cst.If) -> bool:
    """Every binding of the subject that reaches here makes a fresh parameter under the
    switch too (``w = Parameter(...)`` for an offloaded weight): the object exists only when
    the switch is on, so attaching main_grad to it there is complete."""
    root = subject
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    defs = unit.reaching.reaching(root.value, node)
    return bool(defs) and all(
        any(stmt_if is guard for stmt_if, _ in d.node.enclosing_ifs)
        and patterns.callee_name(d.value) == "Parameter"
        for d in defs
    )


def _read_later_outside(unit: Unit, subject, stmt, guard: cst.If) -> bool:
    """Some statement after ``guard`` (in source order, outside it) reads
    ``subject.main_grad``."""
    word = wgrad.stem(subject)
    inside = {id(s) for s, _ in module.iter_statements([guard])}
    passed = False
    for other, _ in unit.statements():
        if other is guard:
            passed = True
        if not passed or id(other) in inside:
            continue
        if isinstance(other, cst.BaseCompoundStatement):
            roots = [getattr(other, "test", None)]
        elif isinstance(other, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            roots = [other.value]
        else:
            roots = [other]
        for root in roots:
            if root is None:
                continue
            if any(wgrad.stem(owner) == word for owner in wgrad.main_grad_owners(root)):
                return True
    return False
