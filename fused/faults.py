"""Known bugs of fused grouped MLPs, injectable into the triton backend to prove a checker.

Each fault is an alternative branch inside the fused code path, at the exact decision the real
bug corrupted: the main_grad bookkeeping (fused/main_grad.py), the weight-gradient kernel's
launch flags and group offsets (fused/kernels/wgrad.py, fused/mlp.py) or the delayed-wgrad
runner (fused/mlp_base.py). A module carries no fault unless :func:`inject` set one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Fault:
    name: str
    bug_class: str  # the "bug" cell of CONTRACT.md's "Known bug classes" table
    description: str


ALIAS_GATED_ON_LOCAL_FLAG = "alias-gated-on-local-flag"
BOOKKEEPING_GATED_ON_LOCAL_FLAG = "bookkeeping-gated-on-local-flag"
DELAYED_WGRAD_DROPPED = "delayed-wgrad-dropped"
DUMMY_NOT_ZEROED = "dummy-not-zeroed"
OVERWRITE_ACCUMULATE_SWAPPED = "overwrite-accumulate-swapped"
FSDP_MAIN_GRAD_NOT_FETCHED = "fsdp-main-grad-not-fetched"
EMPTY_EXPERT_SKIPPED = "empty-expert-skipped"
GROUP_OFFSETS_SHIFTED = "group-offsets-shifted"
NO_DUMMY_GRAD = "no-dummy-grad"

FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            ALIAS_GATED_ON_LOCAL_FLAG,
            "aliasing gated on the downgraded local flag",
            "overwrite mode: main_grad not aliased (wgrad GEMM writes a scratch buffer never "
            "copied back) because aliasing is gated on the local accumulate flag that "
            "overwrite_main_grad switched off (TE #2936)",
        ),
        Fault(
            BOOKKEEPING_GATED_ON_LOCAL_FLAG,
            "bookkeeping gated on the downgraded local flag",
            "overwrite mode: grad_added_to_main_grad not set and the real wgrad returned instead "
            "of the dummy, gated on the downgraded local flag (main_grad itself still written)",
        ),
        Fault(
            DELAYED_WGRAD_DROPPED,
            "delayed wgrad dropped",
            "backward_dw() never writes main_grad and never fires the wgrad hooks",
        ),
        Fault(
            DUMMY_NOT_ZEROED,
            "dummy not zeroed under zero_out_wgrad",
            "dummy wgrad not zero-filled under zero_out_wgrad (returns an uninitialised/reused "
            "buffer)",
        ),
        Fault(
            OVERWRITE_ACCUMULATE_SWAPPED,
            "overwrite where accumulate was required (or the reverse)",
            "GEMM accumulates where it must overwrite and overwrites where it must accumulate",
        ),
        Fault(
            FSDP_MAIN_GRAD_NOT_FETCHED,
            "main_grad not fetched from FSDP",
            "when param.main_grad is None the path does not call get_main_grad() but writes into "
            "a freshly allocated buffer it assigns to param.main_grad (the FSDP buffer never sees "
            "the gradient)",
        ),
        Fault(
            EMPTY_EXPERT_SKIPPED,
            "empty expert skipped in overwrite mode",
            "in overwrite mode experts with 0 tokens are skipped, their main_grad region keeps "
            "stale values",
        ),
        Fault(
            GROUP_OFFSETS_SHIFTED,
            "wrong group offsets",
            "the wgrad kernel's group row offsets come from an inclusive instead of exclusive "
            "scan, so expert g's gradient is computed from expert g+1's rows (a neighbour's "
            "gradient lands in its region)",
        ),
        Fault(
            NO_DUMMY_GRAD,
            "fused op gets no dummy grad",
            "output-into-main-grad returns None instead of a dummy weight gradient (TE #2097)",
        ),
    )
}


def inject(module: torch.nn.Module, name: str) -> None:
    """Make the triton backend ``module`` (a fused.GroupedMLP) behave with fault ``name``."""
    from .mlp import GroupedMLP

    if name not in FAULTS:
        raise ValueError(f"fault: expected one of {', '.join(FAULTS)}, got {name!r}")
    if not isinstance(module, GroupedMLP):
        raise TypeError(
            f"module: faults can only be injected into the triton backend (fused.GroupedMLP), "
            f"got {type(module).__module__}.{type(module).__qualname__}"
        )
    module.fault = name
