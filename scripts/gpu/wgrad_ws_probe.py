"""Probe (H200): does Triton's automatic warp specialisation on Hopper bring the fp32
weight gradient into main_grad closer to the bare bf16 grouped GEMM (issue #21)?

Earlier probes (docs/perf-notes.md, 2026-12-02 third session) tried ``warp_specialize=True``
with 8 warps and found it compiled to the same code as without: Triton 3.6 applies its Hopper
warp specialisation only to 4-warp kernels (its own tests assert no ``ttg.warp_specialize``
for 8 warps on Hopper). With 4 warps the same loop becomes a producer warpgroup issuing the
TMA loads and two consumer warpgroups, each reducing and storing half of the tile (checked by
compiling for sm_90 on a machine without a GPU: ``--compile-only``). The producer fetches the
next tile's operands while the consumers add into main_grad, which the one-program-per-tile
kernel in production cannot do.

The kernel here, ``ws_wgrad``: dest_g (+)= dy_g^T @ x_g for every expert, fp32 into one
[G * N, K] tensor (single grouped weights), persistent (``progs`` programs per SM walk the
tiles expert-major) or one program per tile. ``clip``: x comes through a descriptor the
program makes over its expert's rows, so TMA fills the rows past the expert's end with zeros
(what production does with a masked pointer step for an expert's last partial block); without
it the probe runs uniform splits whose sizes are multiples of BLOCK_T only.

Per preset (uniform load) and GEMM: the bare bf16 ``torch._grouped_mm``, production's
accumulate and overwrite (fused.grouped_ops.grouped_wgrad), and every variant in both modes,
each checked against production first (overwrite into NaN-poisoned memory; accumulate onto
production's result must give twice it), then timed with triton.testing.do_bench (median ms,
the better of two passes). ``clip`` variants are also checked on ragged splits (an empty
expert, sizes off the block) against fp32 torch. One JSON line per row on stdout.

GPU:  python scripts/gpu/wgrad_ws_probe.py [--shapes qwen3,deepseek,mixtral] [--budget S]
CPU:  python scripts/gpu/wgrad_ws_probe.py --compile-only   (Triton 3.6+: sm_90 compile of
      every variant, reports warp specialisation and shared memory)
      TRITON_INTERPRET=1 python scripts/gpu/wgrad_ws_probe.py --interpret  (fp16, tiny)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def ws_wgrad(
    DY_DESC, X_DESC, X, stride_x, DEST, DEST_DESC, stride_dest, OFFS, num_tiles, N, K,
    ACCUMULATE: tl.constexpr, CLIP: tl.constexpr, TMA_DEST: tl.constexpr,
    DEST_BEFORE: tl.constexpr, NUM_PROGS: tl.constexpr,
    WS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_T: tl.constexpr, GROUP_N: tl.constexpr,
):  # fmt: skip
    """dest[g * N + n, k] (+)= sum over expert g's rows t of dy[t, n] * x[t, k].
    OFFS: G + 1 row offsets (int32). NUM_PROGS 0: one program per tile."""
    num_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    per_expert = num_n * num_k
    step = num_tiles if NUM_PROGS == 0 else NUM_PROGS
    for tile in tl.range(tl.program_id(0), num_tiles, step, warp_specialize=WS):
        expert = tile // per_expert
        local = tile % per_expert
        per_group = GROUP_N * num_k
        first_n = (local // per_group) * GROUP_N
        group_n = tl.minimum(num_n - first_n, GROUP_N)
        pid_n = first_n + (local % per_group) % group_n
        pid_k = (local % per_group) // group_n
        first = tl.load(OFFS + expert)
        end = tl.load(OFFS + expert + 1)
        n0 = pid_n * BLOCK_N
        k0 = pid_k * BLOCK_K
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        if ACCUMULATE and DEST_BEFORE:
            prev = _halves_load(DEST_DESC, expert * N + n0, k0, BLOCK_N, BLOCK_K)
        if CLIP:
            x_rows = tl.make_tensor_descriptor(
                X + first.to(tl.int64) * stride_x,
                shape=[end - first, K],
                strides=[stride_x, 1],
                block_shape=[BLOCK_T, BLOCK_K],
            )
            for t in range(0, end - first, BLOCK_T):
                dy = DY_DESC.load([first + t, n0])
                x = x_rows.load([t, k0])
                acc = tl.dot(dy.T, x, acc)
        else:
            for t0 in range(first, end, BLOCK_T):
                dy = DY_DESC.load([t0, n0])
                x = X_DESC.load([t0, k0])
                acc = tl.dot(dy.T, x, acc)
        if TMA_DEST:
            if ACCUMULATE:
                if DEST_BEFORE:
                    acc += prev
                else:
                    acc += _halves_load(DEST_DESC, expert * N + n0, k0, BLOCK_N, BLOCK_K)
            # Two [BLOCK_N / 2, BLOCK_K] halves: the warp specialisation gives each of its two
            # consumer warpgroups half of the tile's rows, and a descriptor's block must match
            # the tile it stores.
            top, bottom = tl.split(
                tl.permute(tl.reshape(acc, (2, BLOCK_N // 2, BLOCK_K)), (1, 2, 0))
            )
            DEST_DESC.store([expert * N + n0, k0], top)
            DEST_DESC.store([expert * N + n0 + BLOCK_N // 2, k0], bottom)
        else:
            rows = (expert * N + n0 + tl.arange(0, BLOCK_N)).to(tl.int64)
            ks = k0 + tl.arange(0, BLOCK_K)
            ptrs = DEST + rows[:, None] * stride_dest + ks[None, :]
            if ACCUMULATE:
                acc += tl.load(ptrs)
            tl.store(ptrs, acc)


@triton.jit
def _halves_load(DEST_DESC, row0, k0, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The [BLOCK_N, BLOCK_K] fp32 tile at (row0, k0) through a descriptor of half its rows."""
    top = DEST_DESC.load([row0, k0])
    bottom = DEST_DESC.load([row0 + BLOCK_N // 2, k0])
    return tl.reshape(tl.permute(tl.join(top, bottom), (2, 0, 1)), (BLOCK_N, BLOCK_K))


# name: tile (BLOCK_N x BLOCK_K), BLOCK_T, warps, stages, programs per SM (0: one per tile),
# warp specialisation, clip. The first is the control: the same schedule, 8 warps, no WS.
BASE = dict(
    bn=128, bk=128, bt=64, warps=4, stages=3, progs=1, ws=True, clip=False, tma=False, before=False
)
VARIANTS = {
    "p1_w8_nows": dict(BASE, warps=8, ws=False),
    "p1_ws": dict(BASE),
    "p1_ws_s4": dict(BASE, stages=4),
    "p1_ws_t128_s2": dict(BASE, bt=128, stages=2),
    "p1_ws_t32_s4": dict(BASE, bt=32, stages=4),
    "p1_ws_t32_s6": dict(BASE, bt=32, stages=6),
    "p1_ws_128x64": dict(BASE, bk=64),
    "p1_ws_128x64_s5": dict(BASE, bk=64, stages=5),
    "np_ws": dict(BASE, progs=0),
    "p1_ws_clip": dict(BASE, clip=True),
    "p1_ws_s4_clip": dict(BASE, stages=4, clip=True),
}


# main_grad's tile through a descriptor (loaded after or, ``before``, ahead of the reduction, so
# that the producer could fetch it; stored by TMA): Triton 3.6's Hopper warp specialisation
# fails to compile these (its data partition meets the halves' reshape / join: "UNREACHABLE
# ... WSDataPartition.cpp"; a whole-tile descriptor: "descriptor block and tensor types must
# match"). Only ``--compile-only`` tries them, to see whether a later Triton does.
UNSUPPORTED = {
    "p1_ws_tma": dict(BASE, tma=True),
    "p1_ws_tma_before_t32_s4": dict(BASE, tma=True, before=True, bt=32, stages=4),
}


def _allocate(size: int, alignment: int, stream) -> torch.Tensor:
    """Global scratch for descriptors made on the device (clip variants)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def launch(p: dict, dy, x, dest, offs, accumulate: bool, num_sms: int):
    """One launch of variant ``p`` over [G, N, K] ``dest``; offs: G + 1 int32 row offsets."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    experts, n, k = dest.shape
    view = dest.view(experts * n, k)
    dy_desc = TensorDescriptor(dy, list(dy.shape), list(dy.stride()), [p["bt"], p["bn"]])
    x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [p["bt"], p["bk"]])
    half = [p["bn"] // 2, p["bk"]]
    dest_desc = TensorDescriptor(view, list(view.shape), list(view.stride()), half)
    num_tiles = experts * triton.cdiv(n, p["bn"]) * triton.cdiv(k, p["bk"])
    progs = num_tiles if p["progs"] == 0 else min(num_tiles, p["progs"] * num_sms)
    return ws_wgrad[(progs,)](
        dy_desc, x_desc, x, x.stride(0), view, dest_desc, view.stride(0), offs, num_tiles, n, k,
        ACCUMULATE=accumulate, CLIP=p["clip"], TMA_DEST=p["tma"], DEST_BEFORE=p["before"],
        NUM_PROGS=0 if p["progs"] == 0 else progs,
        WS=p["ws"], BLOCK_N=p["bn"], BLOCK_K=p["bk"], BLOCK_T=p["bt"], GROUP_N=8,
        num_warps=p["warps"], num_stages=p["stages"],
    )  # fmt: skip


def reference(dy, x, sizes, start) -> torch.Tensor:
    """start[g] + dy_g^T @ x_g in fp32, expert by expert."""
    out = start.clone()
    row = 0
    for g, rows in enumerate(sizes):
        out[g] += dy[row : row + rows].float().t() @ x[row : row + rows].float()
        row += rows
    return out


def relative_error(got, expected, factor: float) -> float:
    """max |got - factor * expected| / max |factor * expected|, a few experts at a time
    (DeepSeek-V3's fc1 main_grad alone is 30 GB; NaN anywhere gives NaN)."""
    err = scale = 0.0
    for lo in range(0, got.shape[0], 16):
        want = factor * expected[lo : lo + 16]
        err = max(err, float((got[lo : lo + 16] - want).abs().max()))
        scale = max(scale, float(want.abs().max()))
    return err / scale if err == err else float("nan")


def offsets(sizes, device) -> torch.Tensor:
    ends = [0]
    for rows in sizes:
        ends.append(ends[-1] + rows)
    return torch.tensor(ends, dtype=torch.int32, device=device)


def interpreted_check(scale: int = 4) -> list[dict]:
    """Every variant under Triton's interpreter (fp16, tiles a ``scale``-th of the GPU's, two
    "SMs" so that persistent programs loop over several tiles) against fp32 torch in both
    modes: the ``clip`` variants on ragged splits (an empty expert, sizes off the block, rows
    past the last expert), the others on equal splits of whole blocks, as the GPU runs them."""
    rows = []
    for label, p in VARIANTS.items():
        p = dict(p, bn=p["bn"] // scale, bk=p["bk"] // scale, bt=p["bt"] // scale)
        block = p["bt"]
        sizes = [3 * block + 5, 0, block - 1, 2 * block] if p["clip"] else [2 * block] * 3
        rows.extend(_checked(label, p, sizes, "cpu", torch.float16, num_sms=2))
    return rows


def ragged_check() -> list[dict]:
    """The ``clip`` variants on ragged splits on the GPU (bf16), against fp32 torch."""
    rows = []
    for label, p in VARIANTS.items():
        if p["clip"]:
            sizes = [197, 0, 63, 128]
            rows.extend(_checked(label, p, sizes, "cuda", torch.bfloat16, num_sms=2))
    return rows


def _checked(label, p, sizes, device, dtype, num_sms) -> list[dict]:
    n, k = 3 * p["bn"], 4 * p["bk"]
    gen = torch.Generator(device=device).manual_seed(1)
    dy = torch.randn(sum(sizes) + 7, n, generator=gen, device=device).to(dtype)  # rows past
    x = torch.randn(sum(sizes) + 7, k, generator=gen, device=device).to(dtype)  # the last
    start = torch.randn(len(sizes), n, k, generator=gen, device=device)
    offs = offsets(sizes, device)
    rows = []
    for accumulate in (True, False):
        dest = start.clone() if accumulate else torch.full_like(start, float("nan"))
        launch(p, dy, x, dest, offs, accumulate, num_sms)
        want = reference(dy, x, sizes, start if accumulate else torch.zeros_like(start))
        err = float((dest - want).abs().max() / want.abs().max())
        rows.append({"checked": label, "sizes": sizes, "accumulate": accumulate, "relerr": err})
    return rows


def compile_only() -> None:
    """Compile every variant for sm_90 here (no GPU) and report what Triton made of it."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile

    for label, p in {**VARIANTS, **UNSUPPORTED}.items():
        for accumulate in (True, False):
            sig = {
                "DY_DESC": f"tensordesc<bf16[{p['bt']},{p['bn']}]>",
                "X_DESC": f"tensordesc<bf16[{p['bt']},{p['bk']}]>",
                "X": "*bf16", "stride_x": "i32", "DEST": "*fp32",
                "DEST_DESC": f"tensordesc<fp32[{p['bn'] // 2},{p['bk']}]>", "stride_dest": "i32",
                "OFFS": "*i32", "num_tiles": "i32", "N": "i32", "K": "i32",
            }  # fmt: skip
            const = dict(
                ACCUMULATE=accumulate, CLIP=p["clip"], TMA_DEST=p["tma"],
                DEST_BEFORE=p["before"], WS=p["ws"], BLOCK_N=p["bn"],
                BLOCK_K=p["bk"], BLOCK_T=p["bt"], GROUP_N=8,
                NUM_PROGS=0 if p["progs"] == 0 else 132 * p["progs"],
            )  # fmt: skip
            sig.update({name: "constexpr" for name in const})
            aligned = [["tt.divisibility", 16]]
            attrs = {(2,): aligned, (3,): aligned, (4,): aligned, (6,): aligned, (7,): aligned}
            row = {"variant": label, "accumulate": accumulate}
            try:
                kernel = compile(
                    ASTSource(ws_wgrad, sig, const, attrs),
                    target=GPUTarget("cuda", 90, 32),
                    options={"num_warps": p["warps"], "num_stages": p["stages"]},
                )
                ttgir = kernel.asm["ttgir"]
                row.update(
                    warp_specialized="ttg.warp_specialize" in ttgir,
                    wgmma="warp_group_dot" in ttgir,
                    smem=kernel.metadata.shared,
                    partitions=ttgir.count("num_warps(4)"),
                )
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            print(json.dumps(row), flush=True)


def _project(module: str):
    """A gmlp_check module, installed or from this checkout."""
    try:
        return importlib.import_module(module)
    except ImportError:
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        sys.path.insert(0, repo)
        import gmlp_check

        gmlp_check.__path__.append(repo)
        return importlib.import_module(module)


def _bench(fn) -> float:
    return min(triton.testing.do_bench(fn, warmup=10, rep=60) for _ in range(2))


SHAPES = {  # name: (tokens, experts, hidden, ffn); fc1 dW [2 ffn, hidden], fc2 dW [hidden, ffn]
    "qwen3": (131072, 128, 2048, 768),
    "deepseek": (32768, 256, 7168, 2048),
    "mixtral": (32768, 8, 4096, 14336),
}


def gemm_rows(grouped_ops, name, gemm, num_sms, deadline) -> list[dict]:
    tokens, experts, hidden, ffn = SHAPES[name]
    n, k = (2 * ffn, hidden) if gemm == "fc1" else (hidden, ffn)
    rows_per = tokens // experts
    sizes = [rows_per] * experts
    gen = torch.Generator(device="cuda").manual_seed(0)
    dy = torch.randn(tokens, n, generator=gen, device="cuda").to(torch.bfloat16)
    x = torch.randn(tokens, k, generator=gen, device="cuda").to(torch.bfloat16)
    splits = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    offs = offsets(sizes, "cuda")
    expected = torch.empty(experts, n, k, device="cuda")
    grouped_ops.grouped_wgrad(dy, x, splits, expected, accumulate=False)
    dest = torch.empty_like(expected)
    base = {"shape": name, "gemm": gemm, "N": n, "K": k, "experts": experts, "rows": rows_per}
    out = []
    bf16 = _bench(lambda: torch._grouped_mm(dy.t(), x, offs=offs[1:]))
    out.append(dict(base, variant="torch_grouped_mm_bf16", ms=bf16))
    for accumulate in (True, False):
        mode = "accumulate" if accumulate else "overwrite"
        prod = _bench(
            lambda a=accumulate: grouped_ops.grouped_wgrad(dy, x, splits, dest, accumulate=a)
        )
        out.append(dict(base, variant="production", mode=mode, ms=prod, x_bf16=prod / bf16))
        for label, p in VARIANTS.items():
            row = dict(base, variant=label, mode=mode)
            if time.monotonic() > deadline:
                out.append(dict(row, skipped="time budget"))
                continue
            if rows_per % p["bt"] and not p["clip"]:
                out.append(dict(row, skipped="rows off the block"))
                continue
            try:
                if accumulate:
                    dest.copy_(expected)
                else:
                    dest.fill_(float("nan"))
                kernel = launch(p, dy, x, dest, offs, accumulate, num_sms)
                torch.cuda.synchronize()
                err = relative_error(dest, expected, 2.0 if accumulate else 1.0)
                row.update(relerr=err, n_regs=kernel.n_regs, n_spills=kernel.n_spills)
                row["smem"] = kernel.metadata.shared
                if not err < 1e-4:
                    out.append(dict(row, skipped="wrong result"))
                    continue
                ms = _bench(lambda p=p, a=accumulate: launch(p, dy, x, dest, offs, a, num_sms))
                out.append(dict(row, ms=ms, x_bf16=ms / bf16, x_production=ms / prod))
            except Exception as exc:
                out.append(dict(row, error=f"{type(exc).__name__}: {str(exc)[:300]}"))
    for row in out:
        print(json.dumps(row), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--interpret", action="store_true")
    parser.add_argument("--shapes", default="qwen3,deepseek,mixtral")
    parser.add_argument("--budget", type=float, default=240.0)
    args = parser.parse_args()
    if args.compile_only:
        compile_only()
        return
    if args.interpret:
        rows = interpreted_check()
        for row in rows:
            print(json.dumps(row))
        sys.exit(0 if all(row["relerr"] < 1e-2 for row in rows) else 1)
    triton.set_allocator(_allocate)
    deadline = time.monotonic() + args.budget
    print(json.dumps({"torch": torch.__version__, "triton": triton.__version__,
                      "device": torch.cuda.get_device_name()}), flush=True)  # fmt: skip
    for row in ragged_check():
        print(json.dumps(row), flush=True)
    grouped_ops = _project("gmlp_check.fused.grouped_ops")
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    for name in args.shapes.split(","):
        for gemm in ("fc1", "fc2"):
            gemm_rows(grouped_ops, name, gemm, num_sms, deadline)
            torch.cuda.empty_cache()  # the next GEMM's operands, not this one's cache


if __name__ == "__main__":
    main()
