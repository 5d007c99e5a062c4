"""GMLP051: a GEMM writes the weight gradient into main_grad, and the same run computes it
again and hands it on as the real `.grad`."""

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
wgrad = LazyModule("..analysis.wgrad", __package__)
deliveries = LazyModule("..analysis.deliveries", __package__)
consistent_paths = LazyModule("..analysis.consistent_paths", __package__)
handoff_values = LazyModule("..analysis.handoff_values", __package__)
grad_buffers = LazyModule("..analysis.grad_buffers", __package__)
implied_tests = LazyModule("..analysis.implied_tests", __package__)
decided_tests = LazyModule("..analysis.decided_tests", __package__)
writing_helpers = LazyModule("..analysis.writing_helpers", __package__)

CODE = "GMLP051"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="main-grad-gemm-then-real-wgrad",
    summary=(
        "A `backward` runs a GEMM whose destination is a weight's main_grad, and on the same "
        "run, with no `grad_added_to_main_grad` set and no dummy made after it, computes a "
        "weight gradient by another product and returns it: the gradient reaches main_grad "
        "twice."
    ),
    flags=(
        "`gemm(..., X.main_grad)` / `gemm(..., out=X.main_grad)` in a `backward`, then on a "
        "path that takes every repeated test the same way and passes no mark or dummy, "
        "`g = <product of no weight>` returned by that `backward`, or that product returned "
        "as it is"
    ),
    explanation="""
        Issue #19, class 3 (the converse: a write with no flag, and a real `.grad`). A
        fused weight-gradient GEMM that accumulates into `param.main_grad` has delivered the
        gradient. If the same run then hands autograd a freshly computed weight gradient as
        well, with `grad_added_to_main_grad` unset, Megatron's grad-accumulation hook adds
        that `.grad` into main_grad again: the gradient is counted twice. Megatron's
        `LinearWithGradAccumulationAndAsyncCommunication` returns a dummy when the parameter
        carries the flag and None when it does not; computing the product in the fused
        branch's `else` (blind corpus 9's ROCm Megatron-LM variant) is the bug.

        Seen: in a function named `backward`, a statement calling a GEMM (a name with
        `gemm`, `matmul` or `gmm`, ending in `mm`, or taking `out=`; `gmm_op` and
        `npu_groupmatmul_add_fp32` since blind corpus 23) handed a main_grad whole as a
        positional argument or `out=` (`X.main_grad`, `getattr(X, "main_grad")`, a local
        every binding of which holds main_grad, an `out` entry of a `**` dict literal; not
        inside a conditional expression, which makes it a destination only sometimes);
        then a binding `g = <expr>` where `<expr>` computes the *same* product again: `@`
        or a GEMM call none of whose operands is a weight (that is the input gradient), not
        mentioning main_grad, whose operands start from the same names as the GEMM's other
        operands (`dy.t().matmul(x)` after `gemm(x, dy, w.main_grad)`; another weight's
        product, `dh.t() @ x`, is not the same gradient); and a `return` of `g` (an element
        of the returned tuple) that this binding reaches. Reported at the binding when one
        run passes the GEMM, the binding and the return in that order, or the binding, the
        GEMM and the return: at the binding when the GEMM runs under an `if` the product
        is computed before (`if ctx.gradient_accumulation_fusion:`; blind corpus 13's
        Megatron-LLM linear, where the fix moves the product into the `else`), at the
        `return` when nothing chooses between them), enters no
        `grad_added_to_main_grad` mark, dummy-making call or bookkeeping helper after the
        GEMM, and no other binding of `g` after the binding. A run takes an `if` whose test
        it has already passed (the same code, nothing of it rebound since) the same way, and
        an `and` that held (an `or` that did not) decides each operand: code that writes
        under `if fuse:` and computes under a later `if not fuse:` (or `... if not fuse else
        None`) is not reported.

        The same product returned as it is computed (`return dx, x.t() @ dy`, also
        `paddle.matmul(x, dy, transpose_x=True)`, converted: `(x.t() @ dy).to(dt)`) is
        reported at that element when a run passes the GEMM and the return with no mark or
        dummy between them, unless it is the arm of a returned choice that the GEMM's `if`
        rules out (`None if fuse else x.t() @ dy`); not a product handed to another call.

        The Parameter's own `.grad` is the buffer too where a framework keeps no main_grad
        (ColossalAI's linears, blind corpus 17: `grad = weight_origin.grad`,
        `wgrad_gemm_accum_fp16(x, dy, grad)`, then the product computed and returned as
        well: autograd adds it into `.grad` again), when it is handed to a kernel named for
        adding (`accum`, `param_grad_add`) or as `out=`; files naming APEX's `gemm_accum`
        kernels are analysed without main_grad. A returned choice is also ruled out through
        boolean locals bound once (`wgrad_now = accum and not use_zbv` under `if
        wgrad_now:` decides `None if use_zbv or accum else ...`).

        A call of a helper function of the file that writes the main_grad of a weight it
        is handed (`_accumulate(x, dy, weight)`, analysis/writing_helpers.py) on every run
        (a top-level statement of its body, with no `return` before it) counts as the GEMM
        into main_grad, its other arguments as the GEMM's operands; a defensive helper that
        may not write (`if hasattr(w, "main_grad")`, or one returning whether it wrote)
        does not.

        Not seen: helpers whose write is a kernel `writing_helpers` does not read as one (Paddle's
        `fused_linear_param_grad_add` given main_grad positionally), helpers of another
        file, a product computed in a helper (`g = compute_wgrad(x, dy)`), operands
        renamed between the two products (`xt = x.t()`), returns of a tuple built
        earlier, gradients assigned to `.grad` (GMLP033's ground for `add_` writes), a
        `.grad` given positionally to a GEMM not named for adding, and fused kernels into
        main_grad whose names say no GEMM
        (but Paddle's `fused_linear_param_grad_add`, named for adding a parameter's
        gradient, is taken for one).
    """,
    fix="""
        On the path where the GEMM wrote main_grad, return a dummy (with
        `grad_added_to_main_grad = True`) or None, not a recomputed product. No automatic
        fix.
    """,
    fix_summary="none (return a dummy or None where main_grad was written)",
    valid=(
        Example(
            """
            def backward(ctx, grad_output):
                total_input, weight = ctx.saved_tensors
                grad_input = grad_output.matmul(weight)
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        grad_weight = make_dummy_wgrad(weight)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                return grad_input, grad_weight
            """
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                if ctx.fuse:
                    general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                dx = dy @ weight
                if not ctx.fuse:
                    wgrad = x.t() @ dy
                else:
                    wgrad = None
                return dx, wgrad
            """
        ),
        Example(
            """
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                accum = fusion_available and weight.grad is not None
                wgrad_now = accum and not ctx.use_zbv
                if wgrad_now:
                    wgrad_gemm_accum_fp32(x, grad_output, weight.grad)
                grad_weight = None if ctx.use_zbv or accum else x.t().matmul(grad_output)
                return grad_output.matmul(weight), grad_weight
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, grad_output):
                total_input, weight = ctx.saved_tensors
                grad_input = grad_output.matmul(weight)
                if ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        grad_weight = make_dummy_wgrad(weight)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = grad_output.t().matmul(total_input)
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                return grad_input, grad_weight
            """,
            line=10,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                if ctx.fuse and weight.requires_grad:
                    general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                dx = dy @ weight
                wgrad = x.t() @ dy if weight.requires_grad else None
                return dx, wgrad
            """,
            line=6,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                if hasattr(weight, "main_grad"):
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                return dy @ weight, x.t() @ dy
            """,
            line=5,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = ctx.saved_tensor()
                fused_linear_param_grad_add(x, dy, weight.main_grad, None, True, False)
                return dy @ weight, paddle.matmul(x, dy, transpose_x=True)
            """,
            line=4,
        ),
        Example(
            """
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad = weight.grad
                if grad is not None and grad.dtype == torch.float16:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(x, grad_output, grad)
                    grad_weight = x.t().matmul(grad_output)
                else:
                    grad_weight = x.t().matmul(grad_output)
                return grad_output.matmul(weight), grad_weight
            """,
            line=6,
        ),
        Example(
            """
            class GroupedMlp(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    dx = gmm_op(dy, weight, ctx.groups, 0)[0]
                    npu_groupmatmul_add_fp32(x, dy, ctx.groups, weight.main_grad)
                    wgrad = gmm_op(x.t(), dy, ctx.groups, 2)[0]
                    return dx, wgrad
            """,
            line=7,
        ),
    ),
)

MESSAGE = (
    "`{name}` is a weight gradient computed again on a run where the GEMM at line {line} "
    "already wrote it into the weight's main_grad (or `.grad`), and no "
    "grad_added_to_main_grad is set on the way: it is added a second time (by Megatron's "
    "hook into main_grad, by autograd into `.grad`); return a dummy or None there"
)
MESSAGE_BEFORE = (
    "`{name}` is a weight gradient computed here and handed back on a run where the GEMM "
    "at line {line} also writes it into the weight's main_grad (or `.grad`), and no "
    "grad_added_to_main_grad is set on the way: it is added a second time; compute it only "
    "where the GEMM does not write it"
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "backward" not in source:
        return
    into_grad = grad_buffers.KERNEL_TRIGGER in source or "out=" in source
    if patterns.MAIN_GRAD not in source and not into_grad:
        return
    writers = context.shared(writing_helpers.WritingHelpers)
    for unit in context.units:
        if unit.name != "backward" or not isinstance(unit.owner, cst.FunctionDef):
            continue
        calls_writer = writers.calls_any(unit.survey.calls)
        if not (unit.survey.spells_main_grad or into_grad or calls_writer):
            continue
        facts = deliveries.Deliveries(unit)
        writes = []
        for root, node in unit.expression_roots():
            operands = _gemm_into_buffer(unit, facts, root, node)
            if operands is None and calls_writer:
                operands = _helper_into_buffer(writers, root)
            if operands is not None:
                writes.append((node, operands))
        if writes:
            _check_unit(unit, facts, writes, out)


def _gemm_into_buffer(unit: Unit, facts, root, node) -> frozenset[str] | None:
    """The roots of the other operands of a GEMM in ``root`` handed a weight's gradient
    buffer whole as its destination (a main_grad positionally, as ``out=``, also through a
    ``**`` dict or a local holding it; a ``.grad`` to an adding kernel or as ``out=``),
    else None."""
    for sub in patterns.walk(root):
        if type(sub) is not cst.Call:
            continue
        adding = grad_buffers.adds_into_argument(sub)
        if not (adding or wgrad.looks_like_gemm(sub)):
            continue
        out_value = wgrad.keyword_value(unit, sub, node, "out")
        positional = [arg.value for arg in sub.args if arg.keyword is None and not arg.star]

        destinations = [v for v in positional if _buffer(unit, facts, v, node, adding)]
        if out_value is not None and _buffer(unit, facts, out_value, node, True):
            destinations.append(out_value)
        if destinations:
            others = [v for v in positional if not any(v is d for d in destinations)]
            return frozenset(filter(None, map(_operand, others)))
    return None


def _helper_into_buffer(writers, root) -> frozenset[str] | None:
    """The roots of the other arguments of a call of a helper of the file that writes the
    main_grad of a weight it is handed (the GEMM moved into ``_accumulate(x, dy, weight)``),
    else None."""
    for sub in patterns.walk(root):
        if type(sub) is not cst.Call:
            continue
        written = writers.surely_written_arguments(sub)
        if written:
            positional = [arg.value for arg in sub.args if arg.keyword is None and not arg.star]
            others = [v for v in positional if not any(v is w for w in written)]
            return frozenset(filter(None, map(_operand, others)))
    return None


def _buffer(unit: Unit, facts, value, node, grad_too: bool) -> bool:
    """``value`` is a weight's main_grad, or (``grad_too``) its ``.grad``."""
    if grad_buffers.holds_main_grad(unit, facts.holders, value, node):
        return True
    return grad_too and grad_buffers.holds_grad(unit, value, node)


def _check_unit(unit: Unit, facts, writes, out: Collector) -> None:
    marks = facts.mark_nodes
    write_nodes = {node.index for node, _ in writes}
    for root, node in unit.expression_roots():
        if type(root) is not cst.Return or root.value is None:
            continue
        for element in wgrad.elements(root.value):
            if type(element) is not cst.Name:
                choice = handoff_values.choice_of(root.value, element)
                _check_returned_product(unit, writes, marks, element, choice, node, out)
                continue
            for d in unit.reaching.reaching(element.value, node):
                product = _recomputed_wgrad(d)
                if product is None or d.node.index in write_nodes:
                    continue
                others = frozenset(
                    o.node.index for o in unit.graph.defs if o.name == d.name and o is not d
                )
                for write, operands in writes:
                    if operands != _product_roots(product) or not operands:
                        continue  # another product: another weight's gradient
                    if _fallback_of(unit, write, d):
                        continue
                    if _chosen_against(unit, d.value, write):
                        continue
                    if consistent_paths.passes_in_order(
                        unit.graph, (write, d.node, node), (marks, others)
                    ):
                        line = unit.context.line_of(write.owner)  # a pass over the file
                        message = MESSAGE.format(name=d.name, line=line)
                        out.report(CODE, d.target or d.node.owner, message)
                        break
                    # computed first, then the GEMM wrote main_grad, then handed on: the
                    # product was computed where it is not wanted (before the choice), or
                    # kept past it; point at the computation, where the fix moves it
                    if consistent_paths.passes_in_order(
                        unit.graph, (d.node, write, node), (others, marks | others)
                    ):
                        line = unit.context.line_of(write.owner)
                        if _chosen_after(d.node, write):
                            # the GEMM runs under a choice the product was computed before
                            # (``if fuse:``): it belongs to the other side of that choice
                            before = MESSAGE_BEFORE.format(name=d.name, line=line)
                            out.report(CODE, d.target or d.node.owner, before)
                        else:
                            message = MESSAGE.format(name=d.name, line=line)
                            out.report(CODE, root, message)  # no choice: the hand-off
                        break


def _check_returned_product(
    unit: Unit, writes, marks, element, choice, node, out: Collector
) -> None:
    """The same product returned as it is computed (``return dx, x.t() @ dy``), on a run
    from the GEMM that sets no mark on the way; ``choice``: the conditional expression it
    is an arm of (``None if fuse else x.t() @ dy``), or the element itself."""
    element = handoff_values.same_gradient(element)  # ``(x.t() @ dy).to(w.dtype)``
    product = _product_in(element)
    if product is None or product is not element:
        return  # only the element itself: a product handed to a call is that call's
    for write, operands in writes:
        if not operands or operands != _product_roots(product):
            continue
        if _chosen_against(unit, choice, write):
            continue
        if consistent_paths.passes_in_order(unit.graph, (write, node), (marks,)):
            line = unit.context.line_of(write.owner)
            name = unit.context.code(product).strip().partition("\n")[0]
            out.report(CODE, element, MESSAGE.format(name=name, line=line))
            return


def _chosen_after(product, write) -> bool:
    """The GEMM at ``write`` sits under an ``if`` that the product at ``product`` does not."""
    around = {id(stmt) for stmt, _ in product.enclosing_ifs}
    return any(id(stmt) not in around for stmt, _ in write.enclosing_ifs)


def _recomputed_wgrad(d):
    """The product a binding computes, when it is a product of no weight (a weight
    gradient, not the input's) that does not involve main_grad; else None."""
    if d.kind != "assign" or d.value is None:
        return None
    return _product_in(d.value)


def _product_in(value):
    """The product a value computes, when it is a product of no weight that does not
    involve main_grad; else None."""
    if type(value) is cst.IfExp:
        # ``x.t() @ dy if weight.requires_grad else None``: the product is the value.
        value = value.body if not patterns.is_none_like(value.body) else value.orelse
    if wgrad.main_grad_owners(value):
        return None
    return wgrad.weight_gradient_product(value)


def _product_roots(product) -> frozenset[str]:
    """The operands of a product, each as ``_operand``'s text (``dy.t() @ x``: dy, x;
    ``dy.t().matmul(x)`` and ``torch.mm(dy.t(), x)`` the same)."""
    if type(product) is cst.BinaryOperation:
        operands = [product.left, product.right]
    else:
        operands = [a.value for a in product.args if a.keyword is None and not a.star]
        func = product.func
        if type(func) is cst.Attribute and _root_name(func.value) not in MODULES:
            operands.append(func.value)  # ``dy.t().matmul(x)``: the receiver
    return frozenset(filter(None, map(_operand, operands)))


MODULES = frozenset({"torch", "F", "tex", "te", "ops", "np", "paddle", None})
# Methods and attributes that give the same tensor's values in another layout or dtype.
SAME_TENSOR = frozenset(
    {
        "t", "T", "mT", "data", "float", "half", "bfloat16", "to", "contiguous", "view",
        "reshape", "flatten", "detach", "transpose", "permute", "type", "view_as", "squeeze",
        "unsqueeze",
    }
)  # fmt: skip


def _operand(expr) -> str | None:
    """The tensor an operand reads, as its code without layout and dtype changes
    (``grad_output.t()``, ``x.float().T``, ``torch.t(x)``: the names; ``ctx.input1`` and
    ``inputs[1]`` stay whole: another field is another tensor)."""
    while True:
        kind = type(expr)
        if kind is cst.Call and type(expr.func) is cst.Attribute:
            if _root_name(expr.func.value) in MODULES and expr.args:
                expr = expr.args[0].value  # ``torch.t(x)``
            elif expr.func.attr.value in SAME_TENSOR:
                expr = expr.func.value
            else:
                return None
        elif kind is cst.Attribute and expr.attr.value in SAME_TENSOR:
            expr = expr.value
        elif kind is cst.Name and expr.value in ("None", "True", "False"):
            return None  # a kernel's flag or empty slot (``..., w.main_grad, None, True)``)
        elif kind in (cst.Name, cst.Attribute, cst.Subscript):
            return cst.Module(body=[]).code_for_node(expr)
        else:
            return None


def _root_name(expr) -> str | None:
    """The name an expression starts from, through calls, attributes and subscripts."""
    while True:
        kind = type(expr)
        if kind is cst.Call:
            expr = expr.func
        elif kind is cst.Attribute or kind is cst.Subscript:
            expr = expr.value
        elif kind is cst.Name:
            return expr.value
        else:
            return None


def _fallback_of(unit: Unit, write, d) -> bool:
    """The binding sits in an ``except`` handler of a ``try`` whose body holds the GEMM:
    the product is the fallback for a GEMM that raised (a missing fused kernel)."""
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.Try:
            continue
        body = {id(n) for n in patterns.walk(stmt.body)}
        if id(write.owner) not in body:
            continue
        for handler in stmt.handlers:
            if any(n is d.node.owner for n in patterns.walk(handler)):
                return True
    return False


def _chosen_against(unit: Unit, value, write) -> bool:
    """A conditional expression that takes the product only where a test the GEMM's own
    ``if`` decided goes the other way (``x.t() @ dy if not ctx.fuse else None`` after
    ``if ctx.fuse: gemm(...)``), also through boolean locals (``None if use_zbv or accum
    else x.t() @ dy`` after ``if wgrad_now:``, ``wgrad_now = accum and not use_zbv``)."""
    if type(value) is not cst.IfExp:
        return False
    taken = not patterns.is_none_like(value.body)  # the test's value where the product is
    if decided_tests.rules_out(write.enclosing_ifs, value.test, taken):
        return True
    return implied_tests.decides(unit, write.enclosing_ifs, value.test) is (not taken)
