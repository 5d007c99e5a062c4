"""One training step through a real engine, in the order Megatron-LM's training loop calls it,
and what the fused side hands the engine's post-backward hooks on the way.

megatron-core 0.19.2's ``train_step`` (megatron/training/training.py) with
``forward_backward_no_pipelining`` (megatron/core/pipeline_parallel/schedules.py):

    model.zero_grad_buffer()
    with no_sync():                     # model.no_sync with overlap_grad_reduce, else a
        for microbatch in all but last: #   nullcontext (config.no_sync_func, set in ``train``)
            y = model(x); torch.autograd.backward(y, dy); [backward_dw()]
    y = model(x_last); torch.autograd.backward(y, dy_last); [backward_dw()]
    finalize_model_grads([model], None) # -> model.finish_grad_sync()

Delayed weight gradients: under DDP the schedule calls ``backward_dw()`` right after each
backward, in the same no_sync scope (the 1F1B plan, ``TransformerLayerSchedulePlan.run``); under
Megatron-FSDP it runs inside backward (fsdp.DelayedWgradBoundary). Megatron's forward_step
divides each microbatch's loss by k (``forward_step_calc_loss``); the checker feeds the same output
gradients to the reference instead, which leaves every verdict unchanged (all of it is linear).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ..inputs import is_weight
from .wrapped import Wrapped


@dataclass
class GradAtHook:
    """``param.grad`` as the engine's post-backward hook is about to find it."""

    step: int
    microbatch: int
    param: str
    present: bool
    shape: tuple[int, ...] | None
    dtype: torch.dtype | None
    value: torch.Tensor | None  # kept where it is compared (plain autograd weights)
    grad_added: bool | None = None  # grad_added_to_main_grad (None: no such attribute)


@dataclass
class StepRecord:
    outputs: list[torch.Tensor] = field(default_factory=list)
    input_grads: list[torch.Tensor | None] = field(default_factory=list)
    probs_grads: list[torch.Tensor | None] = field(default_factory=list)


class EngineError(Exception):
    """An exception of the fused side or the engine, with where it happened."""

    def __init__(self, where: str, exc: BaseException) -> None:
        super().__init__(f"{where}: {type(exc).__name__}: {exc}")
        self.where = where
        self.original = exc


class GradObserver:
    """Records ``.grad`` where the engine's hooks look at it. Installed before the engine wraps
    the fused side, so it runs first: a post-accumulate-grad hook (DDP's hook sits on the
    AccumulateGrad node and runs after it, megatron-core 0.19.2
    ``DistributedDataParallel.__init__``; Megatron-FSDP's is a later post-accumulate-grad hook,
    megatron-fsdp 0.6.1 ``MegatronFSDP._register_fsdp_hooks``), and for delayed
    weights a hook the fused side's backward_dw() runs before the engine's."""

    def __init__(self, module: nn.Module, keep_weight_values: bool) -> None:
        self.records: list[GradAtHook] = []
        self.where = (0, 0)
        self.keep = keep_weight_values
        params = dict(module.named_parameters())
        delayed = [n for n, p in params.items() if getattr(p, "skip_backward_post_hook", False)]
        for name, p in params.items():
            if name not in delayed:
                p.register_post_accumulate_grad_hook(self._hook(name))
        if delayed:

            def after_backward_dw() -> None:
                for name in delayed:
                    self._hook(name)(params[name])

            module.register_wgrad_accumulation_and_reduce_hooks(after_backward_dw)

    def _hook(self, name: str):
        def record(p: torch.Tensor) -> None:
            grad = p.grad
            step, mb = self.where
            added = getattr(p, "grad_added_to_main_grad", None)
            if grad is None:
                self.records.append(GradAtHook(step, mb, name, False, None, None, None, added))
                return
            value = grad.detach().clone() if self.keep and is_weight(name) else None
            rec = GradAtHook(step, mb, name, True, tuple(grad.shape), grad.dtype, value, added)
            self.records.append(rec)

        return record


@dataclass
class Microbatch:
    x: torch.Tensor
    split_sizes: list[int]
    probs: torch.Tensor | None
    dy: torch.Tensor


def run_step(
    wrapped: Wrapped, step: int, microbatches: Sequence[Microbatch], observer: GradObserver
) -> StepRecord:
    """One step; EngineError naming the step, microbatch and phase on any exception."""
    from megatron.core.distributed import finalize_model_grads

    record = StepRecord()
    model = wrapped.model
    phase = "zero_grad_buffer"
    try:
        model.zero_grad_buffer()
        overlap = wrapped.config.overlap_grad_reduce
        no_sync = model.no_sync if overlap else contextlib.nullcontext
        last = len(microbatches) - 1
        with no_sync():
            for mb, batch in enumerate(microbatches[:last]):
                _microbatch(wrapped, step, mb, batch, observer, record)
        _microbatch(wrapped, step, last, microbatches[last], observer, record)
        phase = "finish_grad_sync"
        # pg_collection None: parallel_state's groups; num_tokens None: no per-token scaling.
        finalize_model_grads([model], None)
    except EngineError:
        raise
    except Exception as exc:
        raise EngineError(f"step {step + 1} {phase}", exc) from exc
    return record


def _microbatch(wrapped, step, mb, batch, observer, record) -> None:
    where = f"step {step + 1} mb {mb + 1}"
    observer.where = (step, mb)
    phase = "forward"
    try:
        x = batch.x.detach().clone().requires_grad_(True)
        probs = batch.probs
        if probs is not None:
            probs = probs.detach().clone().requires_grad_(True)
        y = wrapped.forward(x, batch.split_sizes, probs)
        record.outputs.append(y.detach().clone())
        phase = "backward"
        torch.autograd.backward(y, grad_tensors=batch.dy)
        record.input_grads.append(None if x.grad is None else x.grad.detach().clone())
        record.probs_grads.append(
            None if probs is None or probs.grad is None else probs.grad.detach().clone()
        )
        if wrapped.backward_dw_after_backward:
            phase = "backward_dw"
            wrapped.module.backward_dw()
    except Exception as exc:
        raise EngineError(f"{where} {phase}", exc) from exc
