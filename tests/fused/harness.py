"""Run refimpl and a fused backend side by side on identical weights, inputs and main_grads.

Expectations in tests/fused always come from refimpl run the same way (the oracle), never
from hard-coded numbers. What is not specific to the fused path (main_grad attachment, the
engines' hooks, bit comparisons) is in tests/harness.py; the NaN-fill context is in
refimpl/sentinels.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest
import torch
from torch import nn

from gmlp_check import backends, faults, refimpl
from gmlp_check.fused import grouped_mm
from gmlp_check.refimpl.config import MLPConfig
from gmlp_check.refimpl.megatron import install_hooks, weight_params

from ..harness import (
    MainGrads,
    attach,
    engine_hook,
    nonempty,
    same_memory,
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
    accumulate_into_main_grad: bool = False
    delay: bool = False
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    splits: tuple[int, ...] = tuple(SPLITS)
    hidden: int = HIDDEN
    ffn: int = FFN

    def config(self) -> MLPConfig:
        return MLPConfig(
            num_experts=len(self.splits),
            hidden=self.hidden,
            ffn=self.ffn,
            activation=self.activation,
            bias=self.bias,
            single_grouped_weight=self.single,
            accumulate_into_main_grad=self.accumulate_into_main_grad,
            delay_wgrad_compute=self.delay,
            dtype=self.dtype,
            device=self.device,
        )

    def kwargs(self) -> dict:
        """The configuration as a module:factory receives it."""
        return self.config().as_kwargs()

    def with_(self, **changes) -> Case:
        return replace(self, **changes)


def build_fused(case: Case, backend: str = "triton", fault: str | None = None) -> nn.Module:
    """The backend's module for ``case`` (loaded as the checker loads it), with ``fault``
    injected if given."""
    module = backends.load(backend).build(case.config())
    return faults.inject(module, faults.get(fault)) if fault is not None else module


def build_pair(case: Case, backend: str = "triton", seed: int = 0, fault: str | None = None):
    """(reference, fused) with identical parameters."""
    torch.manual_seed(seed)
    ref = refimpl.GroupedMLP(**case.kwargs())
    fused = build_fused(case, backend, fault)
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


@dataclass
class Observed:
    y: list[torch.Tensor] = field(default_factory=list)
    dx: list[torch.Tensor] = field(default_factory=list)
    dprobs: list[torch.Tensor | None] = field(default_factory=list)
    grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    # .grad of each weight as the engine's hook saw it, just before it ran (with engine_hooks)
    hook_grads: dict[str, list[torch.Tensor | None]] = field(default_factory=dict)
    main_grads_before: dict[str, torch.Tensor] = field(default_factory=dict)
    main_grads: dict[str, torch.Tensor] = field(default_factory=dict)
    grad_added: dict[str, object] = field(default_factory=dict)
    exposed_main_grads: dict[str, object] = field(default_factory=dict)
    # param.main_grad views the very buffer the test attached (DDP) or get_main_grad
    # returns (FSDP)
    exposes_buffer: dict[str, bool] = field(default_factory=dict)
    wgrad_hook_calls: int = 0
    backward_dw_hook_calls_before: int = 0


def run(
    mlp,
    batches: list[Inputs],
    splits,
    *,
    main_grads: dict[str, torch.Tensor] | None = None,
    hook: Callable[[torch.Tensor], None] | None = None,
    microbatches: int = 1,
) -> Observed:
    """Forward and backward over ``microbatches`` batches, then backward_dw(); observe.
    ``hook``: the engine's post-backward hook, installed on the weights."""
    obs = Observed()
    names = {id(p): n for n, p in mlp.named_parameters()}
    for name, buf in (main_grads or {}).items():
        obs.main_grads_before[name] = buf.detach().clone()

    if hook is not None:

        def observed_hook(p):
            obs.hook_grads.setdefault(names[id(p)], []).append(
                None if p.grad is None else p.grad.detach().clone()
            )
            hook(p)

        # Only weights carry main_grad here; biases go through autograd alone.
        install_hooks(mlp, weight_params(mlp), observed_hook)

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
        obs.exposes_buffer[name] = same_memory(obs.exposed_main_grads[name], buf)
    return obs


def run_pair(
    case: Case,
    how: MainGrads | None = None,
    *,
    backend: str = "triton",
    fault: str | None = None,
    engine_hooks: bool = False,
    microbatches: int = 1,
    splits=None,
) -> tuple[Observed, Observed]:
    """Observations of (refimpl, fused) for the same case, inputs and main_grad setup.
    ``engine_hooks``: run the post-backward hook of the engine ``how`` stands for."""
    if engine_hooks and how is None:
        raise ValueError("engine_hooks: expected a MainGrads setup (how) to take the engine from")
    ref, fused = build_pair(case, backend, fault=fault)
    batches = make_inputs(case)
    splits = list(case.splits) if splits is None else splits
    hook = engine_hook(how) if engine_hooks else None
    observations = []
    for mlp in (ref, fused):
        buffers = attach(mlp, how) if how is not None else None
        observations.append(
            run(
                mlp,
                batches,
                splits,
                main_grads=buffers,
                hook=hook,
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


def assert_outputs_match(ref: Observed, fused: Observed, dtype: torch.dtype) -> None:
    tol = tolerance(dtype)
    for name in ("y", "dx", "dprobs"):
        pairs = nonempty(zip(getattr(ref, name), getattr(fused, name)), f"microbatches of {name}")
        for r, f in pairs:
            if r is None:
                assert f is None, name
                continue
            torch.testing.assert_close(f, r, **tol, msg=lambda m, n=name: f"{n}: {m}")


def assert_bias_grads_match(ref: Observed, fused: Observed, dtype: torch.dtype) -> None:
    for name in nonempty((n for n in ref.grads if "bias" in n), "bias parameters"):
        torch.testing.assert_close(fused.grads[name], ref.grads[name], **tolerance(dtype), msg=name)


def _grouped_mm_runs_on_cpu() -> bool:
    """torch._grouped_mm exists from torch 2.8 on, its CPU fallback only in later releases."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    a = torch.zeros(8, 8, dtype=torch.bfloat16)
    b = torch.zeros(1, 8, 8, dtype=torch.bfloat16)
    try:
        torch._grouped_mm(a, b, offs=torch.tensor([8], dtype=torch.int32))
    except (NotImplementedError, RuntimeError):
        return False
    return True


def allow_grouped_mm_on_cpu(monkeypatch) -> None:
    """Run the torch-grouped-mm backend on CPU through torch._grouped_mm's CPU fallback.

    Only the device/dtype gate (the module function the constructor's check_supported calls)
    is lifted: the size alignment check, every GEMM, the activation and the main_grad
    decisions run for real."""
    if not _grouped_mm_runs_on_cpu():
        pytest.skip(f"torch {torch.__version__} has no CPU kernel for torch._grouped_mm")
    monkeypatch.setattr(grouped_mm, "check_supported", lambda dtype, device: None)


# The torch-grouped-mm backend's smallest case: bf16, hidden and ffn multiples of 8.
GMM_CASE = Case(hidden=16, ffn=8, dtype=torch.bfloat16)
