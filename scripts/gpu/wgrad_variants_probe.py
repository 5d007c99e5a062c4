"""Probe (H200): which Triton schedule brings the fp32 wgrad-accumulate within 1.25x of the bare
bf16 grouped GEMM (issue #21)?

Production accumulate is ~1.45x torch._grouped_mm's bf16 weight gradient on Qwen3 (fc1 1.89 ms
vs 1.38). docs/perf-notes.md: the fp32 main_grad load and the pipeline fill are serial within a
program; only a second program per SM hides them, and a TMA reduce-add epilogue did not help
(scripts/gpu/wgrad_reduce_probe.py). This probe times real kernel variants of
dest_g += dy_g^T @ x_g, all from one kernel (`wgrad_variant_kernel`):

* persistent (grid = SMs or 2 x SMs, each program loops over (expert, tile) work items, the
  outer loop optionally `flatten=True` so the next tile's operand loads pipeline across the
  tile boundary, or `warp_specialize=True`) against one program per tile ("tiles" grid);
* main_grad through a TMA descriptor (load and store) or through pointers (as production);
  main_grad loaded at the start as the accumulator ("start", production's START_FROM_DEST),
  issued before the K loop and added after it ("before": the load overlaps the products), or
  loaded after it ("after");
* the tutorial's (python/tutorials/09-persistent-matmul.py) epilogue subtiling: the tile is
  loaded/added/stored in two [BN, BK/2] halves through the descriptor;
* tile shapes 128x128, 128x256, 256x128, BLOCK_T 64/128, warps, stages, maxnreg.

Variant names: np_ one program per tile, p1_/p2_ persistent with 1/2 programs per SM; ptr/tma
how main_grad is read and written; start/before/after/sub its add (sub: subtiled "after");
flat flatten=True; ws warp_specialize; tNN BLOCK_T; sN stages; rNNN maxnreg; NxM the tile.

First every variant is compiled and run once on a small problem in child processes (6 at a
time; a compiler crash is then one variant's "died" row, not the end of the run). Then, per
shape and GEMM: torch._grouped_mm's bf16 wgrad, production accumulate and overwrite, and each
variant, checked against production (main_grad = production's overwrite result E, one
accumulate launch must give 2E: max relative error), then timed with triton.testing.do_bench
(median ms). One JSON line per (shape, gemm, variant): ms, x_bf16 (ratio to the bf16 GEMM),
relerr, params, registers, spills, shared memory. Uniform splits only, rows per expert a
multiple of BLOCK_T, N and K multiples of the tile (no masked tail). WGRAD_PROBE_BUDGET_S
(default 200) bounds the whole run: what is left after it is printed as skipped.

GPU:  PYTHONDONTWRITEBYTECODE=1 TRITON_CACHE_DIR=$OUT/tc python3
      scripts/gpu/wgrad_variants_probe.py [qwen3 mixtral deepseek]  (default qwen3 mixtral)
CPU:  python3 scripts/gpu/wgrad_variants_probe.py --dry-run: every variant interpreted
      (TRITON_INTERPRET=1, fp16, tiny sizes) against torch; tests/fused/test_wgrad_variants_probe.py
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

DRY_RUN = "--dry-run" in sys.argv
if DRY_RUN:  # before triton is imported: every kernel interpreted
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

ACC_MODES = {"after": 0, "before": 1, "start": 2}  # the kernel's ACC_MODE


@triton.jit
def _tile_of(tile, per_expert, num_n, num_k, GROUP_N: tl.constexpr):
    """(expert, pid_n, pid_k) of work item ``tile``: expert-major, GROUP_N row tiles per sweep."""
    expert = tile // per_expert
    local = tile % per_expert
    per_group = GROUP_N * num_k
    first_n = (local // per_group) * GROUP_N
    group_n = tl.minimum(num_n - first_n, GROUP_N)
    in_group = local % per_group
    return expert, first_n + in_group % group_n, in_group // group_n


# fmt: off
@triton.jit
def _load_dest(DEST_DESC, DEST, stride_dest, row0, k0, TMA_DEST: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    if TMA_DEST:
        tile = DEST_DESC.load([row0, k0])
    else:
        rows = (row0 + tl.arange(0, BLOCK_N)).to(tl.int64)
        ks = k0 + tl.arange(0, BLOCK_K)
        tile = tl.load(DEST + rows[:, None] * stride_dest + ks[None, :])
    return tile


def _wgrad_variant(
    DY_DESC, X_DESC, DEST_DESC, DEST, stride_dest, OFFS, num_tiles, N, K, k_steps,
    NUM_PROGS: tl.constexpr, TMA_DEST: tl.constexpr, ACC_MODE: tl.constexpr,
    SUBTILE: tl.constexpr, FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_T: tl.constexpr, GROUP_N: tl.constexpr,
):
    """main_grad[g] += dy_g^T @ x_g for every work item tile = program_id + i * NUM_PROGS
    (NUM_PROGS 0: one program per tile).
    main_grad is viewed as [G * N, K] (DEST_DESC, or DEST with row stride stride_dest); expert
    g's rows of dy/x start at OFFS[g] and span k_steps * BLOCK_T rows (uniform splits)."""
    num_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    per_expert = num_n * num_k
    # One program per tile: a runtime step (one compile for every shape); persistent: a
    # compile-time step, as in tutorial 09.
    step = num_tiles if NUM_PROGS == 0 else NUM_PROGS
    for tile in tl.range(tl.program_id(0), num_tiles, step, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        expert, pid_n, pid_k = _tile_of(tile, per_expert, num_n, num_k, GROUP_N)
        first_row = tl.load(OFFS + expert)
        n0 = pid_n * BLOCK_N
        k0 = pid_k * BLOCK_K
        row0 = expert * N + n0
        if ACC_MODE == 2:
            acc = _load_dest(DEST_DESC, DEST, stride_dest, row0, k0, TMA_DEST, BLOCK_N, BLOCK_K)
        else:
            acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        if ACC_MODE == 1:
            prev = _load_dest(DEST_DESC, DEST, stride_dest, row0, k0, TMA_DEST, BLOCK_N, BLOCK_K)
        for step in range(k_steps):
            t0 = first_row + step * BLOCK_T
            dy = DY_DESC.load([t0, n0])
            x = X_DESC.load([t0, k0])
            acc = tl.dot(dy.T, x, acc)
        if SUBTILE:  # tutorial 09's epilogue: two [BLOCK_N, BLOCK_K // 2] halves
            halves = tl.permute(tl.reshape(acc, (BLOCK_N, 2, BLOCK_K // 2)), (0, 2, 1))
            c0, c1 = tl.split(halves)
            c0 += DEST_DESC.load([row0, k0])
            DEST_DESC.store([row0, k0], c0)
            c1 += DEST_DESC.load([row0, k0 + BLOCK_K // 2])
            DEST_DESC.store([row0, k0 + BLOCK_K // 2], c1)
        else:
            if ACC_MODE == 0:
                acc += _load_dest(DEST_DESC, DEST, stride_dest, row0, k0, TMA_DEST, BLOCK_N,
                                  BLOCK_K)
            if ACC_MODE == 1:
                acc += prev
            if TMA_DEST:
                DEST_DESC.store([row0, k0], acc)
            else:
                rows = (row0 + tl.arange(0, BLOCK_N)).to(tl.int64)
                ks = k0 + tl.arange(0, BLOCK_K)
                tl.store(DEST + rows[:, None] * stride_dest + ks[None, :], acc)


wgrad_variant_kernel = triton.jit(_wgrad_variant)


# BLOCK_T, BLOCK_N, BLOCK_K, warps, stages, maxnreg (None: compiler's choice), programs ("tiles":
# one per output tile; 1 or 2: per SM, persistent), main_grad through TMA or pointers, acc mode,
# subtiled epilogue, flattened outer loop, warp_specialize on the outer loop.
# fmt: off
V = dict(bt=64, bn=128, bk=128, warps=8, stages=3, maxnreg=None, progs="tiles", tma_dest=False,
         acc="start", subtile=False, flatten=False, ws=False)
VARIANTS = {  # shared memory from a Triton 3.6 sm_90 compile; two per SM need <= 113 KB
    # production's schedule in this kernel (96 KB; sanity: should time like prod_accumulate)
    "np_ptr_start_r128": dict(V, maxnreg=128),
    # (b) non-persistent, main_grad through a TMA descriptor (+64 KB fp32 buffer), where loaded
    "np_tma_start_r128": dict(V, maxnreg=128, tma_dest=True),
    "np_tma_before_r128": dict(V, maxnreg=128, tma_dest=True, acc="before"),
    "np_tma_after_r128": dict(V, maxnreg=128, tma_dest=True, acc="after"),
    "np_tma_start_t128_s2": dict(V, bt=128, stages=2, tma_dest=True),
    "np_tma_sub_r128": dict(V, maxnreg=128, tma_dest=True, acc="after", subtile=True),
    "np_tma_sub_s2_r128": dict(V, stages=2, maxnreg=128, tma_dest=True, acc="after",
                               subtile=True),
    "np_tma_sub_t32_s4_r128": dict(V, bt=32, stages=4, maxnreg=128, tma_dest=True,
                                   acc="after", subtile=True),
    # (a) persistent, 1 or 2 programs per SM
    "p1_tma_start": dict(V, progs=1, tma_dest=True),
    "p1_tma_start_flat": dict(V, progs=1, tma_dest=True, flatten=True),
    "p1_tma_before_flat": dict(V, progs=1, tma_dest=True, acc="before", flatten=True),
    "p1_tma_sub_flat": dict(V, progs=1, tma_dest=True, acc="after", subtile=True, flatten=True),
    "p1_ptr_start_flat": dict(V, progs=1, flatten=True),
    "p2_ptr_start_r128": dict(V, progs=2, maxnreg=128),
    "p2_ptr_start_flat_t32_s3_r128": dict(V, bt=32, progs=2, maxnreg=128, flatten=True),
    "p2_tma_sub_s2_r128": dict(V, progs=2, stages=2, maxnreg=128, tma_dest=True, acc="after",
                               subtile=True),
    "p2_tma_sub_flat_t32_s2_r128": dict(V, bt=32, progs=2, stages=2, maxnreg=128,
                                        tma_dest=True, acc="after", subtile=True, flatten=True),
    # (c) larger tiles, two consumer warpgroups (one program per SM)
    "np_ptr_start_128x256": dict(V, bk=256),  # production's wgrad_long tiles
    "np_tma_sub_256x128": dict(V, bn=256, tma_dest=True, acc="after", subtile=True),
    "np_tma_sub_128x256": dict(V, bk=256, tma_dest=True, acc="after", subtile=True),
    "p1_ptr_start_flat_128x256_s2": dict(V, bk=256, progs=1, stages=2, flatten=True),
    "p1_tma_sub_128x256": dict(V, bk=256, progs=1, tma_dest=True, acc="after", subtile=True),
    # (d) tutorial 09's warp-specialised outer loop (Blackwell-first in Triton)
    "p1_tma_sub_ws": dict(V, progs=1, tma_dest=True, acc="after", subtile=True, ws=True),
    "p1_tma_start_ws": dict(V, progs=1, tma_dest=True, ws=True),
}


def launch_variant(p, dy, x, main_grad, offs, rows_per_expert, num_sms):
    """One accumulate launch of variant ``p`` (a VARIANTS entry): main_grad += dy_g^T x_g.
    Returns the compiled kernel (registers, spills, shared memory)."""
    experts, n, k = main_grad.shape
    bt, bn, bk = p["bt"], p["bn"], p["bk"]
    assert n % bn == 0 and k % bk == 0 and rows_per_expert % bt == 0, (n, k, rows_per_expert)
    assert not p["subtile"] or (p["tma_dest"] and p["acc"] == "after")
    dest = main_grad.view(experts * n, k)
    dy_desc = TensorDescriptor(dy, list(dy.shape), list(dy.stride()), [bt, bn])
    x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [bt, bk])
    dest_block = [bn, bk // 2] if p["subtile"] else [bn, bk]
    dest_desc = TensorDescriptor(dest, list(dest.shape), list(dest.stride()), dest_block)
    num_tiles = experts * (n // bn) * (k // bk)
    progs = num_tiles if p["progs"] == "tiles" else min(num_tiles, p["progs"] * num_sms)
    options = {"num_warps": p["warps"], "num_stages": p["stages"]}
    if p["maxnreg"]:
        options["maxnreg"] = p["maxnreg"]
    kernel = _interpreted_kernel() if dy.device.type == "cpu" else wgrad_variant_kernel
    return kernel[(progs,)](
        dy_desc, x_desc, dest_desc, dest, dest.stride(0), offs, num_tiles, n, k,
        rows_per_expert // bt, NUM_PROGS=0 if p["progs"] == "tiles" else progs,
        TMA_DEST=p["tma_dest"],
        ACC_MODE=ACC_MODES[p["acc"]], SUBTILE=p["subtile"], FLATTEN=p["flatten"],
        WARP_SPECIALIZE=p["ws"], BLOCK_N=bn, BLOCK_K=bk, BLOCK_T=bt, GROUP_N=8, **options,
    )
# fmt: on


def _inputs(tokens, experts, n, k, dtype, device, gen):
    rows = tokens // experts
    offs = torch.arange(0, tokens, rows, dtype=torch.int32, device=device)
    dy = torch.randn(tokens, n, device=device, generator=gen).to(dtype)
    x = torch.randn(tokens, k, device=device, generator=gen).to(dtype)
    return rows, offs, dy, x


def _relerr(got, want_of, experts) -> float:
    """max |got[g] - want_of(g)| / max |want_of(g)| over experts, one expert's temporaries
    at a time (DeepSeek's main_grad is 30 GB)."""
    err = scale = 0.0
    for g in range(experts):
        want = want_of(g)
        err = max(err, float((got[g] - want).abs().max()))
        scale = max(scale, float(want.abs().max()))
    return err / max(scale, 1e-30)


SHAPES = {  # name: (tokens, experts, hidden, ffn); fc1 dW [2 ffn, hidden], fc2 dW [hidden, ffn]
    "qwen3": (131072, 128, 2048, 768),
    "mixtral": (32768, 8, 4096, 14336),
    "deepseek": (32768, 256, 7168, 2048),
}
GEMMS = {"qwen3": ("fc1", "fc2"), "mixtral": ("fc1",), "deepseek": ("fc1",)}


def _bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=50)


def smoke(labels) -> None:
    """Child process: run each variant once against torch's fp32 sum and print
    {"start": label} before it, so that a crash of the compiler is blamed on its variant.
    GPU: bf16, enough tiles for 2 x 132 persistent programs, integer arguments that specialise
    as Qwen3's do (the compiled kernels land in Triton's cache for the timed run). --dry-run:
    interpreted on CPU, fp16, tiles a quarter of the GPU's (same aspect), 2 "SMs" so that
    persistent programs loop over many tiles."""
    device, dtype = ("cpu", torch.float16) if DRY_RUN else ("cuda", torch.bfloat16)
    experts, rows, n, k = (3, 64, 128, 128) if DRY_RUN else (2, 1024, 1536, 2048)
    gen = torch.Generator(device=device).manual_seed(0)
    _, offs, dy, x = _inputs(experts * rows, experts, n, k, dtype, device, gen)
    start = torch.randn(experts, n, k, device=device, generator=gen)
    chunk = [slice(g * rows, (g + 1) * rows) for g in range(experts)]
    want = torch.stack([start[g] + dy[r].float().t() @ x[r].float() for g, r in enumerate(chunk)])
    num_sms = 2 if DRY_RUN else torch.cuda.get_device_properties(0).multi_processor_count
    for label in labels:
        print(json.dumps({"start": label}), flush=True)
        p = VARIANTS[label]
        if DRY_RUN:
            p = dict(p, bt=p["bt"] // 4, bn=p["bn"] // 4, bk=p["bk"] // 4)
        row = {"variant": label, "relerr": None, "error": None}
        try:
            main_grad = start.clone()
            launch_variant(p, dy, x, main_grad, offs, rows, num_sms)
            if not DRY_RUN:
                torch.cuda.synchronize()
            row["relerr"] = _relerr(main_grad, lambda g: want[g], experts)
            if not row["relerr"] < 1e-4:
                row["error"] = "wrong result"
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        print(json.dumps(row), flush=True)


def _smoke_batch(todo, deadline) -> dict[str, dict]:
    """Smoke rows of the variants ``todo`` from child processes: a child that dies marks the
    variant it was on as failed, and a new child takes the rest."""
    rows: dict[str, dict] = {}
    flags = ["--dry-run"] if DRY_RUN else []
    while todo:
        cmd = [sys.executable, os.path.abspath(__file__), *flags, "--smoke", *todo]
        left = max(deadline - time.monotonic(), 1)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
            out, tail, rc = done.stdout, done.stderr[-300:], done.returncode
        except subprocess.TimeoutExpired as exc:
            out, tail, rc = exc.stdout or b"", "timed out", None
            out = out.decode() if isinstance(out, bytes) else out
        started = None
        for line in out.splitlines():
            row = json.loads(line) if line.startswith('{"') else {}
            if "start" in row:
                started = row["start"]
            elif "variant" in row:
                rows[row["variant"]] = row
        # rc 0: all reported. Died during `started`: that one; else all that are left.
        for label in [started] if started and rc else todo:
            died = {"variant": label, "relerr": None, "error": f"died (rc {rc}): {tail}"}
            rows.setdefault(label, died)
        todo = [label for label in todo if label not in rows]
    return rows


def smoke_all(deadline, parallel) -> dict[str, dict]:
    """Every variant's smoke row, ``parallel`` children at a time (compiling is the cost)."""
    chunks = [list(VARIANTS)[i::parallel] for i in range(parallel)]
    with ThreadPoolExecutor(parallel) as pool:
        done = pool.map(lambda chunk: _smoke_batch(chunk, deadline), chunks)
    rows = {label: row for part in done for label, row in part.items()}
    return {label: rows[label] for label in VARIANTS}


def dry_run() -> None:
    """Every variant, interpreted on CPU (smoke's --dry-run), against torch."""
    rows = smoke_all(time.monotonic() + 250, parallel=1)
    for row in rows.values():
        print(json.dumps(dict(row, dry_run=True)), flush=True)
    if any(row["error"] for row in rows.values()):
        sys.exit("variants wrong or failing under the interpreter")


def _project(module: str):
    """A gmlp_check module, installed or (without installing) from this checkout."""
    try:
        return importlib.import_module(module)
    except ImportError:
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        sys.path.insert(0, repo)
        import gmlp_check

        gmlp_check.__path__.append(repo)  # gmlp_check.fused -> fused/, as setup.py maps it
        return importlib.import_module(module)


@functools.cache
def _interpreted_kernel():
    """The kernel for CPU tensors, through the project's dual_jit: Triton's interpreter with
    the project's fixes for the interpreters of Triton 3.4 to 3.9 (numpy 2.4 scalars, ...)."""
    return _project("gmlp_check.fused.dual_jit").dual_jit(_wgrad_variant)


def _gemm(grouped_ops, name, gemm, tokens, experts, n, k, num_sms, gen, deadline, broken):
    """Baselines, then each variant (checked, then timed) for one weight gradient; returns the
    summary: production's times, the fastest variant and its ratio to the bf16 GEMM."""
    rows, offs, dy, x = _inputs(tokens, experts, n, k, torch.bfloat16, "cuda", gen)
    splits = torch.full((experts,), rows, dtype=torch.int32, device="cuda")
    ends = (offs + rows).to(torch.int32)
    expected = torch.zeros(experts, n, k, device="cuda", dtype=torch.float32)
    grouped_ops.grouped_wgrad(dy, x, splits, expected, accumulate=False)
    main_grad = expected.clone()
    base = {"shape": name, "gemm": gemm, "N": n, "K": k, "experts": experts, "rows": rows}

    def emit(variant, ms, **extra):
        row = dict(base, variant=variant, ms=ms, **extra)
        if isinstance(ms, float):
            row["x_bf16"] = ms / bf16
        print(json.dumps(row), flush=True)

    bf16 = _bench(lambda: torch._grouped_mm(dy.t(), x, offs=ends))
    emit("torch_grouped_mm_bf16", bf16)
    times = {}
    for mode, a in (("prod_accumulate", True), ("prod_overwrite", False)):
        run = functools.partial(grouped_ops.grouped_wgrad, dy, x, splits, main_grad, accumulate=a)
        times[mode] = _bench(run)
        emit(mode, times[mode])
    for label, p in VARIANTS.items():

        def launch(p=p):
            return launch_variant(p, dy, x, main_grad, offs, rows, num_sms)

        if label in broken or time.monotonic() > deadline:
            emit(label, "skipped: " + ("smoke failed" if label in broken else "time budget"))
            continue
        try:
            main_grad.copy_(expected)
            kernel = launch()
            torch.cuda.synchronize()
            err = _relerr(main_grad, lambda g: 2 * expected[g], experts)
            ms = _bench(launch) if err < 1e-3 else "skipped: wrong result"
            used = {a: getattr(kernel, a, None) for a in ("n_regs", "n_spills")}
            used["smem"] = getattr(getattr(kernel, "metadata", None), "shared", None)
            emit(label, ms, relerr=err, params=p, **used)
            if isinstance(ms, float):
                times[label] = ms
        except Exception as exc:  # a variant that does not compile or run here
            emit(label, f"{type(exc).__name__}: {str(exc)[:300]}", params=p)
    best = min(((t, v) for v, t in times.items() if v in VARIANTS), default=(float("nan"), None))
    rounded = {label: round(t, 4) for label, t in times.items()}
    return dict(base, bf16=bf16, **rounded, best=best[1], best_x_bf16=best[0] / bf16)


def gpu_run(names, budget_s) -> None:
    grouped_ops = _project("gmlp_check.fused.grouped_ops")
    deadline = time.monotonic() + budget_s
    smoked = smoke_all(deadline - 60, parallel=6)
    broken = {label for label, row in smoked.items() if row["error"]}
    for label in broken:
        print(json.dumps(dict(smoked[label], smoke=True, params=VARIANTS[label])), flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    summaries = []
    for name in names:
        tokens, experts, hidden, ffn = SHAPES[name]
        for gemm in GEMMS[name]:
            n, k = (2 * ffn, hidden) if gemm == "fc1" else (hidden, ffn)
            if time.monotonic() > deadline:
                print(json.dumps({"shape": name, "gemm": gemm, "skipped": "time budget"}))
                continue
            args = (name, gemm, tokens, experts, n, k, num_sms, gen, deadline, broken)
            summaries.append(_gemm(grouped_ops, *args))
            torch.cuda.empty_cache()
    for summary in summaries:  # last, so that the tail of the output holds them
        print(json.dumps({"summary": True, **summary}), flush=True)


if __name__ == "__main__":
    if "--smoke" in sys.argv:  # a child of smoke_all (--dry-run or not)
        smoke(sys.argv[sys.argv.index("--smoke") + 1 :])
    elif DRY_RUN:
        dry_run()
    else:
        budget = float(os.environ.get("WGRAD_PROBE_BUDGET_S", "200"))  # then skip the rest
        gpu_run([a for a in sys.argv[1:] if not a.startswith("-")] or ["qwen3", "mixtral"], budget)
