"""GMLP003: a dummy wgrad that is not zero-filled where zero_out_wgrad may be set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import SAFE, UNSAFE, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..analysis.cfg import Node
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)

CODE = "GMLP003"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="dummy-wgrad-not-zeroed",
    summary=(
        "A dummy weight gradient is handed back where the parameter may carry "
        "`zero_out_wgrad`, but the dummy is not zero-filled."
    ),
    flags=("a dummy wgrad that is not zero-filled where `zero_out_wgrad` may be set"),
    explanation="""
        After writing the gradient into main_grad, a fused op returns a dummy `.grad` so the
        DDP hook runs. For parameters with `zero_out_wgrad` (shared embeddings, MTP) Megatron
        adds that dummy into main_grad anyway, so it must be zeros; an `empty` allocation adds
        whatever the memory held (Megatron #6565, TE #545).

        Flagged: Transformer Engine's `get_dummy_wgrad(shape, dtype)` without `zero=` (or with
        a literal False), and an `empty`/`empty_like`/`new_empty` allocation handed back as
        the dummy (assigned to the `.grad` of a weight whose main_grad the function touches,
        allocated next to `grad_added_to_main_grad = True`, or
        returned by a function named for dummies or one that sets `grad_added_to_main_grad`)
        on a path that no test on `zero_out_wgrad` guards (an `if`, or a conditional
        expression choosing between two dummies). `get_dummy_wgrad` calls are judged
        only where the dummy leaves the function (returned, put in `.grad`, or stored in what
        the function returns), not where a test fetches the cached dummy to compare.

        Not seen: a dummy allocated in a helper function of the file handed the weight,
        where the marking is the caller's (each function is judged alone).
    """,
    fix="""
        `get_dummy_wgrad(...)` gains `zero=getattr(param, "zero_out_wgrad", False)` (safe: it
        changes nothing for parameters without the attribute). An empty allocation becomes a
        zeros allocation (unsafe: it fills on every step; a `zero_out_wgrad` branch may be
        preferred).
    """,
    fix_summary=(
        'pass `zero=getattr(p, "zero_out_wgrad", False)` (safe); `empty` becomes `zeros` (unsafe)'
    ),
    valid=(
        Example(
            """
            def wgrad_placeholder(weight, dtype):
                if hasattr(weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=dtype)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
                return grad_weight
            """
        ),
        Example(
            """
            def dummy_for(weight):
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
            """
        ),
        Example(
            """
            def dummy_wgrad(param):
                if getattr(param, "zero_out_wgrad", False):
                    return torch.zeros_like(param)
                return torch.empty_like(param)
            """
        ),
        Example(
            """
            def check_dummy(weight):
                assert weight.grad_added_to_main_grad
                expected = get_dummy_wgrad(list(weight.size()), weight.dtype)
                assert weight.grad.data_ptr() == expected.data_ptr()
            """
        ),
        Example(
            """
            def copy_to_master_grads(model_params, master_params):
                for model_param, master_param in zip(model_params, master_params):
                    if master_param.grad is None:
                        master_param.grad = torch.empty_like(master_param)
                    master_param.grad.copy_(model_param.main_grad)
            """
        ),
        Example(
            """
            def scratch_wgrad(weight, main_grad_needed):
                out = torch.empty_like(weight)
                if main_grad_needed:
                    weight.main_grad.add_(out)
                return out
            """
        ),
    ),
    invalid=(
        Example(
            """
            def dummy_for(weight):
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(
                    list(weight.size()),
                    weight.dtype,
                )
            """,
            line=3,
            fixed="""
            def dummy_for(weight):
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(
                    list(weight.size()),
                    weight.dtype, zero=getattr(weight, "zero_out_wgrad", False),
                )
            """,
            applicability="safe",
        ),
        Example(
            """
            def dummy_for(p):
                p.grad_added_to_main_grad = True
                return get_dummy_wgrad(p.shape, p.dtype, zero=False)
            """,
            line=3,
            fixed="""
            def dummy_for(p):
                p.grad_added_to_main_grad = True
                return get_dummy_wgrad(p.shape, p.dtype, zero=getattr(p, "zero_out_wgrad", False))
            """,
            applicability="safe",
        ),
        Example(
            """
            def wgrad_placeholder(weight, dtype):
                if hasattr(weight, "grad_added_to_main_grad"):
                    grad_weight = torch.empty(weight.main_grad.shape, dtype=dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
                return grad_weight
            """,
            line=3,
            fixed="""
            def wgrad_placeholder(weight, dtype):
                if hasattr(weight, "grad_added_to_main_grad"):
                    grad_weight = torch.zeros(weight.main_grad.shape, dtype=dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
                return grad_weight
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def deliver(params, wgrads):
                for p, w in zip(params, wgrads):
                    p.main_grad.add_(w)
                    p.grad_added_to_main_grad = True
                return [torch.empty_like(p) for p in params]
            """,
            line=5,
            fixed="""
            def deliver(params, wgrads):
                for p, w in zip(params, wgrads):
                    p.main_grad.add_(w)
                    p.grad_added_to_main_grad = True
                return [torch.zeros_like(p) for p in params]
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def hand_back(weight, wgrad):
                weight.main_grad.add_(wgrad)
                weight.grad = torch.empty_like(weight)
            """,
            line=3,
            fixed="""
            def hand_back(weight, wgrad):
                weight.main_grad.add_(wgrad)
                weight.grad = torch.zeros_like(weight)
            """,
            applicability="unsafe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
TE_DUMMY = "get_dummy_wgrad"
CONTRACT_WORDS = ("main_grad", "wgrad", "zero_out")


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if TE_DUMMY not in source and "empty" not in source:
        return
    if not any(word in source for word in CONTRACT_WORDS):
        # A function named for a dummy in a file that never names main_grad or a weight
        # gradient (torch's compiled autograd) allocates no dummy wgrad for Megatron's hook.
        return
    for unit in context.units:
        if TE_DUMMY in unit.survey.calls or unit.survey.empty_alloc:
            _Unit(unit, out).run()


class _Unit:
    def __init__(self, unit: Unit, out: Collector) -> None:
        self.unit = unit
        self.out = out
        self.suites_with_grad_added: dict[int, bool] = {}
        self._function_marks: bool | None = None
        self._owners: set[str] | None = None

    def run(self) -> None:
        for stmt, suite in self.unit.statements():
            if isinstance(stmt, cst.BaseCompoundStatement):
                continue
            te_calls = [s for s in patterns.walk(stmt) if patterns.callee_name(s) == TE_DUMMY]
            if te_calls and not self.hands_back(stmt):
                te_calls = []  # e.g. a test fetching the cached dummy to compare pointers
            value = getattr(stmt, "value", None)
            dummy_context = value is not None and self.is_dummy_context(stmt, suite)
            if not te_calls and not dummy_context:
                continue
            node = self.unit.node_for(stmt)
            if node is None or self.guarded(node):
                continue
            chosen = self.zero_out_choices(stmt, node) if te_calls else set()
            for call in te_calls:
                if id(call) not in chosen:
                    self.check_te_dummy(call)
            if dummy_context:
                for call in wgrad.empty_allocations(value, node, self.unit.zero_out):
                    if not self.zeroed_later(stmt):
                        self.report_allocation(call)

    # -- TE's get_dummy_wgrad -----------------------------------------------------------
    def check_te_dummy(self, call: cst.Call) -> None:
        if any(arg.star for arg in call.args):
            return
        zero = patterns.keyword_arg(call, "zero")
        positional = patterns.positional_args(call)
        if zero is None and len(positional) >= 3:
            zero = positional[2]
        if zero is not None and not patterns.is_false_literal(zero.value):
            return
        param = self.param_of(positional)
        fix = None
        if param is not None:
            value = f'getattr({param}, "zero_out_wgrad", False)'
            if zero is None:
                last = call.args[-1].value if call.args else None
                edit = self.out.insert_after(last, f", zero={value}") if last else None
            else:
                edit = self.out.replace(zero.value, value)
            if edit is not None:
                fix = Fix(f"Pass zero={value}", (edit,), SAFE)
        self.out.report(
            CODE,
            call,
            "dummy wgrad from get_dummy_wgrad() is not zero-filled for parameters with "
            "zero_out_wgrad: the DDP hook adds it into main_grad anyway; pass "
            'zero=getattr(param, "zero_out_wgrad", False)',
            fix,
        )

    def param_of(self, positional: list[cst.Arg]) -> str | None:
        """The parameter whose dummy this is, read off ``p.size()``/``p.shape``/``p.dtype``."""
        found: set[str] = set()
        for arg in positional:
            for sub in patterns.walk(arg.value):
                if (
                    isinstance(sub, cst.Attribute)
                    and sub.attr.value in ("size", "shape", "dtype")
                    and isinstance(sub.value, (cst.Name, cst.Attribute))
                ):
                    found.add(self.out.text(sub.value))
        return found.pop() if len(found) == 1 else None

    # -- empty allocations handed back as the dummy ---------------------------------------
    def is_dummy_context(self, stmt: cst.CSTNode, suite: Sequence[cst.CSTNode]) -> bool:
        if isinstance(stmt, (cst.Assign, cst.AnnAssign)):
            targets = patterns.assignment_targets(stmt)
            grads = [t for t in targets if patterns.is_attr(t, "grad")]
            if grads:
                # The dummy of a weight whose gradient went into its main_grad; not the
                # optimizer allocating an fp32 master parameter's .grad to copy into.
                owners = self.main_grad_owners()
                return self.function_marks_grad_added() or any(
                    self.unit.context.code(t.value) in owners for t in grads
                )
            if self.marks_grad_added(suite):
                return True
            return "dummy" in self.unit.name and any(
                isinstance(t, cst.Name) and self.unit.returns(t) for t in targets
            )
        if isinstance(stmt, cst.Return):
            # Returned from a function that tells the hook main_grad already has the
            # gradient: what it returns for the weights is the dummy.
            return "dummy" in self.unit.name or self.function_marks_grad_added()
        return False

    def main_grad_owners(self) -> set[str]:
        """The text of X for every ``X.main_grad`` this function touches."""
        if self._owners is None:
            self._owners = {
                self.unit.context.code(owner)
                for stmt, _ in self.unit.statements()
                if not isinstance(stmt, cst.BaseCompoundStatement)
                for sub in patterns.walk(stmt)
                if (owner := patterns.main_grad_owner(sub)) is not None
            }
        return self._owners

    def function_marks_grad_added(self) -> bool:
        if self._function_marks is None:
            self._function_marks = any(
                wgrad.marks_grad_added(stmt)
                for stmt, _ in self.unit.statements()
                if not isinstance(stmt, cst.BaseCompoundStatement)
            )
        return self._function_marks

    def hands_back(self, stmt: cst.CSTNode) -> bool:
        """The statement's value leaves as a gradient: returned, put in ``.grad``, or stored
        in (or appended to) something the function returns."""
        if isinstance(stmt, cst.Return):
            return True
        if isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = patterns.assignment_targets(stmt)
            return any(patterns.is_attr(t, "grad") or self.unit.returns(t) for t in targets)
        if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
            func = stmt.value.func
            return (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("append", "extend", "insert")
                and self.unit.returns(func.value)
            )
        return False

    def marks_grad_added(self, suite: Sequence[cst.CSTNode]) -> bool:
        key = id(suite)
        cached = self.suites_with_grad_added.get(key)
        if cached is None:
            cached = any(wgrad.marks_grad_added(small) for small in wgrad.small_statements(suite))
            self.suites_with_grad_added[key] = cached
        return cached

    def zero_out_choices(self, stmt: cst.CSTNode, node: Node) -> set[int]:
        """The dummy calls in either arm of a conditional expression whose test asks
        zero_out_wgrad (``guarded``'s expression form: ``d(..., zero=True) if zero_out else
        d(...)``)."""
        found: set[int] = set()
        for sub in patterns.walk(stmt):
            if type(sub) is cst.IfExp and self.unit.zero_out.expr(sub.test, node):
                for arm in (sub.body, sub.orelse):
                    found.update(
                        id(c) for c in patterns.walk(arm) if patterns.callee_name(c) == TE_DUMMY
                    )
        return found

    def guarded(self, node: Node) -> bool:
        """The statement runs only under some test on zero_out_wgrad (either side of it:
        the other side is where the zero-filled dummy is made)."""
        zero_out = self.unit.zero_out
        return any(zero_out.branch(b) for b in self.unit.control.ancestors(node))

    def zeroed_later(self, stmt: cst.CSTNode) -> bool:
        """``d = torch.empty(...)`` followed by ``d.zero_()``/``d.fill_(0)`` somewhere."""
        if not isinstance(stmt, cst.Assign):
            return False
        names = {t.target.value for t in stmt.targets if isinstance(t.target, cst.Name)}
        for other, _ in self.unit.statements():
            for sub in patterns.walk(other):
                if (
                    isinstance(sub, cst.Call)
                    and isinstance(sub.func, cst.Attribute)
                    and sub.func.attr.value in ("zero_", "fill_")
                    and isinstance(sub.func.value, cst.Name)
                    and sub.func.value.value in names
                ):
                    return True
        return False

    def report_allocation(self, call: cst.Call) -> None:
        name = patterns.callee_name(call)
        func = call.func
        target = func.attr if isinstance(func, cst.Attribute) else func
        fix = None
        if name in patterns.EMPTY_ALLOCATORS:
            replacement = patterns.EMPTY_ALLOCATORS[name]
            fix = Fix(
                f"Allocate with {replacement}", (self.out.replace(target, replacement),), UNSAFE
            )
        self.out.report(
            CODE,
            call,
            f"dummy wgrad allocated with {name}() is handed back without a zero_out_wgrad "
            "check: the DDP hook adds it into main_grad for zero_out_wgrad parameters; "
            'allocate zeros when getattr(param, "zero_out_wgrad", False)',
            fix,
        )
