"""Run one side (reference or fused) of a case and record everything the contract speaks about.

Both sides of a case get the same weights, inputs, output gradients and main_grad contents
(``make_inputs``/``make_arena``), each in its own buffers. ``observe`` then drives the module
the way Megatron does: parameters set up as DDP or FSDP parameters, the emulated DDP
post-backward hook installed on every parameter, k microbatches of forward/backward/
backward_dw without a reset in between, and records

* the forward output, the input and probs gradients of every microbatch;
* what every DDP hook call found: ``param.grad`` (before the hook clears it), main_grad,
  ``grad_added_to_main_grad`` and whether main_grad was fetched;
* main_grad and the bookkeeping when ``backward()`` returns and when ``backward_dw()`` returns;
* any exception, with the phase it happened in; and the guard bands at the end.
"""

from __future__ import annotations

import contextlib
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from .buffers import Arena, memory_span
from .kinks import KinkSlack, kink_slack
from .megatron import MissingGradError, install_ddp_hooks, setup_ddp_param, setup_fsdp_param
from .scenarios import Case, Sizes, split_sizes


@contextlib.contextmanager
def uninitialized_memory_as_nan() -> Iterator[None]:
    """Make every torch.empty allocation NaN-filled for the duration, then restore.

    A dummy gradient from ``torch.empty`` holds whatever was in memory; under zero_out_wgrad
    the DDP hook adds it into main_grad, and stale memory is often zero, which would hide the
    bug (Megatron #6565). With deterministic algorithms on and fill_uninitialized_memory set,
    PyTorch fills new float tensors with NaN, so a dummy that was not zeroed poisons main_grad
    visibly and deterministically. warn_only keeps ops without a deterministic implementation
    running (with a warning, which is silenced here)."""
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deterministic.*")
            yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def case_seed(seed: int, case: Case) -> int:
    """A seed per case and global seed, stable across runs and independent of matrix order,
    so a case rerun alone sees exactly the data it saw in the full matrix."""
    return zlib.crc32(f"{seed}:{case.id}".encode())


@dataclass
class Inputs:
    state: dict[str, torch.Tensor]  # weights and biases, in the case dtype
    xs: list[torch.Tensor]
    probs: list[torch.Tensor | None]
    dys: list[torch.Tensor]
    splits: list[list[int]]

    def upcast(self) -> Inputs:
        """The same values in fp32, for the reference."""

        def up(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(torch.float32)

        return Inputs(
            {k: v.to(torch.float32) for k, v in self.state.items()},
            [up(x) for x in self.xs],
            [up(p) for p in self.probs],
            [up(d) for d in self.dys],
            self.splits,
        )


def input_scale(case: Case) -> float:
    """Standard deviation of x. Clamped QGeGLU gets inputs large enough to reach its clamp
    (|h| > 7) in fp32. In half precision an h within an ulp of the limit may land on either
    side of the clamp in the two implementations and flip the derivative, so there the inputs
    stay small and the clamp is left to fp32."""
    if case.activation == "clamped_qgeglu" and case.dtype == "fp32":
        return 8.0
    return 1.0


def make_inputs(
    case: Case,
    sizes: Sizes,
    shapes: dict[str, torch.Size],
    device: torch.device,
    generator: torch.Generator,
) -> Inputs:
    dtype = case.torch_dtype
    state = {}
    for name, shape in shapes.items():
        fan_in = shape[-1] if "weight" in name.rsplit(".", 1)[-1] else sizes.hidden
        bound = 1.0 / fan_in**0.5
        values = (torch.rand(shape, generator=generator) * 2 - 1) * bound
        state[name] = values.to(dtype=dtype, device=device)
    xs, probs, dys, splits = [], [], [], []
    uses_probs = case.activation == "scaled_swiglu"
    for mb in range(case.microbatches):
        sizes_mb = split_sizes(case.splits, sizes.experts, sizes.tokens, mb)
        t = sum(sizes_mb)
        x = torch.randn(t, sizes.hidden, generator=generator) * input_scale(case)
        dy = torch.randn(t, sizes.hidden, generator=generator)
        p = torch.rand(t, generator=generator) * 0.9 + 0.1 if uses_probs else None
        xs.append(x.to(dtype=dtype, device=device))
        dys.append(dy.to(dtype=dtype, device=device))
        probs.append(None if p is None else p.to(dtype=dtype, device=device))
        splits.append(sizes_mb)
    return Inputs(state, xs, probs, dys, splits)


def make_arena(
    case: Case, params: dict[str, torch.Tensor], device: torch.device, generator: torch.Generator
) -> Arena:
    """main_grad for every parameter: NaN sentinels where the contract says each element must
    be written (weights in overwrite mode), random 'before' values where it must accumulate or
    stay untouched (weights otherwise, and biases, whose .grad the DDP hook adds)."""
    arena = Arena({name: p.numel() for name, p in params.items()}, device)
    for name in params:
        is_weight = name.rsplit(".", 1)[-1].startswith("weight")
        arena.fill(name, "nan" if is_weight and case.mode_spec.overwrite else "random", generator)
    return arena


@dataclass
class SideError:
    phase: str
    microbatch: int
    kind: str  # the exception's class name
    message: str
    missing_grad: bool  # the emulated DDP hook found .grad None (TE #2097)

    def describe(self) -> str:
        where = self.phase if self.phase == "construct" else f"{self.phase} of mb {self.microbatch}"
        return f"{self.kind} in {where}: {self.message}"


@dataclass
class GradSeen:
    """``param.grad`` as the DDP hook found it."""

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
    arena_span: tuple[int, int] = (0, 0)  # the main_grad allocation's [start, end) addresses

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
    mode = case.mode_spec
    for name, p in params.items():
        if mode.fsdp:
            setup_fsdp_param(
                p,
                arena.region(name),
                overwrite_main_grad=mode.overwrite,
                zero_out_wgrad=case.zero_out,
            )
        else:
            setup_ddp_param(p, arena.region(name), zero_out_wgrad=case.zero_out)


def observe(module: nn.Module, case: Case, inputs: Inputs, arena: Arena) -> Observations:
    """Drive one side through the case's microbatches and record what it did."""
    params = dict(module.named_parameters())
    names = {id(p): n for n, p in params.items()}
    obs = Observations(
        before={n: arena.region(n).clone() for n in params},
        param_shapes={n: p.shape for n, p in params.items()},
        param_dtypes={n: p.dtype for n, p in params.items()},
        arena_span=memory_span(arena.storage),
    )
    attach_main_grads(case, params, arena)
    where = {"mb": 0, "phase": "forward"}

    def on_hook(p: torch.Tensor) -> None:
        name = names[id(p)]
        grad = p.grad
        if grad is None:
            seen = GradSeen(False)
        else:
            seen = GradSeen(
                True,
                tuple(grad.shape),
                grad.dtype,
                grad.detach().clone(),
                arena.holds(grad),
            )
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

    # The case says whether weight gradients are delayed, so a module without TE's
    # delay_wgrad_compute attribute still gets its weights' hooks from backward_dw().
    install_ddp_hooks(module, params.values(), on_hook=on_hook, delay_wgrad_compute=case.delay)
    try:
        for mb in range(case.microbatches):
            where.update(mb=mb, phase="forward")
            x = inputs.xs[mb].detach().clone().requires_grad_(True)
            probs = inputs.probs[mb]
            if probs is not None:
                probs = probs.detach().clone().requires_grad_(True)
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
    except Exception as exc:  # any failure of the side under test is an observation
        obs.error = SideError(
            where["phase"],
            where["mb"] + 1,
            type(exc).__name__,
            str(exc).strip().splitlines()[0] if str(exc).strip() else "",
            isinstance(exc, MissingGradError),
        )
    obs.guard_violations = arena.guard_violations()
    return obs


Factory = Callable[..., nn.Module]


@dataclass
class CaseRun:
    reference: Observations
    fused: Observations | None
    construct_error: SideError | None
    slack: KinkSlack | None = None  # extra tolerance where a kink of the activation is near


def run_both(case: Case, sizes: Sizes, device: torch.device, factory: Factory) -> CaseRun:
    """Build both sides with identical data and observe them (inside the NaN-fill context)."""
    from refimpl import GroupedMLP

    generator = torch.Generator().manual_seed(case_seed(sizes.seed, case))
    kwargs = dict(case.module_kwargs(), device=device)
    dims = {"num_experts": sizes.experts, "hidden": sizes.hidden, "ffn": sizes.ffn}
    reference = GroupedMLP(**dims, dtype=torch.float32, **kwargs)
    shapes = {n: p.shape for n, p in reference.named_parameters()}
    inputs = make_inputs(case, sizes, shapes, device, generator)
    template = make_arena(case, dict(reference.named_parameters()), device, generator)
    try:
        fused = factory(**dims, dtype=case.torch_dtype, **kwargs)
        # Both ways, so each side holds exactly the values of the other's dtype.
        fused.load_state_dict(inputs.state)
        reference.load_state_dict({k: v.to(torch.float32) for k, v in fused.state_dict().items()})
    except Exception as exc:
        error = SideError("construct", 0, type(exc).__name__, str(exc).strip(), False)
        return CaseRun(observe(reference, case, inputs.upcast(), template.clone()), None, error)
    upcast = inputs.upcast()
    slack = kink_slack(
        case.activation, case.torch_dtype, reference, upcast.xs, upcast.dys, upcast.splits
    )
    ref_obs = observe(reference, case, upcast, template.clone())
    fused_obs = observe(fused, case, inputs, template)
    return CaseRun(ref_obs, fused_obs, None, slack)
