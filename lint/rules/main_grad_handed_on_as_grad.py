"""GMLP031: main_grad itself handed on as the weight's `.grad`."""

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
wgrad = LazyModule("..analysis.wgrad", __package__)
iteration = LazyModule("..analysis.iteration", __package__)
grad_storage = LazyModule("..analysis.grad_storage", __package__)
dropped_gradients = LazyModule("..analysis.dropped_gradients", __package__)
consistent_paths = LazyModule("..analysis.consistent_paths", __package__)
handed_on_results = LazyModule("..analysis.handed_on_results", __package__)
returned_outputs = LazyModule("..analysis.returned_outputs", __package__)

CODE = "GMLP031"
RULE = Rule(
    code=CODE,
    classes=(2,),
    name="main-grad-handed-on-as-grad",
    summary=(
        "An autograd `backward` returns main_grad itself (or a name or view bound to it) as a "
        "gradient, or a weight-gradient producer sets `param.grad` to it."
    ),
    flags=(
        "`return ..., w.main_grad` / a local every binding of which is main_grad or a view of "
        "it, returned by a function named `backward`; `p.grad = <main_grad>` in a function "
        "named for producing the weight gradient or one that marks `grad_added_to_main_grad`"
    ),
    explanation="""
        Issue #19, class 2 (the second half: paths that return main_grad itself as
        `.grad`). Autograd adds what backward returns into `param.grad`, and Megatron's hook
        then adds `.grad` into main_grad unless the flag is set: main_grad handed on as the
        gradient is counted twice, or, with the flag set, autograd holds an fp32 alias of the
        buffer that later steps zero or overwrite under it.

        Seen: in a function named `backward`, a returned element (of a tuple or list) that
        is `X.main_grad`, `getattr(X, "main_grad")`, a main_grad fetch, or a local whose every
        binding reaching the `return` is one of those or a view of one (`.view`, `.data`,
        slicing), or the result of a call that writes it: a GEMM given `out=<main_grad>`
        (also `out=w.main_grad if fuse else None`, the first name a tuple-returning GEMM
        unpacks to) or an in-place method on it (`main_grad.add_(g)`). Where main_grad is the
        result on one arm of a conditional only, a `return` choosing on the same test (a
        conditional expression or a branch it sits in) is taken to choose right; and
        `P.grad = <such a value>` in a function named `*backward*`, `*wgrad*`,
        `*grad_weight*`, `*weight_grad*`, `*_dw`, a `bwd` part without `fwd`, or one that marks
        `grad_added_to_main_grad`. A returned name with other bindings too (a dummy on
        one branch, a product on another) is reported at a binding to main_grad itself
        (`g = w.main_grad`, `getattr`) from which some run reaches the `return` with no
        other binding on the way, taking tests it has passed the same way again.
        (GMLP005 reports a GEMM result written into main_grad and returned under the
        mark.)

        The flat buffer the main_grads are views of counts as main_grad: an attribute
        named `grad_data` (Megatron's bucket) or naming main_grad with a buffer word
        (`flat_main_grad`, `main_grad_buffer`), in a function that spells main_grad or marks
        a weight; so do its pieces, walked by a comprehension or loop
        (`[c.view_as(w) for c, w in zip(flat.split(numels), weights)]`, `for piece in
        flat.chunk(G)`, `torch.split(flat, numels)`, `map(lambda c, w: c.view_as(w),
        flat.split(numels), weights)`). A per-expert comprehension bound to a name only to
        be handed back is reported where it is built.

        Per-expert lists: a list or tuple every element of which holds main_grad
        (`[w.main_grad for w in weights]`, `list(getattr(w, "main_grad") for w in ws)`,
        `[fc1.main_grad, fc2.main_grad]`, or `L = []` filled only by `L.append(<main_grad>)`),
        returned whole or starred (`*wgrad_list`).

        Left alone: a call of a function of the file given `out=main_grad` none of whose
        `return`s hands back its `out` (Primus-Turbo's wgrad wrappers accumulate into it and
        return a dummy); a `.grad` assignment under an `if` that decides against the run
        where main_grad was the GEMM's output (`wgrad = gemm(..., out=w.main_grad if
        ctx.fuse else None)`, then `if not ctx.fuse: w.grad = wgrad`, in a fork of
        Transformer Engine's layernorm_linear; `analysis/returned_outputs.py`).

        Not seen: main_grad returned through a helper of another file or a container filled
        elsewhere (`extend`, `insert`, an item assigned, a list some of whose elements are
        other tensors);
        optimizers and grad-buffer code that set `.grad = main_grad` on purpose
        (they are not producers and are left alone).

        Since blind corpus 26: a function named for a weight gradient that itself marks
        `grad_added_to_main_grad`, whose result a `backward` of the file returns (directly or
        through a local bound to the call), returns what is handed on as the weight's gradient
        (quack's `linear_bwd_compute_weight_grad`): main_grad itself returned there
        (`w.main_grad`, `getattr`, a local bound to either, also through `x if c else None`) is
        reported. A helper whose result is a GEMM's `out=` buffer is not handed on (review 29);
        one no `backward` of the file returns is not seen; and a returned local bound once to
        another local that holds main_grad (`dweight = main_grad`), read nowhere else, is
        reported at that binding, where main_grad was chosen as the gradient.
    """,
    fix="""
        Hand back a dummy (`get_dummy_wgrad(...)` / `torch.zeros_like(param)`) with
        `grad_added_to_main_grad = True`, or None where the hook allows it. No automatic fix.
    """,
    fix_summary="none (hand back a dummy, not main_grad)",
    valid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                out = weight.main_grad if ctx.fuse_wgrad_accumulation else None
                wgrad, _ = gemm(x, dy, accumulate=True, out=out)
                if ctx.fuse_wgrad_accumulation:
                    weight.grad_added_to_main_grad = True
                    wgrad = make_dummy_wgrad(weight)
                return None, wgrad
            """
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = weight.main_grad
                general_gemm(x, dy, out=wgrad, accumulate=True)
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            """
        ),
        Example(
            """
            def copy_model_grads(params):
                for param in params:
                    param.grad = param.main_grad
            """
        ),
        Example(
            """
            def _wgrad(x, dy, accumulate=False, out=None):
                if not accumulate:
                    return gemm(x, dy)
                gemm_accum(x, dy, out=out)
                return make_dummy_wgrad(out)


            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                wgrad = _wgrad(x, dy, accumulate=ctx.fuse, out=ctx.main_grad)
                return dy @ weight, wgrad
            """
        ),
        Example(
            """
            def backward_wgrad(ctx, weight, x, dy):
                fuse = ctx.fuse_wgrad_accumulation
                wgrad, _, _ = gemm(x, dy, accumulate=True, out=weight.main_grad if fuse else None)
                if not fuse:
                    if weight.grad is None:
                        weight.grad = wgrad
                    else:
                        weight.grad += wgrad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                wgrad = weight.main_grad
                general_gemm(x, dy, out=wgrad, accumulate=True)
                weight.grad_added_to_main_grad = True
                return None, wgrad
            """,
            line=6,
        ),
        Example(
            """
            def finish_wgrad(weight, wgrad):
                weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
                weight.grad = weight.main_grad.view(weight.shape)
            """,
            line=4,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                out = weight.main_grad if ctx.fuse_wgrad_accumulation else None
                wgrad, _ = gemm(x, dy, accumulate=True, out=out)
                weight.grad_added_to_main_grad = ctx.fuse_wgrad_accumulation
                return None, wgrad if weight.requires_grad else None
            """,
            line=6,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                weight = ctx.weight
                outputs = gemm(x, dy, accumulate=True, out=weight.main_grad)
                wgrad, bias_grad = outputs
                return None, wgrad, bias_grad
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy, x):
                wgrad_list = [w.main_grad for w in ctx.weights]
                grouped_gemm(x, dy, out=wgrad_list, accumulate=True)
                return None, *wgrad_list
            """,
            line=4,
        ),
        Example(
            """
            def compute_weight_grad(ctx, dout, x, weight):
                main_grad = weight.main_grad
                over = getattr(weight, "overwrite_main_grad", False)
                gemm(dout.T, x, out=main_grad, accumulate=not over)
                weight.grad_added_to_main_grad = True
                dweight = main_grad
                return dweight


            def backward(ctx, dout):
                x, weight = ctx.saved_tensors
                dweight = compute_weight_grad(ctx, dout, x, weight)
                return dout @ weight, dweight
            """,
            line=6,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
RETURNED = (
    "`{value}` is main_grad itself, returned as a gradient: autograd puts it in `.grad`, "
    "where Megatron's hook adds it to main_grad again (or holds an alias of the buffer); "
    "hand back a dummy"
)
BOUND = (
    "`{value}` is bound to main_grad itself here and returned as a gradient on this path: "
    "autograd puts it in `.grad`, where Megatron's hook adds it to main_grad again (or holds "
    "an alias of the buffer); hand back a dummy or None"
)
ASSIGNED = (
    "`{target}` is set to main_grad itself: the hook adds it to main_grad again (or `.grad` "
    "aliases the buffer); hand back a dummy"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "main_grad" not in context.source:
        return
    for unit in context.units:
        # a function that marks the flag may hand back main_grad under another name (the
        # flat buffer the main_grads are views of) without spelling main_grad itself
        spells = unit.survey.spells_main_grad or unit.survey.spells_grad_added
        if spells and isinstance(unit.owner, cst.FunctionDef):
            _check_unit(unit, out)


def _check_unit(unit: Unit, out: Collector) -> None:
    is_backward = unit.name == "backward"
    # A weight-gradient helper of the backward that marks the flag returns what the backward
    # hands on as the weight's gradient (quack's ``linear_bwd_compute_weight_grad``, blind
    # corpus 26): main_grad itself returned there (not a GEMM's result: GMLP005's).
    helper = (
        not is_backward
        and _marks(unit)
        and wgrad_words.names_producer(unit.name)
        and unit.name in unit.context.shared(handed_on_results.handed_on_results)
    )
    producer = _producer(unit)
    for root, node in unit.expression_roots():
        if helper and isinstance(root, cst.Return) and root.value is not None:
            for element in wgrad.elements(root.value):
                if handed_on_results.plain_main_grad(unit, element, node, 3):
                    site = _made_for_return(unit, element, node) or element
                    out.report(CODE, site, RETURNED.format(value=out.text(element)))
        elif is_backward and isinstance(root, cst.Return) and root.value is not None:
            choices = _choice_tests(unit, root.value, node)
            for element in wgrad.elements(root.value):
                tests: set[str] = set()
                if _holds(unit, element, node, set(), tests) and not tests & choices:
                    site = _made_for_return(unit, element, node) or element
                    out.report(CODE, site, RETURNED.format(value=out.text(element)))
                else:
                    for binding in _aliases_on_some_run(unit, element, node):
                        out.report(CODE, binding, BOUND.format(value=out.text(element)))
        elif producer and isinstance(root, cst.Assign):
            tests: set[str] = set()
            if not _holds(unit, root.value, node, set(), tests):
                continue
            if returned_outputs.decided_against(unit, node, tests):
                continue  # main_grad only on the runs that do not reach this assignment
            for target in root.targets:
                if patterns.is_attr(target.target, "grad"):
                    out.report(CODE, root, ASSIGNED.format(target=out.text(target.target)))


def _aliases_on_some_run(unit: Unit, element, node):
    """The bindings of a returned name to main_grad itself (``g = w.main_grad``, also
    ``getattr``) from which some run reaches the ``return`` with no other binding of the
    name on the way, taking repeated tests the same way (``consistent_paths``): the other
    bindings (a dummy, a product) are right on their paths, and this one hands the buffer
    on where it runs."""
    if not isinstance(element, cst.Name):
        return
    for d in unit.reaching.reaching(element.value, node):
        if d.kind != "assign" or d.value is None or not patterns.is_main_grad_direct(d.value):
            continue
        others = frozenset(o.node.index for o in unit.graph.defs if o.name == d.name and o is not d)
        if consistent_paths.passes_in_order(unit.graph, (d.node, node), (others,)):
            yield d.node.owner


def _made_for_return(unit: Unit, element, node):
    """The statement binding a returned name to a per-expert comprehension or to another
    local, where that binding is the name's only one reaching the ``return``, writes
    nothing (no ``out=``, no in-place call) and nothing else reads it (``grads =
    [c.view_as(w) for ...]``): the list of gradients was made to be handed back, and there
    main_grad was chosen as each one. A buffer also written or given to a GEMM is reported
    at the ``return``."""
    if not isinstance(element, cst.Name):
        return None
    defs = unit.reaching.reaching(element.value, node)
    if len(defs) != 1 or defs[0].kind != "assign":
        return None
    d = defs[0]
    comprehension = isinstance(d.value, (cst.ListComp, cst.GeneratorExp))
    # or a local bound once to a local holding main_grad, to be returned (``dweight =
    # main_grad``, blind corpus 26): there main_grad was chosen as the gradient
    renamed = type(d.value) is cst.Name
    if not (comprehension or renamed) or wgrad.assigned_name(d.node.owner) is None:
        return None
    if any(
        grad_storage.writes(call) for call in patterns.walk(d.value) if isinstance(call, cst.Call)
    ):
        return None
    others = (n for n in unit.graph.nodes if n is not node and n is not d.node)
    if any(dropped_gradients.reads(unit, n, d) for n in others):
        return None
    return d.node.owner


def _marks(unit: Unit) -> bool:
    """The function itself sets ``grad_added_to_main_grad = True`` on some weight."""
    return unit.survey.spells_grad_added and any(
        wgrad.marked_subject(stmt) is not None for stmt, _ in unit.statements()
    )


def _producer(unit: Unit) -> bool:
    current: Unit | None = unit
    while current is not None:
        # a function that produces a weight gradient, as GMLP016 judges producers
        if wgrad_words.names_producer(current.name):
            return True
        current = current.parent
    return unit.survey.spells_grad_added


def _choice_tests(unit: Unit, value, node) -> set[str]:
    """The tests a ``return`` chooses its gradients by: of its conditional expressions and
    of the branches it sits in."""
    tests = [sub.test for sub in patterns.walk(value) if isinstance(sub, cst.IfExp)]
    tests += [b.test for b in unit.control.ancestors(node) if b.test is not None]
    return {unit.context.code(test).strip() for test in tests}


def _holds(unit: Unit, expr, node, seen: set[str], tests: set[str] | None = None) -> bool:
    """``expr`` is main_grad storage itself: the buffer, a view of it, the result of a call
    writing it (``out=``, an in-place method), or a local every binding of which reaching
    ``node`` is one. Where that holds only on one arm of a conditional expression
    (``out=w.main_grad if fuse else None``), the arm's test goes into ``tests``: a
    ``return`` that chooses on the same test hands main_grad back only where it chose so."""
    if tests is None:
        tests = set()
    if patterns.is_main_grad_direct(expr):
        return True
    if isinstance(expr, cst.Subscript):
        return _holds(unit, expr.value, node, seen, tests)
    if isinstance(expr, cst.Attribute):
        if grad_storage.names_storage(expr.attr.value):
            return True
        return expr.attr.value in patterns.VIEW_ATTRS and _holds(
            unit, expr.value, node, seen, tests
        )
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        # ``[w.main_grad for w in weights]``: per-expert buffers, every element main_grad;
        # ``[c.view_as(w) for c, w in zip(flat.split(n), ws)]``: views of the pieces of one
        walked = {
            name.value
            for name, seq in iteration.element_sequences(expr.for_in)
            if _holds(unit, seq, node, seen, tests)
        }
        return _holds(unit, expr.elt, node, seen, tests) or grad_storage.view_of(expr.elt, walked)
    if isinstance(expr, (cst.List, cst.Tuple)):
        # ``[fc1.main_grad, fc2.main_grad]`` bound to a name and returned whole or starred
        return bool(expr.elements) and all(
            _holds(unit, element.value, node, seen, tests) for element in expr.elements
        )
    if isinstance(expr, cst.IfExp):
        # ``wgrad if w.requires_grad else None``: main_grad on the path that takes it
        arms = (expr.body, expr.orelse)
        held = [_holds(unit, arm, node, seen, tests) for arm in arms]
        if any(held) and all(h or patterns.is_none_like(arm) for h, arm in zip(held, arms)):
            text = unit.context.code(expr.test).strip()
            tests.add(text)
            if held[0] != held[1]:  # main_grad when the test holds (body) or fails (orelse)
                choice = returned_outputs.arm(expr.test, "body" if held[0] else "orelse")
                tests.update([choice] if choice else [])
            return True
        return False
    if isinstance(expr, cst.Call):
        if patterns.callee_name(expr) in ("list", "tuple") and len(expr.args) == 1:
            return _holds(unit, expr.args[0].value, node, seen, tests)  # ``list(<comp>)``
        out = wgrad.keyword_value(unit, expr, node, "out")  # also from a **kwargs dict
        if out is not None and _holds(unit, out, node, seen, tests):
            # a call given ``out=`` returns that tensor (the GEMM's result), unless it runs
            # a function of the file that never hands back its ``out`` (Primus-Turbo's wgrad
            # wrappers return a dummy after accumulating into it)
            return not returned_outputs.hands_back_other(unit.context, expr)
        if patterns.callee_name(expr) == "map":
            # ``map(lambda c, w: c.view_as(w), flat.split(n), ws)``: as the comprehension
            return _mapped_views(unit, expr, node, seen, tests)
        if grad_storage.torch_view(expr):
            # ``torch.split(flat, numels)``: the function form of the view method
            return _holds(unit, patterns.positional_args(expr)[0].value, node, seen, tests)
        if isinstance(expr.func, cst.Attribute):
            name = expr.func.attr.value
            returns_self = name in patterns.VIEW_METHODS or grad_storage.in_place(name)
            return returns_self and _holds(unit, expr.func.value, node, seen, tests)
        return False
    if isinstance(expr, cst.Name) and expr.value not in seen:
        defs = unit.reaching.reaching(expr.value, node)
        seen = seen | {expr.value}
        held = [_binding_holds(unit, d, seen, tests) for d in defs]
        if not defs or not any(held):
            return False
        if all(held):
            return True
        # ``if fuse: out = w.main_grad`` / ``else: out = None``: as a conditional expression,
        # main_grad on the path through the branch that bound it.
        if not all(
            h or (d.value is not None and patterns.is_none_like(d.value))
            for h, d in zip(held, defs)
        ):
            return False
        for h, d in zip(held, defs):
            if h and d.node.enclosing_ifs:
                branch, side = d.node.enclosing_ifs[0]
                text = unit.context.code(branch.test).strip()
                choice = returned_outputs.arm(branch.test, side)
                tests.update([text, choice] if choice else [text])
        return True
    return False


def _mapped_views(unit: Unit, call, node, seen: set[str], tests: set[str]) -> bool:
    """``map(lambda ...: <view of a parameter>, *sequences)`` where the parameter walks
    main_grad storage."""
    args = patterns.positional_args(call)
    if len(args) < 2 or not isinstance(args[0].value, cst.Lambda):
        return False
    function = args[0].value
    names = [p.name.value for p in function.params.params]
    walked = {
        name for name, seq in zip(names, args[1:]) if _holds(unit, seq.value, node, seen, tests)
    }
    return grad_storage.view_of(function.body, walked)


def _binding_holds(unit: Unit, d, seen: set[str], tests: set[str]) -> bool:
    if d.kind == "for" and d.value is not None:
        # ``for piece in flat.split(n)``: each element of a sequence of main_grad's pieces
        sequence = iteration.element_source(d.node.owner, d.target)
        return sequence is not None and _holds(unit, sequence, d.node, seen, tests)
    if d.kind != "assign" or d.value is None:
        return False
    if isinstance(d.value, cst.List) and not d.value.elements:
        return _filled_with_main_grads(unit, d, seen, tests)
    owner = d.node.owner
    if isinstance(owner, cst.Assign) and d.value is owner.value:
        targets = [t.target for t in owner.targets]
        if any(isinstance(t, (cst.Tuple, cst.List)) for t in targets):
            # ``wgrad, bias_grad, _ = gemm(..., out=main_grad)``: the output tensor comes
            # first, as the GEMMs that return a tuple hand it back
            first = targets[0].elements[0].value if isinstance(targets[0], cst.Tuple) else None
            if not (isinstance(first, cst.Name) and first.value == d.name):
                return False
            return _first_output_holds(unit, d.value, d.node, seen, tests)
    return _holds(unit, d.value, d.node, seen, tests)


def _filled_with_main_grads(unit: Unit, d, seen: set[str], tests: set[str]) -> bool:
    """``L = []`` then ``L.append(w.main_grad)`` (in a loop over the experts): every element
    appended to this binding of L holds main_grad, and something is."""
    given = iteration.appended_to(unit, d)
    return bool(given) and all(_holds(unit, value, at, seen, tests) for value, at in given)


def _first_output_holds(unit: Unit, value, node, seen: set[str], tests: set[str]) -> bool:
    """The first element of the tuple ``value`` is main_grad: a GEMM given ``out=`` it, or
    a local every reaching binding of which is such a GEMM's tuple
    (``outputs = gemm(..., out=...)``; ``wgrad, _ = outputs``)."""
    if isinstance(value, cst.Call):
        out = wgrad.keyword_value(unit, value, node, "out")
        if returned_outputs.hands_back_other(unit.context, value):
            return False
        return out is not None and _holds(unit, out, node, seen, tests)
    if isinstance(value, cst.Name) and value.value not in seen:
        defs = unit.reaching.reaching(value.value, node)
        seen = seen | {value.value}
        return bool(defs) and all(
            d.kind == "assign"
            and d.value is not None
            and _first_output_holds(unit, d.value, d.node, seen, tests)
            for d in defs
        )
    return False
