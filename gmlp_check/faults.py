"""Known bugs of fused grouped MLPs, injectable into a fused backend to prove the checker.

Each fault is the contract's main_grad policy (gmlp_check.fused.main_grad.MainGradPolicy) with
the one decision that a real bug corrupted made wrongly. Injecting a fault replaces a module's
``main_grad_policy``, so it applies to every backend that takes its decisions from one
(triton and torch-grouped-mm). Faults in the weight-gradient kernel itself set the kernel's
compile-time switches; they apply to backends whose kernel honours them (triton).

This file is buggy on purpose: gmlp-lint excludes it (pyproject.toml).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch

from gmlp_check.fused.grouped_linear import DeferredWgrad
from gmlp_check.fused.main_grad import MainGradPolicy


class AliasGatedOnLocalFlag(MainGradPolicy):
    def aliases(self, into_main_grad: bool, accumulate: bool) -> bool:
        return accumulate


class BookkeepingGatedOnLocalFlag(MainGradPolicy):
    def bookkeeps(self, into_main_grad: bool, accumulate: bool) -> bool:
        return accumulate


class DelayedWgradDropped(MainGradPolicy):
    def drain(self, pending: deque[DeferredWgrad]) -> Iterator[DeferredWgrad]:
        pending.clear()
        return iter(())


class DummyNotZeroed(MainGradPolicy):
    def dummy(self, param: torch.Tensor) -> torch.Tensor | None:
        return torch.empty_like(param)


class OverwriteAccumulateSwapped(MainGradPolicy):
    def accumulates(self, param: torch.Tensor) -> bool:
        return not super().accumulates(param)


class FsdpMainGradNotFetched(MainGradPolicy):
    def fetch(self, name: str, param: torch.Tensor) -> torch.Tensor:
        if getattr(param, "main_grad", None) is None:
            param.main_grad = torch.zeros(param.numel(), dtype=torch.float32, device=param.device)
        return super().fetch(name, param)


class NoDummyGrad(MainGradPolicy):
    def dummy(self, param: torch.Tensor) -> torch.Tensor | None:
        return None


class EmptyExpertSkipped(MainGradPolicy):
    kernel_switches: Mapping[str, bool] = MappingProxyType({"skip_empty_experts": True})


class GroupOffsetsShifted(MainGradPolicy):
    kernel_switches: Mapping[str, bool] = MappingProxyType({"inclusive_offsets": True})


@dataclass(frozen=True)
class Fault:
    name: str
    bug_class: str  # the "bug" cell of CONTRACT.md's "Known bug classes" table
    description: str
    policy: type[MainGradPolicy]

    @property
    def in_kernel(self) -> bool:
        """Whether the fault acts through the weight-gradient kernel's switches."""
        return bool(self.policy.kernel_switches)


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            "alias-gated-on-local-flag",
            "aliasing gated on the downgraded local flag",
            "overwrite mode: main_grad not aliased (wgrad GEMM writes a scratch buffer never "
            "copied back) because aliasing is gated on the local accumulate flag that "
            "overwrite_main_grad switched off (TE #2936)",
            AliasGatedOnLocalFlag,
        ),
        Fault(
            "bookkeeping-gated-on-local-flag",
            "bookkeeping gated on the downgraded local flag",
            "overwrite mode: grad_added_to_main_grad not set and the real wgrad returned instead "
            "of the dummy, gated on the downgraded local flag (main_grad itself still written)",
            BookkeepingGatedOnLocalFlag,
        ),
        Fault(
            "delayed-wgrad-dropped",
            "delayed wgrad dropped",
            "backward_dw() never writes main_grad and never fires the wgrad hooks",
            DelayedWgradDropped,
        ),
        Fault(
            "dummy-not-zeroed",
            "dummy not zeroed under zero_out_wgrad",
            "dummy wgrad not zero-filled under zero_out_wgrad (returns an uninitialised buffer)",
            DummyNotZeroed,
        ),
        Fault(
            "overwrite-accumulate-swapped",
            "overwrite where accumulate was required (or the reverse)",
            "GEMM accumulates where it must overwrite and overwrites where it must accumulate",
            OverwriteAccumulateSwapped,
        ),
        Fault(
            "fsdp-main-grad-not-fetched",
            "main_grad not fetched from FSDP",
            "when param.main_grad is None the path does not call get_main_grad() but writes into "
            "a freshly allocated buffer it assigns to param.main_grad (the FSDP buffer never sees "
            "the gradient)",
            FsdpMainGradNotFetched,
        ),
        Fault(
            "empty-expert-skipped",
            "empty expert skipped in overwrite mode",
            "in overwrite mode experts with 0 tokens are skipped, their main_grad region keeps "
            "stale values",
            EmptyExpertSkipped,
        ),
        Fault(
            "group-offsets-shifted",
            "wrong group offsets",
            "the wgrad kernel's group row offsets come from an inclusive instead of exclusive "
            "scan, so expert g's gradient is computed from expert g+1's rows (a neighbour's "
            "gradient lands in its region)",
            GroupOffsetsShifted,
        ),
        Fault(
            "no-dummy-grad",
            "fused op gets no dummy grad",
            "output-into-main-grad returns None instead of a dummy weight gradient (TE #2097)",
            NoDummyGrad,
        ),
    )
}


class FaultError(ValueError):
    """An unknown fault, or a module that cannot take it."""


def get(name: str) -> Fault:
    try:
        return FAULTS[name]
    except KeyError:
        raise FaultError(f"--inject: expected one of {', '.join(FAULTS)}, got {name!r}") from None


def refusal(fault: Fault, module: torch.nn.Module) -> str | None:
    """Why ``fault`` cannot be injected into ``module``, or None if it can."""
    if not isinstance(getattr(module, "main_grad_policy", None), MainGradPolicy):
        return (
            f"{type(module).__qualname__} takes no main_grad_policy "
            f"(gmlp_check.fused.main_grad.MainGradPolicy), so faults cannot reach its decisions"
        )
    if fault.in_kernel and not getattr(module, "honours_kernel_switches", False):
        return (
            f"{fault.name} acts in the weight-gradient kernel, whose switches "
            f"{type(module).__qualname__} does not honour"
        )
    return None


def inject(module: torch.nn.Module, fault: Fault) -> torch.nn.Module:
    """Make ``module`` take its main_grad decisions from ``fault``'s policy."""
    why = refusal(fault, module)
    if why is not None:
        raise FaultError(f"--inject {fault.name}: {why}")
    module.main_grad_policy = fault.policy()
    return module
