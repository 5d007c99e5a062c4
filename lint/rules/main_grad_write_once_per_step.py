"""GMLP041: main_grad written only while `grad_added_to_main_grad` is False, in code that
then sets it: the flag used as a once-per-step guard."""

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
module = LazyModule("..analysis.module", __package__)
branches = LazyModule("..analysis.branches", __package__)
gates = LazyModule("..analysis.gates", __package__)

CODE = "GMLP041"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="main-grad-write-once-per-step",
    summary=(
        "A weight's gradient is added into main_grad only while its `grad_added_to_main_grad` "
        "is False, and the same function then sets the flag: from the second microbatch on "
        "the write is skipped."
    ),
    flags=(
        "`X.main_grad` touched (a write, a local bound to it, a helper of the file handed `X` "
        "that spells it) under a test that "
        "`X.grad_added_to_main_grad` is False (`not X.grad_added_to_main_grad`, `is False`, "
        "`not getattr(X, ...)`), in a function that also sets `X.grad_added_to_main_grad = "
        "True`, in a file that never resets the flag to False"
    ),
    explanation="""
        `grad_added_to_main_grad` tells the data-parallel hook that main_grad already holds
        this backward's gradient, so it must not add `.grad` again. Megatron resets it when it
        zeroes the gradient buffers, once per optimizer step, not once per microbatch. A
        producer that adds into main_grad only while the flag is False and then sets it True
        adds the first microbatch's gradient and skips every later one: with gradient
        accumulation the step sees one microbatch. The write must happen whenever this
        backward computed a gradient; the flag is set after it, never asked before it.
        * AMD-AGI/Primus (the unfused path of its quantized linear, fixed in #1046): `elif not
          weight.grad_added_to_main_grad: weight.main_grad.add_(wgrad);
          weight.grad_added_to_main_grad = True`.
        The consumer's test (the DDP hook's `if not p.grad_added_to_main_grad:
        p.main_grad.add_(p.grad)`) sets no flag and is left alone, and so is a file that resets
        the flag to False itself (it may do so for each microbatch).

        Not seen: the test and the write in different functions (a helper that writes, called
        under the test; a flag read into a local first); a flag set by a helper, or on another
        object than the one whose main_grad is written (a copy, `ctx`); a reset made in another
        file for each microbatch, which would make such a guard correct (none of the trees
        linted does so).
    """,
    fix="""
        Write main_grad whenever this backward computed the weight's gradient (drop the test
        on the flag), then set the flag. No automatic fix: what else the test guarded needs a
        reader.
    """,
    fix_summary="none (write on every microbatch, then set the flag)",
    valid=(
        Example(
            """
            def backward(ctx, grad_out, weight, wgrad, fuse):
                if fuse:
                    weight.grad_added_to_main_grad = True
                else:
                    weight.main_grad.add_(wgrad)
                    weight.grad_added_to_main_grad = True
                return grad_out, make_dummy_wgrad(weight)
            """
        ),
        Example(
            """
            def ddp_hook(param):
                if param.grad is not None and not param.grad_added_to_main_grad:
                    param.main_grad.add_(param.grad)
                param.grad = None
            """
        ),
        Example(
            """
            def before_each_backward(param):
                param.grad_added_to_main_grad = False

            def backward(ctx, grad_out, weight, wgrad):
                if not weight.grad_added_to_main_grad:
                    weight.main_grad.add_(wgrad)
                    weight.grad_added_to_main_grad = True
                return grad_out, make_dummy_wgrad(weight)
            """
        ),
        Example(
            """
            def step(params, g):
                if g is not None:
                    params[0].main_grad.add_(g)
                params[0].grad_added_to_main_grad = True
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, grad_out, weight, wgrad, fuse):
                if fuse:
                    weight.grad_added_to_main_grad = True
                elif not weight.grad_added_to_main_grad:
                    weight.main_grad.add_(wgrad)
                    weight.grad_added_to_main_grad = True
                return grad_out, make_dummy_wgrad(weight)
            """,
            line=4,
        ),
        Example(
            """
            def accumulate(param, wgrad):
                if getattr(param, "grad_added_to_main_grad", False) is False:
                    torch.addmm(param.main_grad, wgrad, ONE, out=param.main_grad)
                setattr(param, "grad_added_to_main_grad", True)
            """,
            line=2,
        ),
    ),
)


MESSAGE = (
    "`{subject}.main_grad` is written only while `{subject}.grad_added_to_main_grad` is False, "
    "and this function sets that flag True: it stays True until the gradient buffers are "
    "zeroed for the next step, so every microbatch after the first skips the write and its "
    "gradient is lost; write main_grad on every microbatch, then set the flag"
)


def check(context: ModuleContext, out: Collector) -> None:
    if patterns.GRAD_ADDED not in context.source or _resets_flag(context):
        return
    for unit in context.units:
        if unit.survey.spells_grad_added:
            _check_unit(unit, out)


def _check_unit(unit: Unit, out: Collector) -> None:
    marked = {
        wgrad.stem(subject)
        for stmt, _ in unit.statements()
        if (subject := wgrad.marked_subject(stmt)) is not None
    } - {None}  # a subject that is not a name (``params[0]``) names no weight to compare
    if not marked:
        return
    for stmt, suite in unit.statements():
        if type(stmt) is not cst.If:
            continue
        for operand in gates.and_operands(stmt.test):
            subject = _flag_false(operand)
            if subject is None or wgrad.stem(subject) not in marked:
                continue
            word = wgrad.stem(subject)
            # ``if not flag: main_grad.copy_(g); mark  else: main_grad.add_(g)`` adds on the
            # later microbatches: the test chooses how to write, not whether.
            if _touches_main_grad(unit, stmt.body, word) and not _touches_otherwise(
                unit, stmt, suite, word
            ):
                out.report(CODE, operand, MESSAGE.format(subject=out.text(subject)))
                break


def _touches_otherwise(unit: Unit, test: cst.If, suite, word: str) -> bool:
    """The path where the flag is already True writes main_grad too: the ``else`` / ``elif``,
    or, when the guarded code ends in a jump, the statements after the ``if``."""
    if test.orelse is not None:
        return _touches_main_grad(unit, test.orelse, word)
    if branches.ends_in_jump(module.suite_body(test.body)):
        return any(_touches_main_grad(unit, later, word) for later in branches.after(test, suite))
    return False


def _touches_main_grad(unit: Unit, body: cst.CSTNode, word: str) -> bool:
    """The guarded code reaches this weight's main_grad: spells it (``X.main_grad``,
    ``getattr(X, "main_grad")``, an unbound ``torch.Tensor.add_``), uses a local every
    binding of which is main_grad storage, or hands X to a top-level function of the file
    that spells main_grad."""
    if any(wgrad.stem(owner) == word for owner in wgrad.main_grad_owners(body)):
        return True
    for stmt, _ in module.iter_statements(_statements_of(body)):
        node = unit.node_for(stmt)
        if node is not None and any(
            type(sub) is cst.Name and unit.aliases.surely(sub.value, node)
            for sub in patterns.walk(stmt)
        ):
            return True  # a local every binding of which is main_grad storage
    helpers = unit.context.shared(_main_grad_helpers)
    return any(
        type(sub) is cst.Call
        and patterns.callee_name(sub) in helpers
        and any(wgrad.stem(arg.value) == word for arg in sub.args)
        for sub in patterns.walk(body)
    )


def _statements_of(code: cst.CSTNode):
    """The statements of a suite, of an ``else``, or the statement itself."""
    if type(code) is cst.Else:
        return module.suite_body(code.body)
    if type(code) in (cst.IndentedBlock, cst.SimpleStatementSuite):
        return module.suite_body(code)
    return (code,)


def _main_grad_helpers(context: ModuleContext) -> frozenset[str]:
    """The top-level functions of the file whose body spells main_grad."""
    return frozenset(
        stmt.name.value
        for stmt in context.module.body
        if type(stmt) is cst.FunctionDef
        and any(patterns.spells(sub, patterns.MAIN_GRAD) for sub in patterns.walk(stmt.body))
    )


def _flag_false(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """X when ``expr`` holds only while X's flag is False: ``not X.<flag>``, ``not
    getattr(X, "<flag>", ...)``, ``X.<flag> is False`` / ``== False``."""
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
        return _flag_owner(expr.expression)
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if type(target.operator) in (cst.Is, cst.Equal) and patterns.is_false_literal(
            target.comparator
        ):
            return _flag_owner(expr.left)
    return None


def _flag_owner(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """X for ``X.<flag>``, ``getattr(X, "<flag>", ...)``, or ``X.<flag> if hasattr(X,
    "<flag>") else False``."""
    if type(expr) is cst.IfExp and patterns.is_false_literal(expr.orelse):
        return _flag_owner(expr.body)
    if patterns.is_attr(expr, patterns.GRAD_ADDED):
        return expr.value
    if type(expr) is cst.Call and patterns.is_getattr_of(expr, patterns.GRAD_ADDED):
        return patterns.positional_args(expr)[0].value
    return None


def _resets_flag(context: ModuleContext) -> bool:
    """The file sets the flag False somewhere (``X.grad_added_to_main_grad = False``): it
    may do so for each microbatch, which makes a once-per-microbatch guard correct."""
    for unit in context.units:
        if not unit.survey.spells_grad_added:
            continue
        for stmt, _ in unit.statements():
            found = patterns.attribute_set(stmt, patterns.GRAD_ADDED)
            if found is not None and patterns.is_false_literal(found[1]):
                return True
    return False
