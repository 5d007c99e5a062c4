"""Weight gradients by cuBLAS, one GEMM per expert, straight into the fp32 regions.

For few experts with long reductions (Mixtral-sized layers) cuBLAS's Hopper GEMM with an fp32
output and beta = 1 is faster than our Triton kernel: the fp32 read-modify-write of main_grad
overlaps the next tile's products in its warp-specialised schedule, which Triton 3.6 does not
generate on Hopper (docs/perf-notes.md). This is the call Transformer Engine issues for
``accumulate_into_main_grad``. fused.tiles.wgrad_by_cublas says when to take it; with many
small experts the launches, one per expert, cost more than the grouped kernel.

It needs the split sizes on the host (to slice the rows) and torch's ``out_dtype`` overloads
of addmm / mm, which run on CUDA only: CPU runs always take the Triton kernel.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .main_grad import WgradPlan


# The oldest torch this route ran on (the H200 sessions of 2026-12-03). Older releases may have
# the overloads yet refuse an fp32 ``self`` beside 16-bit operands in the middle of backward
# (one revision of ATen's Blas.cpp checks that self and mat2 share a dtype); they take Triton.
OLDEST_TORCH_RUN = (2, 11)


@functools.cache  # asked on every backward; the answer is the installed torch's
def has_fp32_output_gemms() -> bool:
    """Whether this torch has addmm / mm with an fp32 output from 16-bit operands, in a
    release this route ran on."""
    if torch.torch_version.TorchVersion(torch.__version__) < OLDEST_TORCH_RUN:
        return False
    return "dtype_out" in torch.ops.aten.addmm.overloads() and (
        "dtype_out" in torch.ops.aten.mm.overloads()
    )


def per_expert_wgrad(
    dy: torch.Tensor, x: torch.Tensor, sizes: Sequence[int], plan: WgradPlan
) -> None:
    """For each expert g: region_g (+)= dy_g^T @ x_g in fp32, accumulating or overwriting as
    the plan says for that expert. An expert without rows gets zeros when overwritten (the
    product of an empty reduction), and keeps its region when accumulated."""
    starts = [0]
    for rows in sizes:
        starts.append(starts[-1] + rows)
    for expert in plan.experts:
        first, end = starts[expert.expert], starts[expert.expert + 1]
        if first == end and expert.accumulate:
            continue  # adding nothing: addmm would still read and write the whole region
        dy_g, x_g = dy[first:end], x[first:end]
        if expert.accumulate:
            torch.addmm(expert.region, dy_g.t(), x_g, out_dtype=torch.float32, out=expert.region)
        else:
            torch.mm(dy_g.t(), x_g, out_dtype=torch.float32, out=expert.region)
