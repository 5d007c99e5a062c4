"""Probe (H200): the weight gradient's fp32 accumulate as a TMA reduce-add store.

Question: the accumulate phase costs more than overwrite because main_grad's tile is loaded
into registers and stored back (docs/perf-notes.md, item 3). Hopper's TMA can add a tile into
global memory asynchronously (cp.reduce.async.bulk.tensor, Triton's descriptor.atomic_add):
no load, no second fp32 tile in registers, the add happens at L2. Does that bring
wgrad-accumulate close to overwrite and to the bare bf16 grouped GEMM?

Prints one JSON line per (shape, GEMM, variant): median ms (triton.testing.do_bench), and the
max relative error against production overwrite on zeroed main_grad. Uniform splits whose
per-expert rows are a multiple of BLOCK_T (the probe has no masked tail).
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.kernels.expert_rows import expert_row_range, grouped_tile
from gmlp_check.fused.operands import experts_pow2


@triton.jit
def wgrad_reduce_kernel(
    DY_DESC,
    X_DESC,
    DEST_DESC,
    DEST_PTRS,
    stride_dest_n,
    SPLITS,
    num_experts,
    N,
    K,
    DEVICE_DESC: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    GROUP_N: tl.constexpr,
    EXPERTS_POW2: tl.constexpr,
):
    num_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    per_expert = num_n * num_k
    pid = tl.program_id(0)
    expert = pid // per_expert
    pid_n, pid_k = grouped_tile(pid % per_expert, num_n, num_k, GROUP_N)
    first_row, count = expert_row_range(SPLITS, num_experts, expert, EXPERTS_POW2)
    if count == 0:
        return
    n0 = pid_n * BLOCK_N
    k0 = pid_k * BLOCK_K
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for t0 in range(first_row, first_row + count, BLOCK_T):
        dy = DY_DESC.load([t0, n0])
        x = X_DESC.load([t0, k0])
        acc = tl.dot(dy.T, x, acc)
    if DEVICE_DESC:
        base = tl.load(DEST_PTRS + expert).to(tl.pointer_type(tl.float32))
        dest = tl.make_tensor_descriptor(
            base, shape=[N, K], strides=[stride_dest_n, 1], block_shape=[BLOCK_N, BLOCK_K]
        )
        dest.atomic_add([n0, k0], acc)
    else:
        DEST_DESC.atomic_add([expert, n0, k0], acc.reshape(1, BLOCK_N, BLOCK_K))


SHAPES = {  # name: (tokens, experts, hidden, ffn)
    "qwen3": (131072, 128, 2048, 768),
    "deepseek": (32768, 256, 7168, 2048),
    "mixtral": (32768, 8, 4096, 14336),
}
# (label, BLOCK_T, BLOCK_N, BLOCK_K, warps, stages, maxnreg, device descriptor)
VARIANTS = [
    ("R64x128x128w8s3", 64, 128, 128, 8, 3, None, False),
    ("R64x128x128w8s3r128", 64, 128, 128, 8, 3, 128, False),
    ("R64x128x128w8s4", 64, 128, 128, 8, 4, None, False),
    ("R64x128x128w4s3", 64, 128, 128, 4, 3, None, False),
    ("R64x128x256w8s3", 64, 128, 256, 8, 3, None, False),
    ("R64x256x128w8s3", 64, 256, 128, 8, 3, None, False),
    ("R128x128x128w8s3", 128, 128, 128, 8, 3, None, False),
    ("R64x128x128w8s3dev", 64, 128, 128, 8, 3, None, True),
    ("R64x128x128w8s3r128dev", 64, 128, 128, 8, 3, 128, True),
]


def _alloc(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=60)


def _variant(variant, dy, x, main_grad, expected, splits) -> dict[str, object]:
    label, bt, bn, bk, warps, stages, maxnreg, device_desc = variant
    experts, n, k = main_grad.shape
    pointers = torch.tensor(
        [main_grad[g].data_ptr() for g in range(experts)], dtype=torch.int64, device="cuda"
    )
    dy_desc = TensorDescriptor(dy, list(dy.shape), list(dy.stride()), [bt, bn])
    x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [bt, bk])
    dest_desc = TensorDescriptor(
        main_grad, list(main_grad.shape), list(main_grad.stride()), [1, bn, bk]
    )
    grid = (experts * triton.cdiv(n, bn) * triton.cdiv(k, bk),)
    options = {"num_warps": warps, "num_stages": stages}
    if maxnreg:
        options["maxnreg"] = maxnreg

    def launch():
        wgrad_reduce_kernel[grid](
            dy_desc,
            x_desc,
            dest_desc,
            pointers,
            main_grad.stride(1),
            splits,
            experts,
            n,
            k,
            DEVICE_DESC=device_desc,
            BLOCK_N=bn,
            BLOCK_K=bk,
            BLOCK_T=bt,
            GROUP_N=8,
            EXPERTS_POW2=experts_pow2(experts),
            **options,
        )

    try:
        main_grad.zero_()
        launch()
        torch.cuda.synchronize()
        scale = expected.abs().max().clamp_min(1e-30)
        err = float((main_grad - expected).abs().max() / scale)
        return {label: _bench(launch), label + "_relerr": err}
    except Exception as exc:  # a variant that does not compile or run here
        return {label: f"{type(exc).__name__}: {str(exc)[:200]}"}


def _gemm(name, gemm, tokens, experts, n, k, gen) -> dict[str, object]:
    splits = torch.full((experts,), tokens // experts, dtype=torch.int32, device="cuda")
    offs = torch.cumsum(splits, 0).to(torch.int32)
    dy = torch.randn(tokens, n, device="cuda", dtype=torch.bfloat16, generator=gen)
    x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    main_grad = torch.zeros(experts, n, k, device="cuda", dtype=torch.float32)
    expected = torch.zeros_like(main_grad)
    grouped_ops.grouped_wgrad(dy, x, splits, expected, accumulate=False)
    torch.cuda.synchronize()
    row: dict[str, object] = {"shape": name, "gemm": gemm, "long_rule": tokens >= 2048 * experts}
    row["baseline_bf16"] = _bench(lambda: torch._grouped_mm(dy.t(), x, offs=offs))
    row["prod_accumulate"] = _bench(
        lambda: grouped_ops.grouped_wgrad(dy, x, splits, main_grad, accumulate=True)
    )
    row["prod_overwrite"] = _bench(
        lambda: grouped_ops.grouped_wgrad(dy, x, splits, main_grad, accumulate=False)
    )
    for variant in VARIANTS:
        row.update(_variant(variant, dy, x, main_grad, expected, splits))
    return row


def main() -> None:
    triton.set_allocator(_alloc)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name in sys.argv[1:] or list(SHAPES):
        tokens, experts, hidden, ffn = SHAPES[name]
        # fc1: dW1 = dh^T x ([2 ffn, hidden]); fc2: dW2 = dy^T a ([hidden, ffn]).
        for gemm, n, k in (("fc1", 2 * ffn, hidden), ("fc2", hidden, ffn)):
            print(json.dumps(_gemm(name, gemm, tokens, experts, n, k, gen)), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
