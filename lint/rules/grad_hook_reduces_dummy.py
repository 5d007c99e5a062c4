"""GMLP026: a gradient hook that reduces `.grad` of a weight whose wgrad may go into main_grad."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

grad_hooks = LazyModule("..analysis.grad_hooks", __package__)

CODE = "GMLP026"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="grad-hook-reduces-dummy",
    summary=(
        "A hook registered on the weight of a Megatron / TE linear all-reduces the gradient "
        "autograd hands it; with wgrad fusion that is a dummy, the real gradient sits in "
        "main_grad and is never reduced."
    ),
    flags=(
        "`w.register_hook(f)` (directly, or through a function of the file given the "
        "weight) where `w` is the `weight` of a layer the class builds from an imported "
        "`*Linear` class (not `nn.Linear`, not built with the fusion switched off), and "
        "`f` hands its gradient to a collective (`all_reduce`, `reduce_scatter`), with "
        "no mention of main_grad or the fusion switches in `f` or where it is registered"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping), found from radixark/miles #2723
        (Megatron-Bridge's shared LoRA factor). Megatron-Core's `ColumnParallelLinear` /
        `RowParallelLinear` and Transformer Engine's linears, with
        `gradient_accumulation_fusion` / `fuse_wgrad_accumulation`, accumulate the weight
        gradient into `weight.main_grad` inside the wgrad GEMM and give autograd a dummy
        (zeros or uninitialised) under `grad_added_to_main_grad`. A tensor hook on that
        weight sees the dummy: a hook that sums the gradient across a group to keep a
        replicated weight in sync sums the dummy, while the optimizer steps on each rank's
        own main_grad, and the replicas drift apart after the first update.

        Seen: classes of the file that assign `self.X` a call of a class named `*Linear`
        that the file does not define (imported from Megatron-Core or TE, or through an
        import helper), except `nn.Linear` and layers built with
        `gradient_accumulation_fusion=False` / `fuse_wgrad_accumulation=False`;
        `T.register_hook(f)` in their methods, `T` followed through locals, conditional
        expressions, loops over tuples of layers and `getattr(layer, "weight")`, or a
        top-level function of the file that registers such a hook on its parameter and is
        called with `T` (the finding is that call); `f` a function of the file or nested
        in it, a method of the class or a lambda, whose first parameter reaches a call
        naming `reduce`. Files naming `register_hook(` that also call something named
        `*reduce*` are analysed for this (a file registering hooks only to record
        gradients is not).

        Not seen: weights handed in from other files or kept in containers; hooks
        registered with `register_post_accumulate_grad_hook` or on the grad accumulator;
        hooks that scale or clip the gradient (also wrong on a dummy, but common on
        tensors that never fuse); whether the configuration switches the fusion on (the
        layer's class may fuse, so it is reported: a model that never fuses can say so
        with the keyword set to `False`).
    """,
    fix="""
        Reduce what holds the gradient: when the weight has `main_grad` (wgrad fusion on),
        all-reduce `weight.main_grad` after the backward pass (a post-backward or
        finalize-grads step, or the hook testing `hasattr(weight, "main_grad")`), and the
        `.grad` only otherwise. No automatic fix.
    """,
    fix_summary="none (all-reduce main_grad when the weight has one)",
    valid=(
        Example(
            """
            class SharedAdapter(torch.nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.linear_in = ColumnParallelLinear(config.hidden, 8, config=config)
                    group = get_expert_model_parallel_group()

                    def sum_grad(grad):
                        weight = self.linear_in.weight
                        if hasattr(weight, "main_grad"):
                            torch.distributed.all_reduce(weight.main_grad, group=group)
                            return grad
                        torch.distributed.all_reduce(grad, group=group)
                        return grad

                    self.linear_in.weight.register_hook(sum_grad)
            """
        ),
        Example(
            """
            class SharedAdapter(torch.nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.linear_in = torch.nn.Linear(config.hidden, 8)
                    self.linear_in.weight.register_hook(self._sum)

                def _sum(self, grad):
                    torch.distributed.all_reduce(grad, group=self.group)
                    return grad
            """
        ),
    ),
    invalid=(
        Example(
            """
            class SharedAdapter(torch.nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.linear_in = ColumnParallelLinear(config.hidden, 8, config=config)
                    self.linear_in.weight.register_hook(self._sum)

                def _sum(self, grad):
                    torch.distributed.all_reduce(grad, group=self.group)
                    return grad
            """,
            line=5,
        ),
    ),
)


MESSAGE = (
    "the hook {hook} registered here on `self.{layer}.weight` all-reduces the `.grad` "
    "autograd hands it; `self.{layer}` may fuse its wgrad into main_grad, and then that "
    "`.grad` is a dummy and main_grad is never reduced: reduce main_grad when the weight "
    "has one"
)


def check(context: ModuleContext, out: Collector) -> None:
    for found in context.shared(grad_hooks.reducing_hooks):
        out.report(CODE, found.site, MESSAGE.format(hook=f"`{found.hook}`", layer=found.layer))
