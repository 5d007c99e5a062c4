"""Known deviations: differences between a real stack and the contract that are deliberate or
harmless, and upstream bugs already written up. Each is an expected failure (a case
selection, the observables that fail there, why, and the upstream reference); the built-in
backend entries (``backends.BUILTIN``) list the ones that apply to them. A
deviation has the semantics of pytest's strict xfail: a matching case is *xfailed* when exactly
those observables fail, and fails as usual when another observable fails too or when it
passes (*xpassed*: the deviation is gone, so the table is stale). A bug keeps failing, with its
write-up in the report, and xpasses once upstream has fixed it.

The README's per-backend tables are generated from the entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .selection import compile_expression


@dataclass(frozen=True)
class Deviation:
    cases: str  # a -k expression over case ids
    observables: tuple[str, ...]  # exactly the observables that fail in those cases
    reason: str
    upstream: str  # where it is discussed or fixed upstream (a PR, an issue, a file:line)
    # "deviation": deliberate or harmless, xfails when it shows exactly as listed; "bug": an
    # upstream bug, written up but kept failing (never xfails) until upstream fixes it.
    kind: str = "deviation"

    def matches(self, case_id: str) -> bool:
        return compile_expression(self.cases)(case_id)


# Transformer Engine 2.20.2 marks a delayed weight gradient as delivered when it queues it.
TE_EARLY_GRAD_ADDED = Deviation(
    "delay=1 and not mode=off",
    ("grad_added_to_main_grad",),
    "with delay_wgrad_compute and output into main_grad, TE sets grad_added_to_main_grad and "
    "hands autograd the dummy at backward time, when it queues the weight-gradient GEMM, not "
    "when backward_dw() writes main_grad; main_grad itself is right at every check. Harmless "
    "where the real engines read the flag: megatron-core 0.19.2's DDP runs a delayed "
    "(skip_backward_post_hook) weight's hook only from backward_dw(), and under it and "
    "Megatron-FSDP 0.6.1's no_shard (--megatron real, one H200) the flag is right at each "
    "engine's hook and the synced main_grad is right; Megatron-FSDP's sharded strategies "
    "were seen at one rank only, where mfsdp-single-rank-sharded masks them",
    "TE 2.20.2: GroupedLinear._fuser_backward_split_quantize (ops/basic/grouped_linear.py, "
    "the op); _GroupedLinear._backward_grouped_tensor (module/grouped_linear.py, the module)",
)

# Where TE's BasicLinear gates its bookkeeping on the downgraded flag (the site gmlp-lint flags).
_BASIC_LINEAR_SITE = (
    "TE 2.20.2: BasicLinear.op_backward (ops/basic/basic_linear.py), the local flag re-assigned "
    "from get_accumulate_flag_in_param and the dummy gated on it (gmlp-lint GMLP002)"
)

# Transformer Engine 2.20.2's op-fuser GroupedLinear cannot run Float8BlockScaling here.
TE_OPS_BLOCK_SCALING = Deviation(
    "fp8=block",
    ("run",),
    "FP8 with Float8BlockScaling: the op fuser's GroupedLinear fails inside cuBLAS "
    "(transformer_engine/common/gemm/cublaslt_gemm.cu: CUBLAS_STATUS_NOT_SUPPORTED, 'Unable to "
    "find suitable cuBLAS GEMM algorithm') on 16-aligned splits with empty experts, on an H200 "
    "with TE's cu13 wheel; the GroupedLinear module (te-grouped-linear) runs the same recipe "
    "and splits. A crash, not a silent error; not narrowed further",
    "TE 2.20.2 ops/basic/grouped_linear.py, GroupedLinear.fuser_forward",
    "bug",
)

# Transformer Engine 2.20.2's BasicLinear cannot quantize an empty expert's input.
BASIC_LINEAR_DELAYED_SCALING = Deviation(
    "fp8=delayed",
    ("run",),
    "FP8 with DelayedScaling: BasicLinear fails on an expert that received no rows "
    "(transformer_engine/common/transpose/transpose.cu: 'input.data.dptr != nullptr' in "
    "transpose, while quantizing the empty input); Float8CurrentScaling and "
    "Float8BlockScaling run the same split (seen on an H200, not narrowed further)",
    "TE 2.20.2 ops/basic/basic_linear.py, BasicLinear._functional_forward",
    "bug",
)

# Transformer Engine's BasicLinear in overwrite mode, by dtype and zero_out_wgrad.
BASIC_LINEAR_OVERWRITE_BUGS: tuple[Deviation, ...] = (
    Deviation(
        "mode=overwrite-fsdp and zero=0 and dtype=fp32",
        ("grad_added_to_main_grad", "param.grad.alias"),
        "BasicLinear gates its bookkeeping on the local accumulate flag that "
        "overwrite_main_grad switched off (TE #2936's class): in overwrite mode it writes "
        "main_grad right but sets no grad_added_to_main_grad and returns main_grad itself "
        "as the weight's .grad, which in fp32 is the main_grad tensor; a DDP-style hook "
        "would add it again (2W)",
        _BASIC_LINEAR_SITE,
        "bug",
    ),
    Deviation(
        "mode=overwrite-fsdp and zero=1",
        ("grad_added_to_main_grad", "param.grad.zero"),
        "the same bug: the gradient returned as .grad is the real one, not a zeroed dummy, "
        "although zero_out_wgrad is set",
        _BASIC_LINEAR_SITE,
        "bug",
    ),
    Deviation(
        "mode=overwrite-fsdp",
        ("grad_added_to_main_grad",),
        "the same bug in 16-bit: grad_added_to_main_grad stays False and .grad is the real "
        "gradient (a copy in the weight dtype) instead of a dummy",
        _BASIC_LINEAR_SITE,
        "bug",
    ),
)


def expected_for(deviations: Sequence[Deviation], case_id: str) -> Deviation | None:
    """The deviation listed for a case, if any (the first that matches)."""
    return next((d for d in deviations if d.matches(case_id)), None)


def markdown_table(spec: str, rows: Sequence[Deviation]) -> str:
    if not rows:
        return f"No known deviations for `{spec}`."
    lines = [
        "| cases (-k) | failing observables | kind | reason | upstream |",
        "|---|---|---|---|---|",
    ]
    for d in rows:
        observables = ", ".join(f"`{o}`" for o in d.observables)
        lines.append(f"| `{d.cases}` | {observables} | {d.kind} | {d.reason} | {d.upstream} |")
    return "\n".join(lines)
