"""Run refimpl and a fused backend side by side on identical weights, inputs and main_grads.

Expectations in tests/fused always come from refimpl run the same way (the oracle), never
from hard-coded numbers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import torch

import refimpl
from fused import backends
from gmlp_check.megatron import (
    install_ddp_hooks,
    setup_ddp_param,
    setup_fsdp_param,
    weight_params,
)

# Expert 1 receives no tokens; expert 2 spans two row tiles of the interpreter's BLOCK_M=16;
# hidden=24 and fc1's 2*ffn=40 are not multiples of the interpreter's blocks (32 and 16).
SPLITS = [5, 0, 18]
HIDDEN = 24
FFN = 20


@dataclass(frozen=True)
class Case:
    activation: str = "swiglu"
    bias: bool = True
    single: bool = False
    output_into_main_grad: bool = False
    delay: bool = False
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    splits: tuple[int, ...] = tuple(SPLITS)
    hidden: int = HIDDEN
    ffn: int = FFN

    def kwargs(self) -> dict:
        return {
            "num_experts": len(self.splits),
            "hidden": self.hidden,
            "ffn": self.ffn,
            "activation": self.activation,
            "bias": self.bias,
            "single_grouped_weight": self.single,
            "accumulate_into_main_grad": self.output_into_main_grad,
            "delay_wgrad_compute": self.delay,
            "dtype": self.dtype,
            "device": self.device,
        }

    def with_(self, **changes) -> Case:
        return replace(self, **changes)


@dataclass(frozen=True)
class MainGrads:
    """How main_grad is attached: Megatron DDP or FSDP, overwrite or not, initial contents."""

    fsdp: bool = False
    overwrite: bool = False
    zero_out: bool = False
    fill: str = "random"  # or "nan": a sentinel that must not survive an overwrite


def build_pair(case: Case, backend: str = "triton", seed: int = 0, fault: str | None = None):
    """(reference, fused) with identical parameters."""
    torch.manual_seed(seed)
    ref = refimpl.GroupedMLP(**case.kwargs())
    fused = backends.create(backend, fault=fault, **case.kwargs())
    fused.load_state_dict(ref.state_dict())
    return ref, fused


@dataclass(frozen=True)
class Inputs:
    x: torch.Tensor
    dy: torch.Tensor
    probs: torch.Tensor | None


def make_inputs(case: Case, seed: int = 1) -> list[Inputs]:
    """Two microbatches of inputs (use the first for a single step)."""
    gen = torch.Generator().manual_seed(seed)
    tokens = sum(case.splits)
    uses_probs = refimpl.ACTIVATIONS[case.activation].uses_probs
    batches = []
    for _ in range(2):
        x = torch.randn(tokens, case.hidden, generator=gen)
        dy = torch.randn(tokens, case.hidden, generator=gen)
        probs = torch.rand(tokens, generator=gen) if uses_probs else None
        batches.append(
            Inputs(
                x.to(case.device, case.dtype),
                dy.to(case.device, case.dtype),
                probs.to(case.device, case.dtype) if probs is not None else None,
            )
        )
    return batches


def initial_main_grads(mlp, how: MainGrads, seed: int = 2) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    buffers = {}
    for name, p in mlp.named_parameters():
        if "weight" not in name:
            continue
        if how.fill == "nan":
            buf = torch.full((p.numel(),), float("nan"))
        else:
            buf = torch.randn(p.numel(), generator=gen)
        buffers[name] = buf.to(p.device)
    return buffers


def attach_main_grads(mlp, how: MainGrads, buffers: dict[str, torch.Tensor]) -> None:
    params = dict(mlp.named_parameters())
    for name, buf in buffers.items():
        p = params[name]
        if how.fsdp:
            setup_fsdp_param(p, buf, overwrite_main_grad=how.overwrite, zero_out_wgrad=how.zero_out)
        else:
            setup_ddp_param(p, buf, zero_out_wgrad=how.zero_out)
            if how.overwrite:
                p.overwrite_main_grad = True


@dataclass
class Observed:
    y: list[torch.Tensor] = field(default_factory=list)
    dx: list[torch.Tensor] = field(default_factory=list)
    dprobs: list[torch.Tensor | None] = field(default_factory=list)
    grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    # .grad of each weight as the DDP hook saw it, just before it ran (with ddp_hooks)
    hook_grads: dict[str, list[torch.Tensor | None]] = field(default_factory=dict)
    main_grads: dict[str, torch.Tensor] = field(default_factory=dict)
    grad_added: dict[str, object] = field(default_factory=dict)
    exposed_main_grads: dict[str, object] = field(default_factory=dict)
    # param.main_grad is the very buffer the test attached (DDP) or get_main_grad returns (FSDP)
    exposes_buffer: dict[str, bool] = field(default_factory=dict)
    wgrad_hook_calls: int = 0
    backward_dw_hook_calls_before: int = 0


def run(
    mlp,
    batches: list[Inputs],
    splits,
    *,
    main_grads: dict[str, torch.Tensor] | None = None,
    ddp_hooks: bool = False,
    microbatches: int = 1,
) -> Observed:
    """Forward and backward over ``microbatches`` batches, then backward_dw(); observe."""
    obs = Observed()
    names = {id(p): n for n, p in mlp.named_parameters()}

    def on_hook(p):
        obs.hook_grads.setdefault(names[id(p)], []).append(
            None if p.grad is None else p.grad.detach().clone()
        )

    if ddp_hooks:
        # Only weights carry main_grad here; biases go through autograd alone.
        install_ddp_hooks(mlp, weight_params(mlp), on_hook=on_hook)

    def count():
        obs.wgrad_hook_calls += 1

    mlp.register_wgrad_accumulation_and_reduce_hooks(count)
    for batch in batches[:microbatches]:
        x = batch.x.clone().requires_grad_()
        probs = batch.probs.clone().requires_grad_() if batch.probs is not None else None
        y = mlp(x, splits, probs)
        y.backward(batch.dy)
        obs.y.append(y.detach())
        obs.dx.append(x.grad)
        obs.dprobs.append(probs.grad if probs is not None else None)
    obs.backward_dw_hook_calls_before = obs.wgrad_hook_calls
    mlp.backward_dw()
    for name, p in mlp.named_parameters():
        obs.grads[name] = None if p.grad is None else p.grad.detach().clone()
        obs.grad_added[name] = getattr(p, "grad_added_to_main_grad", "absent")
        obs.exposed_main_grads[name] = getattr(p, "main_grad", "absent")
    for name, buf in (main_grads or {}).items():
        obs.main_grads[name] = buf.detach().clone()
        obs.exposes_buffer[name] = obs.exposed_main_grads[name] is buf
    return obs


def run_pair(
    case: Case,
    how: MainGrads | None = None,
    *,
    backend: str = "triton",
    fault: str | None = None,
    ddp_hooks: bool = False,
    microbatches: int = 1,
    splits=None,
) -> tuple[Observed, Observed]:
    """Observations of (refimpl, fused) for the same case, inputs and main_grad setup."""
    ref, fused = build_pair(case, backend, fault=fault)
    batches = make_inputs(case)
    splits = list(case.splits) if splits is None else splits
    observations = []
    for mlp in (ref, fused):
        buffers = None
        if how is not None:
            buffers = initial_main_grads(mlp, how)
            attach_main_grads(mlp, how, buffers)
        observations.append(
            run(
                mlp,
                batches,
                splits,
                main_grads=buffers,
                ddp_hooks=ddp_hooks,
                microbatches=microbatches,
            )
        )
    return observations[0], observations[1]


def tolerance(dtype: torch.dtype) -> dict:
    """assert_close tolerances for fused vs refimpl in the same dtype on tiny shapes.

    fp32: assert_close's defaults. fp16: both sides round h, act(h), y and the gradients to
    fp16 (eps 2^-10) at different points (the fused path keeps fp32 inside an epilogue where
    the reference rounds after every op), values are O(1..10): a few eps of relative error
    and 1e-2 absolute. bf16 (eps 2^-7), same reasoning."""
    if dtype == torch.float16:
        return {"rtol": 1e-2, "atol": 1e-2}
    if dtype == torch.bfloat16:
        return {"rtol": 4e-2, "atol": 4e-2}
    return {}


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality, so that NaN sentinels compare equal to themselves."""
    return torch.equal(a.view(torch.int32), b.view(torch.int32))


def assert_outputs_match(ref: Observed, fused: Observed, dtype: torch.dtype) -> None:
    tol = tolerance(dtype)
    for name in ("y", "dx", "dprobs"):
        for r, f in zip(getattr(ref, name), getattr(fused, name)):
            if r is None:
                assert f is None, name
                continue
            torch.testing.assert_close(f, r, **tol, msg=lambda m, n=name: f"{n}: {m}")


def assert_bias_grads_match(ref: Observed, fused: Observed, dtype: torch.dtype) -> None:
    for name, r in ref.grads.items():
        if "bias" in name:
            torch.testing.assert_close(fused.grads[name], r, **tolerance(dtype), msg=name)


@contextlib.contextmanager
def uninitialized_memory_is_nan() -> Iterator[None]:
    """torch.empty returns NaN (how gmlp-check makes uninitialised dummies visible)."""
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was_deterministic, warn_only=was_warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill
