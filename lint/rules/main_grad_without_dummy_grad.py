"""GMLP005: main_grad received the weight gradient, but no dummy `.grad` is handed back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import UNSAFE, Edit, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.cfg import Def
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit
    from ..analysis.wgrad import Mark

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)
narrowed_mark = LazyModule("..analysis.narrowed_mark", __package__)

CODE = "GMLP005"
RULE = Rule(
    code=CODE,
    classes=(3, 5),
    name="main-grad-without-dummy-grad",
    summary=(
        "The weight gradient went into main_grad, but what is handed back as the weight's "
        "`.grad` is main_grad itself or None instead of a dummy tensor."
    ),
    flags=(
        "no dummy `.grad` for a weight whose gradient went into main_grad: main_grad itself "
        "returned under `grad_added_to_main_grad`, `None` in that branch, or `None` with no "
        "`grad_added_to_main_grad` at all; and bookkeeping gated on the flag and something "
        "else about the weight, whose `else` hands back `None`"
    ),
    explanation="""
        When a fused op writes the weight gradient into `param.main_grad`, autograd must
        still receive a gradient for the weight: a dummy tensor of the weight's shape and
        dtype (zero-filled under `zero_out_wgrad`), together with
        `param.grad_added_to_main_grad = True`. Megatron's DDP hook asserts on a `.grad` that
        is None when it overlaps the reduction, and a `.grad` that *is* main_grad (fp32, the
        buffer itself) is added into main_grad again. Three shapes from Transformer Engine's
        history:

        * the branch that sets `grad_added_to_main_grad` leaves the returned wgrad as the
          GEMM result written with `out=param.main_grad` (TE #507);
        * inside that branch one side binds the returned wgrad to None (the `else` of the
          `zero_out_wgrad` test, TE #1474 and #1625);
        * a function makes main_grad the GEMM output, then returns None for that weight on
          the main_grad path and never sets `grad_added_to_main_grad` (TE #2097, the te.ops
          linear backward).

        A fourth shape (blind corpus 16, PaddleFleet's linear backward): the bookkeeping's
        guard asks for the flag and also something else about the weight (`if hasattr(w,
        "grad_added_to_main_grad") and not getattr(w, "is_expert_param", False):`), and its
        `else` binds the handed-back gradient to None. For a weight with the flag that the
        extra condition excludes, main_grad holds the gradient, the flag stays False and no
        `.grad` arrives, so the hook that reduces main_grad never fires (issue #19 class 5).
        Reported on that condition, where the function writes the weight's main_grad
        (itself, or through a helper of the file it hands the weight to). A
        condition that restates when the write ran (it reads a term of a test around a
        write: `wgrad_compute`), names the op-level setting, delayed wgrad or whether the
        weight takes a gradient (`requires_grad`, `needs_input_grad`, Paddle's
        `stop_gradient` / `trainable`), or only asks whether something is None, narrows
        nothing and is left alone, as is a guard of the flag test
        alone (`else` runs only for a weight without that bookkeeping). Not seen: the extra
        condition in an enclosing `if`, or in an `elif` chain; the None bound after the
        `if` instead of in its `else`.

        None under a test on delayed wgrad is left alone: with `delay_wgrad_compute` the
        weight carries `skip_backward_post_hook` and `backward_dw()` finishes the job.

        The op-level setting and a test on delayed wgrad are known by their spellings
        (`accumulate_into_main_grad`, `fuse_wgrad_accumulation`; the word `delay`): renamed
        locals are not seen as such.

        Not seen: a wgrad handed back through a helper that returns None or main_grad
        (`wgrad = finish_wgrad(w, wgrad)` in the marked branch); a handed-back wgrad that is
        main_grad without a GEMM binding it through `out=` (`wgrad = w.main_grad`, or a GEMM
        that takes main_grad positionally, `wgrad = gemm_accum(x, dy, w.main_grad)`); a
        `return None` in the marked branch, and gradients handed back in a dict
        (`return {"weight": wgrad}`). For the third shape: a None under a test that names no
        op-level setting (`if ctx.use_fused_path:`) or nested in a further `if` inside the one
        that does, and any function that calls something named `dummy` or `grad_added`, or a
        bookkeeping helper of the file (it is taken to do the bookkeeping). What the marked
        branch binds is not checked beyond None: any other value passes, main_grad itself
        included (`wgrad = w.main_grad` there), and so does a dummy not zeroed under
        `zero_out_wgrad`.
    """,
    fix="""
        Hand back a dummy: `torch.zeros_like(param)` (unsafe: it allocates and fills on every
        step; Transformer Engine's `get_dummy_wgrad(shape, dtype, zero=...)` caches it). For
        the third shape, set `grad_added_to_main_grad` under `hasattr` and return the dummy;
        no fix is offered there.
    """,
    fix_summary="hand back `torch.zeros_like(param)` (unsafe)",
    valid=(
        Example(
            """
            def backward_wgrad(ctx, weight, x, dy):
                wgrad = gemm(x, dy, out=weight.main_grad if ctx.fuse_wgrad_accumulation else None)
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    if getattr(weight, "zero_out_wgrad", False):
                        wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype)
                    else:
                        wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype)
                elif ctx.fuse_wgrad_accumulation:
                    wgrad = None
                return wgrad
            """
        ),
        Example(
            """
            def backward_wgrad(op, weight, x, dy, delay_wgrad):
                grad_weight = weight.main_grad
                gemm(x, dy, out=grad_weight)
                weight.grad_added_to_main_grad = True
                if delay_wgrad:
                    grad_weight = None
                else:
                    grad_weight = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=True)
                return grad_weight
            """
        ),
        Example(
            """
            def backward_wgrad(ctx, weight, x, dy):
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    grad_weight = None
                else:
                    grad_weight = dy.t().matmul(x)
                return grad_weight
            """
        ),
        Example(
            """
            def backward_wgrad(ctx, weight, x, dy, wgrad_compute):
                if wgrad_compute:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                if hasattr(weight, "grad_added_to_main_grad") and wgrad_compute:
                    weight.grad_added_to_main_grad = True
                    grad_weight = torch.zeros_like(weight)
                else:
                    grad_weight = None
                return grad_weight
            """
        ),
    ),
    invalid=(
        Example(
            """
            import torch


            def backward_wgrad(ctx, weight, x, dy):
                wgrad = gemm(x, dy, out=weight.main_grad if ctx.fuse_wgrad_accumulation else None)
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                return wgrad
            """,
            line=7,
            fixed="""
            import torch


            def backward_wgrad(ctx, weight, x, dy):
                wgrad = gemm(x, dy, out=weight.main_grad if ctx.fuse_wgrad_accumulation else None)
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    wgrad = torch.zeros_like(weight)
                return wgrad
            """,
            applicability="unsafe",
        ),
        Example(
            """
            import torch


            def finish(ctx, weight, wgrad):
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    if getattr(weight, "zero_out_wgrad", False):
                        wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype)
                    else:
                        wgrad = None
                return wgrad
            """,
            line=10,
            fixed="""
            import torch


            def finish(ctx, weight, wgrad):
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    if getattr(weight, "zero_out_wgrad", False):
                        wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype)
                    else:
                        wgrad = torch.zeros_like(weight)
                return wgrad
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def op_backward(self, ctx, x, dy):
                accumulate_into_main_grad = self._accumulate_into_main_grad
                grad_weight = None
                if ctx.weight_requires_grad and accumulate_into_main_grad:
                    grad_weight = self.weight.main_grad.detach()
                grad_input, grad_weight = functional_backward(x, dy, grad_weight=grad_weight)
                if accumulate_into_main_grad:
                    grad_weight = None
                return grad_input, [grad_weight]
            """,
            line=8,
        ),
        Example(
            """
            def backward_wgrad(ctx, weight, x, dy):
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad") and not weight.is_shared:
                        weight.grad_added_to_main_grad = True
                        grad_weight = torch.zeros_like(weight)
                    else:
                        grad_weight = None
                else:
                    grad_weight = dy.t().matmul(x)
                return grad_weight
            """,
            line=4,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
RETURNED = (
    "`{subject}.grad_added_to_main_grad` is set, but `{name}` - handed back as its gradient - "
    "still holds the GEMM result written into main_grad: main_grad itself (fp32) becomes "
    "`.grad` and the DDP hook adds it again; hand back a dummy of the weight's dtype"
)
NONE_IN_BLOCK = (
    "`{name} = None` in the branch that sets `{subject}.grad_added_to_main_grad`: the weight "
    "gets no `.grad` and Megatron's DDP hook, which expects the dummy, asserts or never fires; "
    "hand back a dummy tensor (zeros when zero_out_wgrad is set)"
)
NO_MARK = (
    "`{name}` held main_grad and is handed back as None on the main_grad path, and this "
    "function never sets `grad_added_to_main_grad`: the fused op gives the DDP hook no dummy "
    "`.grad` (Transformer Engine #2097); set the flag under `hasattr` and return a dummy"
)
NARROWED = (
    "the test that sets `{subject}.grad_added_to_main_grad` also asks `{narrowing}`, which "
    "is not when main_grad was written: where it is false, `{name}` is handed back None "
    "(line {line}) and the flag stays unset for a weight whose gradient is in main_grad, so "
    "the hook that reduces main_grad never fires for it; gate the bookkeeping on the flag "
    "(and the write's own condition) only"
)
OP_LEVEL_HINTS = ("main_grad", "accumulat", "fuse_wgrad", "gradient_accumulation_fusion")


def check(context: ModuleContext, out: Collector) -> None:
    if "main_grad" not in context.source:
        return
    torch_bound = None
    for unit in context.units:
        survey = unit.survey
        if not (survey.spells_main_grad or survey.spells_grad_added):
            continue
        found = wgrad.marks(unit) if survey.spells_grad_added else []
        if found:
            if torch_bound is None:
                torch_bound = wgrad.mentions_torch(context)
            _Marked(unit, out, torch_bound).run(found)
        elif not _does_bookkeeping(unit, context.bookkeeping_helpers):
            _check_unmarked(unit, out)


def _does_bookkeeping(unit: Unit, helpers: frozenset[str]) -> bool:
    """Mentions grad_added_to_main_grad, or calls a dummy maker or a bookkeeping helper."""
    calls = unit.survey.calls
    return (
        unit.survey.spells_grad_added
        or not calls.isdisjoint(helpers)
        or any("dummy" in name or "grad_added" in name for name in calls)
    )


class _Marked:
    """A function that sets grad_added_to_main_grad: what does each mark hand back?"""

    def __init__(self, unit: Unit, out: Collector, torch_bound: bool) -> None:
        self.unit = unit
        self.out = out
        self.torch_bound = torch_bound
        self.back = wgrad.handed_back(unit)

    def run(self, found: list[Mark]) -> None:
        for mark in found:
            if not self.none_in_block(mark):
                self.main_grad_returned(mark)
            for narrowing, none in narrowed_mark.nones_past_narrowed_guard(self.unit, mark):
                message = NARROWED.format(
                    name=wgrad.assigned_name(none),
                    line=self.unit.context.line_of(none),
                    subject=self.out.text(mark.subject),
                    narrowing=self.out.text(narrowing),
                )
                self.out.report(CODE, narrowing, message)

    def dummy_fix(self, mark: Mark, edit: Edit | None) -> Fix | None:
        if edit is None:
            return None
        return Fix(f"Hand back `{self.dummy(mark)}`", (edit,), UNSAFE)

    def dummy(self, mark: Mark) -> str | None:
        """A dummy of the marked weight's shape and dtype, when the module can make one."""
        if not self.torch_bound:
            return None
        return f"torch.zeros_like({self.out.text(mark.subject)})"

    def none_in_block(self, mark: Mark) -> bool:
        statements = list(wgrad.block_statements(mark.block))
        tensors = {
            wgrad.assigned_name(s)
            for s in statements
            if wgrad.assigned_name(s) and not patterns.is_none_like(s.value)
        }
        reported = False
        for stmt in statements:
            name = wgrad.assigned_name(stmt)
            if name is None or name not in self.back or name not in tensors:
                continue
            none = self.none_arm(stmt.value)
            if none is None:
                continue
            node = self.unit.node_for(stmt)
            if node is None or self.under_delay(node, mark):
                continue
            message = NONE_IN_BLOCK.format(name=name, subject=self.out.text(mark.subject))
            dummy = self.dummy(mark)
            edit = self.out.replace(none, dummy) if dummy else None
            fix = self.dummy_fix(mark, edit)
            self.out.report(CODE, stmt, message, fix)
            reported = True
        return reported

    def none_arm(self, value):
        """The ``None`` this value hands back: the value itself, or an arm of a conditional
        expression (``zeros(...) if zero_out else None``, as an ``if``/``else`` would assign
        it) whose test is not about delayed wgrad."""
        if _is_none(value):
            return value
        if isinstance(value, cst.IfExp) and "delay" not in self.unit.context.code(value.test):
            for arm in (value.body, value.orelse):
                if _is_none(arm):
                    return arm
        return None

    def under_delay(self, node, mark: Mark) -> bool:
        for stmt_if, _ in node.enclosing_ifs:
            if stmt_if is mark.guard:
                break
            if "delay" in self.unit.context.code(stmt_if.test):
                return True
        return False

    def main_grad_returned(self, mark: Mark) -> None:
        subject = wgrad.stem(mark.subject)
        if subject is None:
            return
        rebound = {wgrad.assigned_name(s) for s in wgrad.block_statements(mark.block)}
        reaching = self.unit.reaching
        exit_node = self.unit.graph.exit
        for name in sorted(self.back - rebound):
            for d in reaching.reaching(name, mark.node):
                if self.written_into_main_grad(d, subject) and d in reaching.reaching(
                    name, exit_node
                ):
                    message = RETURNED.format(subject=self.out.text(mark.subject), name=name)
                    dummy = self.dummy(mark)
                    fix = self.dummy_fix(mark, self.insert(mark, name, dummy) if dummy else None)
                    self.out.report(CODE, mark.stmt, message, fix)
                    return

    def written_into_main_grad(self, d: Def, subject: str) -> bool:
        """``d`` binds the result of a GEMM whose ``out=`` is the subject's main_grad."""
        value = d.value
        if d.kind != "assign" or not isinstance(value, cst.Call):
            return False
        if not _first_target(d):
            return False  # ``wgrad, grad_bias, _ = gemm(...)``: only wgrad is the output
        out = wgrad.keyword_value(self.unit, value, d.node, "out")  # also from a **kwargs dict
        if out is None:
            return False
        return any(wgrad.stem(owner) == subject for owner in wgrad.main_grad_owners(out))

    def insert(self, mark: Mark, name: str, text: str) -> Edit | None:
        """A new line ``name = text`` right after the mark, at its indentation; None when
        the mark is not the first statement of its line (``if c: w.flag = True``,
        ``n += 1; w.flag = True``): the text before it is code, not indentation, and
        copying it onto the new line would run that code twice."""
        _, indent = self.out.line_start(mark.stmt)
        if indent.strip():
            return None
        # Nor when code follows it on its line (``w.flag = True; return wgrad``): the new
        # line would come after that code, past a return or a rebinding of the weight.
        rest = self.out.line_rest(mark.stmt).strip()
        if rest and not rest.startswith("#"):
            return None
        return self.out.insert_line_after(mark.stmt, f"{indent}{name} = {text}\n")


def _is_none(expr) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _first_target(d: Def) -> bool:
    """``d`` binds the whole value, or the first element of an unpacking."""
    owner = d.node.owner
    if not isinstance(owner, cst.Assign):
        return True
    for target in owner.targets:
        if isinstance(target.target, (cst.Tuple, cst.List)):
            elements = target.target.elements
            return bool(elements) and elements[0].value is d.target
    return True


def _check_unmarked(unit: Unit, out: Collector) -> None:
    """No grad_added_to_main_grad at all: None handed back for a name that held main_grad."""
    back = wgrad.handed_back(unit)
    aliases = unit.aliases
    held = {
        d.name
        for d in unit.graph.defs
        if d.name in back and d.value is not None and aliases.alias[d.index]
    }
    if not held:
        return
    for stmt, _ in unit.statements():
        name = wgrad.assigned_name(stmt)
        if name not in held or not _is_none(stmt.value):
            continue
        node = unit.node_for(stmt)
        if node is None or not node.enclosing_ifs:
            continue
        stmt_if, side = node.enclosing_ifs[0]
        test = unit.context.code(stmt_if.test)
        if side == "body" and "delay" not in test and any(h in test for h in OP_LEVEL_HINTS):
            out.report(CODE, stmt, NO_MARK.format(name=name))
