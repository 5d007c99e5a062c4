"""GMLP066: a parameter's `.grad` added into its main_grad by code that never asks whether the
layer already wrote main_grad (`grad_added_to_main_grad`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

unflagged_folds = LazyModule("..analysis.unflagged_folds", __package__)

CODE = "GMLP066"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="grad-folded-without-flag",
    summary=(
        "A hook folds a parameter's `.grad` into its main_grad without asking "
        "`grad_added_to_main_grad`: where the layer fused the wgrad into main_grad, `.grad` "
        "is a dummy and its memory is added on top of the real gradient."
    ),
    flags=(
        "`P.main_grad.add_(P.grad...)` / `P.main_grad += P.grad...` (main_grad also through "
        "`getattr`, `.data` or a local bound to it; the gradient also handed through a call) "
        "in a function the file never calls by name, in a file that sets "
        "`grad_added_to_main_grad` (an assignment, `setattr`) and reads it nowhere"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping: the hook's side). Megatron's DDP
        grad-accumulation hook moves autograd's gradient into main_grad only when the layer
        did not write main_grad itself: `if param.grad is not None and not
        param.grad_added_to_main_grad: param.main_grad.add_(param.grad.data)`. A layer with
        the fused wgrad (Transformer Engine's `fuse_wgrad_accumulation`, Megatron's
        `gradient_accumulation_fusion`) has already accumulated the real gradient into
        main_grad, sets the flag and hands autograd a dummy: `torch.empty(...)` unless
        `zero_out_wgrad`. A fold that does not ask the flag adds that uninitialised memory
        into main_grad (or, with zeros, does a full read-modify-write for nothing). Found
        from blind corpus 20 (Yuan2.0-M32's legacy DDP hook given Megatron-core's reset of
        the flag in `zero_grad_buffer`, its check left out).

        Seen: per function, an in-place add into `P.main_grad` (`add_`, `+=`; main_grad also
        as `getattr(P, "main_grad")`, `P.main_grad.data` or a local whose one binding is it)
        of `P.grad` as it is, reshaped (`.data`, `.view(-1)`, `.to(dtype)`) or handed
        through a call (`to_local_if_dtensor(p.grad)`), `P` spelled the same on both sides
        (a name or an attribute chain), in a file that sets `grad_added_to_main_grad`
        (`p.grad_added_to_main_grad = False` in a reset, `= True` in a layer, `setattr`) and
        reads it nowhere: the file keeps the protocol, so its parameters can arrive with a
        dummy, and no code of it asks which did. A file that reads the flag anywhere (the
        hook itself, a helper it calls, a registration that skips fused parameters, a
        constant holding the name, a config dump; comments aside) is not judged: it may ask
        where the hook does not. Nor is a function the file calls by name (a helper: its
        callers decide when it folds).

        Not seen: a file that never names the flag (Megatron's legacy DDP, written before
        it, whose fused layers hand autograd `None`: nothing to add; veScale's copy of
        Megatron-core's DDP, whose layers never fuse; a hook trimmed out of its file, as
        blind corpus 21's Megatron-core hook without the flag check was); a file that reads
        the flag somewhere else than the hook (a hook that does not ask, beside a reader
        elsewhere, is taken to be covered); a helper of the file, whether its callers ask or
        not (one called from another file is judged alone and may be reported wrongly); the
        gradient through a local (`g = p.grad; p.main_grad.add_(g)`), main_grad through
        `get_main_grad()` or a local bound twice, or into another buffer (a slice of a
        contiguous buffer, `torch.add(..., out=)`); whether any layer of the run fuses the
        wgrad at all.
    """,
    fix="""
        Fold only when the layer did not: `if p.grad is not None and not
        p.grad_added_to_main_grad: p.main_grad.add_(p.grad.data)` (Megatron-core's DDP also
        folds when `zero_out_wgrad` is set). No automatic fix.
    """,
    fix_summary="none (fold only when `grad_added_to_main_grad` is False)",
    valid=(
        Example(
            """
            def _make_param_hook(self, param):
                def param_hook(*unused):
                    if param.grad is not None:
                        if not param.grad_added_to_main_grad:
                            param.main_grad.add_(param.grad.data)
                        param.grad = None

                return param_hook

            def zero_grad_buffer(self):
                for param in self.params:
                    param.grad_added_to_main_grad = False
            """
        ),
        Example(
            """
            def _make_param_hook(self, param):
                skip = getattr(param, "grad_added_to_main_grad", False)

                def param_hook(*unused):
                    if param.grad is not None and not skip:
                        param.main_grad.add_(param.grad.data)
                    param.grad = None

                return param_hook
            """
        ),
        Example(
            """
            def param_hook(param):
                if param.grad is not None:
                    param.main_grad.add_(param.grad.data)
                    param.grad = None
            """
        ),
        Example(
            """
            def fold(param, main_param):
                main_param.main_grad.add_(param.grad.data)

            def zero_grad_buffer(params):
                for param in params:
                    param.grad_added_to_main_grad = False
            """
        ),
    ),
    invalid=(
        Example(
            """
            def _make_param_hook(self, param):
                def param_hook(*unused):
                    if param.grad is not None:
                        param.main_grad.add_(param.grad.data)
                        param.grad = None

                return param_hook

            def zero_grad_buffer(self):
                for param in self.params:
                    param.grad_added_to_main_grad = False
            """,
            line=4,
        ),
        Example(
            """
            class Buckets:
                def finish_grad_sync(self):
                    for param in self.params:
                        if param.grad is not None:
                            param.main_grad += param.grad.to(param.main_grad.dtype)
                            param.grad = None

                def reset(self):
                    for param in self.params:
                        param.grad_added_to_main_grad = False
            """,
            line=5,
        ),
    ),
)


MESSAGE = (
    "`{owner}.grad` is added into `{owner}.main_grad` without asking "
    "`{owner}.grad_added_to_main_grad`: a layer that fused the wgrad into main_grad hands "
    "autograd a dummy, whose memory this adds on top of the real gradient; fold only when "
    "the flag is False"
)


def check(context: ModuleContext, out: Collector) -> None:
    if ".grad" not in context.source:
        return
    for unit in context.units:
        for fold in unflagged_folds.unflagged_folds(unit):
            out.report(CODE, fold.site, MESSAGE.format(owner=fold.owner.strip()))
