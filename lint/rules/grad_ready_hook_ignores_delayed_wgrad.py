"""GMLP028: a gradient-ready hook on every parameter, in a run that delays weight gradients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

grad_ready_hooks = LazyModule("..analysis.grad_ready_hooks", __package__)

CODE = "GMLP028"

# Another file of the run using the delayed-wgrad contract (Megatron-LM's DDP does).
_DDP = (
    "ddp.py",
    """
    def register_grad_hooks(module, on_ready):
        for param in module.parameters():
            if getattr(param, "skip_backward_post_hook", False):
                module.register_wgrad_accumulation_and_reduce_hooks(on_ready)
            else:
                param.register_post_accumulate_grad_hook(on_ready)
    """,
)

RULE = Rule(
    code=CODE,
    classes=(5,),
    name="grad-ready-hook-ignores-delayed-wgrad",
    summary=(
        "A gradient-ready hook registered on every parameter in a loop, in a run that uses "
        "Transformer Engine's delayed-wgrad contract, without asking whether the parameter "
        "delays its weight gradient (`skip_backward_post_hook`): for such a parameter the "
        "hook fires before its gradient exists."
    ),
    flags=(
        "in a run where some file reads `skip_backward_post_hook` or calls "
        "`register_wgrad_accumulation_and_reduce_hooks`, a "
        "`p.register_post_accumulate_grad_hook(h)` (or `g.register_hook(h)` on the "
        "accumulator `p.expand_as(p).grad_fn.next_functions[0][0]`) in a loop over "
        "parameters, in a function that spells neither"
    ),
    explanation="""
        Issue #19, class 5 (wgrad computed outside autograd), found from
        NVIDIA/Megatron-LM#6697. Transformer Engine's layers built with
        `delay_wgrad_compute` compute a weight's gradient in `backward_dw()`, after
        autograd has finished with it, and mark the weight `skip_backward_post_hook = True`.
        A data-parallel wrapper that counts gradients ready from a hook autograd fires
        (`register_post_accumulate_grad_hook`, or `register_hook` on the parameter's
        gradient accumulator) must register its completion for such a weight through the
        layer's `register_wgrad_accumulation_and_reduce_hooks` instead: registered on every
        parameter, the hook fires while the delayed weight's `.grad` is still None, the
        wrapper reduces and reshards before the gradient exists, and `backward_dw()` does
        not fire the hook again. The gradient is lost or reduced late.

        Seen: a registration of either kind in a `for` loop (or comprehension) whose
        iterable's text names parameters (`parameters()`, `params`, `fsdp_parameters`),
        on the loop's variable or a name bound from it in the loop (or on an accumulator
        bound from `...grad_fn.next_functions`). Reported only when the run uses the
        contract: some function of the files linted together (this one included) reads
        `skip_backward_post_hook` (attribute, `getattr`, `hasattr`) or calls
        `register_wgrad_accumulation_and_reduce_hooks`. Marking a weight
        (`p.skip_backward_post_hook = True`) or defining the method is no use of it. Not
        reported when the function, a function it is nested in, or a function of the file
        named in the hook argument (`self._make_hook(p)`) spells either word: it is taken
        to handle the delayed parameters.

        Not seen: a run that lints the registering file without any file using the
        contract (linting one file alone, or a repository whose only link to TE is an
        installed package: TE's own files are not part of the run); whether the
        parameters registered can be TE's delayed weights at all (a wrapper of a model with
        no TE layers is reported when another file of the run uses the contract);
        registrations outside loops over parameters, or through a helper of another
        function; a function that spells the word but does not skip the delayed ones.
    """,
    fix="""
        Ask each parameter: when `getattr(p, "skip_backward_post_hook", False)`, register
        the completion through the owning module's
        `register_wgrad_accumulation_and_reduce_hooks(...)` (Transformer Engine calls it
        after `backward_dw()` has materialised the gradient); otherwise register the
        gradient-ready hook. No automatic fix.
    """,
    fix_summary="none (register delayed parameters through the module's wgrad hooks)",
    valid=(
        Example(_DDP[1], others=(_DDP,)),
        # Alone, or in a run that never uses the contract: an ordinary hook.
        Example(
            """
            def register_grad_hooks(module, on_ready):
                for param in module.parameters():
                    param.register_post_accumulate_grad_hook(on_ready)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def register_grad_hooks(module, on_ready):
                for param in module.parameters():
                    param.register_post_accumulate_grad_hook(on_ready)
            """,
            line=3,
            others=(_DDP,),
        ),
    ),
)


MESSAGE = (
    "a gradient-ready hook (`{method}`) registered on every parameter without asking "
    "`skip_backward_post_hook`, in a run that uses TE's delayed wgrad: a delayed parameter "
    "gets its gradient in `backward_dw()`, after this hook fired with `.grad` still None; "
    "register it through the module's `register_wgrad_accumulation_and_reduce_hooks`"
)


def check(context: ModuleContext, out: Collector) -> None:
    for registration in context.shared(grad_ready_hooks.unaware_registrations):
        out.report(CODE, registration.call, MESSAGE.format(method=registration.method))
