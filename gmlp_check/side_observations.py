"""Drive one side (reference or fused) of a case through its microbatches, with the emulated
Megatron engine around it, and record everything the contract speaks about:

* the forward output, the input and probs gradients of every microbatch;
* what every post-backward hook call found: ``param.grad`` (before the hook clears it),
  main_grad, ``grad_added_to_main_grad`` and whether main_grad was fetched;
* main_grad and the bookkeeping when ``backward()`` returns and when ``backward_dw()`` returns;
* any exception, with the phase it happened in; and the guard bands at the end.

Parameters are set up as the case's mode says: Megatron DDP (``off``, ``accumulate-ddp``), or
Megatron-FSDP with sharded gradients (``overwrite-fsdp``) or without (``accumulate-fsdp``), each
with its own post-backward hook (``gmlp_check.refimpl.megatron``). As the real engines do:
a Megatron-FSDP parameter has no ``main_grad`` attribute until it is first fetched, and with
sharded gradients it is None again after every microbatch (its bucket was reduced and freed);
the weights of a delayed case are marked ``skip_backward_post_hook``, as Transformer Engine
marks them, which is what routes their hooks through ``backward_dw()``; DDP runs with
``overlap_grad_reduce`` on. ``gmlp-check diff --megatron real`` runs the real engines.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import nn

from gmlp_check.refimpl import megatron

from .backends import short
from .buffers import Arena, memory_span
from .inputs import Inputs
from .matrix import Case


@dataclass
class SideError:
    phase: str
    microbatch: int
    message: str  # "Type: first line", cut to a readable length
    missing_grad: bool = False  # the DDP hook found .grad None (TE #2097)

    def describe(self) -> str:
        # microbatch 0: a phase outside the microbatches (construction, FP8's twin run).
        where = f"{self.phase} of mb {self.microbatch}" if self.microbatch else self.phase
        return f"{self.message} in {where}"

    @classmethod
    def of(cls, exc: BaseException, phase: str, microbatch: int = 0) -> SideError:
        return cls(phase, microbatch, short(exc), isinstance(exc, megatron.MissingGradError))


@dataclass
class GradSeen:
    """``param.grad`` as the post-backward hook found it."""

    present: bool
    shape: tuple[int, ...] | None = None
    dtype: torch.dtype | None = None
    value: torch.Tensor | None = None
    aliases_main_grad: bool = False


@dataclass
class HookRecord:
    microbatch: int
    phase: str  # "backward" or "backward_dw": when the hook ran
    param: str
    grad: GradSeen
    main_grad: torch.Tensor  # the region as the hook found it, before it adds .grad
    grad_added: bool | None  # None: the attribute does not exist
    fetched: bool  # param.main_grad is the region (not None, not another buffer)


@dataclass
class Snapshot:
    main_grad: dict[str, torch.Tensor]
    grad_added: dict[str, bool | None]
    grad_present: dict[str, bool]
    fetched: dict[str, bool]


@dataclass
class Observations:
    before: dict[str, torch.Tensor]
    param_shapes: dict[str, torch.Size] = field(default_factory=dict)
    param_dtypes: dict[str, torch.dtype] = field(default_factory=dict)
    outputs: list[torch.Tensor] = field(default_factory=list)
    input_grads: list[torch.Tensor | None] = field(default_factory=list)
    probs_grads: list[torch.Tensor | None] = field(default_factory=list)
    hooks: list[HookRecord] = field(default_factory=list)
    after_backward: list[Snapshot] = field(default_factory=list)
    after_backward_dw: list[Snapshot] = field(default_factory=list)
    error: SideError | None = None
    guard_violations: list[str] = field(default_factory=list)

    def state_at_start(self, mb: int) -> dict[str, torch.Tensor]:
        return self.before if mb == 0 else self.after_backward_dw[mb - 1].main_grad

    def state_before(self, mb: int, phase: str) -> dict[str, torch.Tensor]:
        """main_grad as it was when ``phase`` of microbatch ``mb`` began."""
        if phase == "backward_dw":
            return self.after_backward[mb].main_grad
        return self.state_at_start(mb)


def _is_region(buffer: object, region: torch.Tensor) -> bool:
    return isinstance(buffer, torch.Tensor) and memory_span(buffer) == memory_span(region)


def attach_main_grads(case: Case, params: dict[str, nn.Parameter], arena: Arena) -> None:
    """Give every parameter its region of the arena as Megatron DDP or FSDP would.

    ``overwrite-fsdp`` stands for Megatron-FSDP's optim_grads / optim_grads_params on two or
    more ranks, where the gradient buffer is distributed and the hook takes its sharded branch
    (it copies ``.grad`` over the bucket when the flag is unset). With one rank Megatron-FSDP
    does not distribute the buffer and its hook adds ``.grad`` instead, although it still sets
    overwrite_main_grad: ``--megatron real`` on one GPU runs that branch (engines/configs.py,
    mfsdp-single-rank-sharded), which is why a fused side that hands back its gradient under
    overwrite (TE's BasicLinear) doubles it there and not here."""
    mode = case.mode_spec
    for name, p in params.items():
        if mode.fsdp:
            megatron.setup_fsdp_param(
                p, arena.region(name), sharded=mode.overwrite, zero_out_wgrad=case.zero_out
            )
            megatron.hide_main_grad(p)
        else:
            megatron.setup_ddp_param(p, arena.region(name), zero_out_wgrad=case.zero_out)


# Megatron-LM's usual DDP setting, and the one under which DDP's hook asserts that a gradient
# arrived (megatron-core 0.19.2 ``DistributedDataParallel._make_backward_post_hook``): the
# emulation is the stricter of the two.
EMULATED_OVERLAP_GRAD_REDUCE = True


def engine_hook(case: Case):
    """The post-backward hook of the engine the case's mode stands for."""
    mode = case.mode_spec
    if mode.fsdp:
        return partial(megatron.fsdp_post_backward_hook, sharded=mode.overwrite)
    return partial(
        megatron.ddp_post_backward_hook, overlap_grad_reduce=EMULATED_OVERLAP_GRAD_REDUCE
    )


def observe(
    module: nn.Module,
    case: Case,
    inputs: Inputs,
    arena: Arena,
    forward_context: Callable[[], AbstractContextManager] = nullcontext,
) -> Observations:
    """Drive one side through the case's microbatches and record what it did. Each forward
    runs inside ``forward_context()`` (the fused side of an FP8 case: TE's autocast)."""
    params = dict(module.named_parameters())
    names = {id(p): n for n, p in params.items()}
    obs = Observations(
        before={n: arena.region(n).clone() for n in params},
        param_shapes={n: p.shape for n, p in params.items()},
        param_dtypes={n: p.dtype for n, p in params.items()},
    )
    attach_main_grads(case, params, arena)
    where = {"mb": 0, "phase": "forward"}
    post_backward = engine_hook(case)

    def hook(p: torch.Tensor) -> None:
        name = names[id(p)]
        grad = p.grad
        seen = GradSeen(False)
        if grad is not None:
            value = grad.detach().clone()
            seen = GradSeen(True, tuple(grad.shape), grad.dtype, value, arena.holds(grad))
        obs.hooks.append(
            HookRecord(
                where["mb"],
                where["phase"],
                name,
                seen,
                arena.region(name).clone(),
                getattr(p, "grad_added_to_main_grad", None),
                _is_region(getattr(p, "main_grad", None), arena.region(name)),
            )
        )
        post_backward(p)

    def snapshot() -> Snapshot:
        return Snapshot(
            {n: arena.region(n).clone() for n in params},
            {n: getattr(p, "grad_added_to_main_grad", None) for n, p in params.items()},
            {n: p.grad is not None for n, p in params.items()},
            {
                n: _is_region(getattr(p, "main_grad", None), arena.region(n))
                for n, p in params.items()
            },
        )

    try:
        # The case says whether weight gradients are delayed, so a module without TE's
        # delay_wgrad_compute attribute still gets its weights' hooks from backward_dw().
        if case.delay:
            megatron.mark_delayed_weights(module)
        megatron.install_hooks(module, params.values(), hook, delay_wgrad_compute=case.delay)
        for mb in range(case.microbatches):
            where.update(mb=mb, phase="forward")
            x = inputs.xs[mb].detach().clone().requires_grad_(True)
            probs = inputs.probs[mb]
            if probs is not None:
                probs = probs.detach().clone().requires_grad_(True)
            with forward_context():
                y = module(x, inputs.splits[mb], probs)
            obs.outputs.append(y.detach().clone())
            where["phase"] = "backward"
            y.backward(inputs.dys[mb])
            obs.input_grads.append(None if x.grad is None else x.grad.detach().clone())
            obs.probs_grads.append(
                None if probs is None or probs.grad is None else probs.grad.detach().clone()
            )
            obs.after_backward.append(snapshot())
            where["phase"] = "backward_dw"
            module.backward_dw()
            obs.after_backward_dw.append(snapshot())
            if case.mode_spec.fsdp and case.mode_spec.overwrite:
                for p in params.values():
                    megatron.release_main_grad(p)
    except Exception as exc:  # any failure of the side under test is an observation
        obs.error = SideError.of(exc, where["phase"], where["mb"] + 1)
    obs.guard_violations = arena.guard_violations()
    return obs
