"""GMLP034: main_grad written through the copy autograd's saved tensors hand back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

cst = LazyModule("libcst")
saved = LazyModule("..analysis.saved", __package__)

CODE = "GMLP034"
RULE = Rule(
    code=CODE,
    classes=(1,),
    name="main-grad-through-saved-tensors",
    summary=(
        "main_grad is put into the saved tensors in forward and the tensor restored from "
        "them is used as the weight-gradient buffer in backward: a checked or copied "
        "stand-in, not the Parameter's buffer."
    ),
    flags=(
        "a name restored from `ctx.saved_tensors` / `restore_from_saved(...)` that holds "
        "main_grad (named for it, or at the position where `save_for_backward` / "
        "`prepare_for_saving` got `X.main_grad`) used as a GEMM `out=`, an in-place target "
        "or a kernel argument"
    ),
    explanation="""
        Issue #19, class 1 (which object), for the buffer itself. A tensor given to
        `ctx.save_for_backward` (or Transformer Engine's `prepare_for_saving`) comes back
        through `ctx.saved_tensors` as a stand-in: autograd checks it against in-place
        changes, so another microbatch's accumulation into main_grad between this
        forward and backward fails the check; saved-tensor hooks (activation offloading,
        swapping) hand back a copy that nobody reduces; and a position saved only under
        one condition (`w.main_grad if cpu_offloading else None`) is `None` under the
        other, so the GEMM writes a fresh tensor while the flag and dummy say main_grad
        holds the gradient. Megatron-LM keeps it as `ctx.main_grad` for this reason;
        Transformer Engine's 2.0 branch fixed three such backwards (pggPL/TE#2).

        Seen (analysis/saved.py): names bound by unpacking or indexing
        `ctx.saved_tensors`, a local bound to it, or a `restore_from_saved(...)` result,
        that are named for main_grad or sit at a position where a save call of the file
        put a main_grad expression (`X.main_grad`, a conditional with it as an arm, a
        local bound to it; the unpacking and the save having the same number of plain
        items), used as anything but metadata, a test or a put-back onto a weight
        (`weight.main_grad = main_grad`, the CPU-offloading re-attachment, is left alone).

        Not seen: main_grad read from a *weight* restored from the saved tensors
        (`x, w = ctx.saved_tensors; w.main_grad`): without saved-tensor hooks the restored
        Parameter is the Parameter itself, and that is how Megatron-LM's linear layers
        were written for years, so the shape alone does not tell a bug (MindSpeed !1534,
        where MindSpeed's own hooks made it one); positions after a starred item; buffers
        saved in one file and restored in another.
    """,
    fix="""
        Keep the buffer on `ctx` as a plain attribute in forward (`ctx.main_grad =
        weight.main_grad`), or keep the Parameter or a weakref of it and read
        `weight.main_grad` in backward. No automatic fix.
    """,
    fix_summary="none (keep main_grad on ctx, not in the saved tensors)",
    valid=(
        Example(
            """
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight)
                ctx.main_grad = weight.main_grad
                return x @ weight.t()


            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                general_gemm(x, dy, out=ctx.main_grad, accumulate=True)
                return None, None
            """
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight, main_grad = ctx.saved_tensors
                if ctx.cpu_offloading and main_grad is not None:
                    weight = torch.nn.Parameter(weight, weight.requires_grad)
                    weight.main_grad = main_grad
                if main_grad is not None and main_grad.dtype != torch.float32:
                    raise TypeError("main_grad must be fp32")
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                return None, None
            """
        ),
        Example(
            """
            def backward(ctx, dy):
                (scale, *saved) = ctx.saved_tensors
                weights = saved[: ctx.n]
                main_grads = saved[ctx.n :]
                if ctx.cpu_offloading:
                    for i in range(ctx.n):
                        w = torch.nn.Parameter(weights[i], False)
                        w.main_grad = main_grads[i]
                        weights[i] = w
                return dy
            """
        ),
    ),
    invalid=(
        Example(
            """
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight.main_grad)
                return x @ weight.t()


            def backward(ctx, dy):
                x, main_grad = ctx.saved_tensors
                general_gemm(x, dy, out=main_grad, accumulate=True)
                return None, None
            """,
            line=8,
        ),
        Example(
            """
            def forward(ctx, x, weight, fuse):
                buf = weight.main_grad if fuse else None
                tensors, ctx.objects = prepare_for_saving(x, weight, buf)
                ctx.save_for_backward(*tensors)
                return x @ weight.t()


            def backward(ctx, dy):
                x, weight, buf = restore_from_saved(ctx.objects, ctx.saved_tensors)
                buf.add_(dy.t() @ x)
                return None, None, None
            """,
            line=10,
        ),
    ),
)

MESSAGE = (
    "`{name}` is main_grad restored from the saved tensors: autograd hands back a checked "
    "or copied stand-in (or None where it was saved conditionally), so the weight gradient "
    "does not reach the Parameter's buffer; keep main_grad on ctx or read it from the "
    "Parameter"
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" not in source or not (saved.SAVED_ATTR in source or "restore_from" in source):
        return
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        for restored, d in saved.restored_main_grads(unit):
            uses = saved.uses_as_buffer(unit, restored, d)
            if uses:
                out.report(CODE, uses[0], MESSAGE.format(name=restored.name))
