"""Faults at the contract's surface, declared as data: each wraps whatever module a factory
built (ours, Transformer Engine's, Megatron's, a user's) and rewrites, where CONTRACT.md
speaks (the weight gradients delivered after backward or ``backward_dw()``, the engine's
reduce hooks), what the real backend did, the way one bug class would have left it.

A fault applies to the cases where its bug changes something the contract fixes: ``applies``
is a predicate on the case, ``applies_doc`` says it in words (docs/faults.md shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from ..matrix import Case
from . import effects
from .intercept import Delivery, Interceptor


@dataclass(frozen=True)
class SurfaceFault:
    name: str
    bug_class: str  # a name of gmlp_check.faults.classes.BUG_CLASSES
    description: str  # what the backend does instead
    upstream: str  # the upstream fix or report this stands for, "" where none is known
    observables: tuple[str, ...]  # the observables meant to catch it
    applies_doc: str
    applies: Callable[[Case], bool]
    on_delivery: Callable[[Delivery], None] | None = None
    reduce_hooks: str = "fire"  # "drop", "twice" or "early" for the faults of the hooks

    kind = "surface"

    def wrap(self, module: nn.Module, case: Case) -> nn.Module:
        Interceptor(module, case, self.on_delivery, self.reduce_hooks)
        return module


def _into(case: Case) -> bool:
    return case.mode_spec.accumulate_into_main_grad


def _tokens(case: Case) -> bool:
    return case.splits != "t0"


def _quantized_copy(case: Case) -> bool:
    """FP8 compute with high-precision weights: the GEMMs read a quantized copy."""
    return case.quantized and not case.fp8_weights


SURFACE_FAULTS: tuple[SurfaceFault, ...] = (
    SurfaceFault(
        "expert-write-lost",
        "main-grad-write-lost",
        "the weight gradient of the first expert with tokens never reaches main_grad (written "
        "into a scratch buffer that is never copied back)",
        "TE #2936: fused grouped MLP backward (ops/fused/backward_grouped_mlp.py), fixed by "
        "b4aeed18; TE #1488: GroupedLinear (module/grouped_linear.py) chose main_grad as "
        "destination but the GEMM never saw it",
        ("main_grad.at_hook", "main_grad.after_backward", "main_grad.after_backward_dw"),
        "output into main_grad, and some expert has tokens",
        lambda c: _into(c) and _tokens(c),
        effects.lose_first_nonempty_expert,
    ),
    SurfaceFault(
        "empty-expert-skipped",
        "empty-expert-skipped",
        "in overwrite mode the first expert that received no tokens is skipped: its main_grad "
        "keeps stale values instead of becoming 0",
        "",
        ("main_grad.at_hook", "main_grad.after_backward", "main_grad.after_backward_dw"),
        "overwrite mode, and some expert has no tokens",
        lambda c: c.mode_spec.overwrite and c.splits != "ragged",
        effects.lose_first_empty_expert,
    ),
    SurfaceFault(
        "accumulate-for-overwrite",
        "overwrite-accumulate-swapped",
        "main_grad += wgrad where overwrite_main_grad asks for main_grad = wgrad",
        "Megatron-LM #6357 (megatron-fsdp megatron_fsdp.py unshard path set overwrite for "
        "every strategy); TE #2549 (module/layernorm_mlp.py read the flag from another object)",
        ("main_grad.at_hook", "main_grad.after_backward", "main_grad.after_backward_dw"),
        "overwrite mode",
        lambda c: c.mode_spec.overwrite,
        effects.accumulate_instead_of_overwrite,
    ),
    SurfaceFault(
        "overwrite-for-accumulate",
        "overwrite-accumulate-swapped",
        "main_grad = wgrad where accumulation (main_grad += wgrad) is asked",
        "Megatron-LM #6357 (ZeRO-1 microbatches overwritten: all but the last lost)",
        ("main_grad.at_hook", "main_grad.after_backward", "main_grad.after_backward_dw"),
        "output into main_grad without overwrite_main_grad",
        lambda c: _into(c) and not c.mode_spec.overwrite,
        effects.overwrite_instead_of_accumulate,
    ),
    SurfaceFault(
        "wgrad-to-autograd",
        "wgrad-returned-as-grad",
        "the real weight gradient is handed to autograd as .grad instead of the dummy (the "
        "flag still set), so an engine that adds .grad anyway adds it twice",
        "TE basic_linear.py (ops/basic, 2.20.2): the dummy follows the flag that "
        "overwrite_main_grad downgraded (#2936's class)",
        ("param.grad.zero", "main_grad.at_hook"),
        "output into main_grad, zero_out_wgrad, and some expert has tokens",
        lambda c: _into(c) and c.zero_out and _tokens(c),
        effects.hand_wgrad_to_autograd,
    ),
    SurfaceFault(
        "nonzero-dummy",
        "dummy-not-zeroed",
        "under zero_out_wgrad the dummy .grad is not zero-filled (all ones here)",
        "Megatron-LM #6565 (generalized_tensor_parallelism.py); TE #545 (module/linear.py, "
        "layernorm_linear.py, layernorm_mlp.py: torch.empty dummies)",
        ("param.grad.zero",),
        "output into main_grad and zero_out_wgrad",
        lambda c: _into(c) and c.zero_out,
        effects.nonzero_dummy,
    ),
    SurfaceFault(
        "grad-added-not-set",
        "bookkeeping-not-set",
        "grad_added_to_main_grad is left False after main_grad was written",
        "TE #2923 (ops/basic/grouped_linear.py, fixed by 3ded6168); TE BasicLinear "
        "(BasicLinear.op_backward in ops/basic/basic_linear.py, unfixed in 2.20.2)",
        ("grad_added_to_main_grad",),
        "output into main_grad",
        _into,
        effects.unset_grad_added,
    ),
    SurfaceFault(
        "grad-added-without-write",
        "bookkeeping-without-write",
        "grad_added_to_main_grad is set although the gradient went to .grad, not main_grad: "
        "the engine's hook drops it",
        "",
        ("grad_added_to_main_grad", "main_grad.after_backward"),
        "plain autograd mode (no output into main_grad)",
        lambda c: not _into(c),
        effects.set_grad_added,
    ),
    SurfaceFault(
        "reduce-hook-not-fired",
        "reduce-hook-not-fired",
        "backward_dw() writes main_grad but never fires the hooks registered with "
        "register_wgrad_accumulation_and_reduce_hooks",
        "TE #2886 (ops/basic/grouped_linear.py backward_dw); Megatron-LM #4311",
        ("ddp_hook",),
        "delayed weight gradients",
        lambda c: c.delay,
        reduce_hooks="drop",
    ),
    SurfaceFault(
        "reduce-hook-fired-twice",
        "reduce-hook-fired-twice",
        "backward_dw() fires each registered reduce hook twice",
        "",
        ("ddp_hook",),
        "delayed weight gradients",
        lambda c: c.delay,
        reduce_hooks="twice",
    ),
    SurfaceFault(
        "reduce-hook-fired-early",
        "reduce-hook-fired-early",
        "the registered reduce hooks fire when backward_dw() starts, before it computed the "
        "weight gradients",
        "",
        ("main_grad.at_hook", "grad_added_to_main_grad", "ddp_hook"),
        # Without tokens there is no gradient to be early for: the hook's only trace would
        # be an unfetched buffer or a missing .grad, the symptoms of other classes.
        "delayed weight gradients into main_grad, some expert with tokens",
        lambda c: c.delay and _into(c) and _tokens(c),
        reduce_hooks="early",
    ),
    SurfaceFault(
        "grad-aliases-main-grad",
        "grad-aliases-main-grad",
        "main_grad itself is handed back as the weight's .grad",
        "TE #507 (module/layernorm_linear.py: the GEMM output written with out=main_grad "
        "returned as .grad)",
        ("param.grad.alias",),
        "output into main_grad in fp32 (a .grad must have the weight's dtype)",
        lambda c: _into(c) and c.dtype == "fp32",
        effects.alias_grad_to_main_grad,
    ),
    SurfaceFault(
        "fsdp-buffer-not-fetched",
        "fsdp-main-grad-not-fetched",
        "under Megatron-FSDP the gradient goes into a buffer the path allocated and assigned "
        "to param.main_grad instead of the one get_main_grad() returns",
        "Megatron-LM #5209 (moe/experts.py: expose the FSDP main_grad before fused execution); "
        "TE #2371 (module/grouped_linear.py)",
        ("main_grad.fetched", "main_grad.after_backward"),
        "Megatron-FSDP with output into main_grad",
        lambda c: _into(c) and c.mode_spec.fsdp,
        effects.write_unfetched_buffer,
    ),
    SurfaceFault(
        "expert-rows-swapped",
        "wrong-group-offsets",
        "the first expert with tokens and the next one receive each other's weight gradient "
        "in a single grouped weight",
        "",
        ("main_grad.at_hook", "main_grad.after_backward", "main_grad.after_backward_dw"),
        "a single grouped weight, output into main_grad, some expert with tokens",
        lambda c: _into(c) and c.single and _tokens(c),
        effects.swap_two_experts,
    ),
    SurfaceFault(
        "group-offsets-shifted",
        "wrong-group-offsets",
        "group offsets shifted by one: expert g's region of a single grouped weight receives "
        "expert g+1's gradient (the last one expert 0's)",
        "",
        ("main_grad.at_hook", "main_grad.after_backward", "main_grad.after_backward_dw"),
        "a single grouped weight, output into main_grad, some expert with tokens",
        lambda c: _into(c) and c.single and _tokens(c),
        effects.shift_group_offsets,
    ),
    SurfaceFault(
        "write-through-stand-in",
        "stand-in-copy",
        "main_grad is written and grad_added_to_main_grad set on a stand-in (a detached or "
        "quantized copy of the weight): the Parameter sees neither",
        "TE #1026 and #1034 (main_grad offloaded: the GEMM wrote a copy); TE #548 and #1609 "
        "(flag read from another object); Megatron-LM #5487 (grouped weight replaced by a "
        "fresh parameter)",
        ("main_grad.at_hook", "grad_added_to_main_grad"),
        "output into main_grad, and some expert has tokens",
        lambda c: _into(c) and _tokens(c),
        effects.write_through_stand_in,
    ),
    SurfaceFault(
        "flag-from-quantized-copy",
        "overwrite-accumulate-swapped",
        "under FP8 compute with high-precision weights, overwrite_main_grad is read from the "
        "quantized copy of the weight the GEMM used, which does not carry it: main_grad += "
        "wgrad where overwrite is asked (no copy exists without FP8, so bf16 cannot show it)",
        "TE #2549 (the overwrite flag read from the FP8 weight copy, fixed in TE 2.15)",
        ("main_grad.own_run", "main_grad.at_hook", "main_grad.after_backward"),
        "FP8 compute with high-precision weights, overwrite mode",
        lambda c: _quantized_copy(c) and c.mode_spec.overwrite,
        effects.flag_from_quantized_copy,
    ),
    SurfaceFault(
        "write-through-quantized-copy",
        "stand-in-copy",
        "under FP8 compute with high-precision weights, main_grad is written and "
        "grad_added_to_main_grad set on the quantized copy the GEMM used: the Parameter sees "
        "neither (no copy exists without FP8, so bf16 cannot show it)",
        "TE #2549's class (bookkeeping on the FP8 weight copy instead of the Parameter)",
        ("main_grad.own_run", "main_grad.at_hook", "grad_added_to_main_grad"),
        "FP8 compute with high-precision weights, output into main_grad, some expert with tokens",
        lambda c: _quantized_copy(c) and _into(c) and _tokens(c),
        effects.write_through_quantized_copy,
    ),
    SurfaceFault(
        "dummy-dropped",
        "no-dummy-grad",
        "no dummy .grad is handed back after writing main_grad: DDP's overlap hook finds None",
        "TE #2097 (ops/basic/basic_linear.py); TE #1474 and #1625 (module/layernorm_linear.py, "
        "layernorm_mlp.py)",
        ("ddp_hook",),
        "Megatron DDP with output into main_grad",
        lambda c: _into(c) and not c.mode_spec.fsdp,
        effects.drop_dummy,
    ),
)
