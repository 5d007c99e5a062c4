"""GMLP016: main_grad's contents replaced by code that never asks whether to overwrite."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)

CODE = "GMLP016"
# GEMMs that replace their ``out=`` unless told to accumulate (torch's have no such switch).
REPLACING_GEMMS = frozenset({"matmul", "mm", "bmm"})
ACCUMULATE_KEYWORDS = ("accumulate", "beta")
# Words that show the code asks how main_grad is to be written: the per-parameter flag, or
# the sharding strategy that decides it (Megatron-FSDP overwrites for ZeRO-2/3 only).
ASKING_WORDS = ("overwrite", "sharding", "fsdp", "zero_stage", "optim_grads")
# The producer side: a write counts only in a function (or one it is nested in) whose name
# says it computes the weight gradient. Consumers (grad buffers, optimizers, examples that
# consolidate .grad) copy into main_grad on purpose, once per step.
PRODUCER_WORDS = ("backward", "wgrad", "grad_weight", "weight_grad", "_dw")
RULE = Rule(
    code=CODE,
    name="main-grad-replaced-without-asking",
    summary=(
        "A write replaces main_grad's contents (a GEMM with `accumulate=False`, "
        "`matmul(out=main_grad)`, `main_grad.copy_(...)`) in code that reads neither "
        "`overwrite_main_grad` nor the sharding strategy."
    ),
    flags=(
        "a GEMM into `p.main_grad` (or a local bound to it, or through a `**kwargs` dict) with "
        "`accumulate=False` / `beta=0` (a literal or a local that is always one), "
        "`torch.matmul` / `mm` with such an `out=`, `copy_` into it, or `p.main_grad[...] = "
        "...`, in a producer function (and the functions around it) that never mentions "
        "overwrite or sharding; and, in FSDP code that never mentions `overwrite_main_grad`, "
        "a hook resetting `grad_added_to_main_grad = False` for a new backward"
    ),
    explanation="""
        Issue #19, class 4. main_grad accumulates the weight gradient over microbatches;
        only Megatron-FSDP with sharded gradients (ZeRO-2/3) wants it overwritten, and says
        so with `param.overwrite_main_grad`. A write that replaces the contents in code that
        never consults that flag (or the sharding strategy) keeps only the last
        microbatch's gradient in accumulate mode.

        Seen: in one function, a call whose `out=` is `X.main_grad` (or a `getattr` of it,
        or a local every binding of which reaching the call is main_grad storage) with
        `accumulate=False` or `beta=0` (literals, or a local every reaching binding of which
        is such a literal), the same arguments passed as `**kwargs` where `kwargs` is one
        dict literal, a `matmul` / `mm` / `bmm` with such an `out=` and no accumulate
        switch, `copy_` into main_grad or a local bound to it, and `X.main_grad[...] =
        value`; the function and the functions it is nested in are searched for a mention
        of overwrite, sharding, FSDP or the ZeRO stage. Only producer code is judged: a
        function, or one it is nested in, named `backward*`, `*wgrad*`, `*grad_weight*`,
        `*weight_grad*` or `*_dw`, or one that marks `grad_added_to_main_grad` (it delivers a
        weight gradient whatever its name); grad buffers, optimizers and scripts that
        consolidate `.grad` into main_grad once per step copy on purpose.

        Not seen: the decision made by a caller in another file (such a write is reported
        although the caller may ask), GEMMs whose default is to replace but that are given
        no `accumulate=` (only torch's matmuls are known to replace), dicts of arguments
        built up entry by entry, and producer functions named otherwise that mark nothing.

        The converse (accumulating where overwriting was needed, Megatron-LM #4849's PR
        branch): in a file of an FSDP integration (it names FSDP) that never mentions
        `overwrite_main_grad`, a hook or backward callback (a function named `*hook*` or
        `*backward*`) that resets `grad_added_to_main_grad = False` (or by `setattr`) for a
        new backward. Where gradients are sharded, each microbatch's main_grad is a fresh
        bucket and only `overwrite_main_grad` tells the fused wgrad GEMM not to add to what
        it holds. Not seen: an integration that zeroes those buckets itself in its hook
        (reported; suppress with the reason), one whose file never names FSDP, and resets
        in functions named otherwise.

        A helper of the file is judged with the functions that call it by name (one level):
        called from a producer it is one, called from a function that asks
        `overwrite_main_grad` it is left alone. Not seen: `accumulate=False` handed to such
        a helper as an argument.
    """,
    fix="""
        Accumulate (`accumulate=True`, `main_grad.add_(...)`), or decide by
        `not getattr(param, "overwrite_main_grad", False)`. No automatic fix.
    """,
    fix_summary="none (accumulate, or ask overwrite_main_grad)",
    valid=(
        Example(
            """
            def pre_backward_hook(fsdp_module, grads):
                for group in fsdp_module.param_groups:
                    for param in group.params:
                        param.grad_added_to_main_grad = False
                        param.overwrite_main_grad = group.shards_gradients
            """
        ),
        Example(
            """
            def finish_step(model):
                for param in model.parameters():
                    if param.grad is not None:
                        param.main_grad.copy_(param.grad)
            """
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                accumulate = not getattr(weight, "overwrite_main_grad", False)
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            """
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def pre_backward_hook(fsdp_module, grads):
                for group in fsdp_module.param_groups:
                    for param in group.params:
                        setattr(param, "grad_added_to_main_grad", False)
            """,
            line=4,
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                torch.matmul(dy.t(), x, out=weight.main_grad)
            """,
            line=2,
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                general_gemm(x, dy, out=weight.main_grad, accumulate=False)
            """,
            line=2,
        ),
        Example(
            """
            def wgrad(weight, x, dy):
                weight.main_grad.copy_(dy.t() @ x)
            """,
            line=2,
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def backward(ctx, dy):
                    def compute():
                        torch.mm(dy.t(), ctx.x, out=ctx.weight.main_grad)

                    compute()
            """,
            line=5,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "this replaces `{target}`'s contents ({how}) in code that never asks overwrite_main_grad "
    "or the sharding strategy: in accumulate mode only the last microbatch's gradient survives"
)


RESET_MESSAGE = (
    "`{subject}`'s grad_added_to_main_grad is reset for a new backward in FSDP code that never "
    "sets overwrite_main_grad: where gradients are sharded, main_grad is a fresh bucket each "
    "microbatch and the fused wgrad GEMM accumulates into what it holds; set "
    "`overwrite_main_grad` for the strategies that shard gradients"
)
# Where the per-backward bookkeeping of an FSDP integration runs.
RESET_FUNCTION_WORDS = ("hook", "backward")


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" not in source:
        return
    if "fsdp" in source.lower() and patterns.OVERWRITE not in source:
        _check_fsdp_resets(context, out)
    if not ("out" in source or "copy_" in source or "[" in source):
        return
    callers = _callers(context)
    asked: dict[int, bool] = {}

    def asks(unit: Unit) -> bool:
        if id(unit) not in asked:
            asked[id(unit)] = _asks(unit)
        return asked[id(unit)]

    for unit in context.units:
        if not unit.survey.spells_main_grad:
            continue
        # A helper of the file judged with the functions that call it (one level): the
        # write moved out of a producer is still the producer's, and a caller that asks
        # overwrite_main_grad decides for it.
        around = [unit, *callers.get(unit.name, ())]
        if any(map(_in_producer, around)) and not any(map(asks, around)):
            for root, node in unit.expression_roots():
                if isinstance(root, cst.Assign):
                    _check_slice_assignment(root, out)
                for sub in patterns.walk(root):
                    _check_call(sub, _Buffers(unit, node), out)


def _callers(context: ModuleContext) -> dict[str, list[Unit]]:
    """function name -> the functions of the file that call a function of that name."""
    found: dict[str, list[Unit]] = {}
    names = {u.name for u in context.units if isinstance(u.owner, cst.FunctionDef)}
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            for name in unit.survey.calls & names:
                if name != unit.name:
                    found.setdefault(name, []).append(unit)
    return found


def _in_producer(unit: Unit) -> bool:
    """The unit, or one it is nested in, is named for computing the weight gradient, or it
    marks ``grad_added_to_main_grad`` (it delivers a weight gradient, whatever its name)."""
    current: Unit | None = unit
    while current is not None:
        if any(word in current.name.lower() for word in PRODUCER_WORDS):
            return True
        if current.survey.spells_grad_added and isinstance(current.owner, cst.FunctionDef):
            return True
        current = current.parent
    return False


def _asks(unit: Unit) -> bool:
    current: Unit | None = unit
    while current is not None:
        text = unit.context.code(current.owner).lower()
        if any(word in text for word in ASKING_WORDS):
            return True
        current = current.parent
    return False


class _Buffers:
    """What the expressions evaluated at one graph node hold: main_grad storage (directly or
    through a local bound to it, ``main_grad = w.main_grad``), a switch that is off (a
    literal, or a local every reaching binding of which is one), and the entries of a dict
    of GEMM arguments (``kwargs = {"out": w.main_grad, "accumulate": False}``)."""

    def __init__(self, unit: Unit, node) -> None:
        self.unit = unit
        self.node = node

    def main_grad(self, expr) -> bool:
        if patterns.is_main_grad_direct(expr):
            return True
        return isinstance(expr, cst.Name) and self.unit.aliases.surely(expr.value, self.node)

    def off(self, value) -> bool:
        if _literal_off(value):
            return True
        if not isinstance(value, cst.Name):
            return False
        defs = self.unit.reaching.reaching(value.value, self.node)
        return bool(defs) and all(d.value is not None and _literal_off(d.value) for d in defs)

    def arguments(self, call) -> dict[str, object] | None:
        """The call's keyword arguments, with those of a ``**kwargs`` whose every reaching
        binding is one dict literal; None when a ``**`` argument cannot be read."""
        found: dict[str, object] = {}
        for arg in call.args:
            if arg.keyword is not None:
                found[arg.keyword.value] = arg.value
            elif arg.star == "**":
                entries = self._dict_of(arg.value)
                if entries is None:
                    return None
                found.update(entries)
        return found

    def _dict_of(self, expr):
        if not isinstance(expr, cst.Name):
            return patterns.dict_entries(expr)
        defs = self.unit.reaching.reaching(expr.value, self.node)
        if len(defs) != 1:
            return None
        return patterns.dict_entries(defs[0].value)


def _check_call(node, buffers: _Buffers, out: Collector) -> None:
    if not isinstance(node, cst.Call):
        return
    name = patterns.callee_name(node)
    if name == "copy_" and isinstance(node.func, cst.Attribute):
        method = patterns.method_call(node)  # also torch.Tensor.copy_(buffer, value)
        if method is not None and buffers.main_grad(method[0]):
            how = "copy_"
            out.report(CODE, node, MESSAGE.format(target=out.text(method[0]), how=how))
        return
    arguments = buffers.arguments(node)
    target = arguments.get("out") if arguments is not None else None
    if target is None or not buffers.main_grad(target):
        return
    given = [arguments[word] for word in ACCUMULATE_KEYWORDS if word in arguments]
    if given:
        replacing = all(buffers.off(value) for value in given)
        how = "accumulate=False / beta=0"
    else:
        replacing = name in REPLACING_GEMMS
        how = f"{name}(out=...) overwrites"
    if replacing:
        out.report(CODE, node, MESSAGE.format(target=out.context.code(target).strip(), how=how))


def _check_slice_assignment(stmt, out: Collector) -> None:
    """``p.main_grad[...] = value``: the slice's old contents are dropped."""
    for target in stmt.targets:
        sub = target.target
        if isinstance(sub, cst.Subscript) and patterns.is_main_grad_direct(sub.value):
            how = "an assignment into it"
            out.report(CODE, stmt, MESSAGE.format(target=out.text(sub.value), how=how))


def _literal_off(value) -> bool:
    if patterns.is_false_literal(value):
        return True
    return isinstance(value, (cst.Integer, cst.Float)) and float(value.value) == 0.0


def _check_fsdp_resets(context: ModuleContext, out: Collector) -> None:
    """The converse direction (Megatron-LM #4849's PR branch): an FSDP integration's
    pre-backward hook resets ``grad_added_to_main_grad = False`` for each parameter, and
    nothing in the file ever sets ``overwrite_main_grad``, so the producer accumulates into
    buckets that sharded strategies hand out afresh. Only hooks and backward callbacks
    are judged: a reset in ``__init__`` or a ``zero_grad_buffer`` is set-up or zeroing."""
    for unit in context.units:
        if not (unit.survey.spells_grad_added and isinstance(unit.owner, cst.FunctionDef)):
            continue
        if not any(word in unit.name.lower() for word in RESET_FUNCTION_WORDS):
            continue
        for root, _ in unit.expression_roots():
            found = patterns.attribute_set(root, patterns.GRAD_ADDED)
            if found is not None and patterns.is_false_literal(found[1]):
                out.report(CODE, root, RESET_MESSAGE.format(subject=out.text(found[0])))
