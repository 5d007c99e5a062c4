"""GMLP033: a gradient added into main_grad and also handed on as `.grad`, with no flag."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.deliveries import Deliveries
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)
handoff_values = LazyModule("..analysis.handoff_values", __package__)
deliveries = LazyModule("..analysis.deliveries", __package__)
iteration = LazyModule("..analysis.iteration", __package__)
paths = LazyModule("..analysis.paths", __package__)
delivered_gradients = LazyModule("..analysis.delivered_gradients", __package__)
decided_tests = LazyModule("..analysis.decided_tests", __package__)
consistent_paths = LazyModule("..analysis.consistent_paths", __package__)

CODE = "GMLP033"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="main-grad-written-grad-handed-on",
    summary=(
        "A weight gradient is added (or copied) into main_grad and the same tensor is then "
        "handed on as the real `.grad` (returned by `backward` or assigned to `p.grad`) on a "
        "path that sets no `grad_added_to_main_grad` and makes no dummy."
    ),
    flags=(
        "`X.main_grad.add_(g)` / `copy_(g)` / `+= g` / `kernel(X.main_grad, g)` followed, "
        "on a path with no "
        "`grad_added_to_main_grad` mark and no dummy, by `return ..., g` in a `backward` or "
        "`p.grad = g`, also through a local bound to `g` or to a conditional expression with "
        "`g` in an arm"
    ),
    explanation="""
        Issue #19, class 3, the converse of a flag without a write: a write with no flag.
        When the weight gradient has gone into main_grad, Megatron's hook must be told
        (`grad_added_to_main_grad = True`) and must receive a dummy, or it adds `.grad`
        into main_grad a second time: the same gradient counted twice.

        Seen: a statement that puts a local `g` into main_grad storage (`add_` / `copy_`
        on `X.main_grad`, a name bound to it or a view of it, or `main_grad += g`); the same
        binding of `g` then handed on by a function named `backward` as one of the
        gradients it returns, or assigned to `P.grad`; reported when a path from the write
        to the hand-off passes no mark of `grad_added_to_main_grad` (any weight's, or a
        `setattr` / helper marking it) and no call making a dummy. Reported at the hand-off,
        or at the write when an `if` decides whether the write runs and not whether the
        hand-off does and some path reaches the hand-off without any write of `g` (the
        hand-off is then right on the paths that wrote nothing, and the write's branch is
        what lacks the flag and the dummy); when every path to the hand-off wrote (`if
        overwrite: copy_(g) else: add_(g)`), the hand-off is reported. The gradient
        converted on the way in or out is the same gradient (`g.to(weight.dtype)`, `g.float()`,
        `g.contiguous()`, `g.astype(dtype)`, a view of it), and main_grad reached through a
        local (`mg := getattr(w, "main_grad", None)`, a view of it) is main_grad.

        Class 7, the same shape in other syntax: the gradient may reach the hand-off through
        a local bound to it (`grad_weight = wgrad.to(dtype)`) or to a conditional expression
        one arm of which is it (`grad_weight = dummy if hasattr(w, "grad_added_to_main_grad")
        else wgrad`, taken on the run where the mark above was skipped); reported at that
        binding when a run passes the write and the binding with no mark between them, unless
        the `if` around the write rules the arm out (`if fuse: add_(g)` beside `dummy if fuse
        else g`).

        A kernel that takes its destination first (`fused_accumulate(p.main_grad, g)`, a
        function, not an in-place method of another tensor) puts its second argument into
        main_grad; a tuple or list bound to a name and returned (`grads = (dx, g); return
        grads`) hands on the names it displays.

        Lists of per-expert gradients, element by element: a loop variable of `for g in L`,
        `for i, g in enumerate(L)` or `for w, g in zip(W, L)` (nested the same way), `L[i]`,
        or a `g` appended to `L` (`L.append(g)`), put into main_grad writes the elements of
        `L`; returning `L`, `*L`,
        `*[g for g in L]`, `*(g for g in L)`, `*tuple(L)` or `*list(L)` from the same
        binding of `L` hands them all on. So does `torch._foreach_add_(<main_grads>, L)` /
        `_foreach_copy_` (a list of main_grads, or a local bound to one).

        A run that binds the gradient's name anew after the write (`if fuse: add_(g); g =
        None`) hands on something else and is not reported; a returned choice (`return dx,
        (None if fuse else g)`) is judged like a bound one.

        Not seen: a choice whose test only implies the write's (`if fuse:` around the write,
        `dummy if fuse and not fp8 else g` at the binding) is taken as possible; bindings
        through more than one local, nested conditional expressions, a walrus alias inside
        the return, `paddle.cast(g, dt)` spelled as a function. Writes by GEMMs
        (`out=main_grad`: their result *is* main_grad, GMLP031's and GMLP005's ground; a
        gradient computed apart and returned next to such a kernel is not tied to it),
        hand-offs in helpers of other files, the flag set by the caller; a list rebuilt from
        the written one (`[g.float() for g in L]`), elements handed on one by one by index
        (`p.grad = L[i]`) after a write through another name, and loops over anything but a
        plain name, `zip` and `enumerate`.

        A call of a helper of the file that puts one of its parameters into another's
        main_grad (`P.main_grad.add_(Q)`) and marks nothing counts as that write, of the
        argument handed as Q (one level; a helper defined twice in the file is not used).

        A helper of the file that puts the gradient it is handed into main_grad, marks nothing
        and hands that same gradient back on runs that all wrote it (`def _finish_wgrad(param,
        grad): param.main_grad.add_(grad.to(...)); return grad`; a `return grad` on a run with
        no main_grad or with the write switched off hands back an unwritten gradient, review
        29), called as `g = _finish_wgrad(w, g)` with `g` then handed on, is reported at the
        helper's `return` (blind corpus 26): the caller's binding keeps the written gradient. A
        helper call bound to the gradient's own name that hands back something else (a dummy)
        ends the gradient there.
    """,
    fix="""
        Set `param.grad_added_to_main_grad = True` (under `hasattr`) and hand back a dummy
        or None. No automatic fix.
    """,
    fix_summary="none (mark the flag and hand back a dummy)",
    valid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = dy.t() @ x
                weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = dy.t() @ x
                if ctx.fuse:
                    weight.main_grad.add_(wgrad)
                    weight.grad_added_to_main_grad = True
                return None, wgrad
            """
        ),
        Example(
            """
            def backward(ctx, dy, x):
                wgrads = [dy[i].t() @ x[i] for i in range(len(ctx.weights))]
                for w, g in zip(ctx.weights, wgrads):
                    w.main_grad.add_(g)
                    w.grad_added_to_main_grad = True
                return None, *[make_dummy_wgrad(w) for w in ctx.weights]
            """
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = dy.t() @ x
                if ctx.fuse:
                    weight.main_grad.add_(wgrad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                grad_weight = torch.zeros_like(weight) if ctx.fuse else wgrad.to(x.dtype)
                return None, grad_weight
            """
        ),
        Example(
            """
            def finish_wgrad(param, grad):
                param.main_grad.add_(grad.to(param.main_grad.dtype))
                param.grad_added_to_main_grad = True
                return make_dummy_wgrad(param)


            def backward(ctx, dy):
                x, w = ctx.saved_tensors
                wgrad = dy.t() @ x
                wgrad = finish_wgrad(w, wgrad)
                return None, wgrad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = dy.t() @ x
                weight.main_grad.add_(wgrad)
                return None, wgrad
            """,
            line=5,
        ),
        Example(
            """
            def reduce_expert_grads(params, grads):
                for p, g in zip(params, grads):
                    p.main_grad.add_(g)
                    p.grad = g
            """,
            line=4,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                wgrads = [dy[i].t() @ x[i] for i in range(len(ctx.weights))]
                for w, g in zip(ctx.weights, wgrads):
                    w.main_grad.add_(g)
                return None, *wgrads
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = dy.t().float() @ x.float()
                if (mg := getattr(weight, "main_grad", None)) is not None:
                    mg.add_(wgrad)
                return None, wgrad.to(weight.dtype)
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = dy.t() @ x
                weight.main_grad.add_(wgrad)
                grad_weight = wgrad.astype(x.dtype)
                return None, grad_weight
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = dy.t() @ x
                weight.main_grad.add_(wgrad)
                if hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                marked = hasattr(weight, "grad_added_to_main_grad")
                grad_weight = torch.zeros_like(weight) if marked else wgrad
                return None, grad_weight
            """,
            line=8,
        ),
        Example(
            """
            def finish_wgrad(param, grad):
                param.main_grad.add_(grad.to(param.main_grad.dtype))
                return grad


            def backward(ctx, dy):
                x, w = ctx.saved_tensors
                wgrad = dy.t() @ x
                wgrad = finish_wgrad(w, wgrad)
                return None, wgrad
            """,
            line=3,
        ),
    ),
)


# -- the check: the gradients put into main_grad are found by
# analysis/delivered_gradients.py; judged here is where they are handed on ----------------
MESSAGE = (
    "`{name}` went into main_grad at line {line} and is handed on here as the real gradient "
    "with no grad_added_to_main_grad set on the way: Megatron's hook adds it to main_grad a "
    "second time"
)


ELEMENTS_MESSAGE = (
    "the elements of `{name}` went into main_grad at line {line} and are handed on here as "
    "the real gradients with no grad_added_to_main_grad set on the way: Megatron's hook adds "
    "them to main_grad a second time"
)


HELPER_MESSAGE = (
    "this helper adds the weight gradient it is handed into main_grad and hands the same "
    "gradient back, which the caller returns as the real gradient (line {line}) with no "
    "grad_added_to_main_grad set: Megatron's hook adds it to main_grad a second time; mark "
    "the weight and return a dummy"
)


WRITE_MESSAGE = (
    "a weight gradient goes into main_grad here and is handed on at line {line} as the real "
    "gradient with no grad_added_to_main_grad set on the way: Megatron's hook adds it to "
    "main_grad a second time"
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    # ``main_grad,``: the buffer handed first to a kernel that takes its destination.
    if "main_grad" not in source or not (
        "add_" in source or "copy_" in source or "+=" in source or "main_grad," in source
    ):  # (``_foreach_add_`` / ``_foreach_copy_`` hold the first two)
        return
    helpers = None
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        if not unit.survey.spells_main_grad:
            # It may still write main_grad through a helper of the file.
            helpers = (
                context.shared(delivered_gradients.helper_writes) if helpers is None else helpers
            )
            if not helpers or not unit.survey.calls & helpers.keys():
                continue
        facts = deliveries.Deliveries(unit)
        writes = [
            (node, d, ELEMENTS_MESSAGE if elements else MESSAGE)
            for node, d, elements in delivered_gradients.writes(unit, facts)
        ]
        if writes and "append" in source:  # ``wgrads.append(g)`` after g went in
            written = {id(d): node for node, d, _ in writes}
            for d, listed in list(iteration.lists_given(unit, written)):
                writes.append((written[id(d)], listed, ELEMENTS_MESSAGE))
        if writes:
            _check_unit(unit, facts, writes, out)


def _check_unit(unit: Unit, facts: Deliveries, writes, out: Collector) -> None:
    is_backward = unit.name == "backward"
    reported: set[int] = set()  # the helpers' returns already reported
    for root, node in unit.expression_roots():
        handed: list[cst.Name] = []
        # (name, node where its value is taken) when the gradients went into a tuple first
        built: list[tuple[cst.Name, object]] = []
        # (element, the conditional expression it is an arm of) of a returned choice
        chosen: dict[int, object] = {}
        if is_backward and isinstance(root, cst.Return) and root.value is not None:
            handed = []
            for element in wgrad.elements(root.value):
                e = handoff_values.same_gradient(handoff_values.whole_list(element))
                if isinstance(e, cst.Name):
                    handed.append(e)
                    choice = handoff_values.choice_of(root.value, element)
                    if choice is not element:
                        chosen[id(e)] = (choice, choice.body is element)
            if isinstance(root.value, cst.Name):
                built = list(_built_tuple(unit, root.value, node))
        elif (
            isinstance(root, cst.Assign)
            and isinstance(handoff_values.same_gradient(root.value), cst.Name)
            and any(patterns.is_attr(t.target, "grad") for t in root.targets)
        ):
            handed = [handoff_values.same_gradient(root.value)]
        # (name, node, arm) of a local bound to the gradient, or to a choice of it, and
        # handed on: reported at that binding, where the real gradient is chosen.
        aliased = [a for n in handed for a in _aliases(unit, n, node)]
        entries = [(n, node, chosen.get(id(n)), root) for n in handed]
        entries += [(n, at, None, root) for n, at in built]
        entries += [(n, at, arm, at.owner) for n, at, arm in aliased]
        for name, at, arm, site in entries:
            reaching = unit.reaching.reaching(name.value, at)
            mine = [w for w in writes if w[1] in reaching]
            # Every path to the hand-off wrote (``if overwrite: copy_ else: add_``): the
            # hand-off itself is what is wrong, whichever write ran.
            wrote_always = not paths.reachable_avoiding(
                unit.graph, node, (w[0].index for w in mine)
            )
            handoff = node if site is root else at
            # a run that binds the name anew after the write hands on something else
            # (``if fuse: add_(g); g = None``)
            rebinds = _bindings_of(unit, name.value) if at is node else frozenset()
            for write_node, _, message in mine:
                if site is not root and not _alias_after_write(
                    unit, facts, write_node, at, node, arm, name.value
                ):
                    continue
                helper = _passing_helper(unit, site, write_node)
                if helper is None and _rebinds_at_write(write_node, name.value):
                    # ``g = _finish_wgrad(w, g)``: ``g`` is the helper's result from here,
                    # judged through that binding (or not handed back at all)
                    helper = _passing_helper(unit, write_node.owner, write_node)
                    if helper is None:
                        continue
                if helper is not None:
                    if id(helper) not in reported:
                        reported.add(id(helper))
                        there = unit.context.line_of(root)
                        out.report(CODE, helper, HELPER_MESSAGE.format(line=there))
                    break
                if site is root and arm is not None and _arm_ruled_out(write_node, arm):
                    continue
                if deliveries.through(unit.graph, write_node, node, facts.mark_nodes | rebinds):
                    if not wrote_always and _only_the_write_decided(unit, write_node, handoff):
                        # The hand-off is right on the paths that wrote nothing: the
                        # write's own branch is what lacks the flag and the dummy.
                        there = unit.context.line_of(site)
                        out.report(CODE, write_node.owner, WRITE_MESSAGE.format(line=there))
                        continue
                    line = unit.context.line_of(write_node.owner)
                    out.report(CODE, site, message.format(name=name.value, line=line))
                    break


def _rebinds_at_write(write, name: str) -> bool:
    """The write is a helper's call whose result is bound to ``name`` itself."""
    owner = write.owner
    return type(owner) is cst.Assign and any(
        type(t.target) is cst.Name and t.target.value == name for t in owner.targets
    )


def _passing_helper(unit: Unit, site, write) -> cst.Return | None:
    """The ``return`` of the helper that both wrote the gradient and handed it back, when
    the hand-off's binding is that helper's call (``g = _finish_wgrad(w, g)``): the helper
    is what left out the flag and the dummy."""
    if write.owner is not site or type(site) is not cst.Assign:
        return None
    helper = delivered_gradients.passing_return(unit.context, site.value)
    return helper[1] if helper is not None else None


def _only_the_write_decided(unit: Unit, write, handoff) -> bool:
    """An ``if`` decides whether the write runs and not whether the hand-off runs: the
    hand-off also serves paths that wrote nothing (loops do not count: a loop over the
    experts writes every element it hands on)."""
    handoff_branches = {b.index for b in unit.control.ancestors(handoff)}
    return any(
        b.kind == "if" and b.index not in handoff_branches for b in unit.control.ancestors(write)
    )


def _built_tuple(unit: Unit, name: cst.Name, node):
    """(element, its node) for ``grads = (dx, wgrad); return grads``: the names a tuple or
    list bound to the returned name displays, read where it was built."""
    for d in unit.reaching.reaching(name.value, node):
        if d.kind == "assign" and isinstance(d.value, (cst.Tuple, cst.List)):
            for element in wgrad.elements(d.value):
                if isinstance(element, cst.Name):
                    yield element, d.node


def _aliases(unit: Unit, name: cst.Name, node):
    """(g, the binding's node, arm) for a handed-on local bound to the gradient ``g``
    (``grad_weight = wgrad.to(dtype)``) or to a choice one arm of which is ``g``
    (``grad_weight = dummy if marked else wgrad.astype(dtype)``: arm is that conditional
    expression and the arm's truth value, None for a plain binding)."""
    for d in unit.reaching.reaching(name.value, node):
        if d.kind != "assign" or d.value is None:
            continue
        value = handoff_values.same_gradient(d.value)
        passed = delivered_gradients.passed_through(unit.context, value)
        if passed is not None:  # ``g = _finish_wgrad(w, g)``: the helper hands ``g`` back
            yield passed, d.node, None
        elif isinstance(value, cst.Name) and value.value != name.value:
            yield value, d.node, None
        elif isinstance(value, cst.IfExp):
            for branch, truth in ((value.body, True), (value.orelse, False)):
                chosen = handoff_values.same_gradient(branch)
                if isinstance(chosen, cst.Name) and chosen.value != name.value:
                    yield chosen, d.node, (value, truth)


def _bindings_of(unit: Unit, name: str, but=None) -> frozenset[int]:
    """The nodes that bind ``name`` (other than ``but``)."""
    return frozenset(d.node.index for d in unit.graph.defs if d.name == name and d.node is not but)


def _alias_after_write(
    unit: Unit, facts: Deliveries, write, binding, handoff, arm, gradient: str
) -> bool:
    """The binding that hands the written gradient on runs on a run with the write, and goes
    on to the hand-off, with no mark after the first of them (either may come first; a run
    takes every ``if`` on a test already decided the way it went), and a conditional
    expression's arm is not one that the ``if`` around the write rules out (``if fuse:
    add_(g)`` beside ``dummy if fuse else g``: the write's runs take the dummy)."""
    marks = facts.mark_nodes
    # the gradient bound anew between the write and the binding, or the alias between the
    # binding and the hand-off, is not the written gradient handed on
    gradient_rebound = _bindings_of(unit, gradient)
    alias = next((d.name for d in unit.graph.defs if d.node is binding), None)
    alias_rebound = _bindings_of(unit, alias, but=binding) if alias else frozenset()
    if not (
        consistent_paths.passes_in_order(
            unit.graph, (write, binding, handoff), (marks | gradient_rebound, marks | alias_rebound)
        )
        or consistent_paths.passes_in_order(
            unit.graph, (binding, write, handoff), (alias_rebound, marks | alias_rebound)
        )
    ):
        return False
    return arm is None or not _arm_ruled_out(write, arm)


def _arm_ruled_out(write, arm) -> bool:
    """The ``if`` around the write decides the conditional expression's test against the
    arm that hands the gradient on (``if fuse: add_(g)`` beside ``dummy if fuse else g``)."""
    choice, truth = arm
    return decided_tests.rules_out(write.enclosing_ifs, choice.test, truth)
