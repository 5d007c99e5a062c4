"""GMLP035: a weight gradient computed outside autograd assigned over `.grad`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import wgrad_words
from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)

CODE = "GMLP035"
# Functions that compute weight gradients outside autograd's own accumulation: delayed wgrad
# (``backward_dw``, wgrad closures and stores) and producers named for it
# (wgrad_words.names_producer).
GRAD = "grad"
WEIGHT_WORDS = ("weight", "param")
RULE = Rule(
    code=CODE,
    classes=(4,),
    name="delayed-wgrad-replaces-grad",
    summary=(
        "A weight gradient computed outside autograd (delayed wgrad, a wgrad closure) is "
        "assigned to the Parameter's `.grad`, replacing what autograd or an earlier "
        "contribution accumulated there, in code that never looks at `.grad` first."
    ),
    flags=(
        "`p.grad = g` (g not None, not a dummy, not main_grad) in a function named "
        "`*_dw` / `*wgrad*` / `*grad_weight*` / `*weight_grad*` / `*backward*` / a `bwd` "
        "part without `fwd` (or one "
        "nested in it) that never reads `p.grad` (no `is None` test, no `add_`, no `+=`)"
    ),
    explanation="""
        Issue #19, class 4 (overwrite without asking), on the `.grad` path. Autograd adds a
        weight's gradient into `.grad`: two modules sharing one Parameter (tied weights)
        and several microbatches before the optimizer step all accumulate. A weight
        gradient computed outside autograd, such as the delayed wgrad that `backward_dw()`
        pops from its store when wgrad fusion into main_grad is off, must do the same;
        assigned with `p.grad = wgrad` it silently replaces every earlier contribution
        (Transformer Engine #3437 / #3552: a tied weight's gradient came out at 0.6x).

        Seen: an assignment to `<X>.grad` of a value that is not None, not a zero / empty
        dummy and not main_grad (GMLP031's ground), in a function whose name (or an
        enclosing function's) says it produces weight gradients, where the function never
        reads `<X>.grad` (the same spelling of X) anywhere else: any test, `add_`, `+=`
        or `X.grad + g` counts as asking, so the usual fix (`if p.grad is None: p.grad =
        g` / `else: p.grad += g`) is clean.

        Also `setattr(X, "grad", g)`.

        Not seen: a caller that zeroes `.grad` right
        before (then the assignment is correct, and a suppression with that reason is
        the answer); the converse, a contribution dropped under `if p.grad is None:` with
        no `else` (Transformer Engine sets bias gradients that way on purpose when the
        main backward already produced one, so that shape alone does not tell a bug).

        Not reported: a gradient the weight itself held put back, `p.grad =
        p._saved_grad_shard` or `p.grad = p._cpu_grad` (an attribute of the same X whose
        name says grad): that is what was accumulated, moved, not a contribution computed
        outside autograd (fairscale's FSDP restores its shards so after a backward).

        A producer is known by its name (the words above) and a weight by its spelling
        (`weight`, `param`) or a binding from such a spelling: a function or local renamed
        away from them is not seen.
    """,
    fix="""
        Add into `.grad` when it is already set: `if p.grad is None: p.grad = g` /
        `else: p.grad.add_(g)`. No automatic fix.
    """,
    fix_summary="none (accumulate into `.grad`)",
    valid=(
        Example(
            """
            def backward_dw(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    weight = self.weight
                    if weight.grad is None:
                        weight.grad = wgrad.to(weight.dtype)
                    else:
                        weight.grad.add_(wgrad.to(weight.dtype))
                self._trigger_wgrad_accumulation_and_reduce_hooks()
            """
        ),
        Example(
            """
            def backward_dw(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                self.weight.grad = torch.zeros_like(self.weight)
                self.weight.main_grad.add_(wgrad)
                self._trigger_wgrad_accumulation_and_reduce_hooks()
            """
        ),
        Example(
            """
            def _wait_for_post_backward(self):
                for p in self.params:
                    if hasattr(p, "_saved_grad_shard"):
                        p.grad = p._saved_grad_shard
            """
        ),
        Example(
            """
            def layer_backward(self, shared_experts, delay_wgrad_compute):
                shared_grad = shared_experts.get_backward_grad()
                if shared_grad is not None:
                    self.layernorm_graph[1].grad = shared_grad
                run_graph_backward(self.layernorm_graph)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward_dw(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    self.weight.grad = wgrad.to(self.weight.dtype)
                self._trigger_wgrad_accumulation_and_reduce_hooks()
            """,
            line=4,
        ),
        Example(
            """
            def run_delayed_wgrad(params, grads, delay_wgrad_compute):
                for p, g in zip(params, grads):
                    p.grad = g
            """,
            line=3,
        ),
    ),
)

MESSAGE = (
    "`{target}.grad = ...` replaces the gradient already accumulated there (a tied weight's "
    "other module, an earlier microbatch): a weight gradient computed outside autograd must "
    "be added when `.grad` is set"
)
# Allocations that make a dummy, not a gradient.
_DUMMIES = frozenset(
    {"zeros", "zeros_like", "empty", "empty_like", "new_zeros", "new_empty", "full", "ones"}
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if ".grad =" not in source and "setattr" not in source:
        return
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef) and _in_producer(unit):
            _check_unit(unit, out)


def _in_producer(unit: Unit) -> bool:
    current: Unit | None = unit
    while current is not None:
        if isinstance(current.owner, cst.FunctionDef) and wgrad_words.names_producer(current.name):
            return True
        current = current.parent
    return False


def _check_unit(unit: Unit, out: Collector) -> None:
    assignments = list(_grad_assignments(unit))
    if not assignments:
        return
    asked = None
    for stmt, reported, owner in assignments:
        if not _is_weight(unit, stmt, owner) or _own_stored_gradient(unit, stmt, owner):
            continue
        if asked is None:
            asked = _grads_read(unit)
        text = unit.context.code(owner)
        if text not in asked:
            out.report(CODE, reported, MESSAGE.format(target=text))


def _grad_assignments(unit: Unit):
    """(statement, node to report, X) for each ``X.grad = g`` and ``setattr(X, "grad", g)``
    of a gradient g."""
    for stmt, _ in unit.statements():
        if isinstance(stmt, cst.Assign) and _is_gradient(stmt.value):
            for target in stmt.targets:
                if patterns.is_attr(target.target, GRAD):
                    yield stmt, target.target, target.target.value
        elif isinstance(stmt, cst.Expr) and patterns.callee_name(stmt.value) == "setattr":
            args = patterns.positional_args(stmt.value)
            if (
                len(args) == 3
                and patterns.string_is(args[1].value, GRAD)
                and _is_gradient(args[2].value)
            ):
                yield stmt, stmt.value, args[0].value


def _is_weight(unit: Unit, stmt, owner) -> bool:
    """The object whose ``.grad`` is set is a weight: spelled as one (``self.fc1_weight``,
    ``weight_params[i]``), or a local bound from something spelled so (``for p, g in
    zip(params, grads)``, ``w = getattr(self, f"weight{i}")``). An activation whose
    ``.grad`` seeds a hand-run graph backward is not: it gets one gradient per pass."""
    context = unit.context
    if any(word in context.code(owner).lower() for word in WEIGHT_WORDS):
        return True
    if not isinstance(owner, cst.Name):
        return False
    node = unit.node_for(stmt)
    defs = unit.reaching.reaching(owner.value, node) if node is not None else []
    return bool(defs) and all(
        d.value is not None and any(word in context.code(d.value).lower() for word in WEIGHT_WORDS)
        for d in defs
    )


def _own_stored_gradient(unit: Unit, stmt, owner) -> bool:
    """``p.grad = p._saved_grad_shard``: what the weight itself held under a name that says
    grad, put back; not a gradient computed outside autograd."""
    value = (
        stmt.value
        if isinstance(stmt, cst.Assign)
        else patterns.positional_args(stmt.value)[2].value
    )
    return (
        isinstance(value, cst.Attribute)
        and GRAD in value.attr.value.lower()
        and unit.context.code(value.value) == unit.context.code(owner)
    )


def _is_gradient(value: cst.CSTNode) -> bool:
    """Not None, not a dummy allocation, not main_grad."""
    if patterns.is_none_like(value):
        return False
    if isinstance(value, cst.Call) and patterns.callee_name(value) in _DUMMIES:
        return False
    return not any(patterns.is_main_grad_direct(n) for n in patterns.walk(value))


def _grads_read(unit: Unit) -> set[str]:
    """The spellings X of every ``X.grad`` the unit (or a function it is nested in) reads:
    anything but the target of a plain assignment."""
    found: set[str] = set()
    current: Unit | None = unit
    while current is not None:
        context = current.context
        for root in _roots(current):
            skip = set()
            if isinstance(root, cst.Assign):
                skip = {id(t.target) for t in root.targets}
            for node in patterns.walk(root):
                if id(node) not in skip and patterns.is_attr(node, GRAD):
                    found.add(context.code(node.value))
        current = current.parent
    return found


def _roots(unit: Unit):
    """The unit's small statements and compound headers, without building its graph (a
    backward of a few hundred lines costs more to graph than this rule's whole walk)."""
    for stmt, _ in unit.statements():
        if isinstance(stmt, (cst.If, cst.While)):
            yield stmt.test
        elif isinstance(stmt, cst.For):
            yield stmt.iter
        elif isinstance(stmt, cst.With):
            yield from (item.item for item in stmt.items)
        elif not isinstance(stmt, cst.BaseCompoundStatement):
            yield stmt
