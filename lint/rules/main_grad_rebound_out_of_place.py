"""GMLP053: main_grad rebound to an out-of-place sum, leaving the gradient buffer behind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
main_grad_copies = LazyModule("..analysis.main_grad_copies", __package__)
cloned_views = LazyModule("..analysis.cloned_views", __package__)

CODE = "GMLP053"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="main-grad-rebound-out-of-place",
    summary=(
        "`X.main_grad = X.main_grad + g` (or `.add(g)`, `torch.add(X.main_grad, g)`) binds a "
        "new tensor to the attribute: the gradient buffer DDP or Megatron-FSDP reduces is "
        "left unchanged, and the gradient is lost."
    ),
    flags=(
        "an assignment to `X.main_grad` of an arithmetic result (`+`, `-`, `*`, `.add()`, "
        "`.sub()`, `.mul()`, `torch.add` / `sub` / `mul`) one of whose operands is that same "
        "`X.main_grad`; or of a copy of that same buffer (`clone`, `torch.clone`, "
        "`copy.deepcopy`), also through locals, same-storage methods and calls handed it "
        "first, and `setattr(X, attr, ...)` with `attr` a local naming main_grad"
    ),
    explanation="""
        Issue #19, class 3 (flags without writes): `param.main_grad` is a view into the
        grad buffer that Megatron's DDP (or Megatron-FSDP) reduces and the optimizer reads.
        Adding a weight gradient out of place (`w.main_grad = w.main_grad + wgrad`) makes a
        new tensor and binds it to the attribute; the buffer itself never sees the
        gradient, and the next `zero_grad_buffer()` rebinds or zeroes a view the attribute
        no longer points at. With `grad_added_to_main_grad` set and a dummy returned, the
        gradient is lost without a trace (blind corpus 10's HYGON `_bridge_weight_grad`
        variant). The in-place form (`w.main_grad.add_(wgrad)`) writes the buffer.

        Seen: an assignment (an augmented one, `+=`, is in place and fine) whose target is
        `X.main_grad` (or a `setattr(X, "main_grad", ...)`) and whose value is a `+`, `-` or
        `*` with X's main_grad (`X.main_grad` or `getattr(X, "main_grad")`, X the same
        text) as an operand, or a call `X.main_grad.add(...)` / `.sub(...)` / `.mul(...)`,
        or `torch.add(X.main_grad, ...)` (also `sub`, `mul`).

        Not seen: the sum bound to a local first and assigned later.

        Also reported (since blind corpus 15; analysis/main_grad_copies.py): a copy of X's
        buffer bound back to `X.main_grad`, reported at the copy (correct code binds the
        buffer back too, after unsharding or resharding it: the copy is what leaves the
        buffer behind). MT-MegatronLM's MTP embedding reduction with `grad =
        _unshard_if_dtensor(orig_grad).contiguous().clone()`, an all-reduce of `grad`, then
        `setattr(weight, grad_attr, _reshard_if_dtensor(grad, orig_grad))`: the reduced sum
        never reaches the buffer the optimizer reads. The value is followed back through
        locals (every binding reaching the read), methods that hand back the same storage
        (`contiguous`, `view`, `reshape`, `float`, `detach`, `.data`) and calls of anything
        else whose first argument it is (a helper that unshards or reshards a tensor is taken
        to hand back what it was given; a function of the file is followed through the
        parameters its `return`s hand back); the attribute may be named by a local bound only
        to string constants, one of them `"main_grad"`. A function that also binds that
        main_grad to something not a copy (the buffer put back after a scratch copy, a tensor
        of its own in a test) is not judged.

        The copy may come across on `ctx` (blind corpus 17, a zero-bubble Megatron fork's
        forward stashing `ctx.weight_main_grad = weight.main_grad.detach().clone()`, its
        backward putting it back with `weight.main_grad = ctx.weight_main_grad`): a `ctx`
        attribute that every assignment of the file sets to a copy of a parameter's
        main_grad (by syntax: `clone` / `torch.clone` / `copy.deepcopy` of `X.main_grad`,
        through the same-storage methods) is that copy wherever it is read, and is
        reported at the copy when bound back to the main_grad of a parameter written the
        same way. Not seen: the stashed copy used as a GEMM destination without being bound
        back.

        A third shape (blind corpus 18, picotron's `BucketManager`): main_grad bound to a
        `clone()` of a slice of a gradient buffer (`tensor[start:end].view(shape).clone()`,
        also through layout changes, `torch.clone(...)`, or a function or method of the file
        every `return` of which is such a clone), reported at the clone: main_grad is no
        longer a view into the bucket the reduction reads.

        Not seen: a copy made by a helper's own code (`grad = copy_of(main_grad)`), by
        `torch.empty_like` plus `copy_`, or by `.to(...)` into another dtype; a copy bound by
        a walrus or an annotated assignment; an attribute name bound by a loop; a copy bound
        to another parameter's main_grad.
    """,
    fix="""
        Write the buffer in place: `X.main_grad.add_(g)` (or `+=`). No automatic fix: the
        in-place form also changes what other holders of the old tensor see.
    """,
    fix_summary="none (add in place: `X.main_grad.add_(g)`)",
    valid=(
        Example(
            """
            def backward(ctx, grad_w):
                (weight,) = ctx.saved_tensors
                weight.main_grad.add_(grad_w)
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=weight.zero_out_wgrad)
            """
        ),
        Example(
            """
            def backward(ctx, grad_w):
                (weight,) = ctx.saved_tensors
                weight.main_grad += grad_w
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=weight.zero_out_wgrad)
            """
        ),
        Example(
            """
            def attach(param):
                param.main_grad = param.get_main_grad()
            """
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, weight)
                    ctx.stashed_grad = weight.main_grad
                    return x @ weight.t()

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    weight.main_grad = ctx.stashed_grad
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    return dy @ weight, None
            """
        ),
        Example(
            """
            def allreduce_embedding_grad(weight, group):
                grad_attr = "main_grad" if hasattr(weight, "main_grad") else "grad"
                orig_grad = getattr(weight, grad_attr)
                grad = _unshard_if_dtensor(orig_grad)
                torch.distributed.all_reduce(grad, group=group)
                setattr(weight, grad_attr, _reshard_if_dtensor(grad, orig_grad))
            """
        ),
        Example(
            """
            class BucketManager:
                def _initialize_buckets(self):
                    for param in self.params:
                        start, end, bucket_id = self.locations[param]
                        grad_data = self.grad_data_list[bucket_id]
                        param.main_grad = self._get_view(grad_data, param.shape, start, end)
                        param.grad_snapshot = grad_data[start:end].clone()

                def _get_view(self, tensor, shape, start, end):
                    return tensor[start:end].view(shape)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, grad_w):
                (weight,) = ctx.saved_tensors
                weight.main_grad = weight.main_grad + grad_w
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=weight.zero_out_wgrad)
            """,
            line=3,
        ),
        Example(
            """
            def backward(ctx, grad_w):
                (weight,) = ctx.saved_tensors
                weight.main_grad = torch.add(weight.main_grad, grad_w.float())
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=weight.zero_out_wgrad)
            """,
            line=3,
        ),
        Example(
            """
            def allreduce_embedding_grad(weight, group):
                grad_attr = "main_grad" if hasattr(weight, "main_grad") else "grad"
                orig_grad = getattr(weight, grad_attr)
                grad = _unshard_if_dtensor(orig_grad).contiguous().clone()
                torch.distributed.all_reduce(grad, group=group)
                setattr(weight, grad_attr, _reshard_if_dtensor(grad, orig_grad))
            """,
            line=4,
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, weight)
                    ctx.stashed_grad = weight.main_grad.detach().clone()
                    return x @ weight.t()

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    weight.main_grad = ctx.stashed_grad
                    wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
                    return dy @ weight, None
            """,
            line=5,
        ),
        Example(
            """
            class BucketManager:
                def _initialize_buckets(self):
                    for param in self.params:
                        start, end, bucket_id = self.locations[param]
                        grad_data = self.grad_data_list[bucket_id]
                        param.main_grad = self._get_view(grad_data, param.shape, start, end)

                def _get_view(self, tensor, shape, start, end):
                    return tensor[start:end].view(shape).clone()
            """,
            line=9,
        ),
    ),
)

MESSAGE = (
    "`{target}` is rebound to a new tensor (an out-of-place sum): the gradient buffer it "
    "viewed never receives the gradient; add in place (`{target}.add_(...)`)"
)
OPERATORS = ("Add", "Subtract", "Multiply")
METHODS = ("add", "sub", "mul")


VIEW_MESSAGE = (
    "main_grad is bound to this clone of a slice of a gradient buffer: it is no longer a view "
    "into the buffer the reduction and the optimizer read, so the gradients accumulated into "
    "it never reach them; bind the view itself"
)
COPY_MESSAGE = (
    "`{copy}` copies `{target}`'s buffer, and the copy is bound back to `{target}` at line "
    "{line}: the gradient buffer the attribute viewed, which DDP reduces and the optimizer "
    "reads, is left behind with none of what is done to the copy; work on the buffer itself"
)


def check(context: ModuleContext, out: Collector) -> None:
    if patterns.MAIN_GRAD not in context.source:
        return
    for unit in context.units:
        reported = set()
        for stmt, _ in unit.statements():
            for owner, value in main_grad_copies.bindings(unit, stmt, unit.node_for(stmt)):
                text = out.context.code(owner).strip()
                if _out_of_place_on(value, text, out):
                    out.report(CODE, stmt, MESSAGE.format(target=f"{text}.main_grad"))
                    reported.add(id(stmt))
        for clone in cloned_views.cloned_views(unit):
            out.report(CODE, clone, VIEW_MESSAGE)
        copies = main_grad_copies.copies_bound(unit) if unit.survey.spells_main_grad else []
        for found in copies:
            if id(found.stmt) in reported:
                continue
            # Reported at the copy: correct code binds the buffer back too (after unsharding
            # or resharding it); the copy is what leaves the buffer behind.
            copy = out.context.code(found.copy).strip().partition("\n")[0]
            message = COPY_MESSAGE.format(
                target=f"{found.owner}.main_grad",
                copy=copy,
                line=out.context.line_of(found.stmt),
            )
            out.report(CODE, found.copy, message)


def _out_of_place_on(value, owner: str, out: Collector) -> bool:
    """``value`` is an arithmetic result with ``owner``'s main_grad (``owner.main_grad``,
    ``getattr(owner, "main_grad")``) as an operand."""

    def same(expr) -> bool:
        found = patterns.main_grad_owner(expr)
        return found is not None and out.context.code(found).strip() == owner

    if type(value) is cst.BinaryOperation and type(value.operator).__name__ in OPERATORS:
        return same(value.left) or same(value.right)
    if type(value) is cst.Call and type(value.func) is cst.Attribute:
        method = value.func.attr.value
        if method in METHODS and same(value.func.value):
            return True  # ``w.main_grad.add(g)``
        module = value.func.value
        if method in METHODS and type(module) is cst.Name and module.value == "torch":
            return any(same(arg.value) for arg in value.args if arg.keyword is None)
    return False
