"""GMLP064: a parameter's `.grad` added into its buffer, and freed on only some ways out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
kept_grads = LazyModule("..analysis.kept_grads", __package__)

CODE = "GMLP064"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="grad-kept-after-accumulating",
    summary=(
        "A hook adds a parameter's `.grad` into the buffer the reduction reads (main_grad, "
        "a slice of a contiguous buffer) and frees `.grad`, but some way out of it skips "
        "the free: the kept `.grad` is accumulated into again and added a second time."
    ),
    flags=(
        "`B.add_(P.grad...)` in a function that also sets `P.grad = None`, with a normal way "
        "out from the add that passes no such free (reported at the first free reachable "
        "from the add)"
    ),
    explanation="""
        Issue #19, class 3 (the converse of a flag without a write: the buffer written and
        a real `.grad` handed on). Megatron's DDP hook, picotron's and nnscaler's move each
        parameter's gradient into the buffer the reduction and the optimizer read, then set
        `param.grad = None`. The free is what makes it a move: a `.grad` kept is
        accumulated into by the next microbatch's backward and added into the buffer once
        more, so early microbatches count several times. Blind corpus 18 moved the free
        under the synchronisation switch (`if self.require_backward_grad_sync: param.grad
        = None`: under `no_sync` the gradient is kept) and behind an early `return`
        (nnscaler's `if RuntimeFlag.skip_reducer: return` before the free).

        Seen: per function, an in-place `add_` on another tensor an argument of which
        reads `P.grad` (as it is, `.data`, `.view(-1)`, `.to(...)`), `P` a name or an
        attribute chain; the same function setting `P.grad = None` (spelled the same) at a
        point the add reaches in the same pass (not through the head of a loop around it: a
        loop over parameters frees the next one's); a path from the add to a `return` or
        the end of the function that passes no such free, taking every test it already
        passed the same way (`if moved: buf.add_(...)` then `if moved: p.grad = None` is
        one decision). Raising is not a way out here. Files are analysed when they name a
        trigger (`main_grad`, or `register_hook(` with `next_functions`, ...).

        Not seen: a function that never frees (it may leave the free to its caller: not
        judged), files that name no trigger (a hook into a contiguous buffer with no
        main_grad and no `next_functions`), frees through a helper or `setattr`, `P.grad`
        read through a local (`g = p.grad; buf.add_(g)`), adds spelled `torch.add(...,
        out=)` or `+=`.
    """,
    fix="""
        Free `.grad` right after the add, before any early return or condition. No
        automatic fix.
    """,
    fix_summary="none (free `.grad` right after the add)",
    valid=(
        Example(
            """
            def param_hook(*unused):
                if param.grad is not None and not param.grad_added_to_main_grad:
                    param.main_grad.add_(param.grad.data)
                param.grad = None
                if ddp_config.overlap_grad_reduce:
                    bucket_group.register_grad_ready(param)
            """
        ),
        Example(
            """
            def register_hooks(params):
                def post_grad_hook(param, *unused):
                    offset = offsets[param]
                    contiguous_grads[offset : offset + param.numel()].add_(param.grad.view(-1))
                    param.grad = None
                    if skip_reducer:
                        return
                    launch_reduce()

                for param in params:
                    grad_acc = param.expand_as(param).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(partial(post_grad_hook, param))
            """
        ),
    ),
    invalid=(
        Example(
            """
            def param_hook(*unused):
                param.main_grad.add_(param.grad.data)
                if not require_backward_grad_sync:
                    return
                param.grad = None
                bucket_manager.mark_param_as_ready(param)
            """,
            line=5,
        ),
    ),
)


MESSAGE = (
    "`{owner}.grad` was added into the buffer at line {line}, but a way out of this "
    "function skips this free: the kept `.grad` is accumulated into by the next backward "
    "and added again; free it right after the add"
)


def check(context: ModuleContext, out: Collector) -> None:
    if ".grad" not in context.source or "add_" not in context.source:
        return
    for unit in context.units:
        for found in kept_grads.kept_grads(unit):
            line = context.line_of(found.add_line_node)
            out.report(CODE, found.free, MESSAGE.format(owner=found.owner, line=line))
