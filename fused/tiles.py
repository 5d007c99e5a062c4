"""Tile sizes and launch options of the fused kernels, in one place for later tuning.

Fixed choices rather than ``triton.autotune``: the weight-gradient kernel accumulates into
main_grad in place, so benchmarking configurations would add the gradient several times; and a
timing-based choice could change the summation order, hence the rounding, from one process to
the next, which a differential checker must not see. The GPU sizes are conventional Hopper
choices (128x128 tiles, 64-deep K steps, 3 pipeline stages for 16-bit types; smaller tiles
for fp32, whose IEEE dot runs on FMA units). In the interpreter every program costs Python
overhead, so there a few larger programs beat many small ones.

fp32 dots use ``input_precision="ieee"`` on every device: TF32 would round operands to 10
mantissa bits (relative error about 1e-3), far outside the fp32 tolerance a checker applies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tiles:
    block_m: int  # rows (tokens) per program; BLOCK_T of the reduction kernels
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 2

    def launch_options(self) -> dict[str, int]:
        # The interpreter ignores these; compiled launches take them as launch options.
        return {"num_warps": self.num_warps, "num_stages": self.num_stages}


_INTERPRETER = Tiles(block_m=16, block_n=32, block_k=16)

_GPU_16BIT = {
    "row_gemm": Tiles(128, 128, 64, num_warps=8, num_stages=3),
    # Two accumulators (gate and linear halves) or an activation epilogue: narrower tiles.
    "activation_gemm": Tiles(128, 64, 64, num_warps=8, num_stages=3),
    # block_n x block_k output tile, block_m tokens per reduction step.
    "wgrad": Tiles(64, 128, 128, num_warps=8, num_stages=3),
    "bias_grad": Tiles(64, 128, 1, num_warps=4, num_stages=2),
}
_GPU_FP32 = {
    "row_gemm": Tiles(64, 64, 32, num_warps=4, num_stages=2),
    "activation_gemm": Tiles(64, 64, 32, num_warps=4, num_stages=2),
    "wgrad": Tiles(32, 64, 64, num_warps=4, num_stages=2),
    "bias_grad": Tiles(64, 128, 1, num_warps=4, num_stages=2),
}


def tiles_for(kernel: str, device: torch.device, dtype: torch.dtype) -> Tiles:
    """Tiles of ``kernel`` (row_gemm, activation_gemm, wgrad, bias_grad) on this device/dtype."""
    if device.type == "cpu":
        return _INTERPRETER
    table = _GPU_FP32 if dtype == torch.float32 else _GPU_16BIT
    return table[kernel]


def dot_precision(dtype: torch.dtype) -> str:
    """input_precision of tl.dot: IEEE fp32 for fp32 operands; 16-bit operands ignore it."""
    return "ieee" if dtype == torch.float32 else "tf32"
