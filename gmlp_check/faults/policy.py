"""Known bugs of fused grouped MLPs, injected into the decisions of our own fused backends.

Each fault is the contract's main_grad policy (gmlp_check.fused.main_grad.MainGradPolicy) with
the one decision that a real bug corrupted made wrongly. Injecting a fault replaces a module's
``main_grad_policy``, so it applies to every backend that takes its decisions from one
(triton and torch-grouped-mm). Faults for any backend act at the contract's surface instead
(``surface.py``).

This file is buggy on purpose: gmlp-lint excludes it (pyproject.toml).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from gmlp_check.fused.grouped_linear import DeferredWgrad
from gmlp_check.fused.main_grad import MainGradPolicy


class AliasGatedOnLocalFlag(MainGradPolicy):
    def aliases(self, accumulate_into_main_grad: bool, accumulate: bool) -> bool:
        return accumulate


class BookkeepingGatedOnLocalFlag(MainGradPolicy):
    def bookkeeps(self, accumulate_into_main_grad: bool, accumulate: bool) -> bool:
        return accumulate


class DelayedWgradDropped(MainGradPolicy):
    def drain(self, pending: deque[DeferredWgrad]) -> Iterator[DeferredWgrad]:
        pending.clear()
        return iter(())


class DummyNotZeroed(MainGradPolicy):
    def dummies(self, params: list[torch.nn.Parameter]) -> list[torch.Tensor | None]:
        return [torch.empty_like(p) for p in params]


class OverwriteAccumulateSwapped(MainGradPolicy):
    def accumulates(self, param: torch.Tensor) -> bool:
        return not super().accumulates(param)


class FsdpMainGradNotFetched(MainGradPolicy):
    def fetch(self, name: str, param: torch.Tensor) -> torch.Tensor:
        if getattr(param, "main_grad", None) is None:
            param.main_grad = torch.zeros(param.numel(), dtype=torch.float32, device=param.device)
        return super().fetch(name, param)


class NoDummyGrad(MainGradPolicy):
    def dummies(self, params: list[torch.nn.Parameter]) -> list[torch.Tensor | None]:
        return [None] * len(params)


@dataclass(frozen=True)
class PolicyFault:
    name: str
    bug_class: str  # a name of gmlp_check.faults.classes.BUG_CLASSES
    description: str
    policy: type[MainGradPolicy]
    upstream: str = ""
    observables: tuple[str, ...] = ()

    kind = "policy"
    applies_doc = "every case, on a backend that takes a main_grad_policy"

    def applies(self, case) -> bool:
        return True


POLICY_FAULTS: tuple[PolicyFault, ...] = (
    PolicyFault(
        "alias-gated-on-local-flag",
        "main-grad-write-lost",
        "overwrite mode: main_grad not aliased (wgrad GEMM writes a scratch buffer never "
        "copied back) because aliasing is gated on the local accumulate flag that "
        "overwrite_main_grad switched off",
        AliasGatedOnLocalFlag,
        "TE #2936 (ops/fused/backward_grouped_mlp.py), fixed by b4aeed18",
        ("main_grad.at_hook", "main_grad.after_backward"),
    ),
    PolicyFault(
        "bookkeeping-gated-on-local-flag",
        "bookkeeping-not-set",
        "overwrite mode: grad_added_to_main_grad not set and the real wgrad returned instead "
        "of the dummy, gated on the downgraded local flag (main_grad itself still written)",
        BookkeepingGatedOnLocalFlag,
        "TE #2923 (ops/basic/grouped_linear.py), fixed by 3ded6168",
        ("grad_added_to_main_grad",),
    ),
    PolicyFault(
        "delayed-wgrad-dropped",
        "delayed-wgrad-dropped",
        "backward_dw() never writes main_grad and never fires the wgrad hooks",
        DelayedWgradDropped,
        "Megatron-LM #4311 (fused grouped MLP delayed-wgrad hooks); TE #2886",
        ("main_grad.after_backward_dw", "ddp_hook"),
    ),
    PolicyFault(
        "dummy-not-zeroed",
        "dummy-not-zeroed",
        "dummy wgrad not zero-filled under zero_out_wgrad (returns an uninitialised buffer)",
        DummyNotZeroed,
        "Megatron-LM #6565; TE #545",
        ("param.grad.zero",),
    ),
    PolicyFault(
        "overwrite-accumulate-swapped",
        "overwrite-accumulate-swapped",
        "GEMM accumulates where it must overwrite and overwrites where it must accumulate",
        OverwriteAccumulateSwapped,
        "Megatron-LM #6357",
        ("main_grad.at_hook", "main_grad.after_backward"),
    ),
    PolicyFault(
        "fsdp-main-grad-not-fetched",
        "fsdp-main-grad-not-fetched",
        "when param.main_grad is None the path does not call get_main_grad() but writes into "
        "a freshly allocated buffer it assigns to param.main_grad (the FSDP buffer never sees "
        "the gradient)",
        FsdpMainGradNotFetched,
        "Megatron-LM #5209 (moe/experts.py)",
        ("main_grad.fetched",),
    ),
    PolicyFault(
        "no-dummy-grad",
        "no-dummy-grad",
        "output-into-main-grad returns None instead of a dummy weight gradient",
        NoDummyGrad,
        "TE #2097 (ops/basic/basic_linear.py)",
        ("ddp_hook",),
    ),
)


def refusal(module: torch.nn.Module) -> str | None:
    """Why a policy fault cannot be injected into ``module``, or None if it can."""
    if not isinstance(getattr(module, "main_grad_policy", None), MainGradPolicy):
        return (
            f"{type(module).__qualname__} takes no main_grad_policy "
            f"(gmlp_check.fused.main_grad.MainGradPolicy), so policy faults cannot reach its "
            f"decisions"
        )
    return None
