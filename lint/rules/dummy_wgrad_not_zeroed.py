"""GMLP003: a dummy wgrad that is not zero-filled where zero_out_wgrad may be set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import SAFE, UNSAFE, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
dummy_sites = LazyModule("..analysis.dummy_sites", __package__)
function_bindings = LazyModule("..analysis.function_bindings", __package__)

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
        itself or through a helper of the file that writes it, allocated next to
        `grad_added_to_main_grad = True`, or returned by a function named for dummies or one
        that sets `grad_added_to_main_grad`)
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


# -- the check: the dummies handed back unguarded are found by analysis/dummy_sites.py;
# judged here is whether each is zero-filled, and the fix ----------------------------------
CONTRACT_WORDS = ("main_grad", "wgrad", "zero_out")


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if dummy_sites.TE_DUMMY not in source and "empty" not in source:
        return
    if not any(word in source for word in CONTRACT_WORDS):
        # A function named for a dummy in a file that never names main_grad or a weight
        # gradient (torch's compiled autograd) allocates no dummy wgrad for Megatron's hook.
        return
    for unit in context.units:
        if dummy_sites.TE_DUMMY in unit.survey.calls or unit.survey.empty_alloc:
            for made_by, call in dummy_sites.unguarded_dummies(unit):
                if made_by == dummy_sites.TE_CALL:
                    _check_te_dummy(call, out)
                else:
                    _report_allocation(call, out)


# -- TE's get_dummy_wgrad ---------------------------------------------------------------
def _check_te_dummy(call: cst.Call, out: Collector) -> None:
    if any(arg.star for arg in call.args):
        return
    zero = patterns.keyword_arg(call, "zero")
    positional = patterns.positional_args(call)
    if zero is None and len(positional) >= 3:
        zero = positional[2]
    if zero is not None and not patterns.is_false_literal(zero.value):
        return
    param = _param_of(positional, out)
    fix = None
    if param is not None:
        value = f'getattr({param}, "zero_out_wgrad", False)'
        if zero is None:
            last = call.args[-1].value if call.args else None
            # ``f(a, (b))``: the insertion would land inside the last argument's parentheses
            parenthesized = last is not None and bool(getattr(last, "lpar", ()))
            edit = out.insert_after(last, f", zero={value}") if last and not parenthesized else None
        else:
            edit = out.replace(zero.value, value)
        if edit is not None:
            fix = Fix(f"Pass zero={value}", (edit,), SAFE)
    out.report(
        CODE,
        call,
        "dummy wgrad from get_dummy_wgrad() is not zero-filled for parameters with "
        "zero_out_wgrad: the DDP hook adds it into main_grad anyway; pass "
        'zero=getattr(param, "zero_out_wgrad", False)',
        fix,
    )


def _param_of(positional: list[cst.Arg], out: Collector) -> str | None:
    """The parameter whose dummy this is, read off ``p.size()``/``p.shape``/``p.dtype``;
    None when an argument holds a lambda or comprehension, whose own names (``[p.size() for
    p in params]``) mean nothing where the fix would write them."""
    found: set[str] = set()
    for arg in positional:
        if any(isinstance(sub, function_bindings.SCOPES) for sub in patterns.walk(arg.value)):
            return None
        for sub in patterns.walk(arg.value):
            if (
                isinstance(sub, cst.Attribute)
                and sub.attr.value in ("size", "shape", "dtype")
                and isinstance(sub.value, (cst.Name, cst.Attribute))
            ):
                found.add(out.text(sub.value))
    return found.pop() if len(found) == 1 else None


# -- empty allocations handed back as the dummy -------------------------------------------
def _report_allocation(call: cst.Call, out: Collector) -> None:
    name = patterns.callee_name(call)
    func = call.func
    target = func.attr if isinstance(func, cst.Attribute) else func
    fix = None
    # Only ``torch.empty_like(...)``-style calls: a bare ``empty_like`` was imported by that
    # name, and ``zeros_like`` may not be.
    if name in patterns.EMPTY_ALLOCATORS and isinstance(func, cst.Attribute):
        replacement = patterns.EMPTY_ALLOCATORS[name]
        fix = Fix(f"Allocate with {replacement}", (out.replace(target, replacement),), UNSAFE)
    out.report(
        CODE,
        call,
        f"dummy wgrad allocated with {name}() is handed back without a zero_out_wgrad "
        "check: the DDP hook adds it into main_grad for zero_out_wgrad parameters; "
        'allocate zeros when getattr(param, "zero_out_wgrad", False)',
        fix,
    )
