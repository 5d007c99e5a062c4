"""Tile sizes and launch options of the fused kernels: a fixed table, chosen by measurement.

Fixed choices rather than ``triton.autotune``: the weight-gradient kernel accumulates into
main_grad in place, so benchmarking configurations would add the gradient several times
(autotune would need restore_value on main_grad); and a timing-based choice could change the
summation order, hence the rounding, from one process to the next, which a differential
checker must not see. The table is keyed by kernel and dtype, plus one shape rule below, so a
given shape always runs the same tiles.

16-bit GPU tiles were picked on an H200 (docs/perf-notes.md; scripts/tune_kernels.py times
every candidate on the Qwen3-, Mixtral- and DeepSeek-like shapes after checking it against
torch). What decided them:
  * TMA operand loads (``tma``) take 5-25 % less time than pointer loads: no address or mask
    arithmetic in the K loop, the registers stay with the accumulators.
  * row GEMMs (fc2 forward, fc1 dgrad): 128x256x64, 8 warps, 3 stages, one program per
    multiprocessor; within 5 % of the best candidate on every shape.
  * fc1 forward with GLU (two 128x128 accumulators sharing the x tile) and fc2 dgrad with the
    activation derivative in its epilogue: 128x128x64, 8 warps, 4 stages.
  * fc2 dgrad, 16-bit: the row GEMM storing da, then the derivative in an elementwise kernel
    (``dgrad_activation_apart``), rather than the epilogue above, whose two h loads and two
    dh stores per tile sat exposed after the products (one program per multiprocessor). A/B
    on the H200 (scripts/gpu/dgrad_apart_ab.py): Mixtral 8.5 -> 6.65 ms, Qwen3 1.30 -> 0.90,
    DeepSeek 2.57 -> 2.11.
  * weight gradient, fp32 main_grad epilogue: with short per-expert reductions (Qwen3 ~1024
    rows, DeepSeek ~128) the fp32 read-modify-write of each 128x128 output tile costs as much
    as its matrix products, and is only hidden behind another program's products on the same
    multiprocessor. Two programs fit when the reduction starts from main_grad
    (``start_from_dest``: no second fp32 tile held in the epilogue) and ptxas is capped at
    128 registers (8 bytes spill): 20-35 % less time than one program. Long reductions (Mixtral:
    4096 rows per expert, at least LONG_REDUCTION_ROWS) amortise the epilogue and prefer the
    larger 128x256 tile, one program per multiprocessor: 12-15 % less time there.
fp32 runs IEEE dots on FMA units (small tiles, pointer loads) and keeps the reduction apart
from main_grad's old value, so its result is the reference's up to summation order within
each product. In the interpreter every program costs Python overhead, so there a few larger
programs beat many small ones; it takes the GPU's code paths per dtype.

fp32 dots use ``input_precision="ieee"`` on every device: TF32 would round operands to 10
mantissa bits (relative error about 1e-3), far outside the fp32 tolerance a checker applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from .cublas_wgrad import has_fp32_output_gemms

# Weight gradients whose experts average at least this many rows take "wgrad_long".
LONG_REDUCTION_ROWS = 2048


@dataclass(frozen=True)
class Tiles:
    block_m: int  # rows (tokens) per program; BLOCK_T of the reduction kernels
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 2
    # Row tiles (weight-gradient: output-row tiles) that sweep the columns together.
    group: int = 8
    # Operand tiles through TMA descriptors where the tensors allow (16-bit types only).
    tma: bool = False
    # Weight gradient, accumulate mode: start the reduction from main_grad (kernels/wgrad.py).
    start_from_dest: bool = False
    # Weight gradient: main_grad's tile read and written through a descriptor each program
    # makes over its expert's region, where the regions allow (kernels/wgrad.py).
    tma_dest: bool = False
    # Weight gradient: main_grad's tile stored with an evict-first cache hint (pointer path),
    # so the fp32 stream, which nothing reads again in the kernel, passes L2 without pushing
    # out the operand tiles the next programs reuse (kernels/wgrad.py).
    evict_first_dest: bool = False
    # Weight gradient: experts in heavy-light pairs whose programs alternate (kernels/wgrad.py).
    paired: bool = False
    # Register cap per thread (ptxas), None for the compiler's choice.
    max_registers: int | None = None

    def launch_options(self) -> dict[str, int]:
        # The interpreter ignores these; compiled launches take them as launch options.
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.max_registers is not None:
            options["maxnreg"] = self.max_registers
        return options


_INTERPRETER_16BIT = Tiles(16, 32, 16, group=2, tma=True, start_from_dest=True)
_INTERPRETER_FP32 = Tiles(16, 32, 16, group=2)

_GPU_16BIT = {
    "row_gemm": Tiles(128, 256, 64, num_warps=8, num_stages=3, tma=True),
    # Two accumulators (gate and linear halves) or an activation epilogue.
    "activation_gemm": Tiles(128, 128, 64, num_warps=8, num_stages=4, tma=True),
    # block_n x block_k output tile, block_m tokens per reduction step.
    "wgrad": Tiles(
        64, 128, 128, num_warps=8, num_stages=3, tma=True, start_from_dest=True, max_registers=128
    ),
    "wgrad_long": Tiles(64, 128, 256, num_warps=8, num_stages=3, tma=True, start_from_dest=True),
    "bias_grad": Tiles(64, 128, 1, num_warps=4, num_stages=2),
    # Elementwise (kernels/activation_backward.py): rows x columns of da per program.
    "activation_backward": Tiles(32, 128, 1, num_warps=4, num_stages=1),
}
_GPU_FP32 = {
    "row_gemm": Tiles(64, 64, 32, num_warps=4, num_stages=2),
    "activation_gemm": Tiles(64, 64, 32, num_warps=4, num_stages=2),
    "wgrad": Tiles(32, 64, 64, num_warps=4, num_stages=2),
    "wgrad_long": Tiles(32, 64, 64, num_warps=4, num_stages=2),
    "bias_grad": Tiles(64, 128, 1, num_warps=4, num_stages=2),
    "activation_backward": Tiles(32, 64, 1, num_warps=4, num_stages=1),
}


def tiles_for(kernel: str, device: torch.device, dtype: torch.dtype) -> Tiles:
    """Tiles of ``kernel`` (row_gemm, activation_gemm, wgrad, wgrad_long, bias_grad,
    activation_backward) on this device/dtype."""
    if device.type == "cpu":
        return _INTERPRETER_FP32 if dtype == torch.float32 else _INTERPRETER_16BIT
    table = _GPU_FP32 if dtype == torch.float32 else _GPU_16BIT
    return table[kernel]


# Accumulating weight gradients take heavy-light pairs (Tiles.paired, kernels/wgrad.py) when
# experts are short (mean rows at most PAIRED_MAX_MEAN_ROWS: most programs only move their
# fp32 tile of main_grad) and the heaviest has at least PAIRED_MIN_SKEW times the mean rows
# (its long programs are compute-bound). Measured on an H100 (scripts/gpu/wgrad_tiles_sweep.py
# --table paired, docs/gpu-runs/h100-session-2026-12-06d/): DeepSeek-V3 skewed (mean 128 rows,
# heaviest 32x) fc1 20.8 -> 18.7 ms, fc2 10.4 -> 9.3 ms; uniform DeepSeek-V3 (1x) 1 % slower,
# Qwen3 (mean 1024) 0-10 % slower with either load; overwriting, mixed (-1 to +6 %). Nothing
# measured between those points: each threshold sits near the middle on a log scale.
PAIRED_MAX_MEAN_ROWS = 256
PAIRED_MIN_SKEW = 8


def wgrad_tiles(
    device: torch.device,
    dtype: torch.dtype,
    *,
    rows: int,
    experts: int,
    heaviest: int | None = None,
    accumulate: bool = False,
) -> Tiles:
    """Tiles of the weight-gradient kernel for ``rows`` rows over ``experts`` experts, the
    heaviest of which has ``heaviest`` rows (None when the split sizes are on the device
    only: no pairs then). Long per-expert reductions amortise a larger tile's single
    resident program; short ones need two programs per multiprocessor to hide the fp32
    read-modify-write."""
    mean = rows / max(experts, 1)
    tiles = tiles_for("wgrad_long" if mean >= LONG_REDUCTION_ROWS else "wgrad", device, dtype)
    if (
        accumulate
        and tiles.tma
        and heaviest is not None
        and mean <= PAIRED_MAX_MEAN_ROWS
        and heaviest >= PAIRED_MIN_SKEW * mean > 0
    ):
        return replace(tiles, paired=True)
    return tiles


def dgrad_activation_apart(dtype: torch.dtype) -> bool:
    """Whether fc2's dgrad stores da with the row GEMM and applies the activation's derivative
    in a kernel of its own (kernels/activation_backward.py) instead of the GEMM's epilogue.
    16-bit: yes, on the GPU (less time on every preset shape: the epilogue's h loads and dh
    stores were exposed) and in the interpreter alike, so that CPU tests run the GPU's path.
    fp32 keeps the epilogue (its pointer-load GEMMs are not the row GEMM's, and nothing was
    measured to gain)."""
    return dtype != torch.float32


# Mean multiply-adds per expert (n * k * rows) from which the weight gradient goes to cuBLAS
# one expert at a time (fused/cublas_wgrad.py). Measured on the H200 (bf16, uniform load,
# scripts/gpu/wgrad_cublas_ab.py): Mixtral's 8 experts (2.4e11 and 4.8e11) 8 % faster by
# cuBLAS (fc1 12.0 against 13.1 ms accumulating, 2-3 % overwriting); accumulating,
# DeepSeek-V3's 256 (3.8e9) and Qwen3's 128 (3.2e9) 1.4-3.8x slower (per-expert launches,
# host-bound). Nothing was measured in between: the threshold sits near the middle on a log
# scale. fp16 takes the route too; only bf16 was timed.
CUBLAS_WGRAD_MIN_MACS_PER_EXPERT = 2**35


def wgrad_by_cublas(
    sizes: Sequence[int], n: int, k: int, device: torch.device, dtype: torch.dtype
) -> bool:
    """Whether the [n, k] weight gradients of experts with ``sizes`` rows go to cuBLAS per
    expert instead of the grouped Triton kernel: 16-bit operands on a CUDA device whose torch
    has fp32-output GEMMs, with enough work per expert to amortise a launch each."""
    if device.type != "cuda" or dtype == torch.float32 or not sizes:
        return False
    mean_rows = sum(sizes) / len(sizes)
    if n * k * mean_rows < CUBLAS_WGRAD_MIN_MACS_PER_EXPERT:
        return False
    return has_fp32_output_gemms()


def dot_precision(dtype: torch.dtype) -> str:
    """input_precision of tl.dot: IEEE fp32 for fp32 operands; 16-bit operands ignore it."""
    return "ieee" if dtype == torch.float32 else "tf32"
