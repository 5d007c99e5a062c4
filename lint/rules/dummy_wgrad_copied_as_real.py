"""GMLP022: the gradients of a helper that hands dummy wgrads for main_grad-accumulated
weights are cloned item by item, dummies included, as if they were real."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)

CODE = "GMLP022"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="dummy-wgrad-copied-as-real",
    summary=(
        "Gradients from a helper of the module that puts dummy wgrads in place of the "
        "weights whose gradient went to main_grad are cloned one by one with no test of "
        "which are dummies: each dummy becomes a fresh weight-sized allocation handed on as "
        "if it were a real gradient."
    ),
    flags=(
        "`g.clone()` for each `g` of `helper()` (comprehension or loop) where `helper`, "
        "defined in the file, tests `grad_added_to_main_grad` and allocates dummies, and "
        "the element's test reads nothing but `g`"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping: gradients handed on that treat dummy
        wgrads as real). With wgrad fusion a weight's gradient is already in main_grad;
        what autograd receives for it is a dummy, which Megatron's hook ignores because
        `grad_added_to_main_grad` is set. A CUDA-graph replay hands on gradients from
        static buffers and must clone the real ones (the next replay overwrites them); a
        backward that clones every item clones the dummies too, so each microbatch
        allocates a weight-sized tensor per fused weight, and the dummy, no longer the
        shared static one, is handed on as a real gradient. Megatron-LM !3366 (development
        split): the replay node cloned every entry of `runner.get_input_grads()`, whose
        weight entries were dummies under `grad_added_to_main_grad`; the fix returns a
        dummy mark with each gradient and clones only the real ones.

        Seen: a *dummy-making helper*, a function or method of this file that reads
        `grad_added_to_main_grad` (attribute or `getattr` string), allocates a tensor
        (`zeros`, `empty`, `*_like`, `get_dummy_wgrad`) and returns a value; a comprehension
        or `for` loop over a call of that helper (also inside `zip`/`enumerate`/`tuple`, or
        through a local bound from the call)
        whose element is given to `.clone()` / `torch.clone()`, where the element's
        conditions (the conditional expression's test, the comprehension's `if`, an `if`
        in the loop) read no name but the element itself (`g is not None` does not tell a
        dummy from a real gradient).

        Not seen: helpers of other files, gradients cloned after being stored in a
        container first, and copies by other means (`copy_` into a new buffer).
    """,
    fix="""
        Have the helper say which entries are dummies (or return the dummies marked) and
        clone only the real gradients. No automatic fix.
    """,
    fix_summary="none (clone only the real gradients)",
    valid=(
        Example(
            """
            class Runner:
                def input_grads_with_dummy_marks(self):
                    grads, marks = list(self.static_grads[: self.n]), [False] * self.n
                    for param, wgrad in zip(self.params, self.static_grads[self.n :]):
                        dummy = getattr(param, "grad_added_to_main_grad", False)
                        grads.append(torch.zeros(1) if dummy else wgrad)
                        marks.append(dummy)
                    return grads, marks


            def replay_backward(runner):
                grads, marks = runner.input_grads_with_dummy_marks()
                return tuple(
                    g.clone() if not (g is None or dummy) else g for dummy, g in zip(marks, grads)
                )
            """
        ),
        Example(
            """
            def replay_backward(runner):
                return tuple(g.clone() if g is not None else g for g in runner.static_grads)
            """
        ),
    ),
    invalid=(
        Example(
            """
            class Runner:
                def input_grads(self):
                    grads = list(self.static_grads[: self.n])
                    for param, wgrad in zip(self.params, self.static_grads[self.n :]):
                        if getattr(param, "grad_added_to_main_grad", False):
                            wgrad = torch.zeros(param.main_grad.shape, dtype=param.dtype)
                        grads.append(wgrad)
                    return grads


            def replay_backward(runner):
                return tuple(g.clone() if g is not None else g for g in runner.input_grads())
            """,
            line=12,
        ),
        Example(
            """
            def input_grads(params, static_grads):
                out = []
                for param, wgrad in zip(params, static_grads):
                    if param.grad_added_to_main_grad:
                        wgrad = get_dummy_wgrad(list(param.main_grad.shape), param.dtype)
                    out.append(wgrad)
                return out


            def replay_backward(params, static_grads):
                handed = []
                for g in input_grads(params, static_grads):
                    handed.append(torch.clone(g))
                return handed
            """,
            line=13,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "every gradient of `{helper}()` is cloned here, but `{helper}` hands dummy wgrads for "
    "the weights whose gradient is already in main_grad: the dummies are copied and handed "
    "on as real gradients (a weight-sized allocation each); clone only the real ones"
)
GRAD_ADDED = "grad_added_to_main_grad"
DUMMY_MAKERS = ("get_dummy_wgrad",)
COMPREHENSIONS = ("ListComp", "GeneratorExp", "SetComp")


def check(context: ModuleContext, out: Collector) -> None:
    if GRAD_ADDED not in context.source or "clone" not in context.source:
        return
    helpers = _dummy_helpers(context)
    if not helpers:
        return
    for unit in context.units:
        if "clone" not in unit.survey.calls:
            continue
        for stmt, _ in unit.statements():
            roots = [stmt.iter] if type(stmt) is cst.For else []
            if not isinstance(stmt, cst.BaseCompoundStatement):
                roots = [stmt]
            found = _Source(helpers, unit, unit.node_for(stmt))
            for root in roots:
                for node in patterns.walk(root):
                    if type(node).__name__ in COMPREHENSIONS:
                        _check_comprehension(node, found, out)
            if type(stmt) is cst.For:
                _check_loop(stmt, found, out)


def _dummy_helpers(context: ModuleContext) -> set[str]:
    found = set()
    for unit in context.units:
        if type(unit.owner) is not cst.FunctionDef or not unit.survey.spells_grad_added:
            continue
        calls = unit.survey.calls
        allocates = calls & patterns.ALLOCATORS or any(m in calls for m in DUMMY_MAKERS)
        returns = any(type(s) is cst.Return and s.value is not None for s, _ in unit.statements())
        if allocates and returns:
            found.add(unit.name)
    return found


class _Source:
    """Which dummy-making helper an iterated expression comes from: a call in it, or a
    local it reads that was bound from such a call (``grads = runner.input_grads()``)."""

    def __init__(self, helpers: set[str], unit, node) -> None:
        self.helpers, self.unit, self.node = helpers, unit, node

    def helper(self, expr: cst.CSTNode) -> str | None:
        for sub in patterns.walk(expr):
            name = patterns.callee_name(sub)
            if name in self.helpers:
                return name
        if self.node is None:
            return None
        for name in patterns.read_names(expr):
            for definition in self.unit.reaching.reaching(name.value, self.node):
                if definition.value is None:
                    continue
                for sub in patterns.walk(definition.value):
                    if patterns.callee_name(sub) in self.helpers:
                        return patterns.callee_name(sub)
        return None


def _check_comprehension(comp, source: _Source, out: Collector) -> None:
    clauses = []
    clause = comp.for_in
    while clause is not None:
        clauses.append(clause)
        clause = clause.inner_for_in
    for clause in clauses:
        helper = source.helper(clause.iter)
        if helper is None:
            continue
        for element in _target_names(clause.target):
            tests = [c.test for cl in clauses for c in cl.ifs]
            clone = _clone_of(comp.elt, element, tests)
            if clone is not None:
                out.report(CODE, clone, MESSAGE.format(helper=helper))
                return


def _check_loop(loop, source: _Source, out: Collector) -> None:
    helper = source.helper(loop.iter)
    if helper is None:
        return
    tests = [n.test for n in patterns.walk(loop.body) if type(n) in (cst.If, cst.While)]
    for element in _target_names(loop.target):
        clone = _clone_of(loop.body, element, tests)
        if clone is not None:
            out.report(CODE, clone, MESSAGE.format(helper=helper))
            return


def _clone_of(expr, element: str, tests: list) -> cst.Call | None:
    """The clone of ``element`` in ``expr``, unless a condition around it reads another
    name (a dummy mark)."""
    tests = tests + [n.test for n in patterns.walk(expr) if type(n) is cst.IfExp]
    if any(n.value not in (element, "None") for t in tests for n in patterns.read_names(t)):
        return None
    for node in patterns.walk(expr):
        if type(node) is not cst.Call:
            continue
        name = patterns.callee_name(node)
        if name != "clone":
            continue
        func = node.func
        receiver = func.value if type(func) is cst.Attribute else None
        args = patterns.positional_args(node)
        subject = (
            args[0].value
            if type(receiver) is cst.Name and receiver.value == "torch" and args
            else receiver
        )
        while type(subject) is cst.Call and type(subject.func) is cst.Attribute:
            subject = subject.func.value  # g.detach().clone()
        if type(subject) is cst.Name and subject.value == element:
            return node
    return None


def _target_names(target) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []
