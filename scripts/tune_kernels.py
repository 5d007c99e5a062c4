"""Check and time tile variants of every fused kernel on the benchmark shapes; writes JSON.

    python scripts/tune_kernels.py --out tune.json [--shapes qwen3,mixtral]
        [--kernels fc1_forward,wgrad_fc1] [--steps] [--old scripts/_old]

For each shape (uniform load, bf16, single grouped weights) and each kernel of one training
step, every variant of VARIANTS is run on fresh random inputs, checked against torch
(torch._grouped_mm in bf16 with fp32 accumulation, and fp32 activation formulas) by
||out - ref|| / ||ref||, and timed with triton.testing.do_bench (median; L2 cleared before
every call). Outputs are poisoned with NaN first, so a tile left unwritten fails the check.
The plain torch._grouped_mm GEMM of the same product is timed as a yardstick. With --old,
"old" times the launchers of a saved copy of the fused package (package ``fused_old`` in that
folder), for before/after figures. With --steps, a whole forward+backward step accumulating
into fp32 main_grad is timed per implementation (the module, old module, torch-grouped-mm).

A measurement to read, not a test; the JSON is rewritten after every variant, so a run cut
short keeps what it measured.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import inspect
import json
import statistics
import sys
import time
import traceback
from itertools import accumulate
from pathlib import Path

import torch
import triton
from tune_variants import KERNELS, SHAPE_VARIANTS  # beside this file, on sys.path when run

from gmlp_check import backends
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused import grouped_ops
from gmlp_check.fused.kernels.activations import ACTIVATION_CODES
from gmlp_check.refimpl.config import MLPConfig

SWIGLU = ACTIVATION_CODES["swiglu"]
DEVICE = "cuda"  # --dry-run: "cpu", interpreted kernels, one call instead of timing
DTYPE = torch.bfloat16  # --dry-run: float16 (the interpreter's bf16 dot is wrong)
TOLERANCE = 1e-2  # bf16 outputs: about 2^-9 relative each; fp32 sums of bf16 products


def rel_error(out: torch.Tensor, ref: torch.Tensor, offset: float = 0.0) -> float:
    """||out - offset - ref|| / ||ref||, in chunks (DeepSeek's weight gradient is 30 GB)."""
    diff2 = ref2 = 0.0
    for o, r in zip(out.split(max(1, out.shape[0] // 16)), ref.split(max(1, ref.shape[0] // 16))):
        o, r = o.float() - offset, r.float()
        if not torch.isfinite(o).all():
            return float("inf")
        diff2 += (o - r).square().sum().item()
        ref2 += r.square().sum().item()
    return (diff2 / max(ref2, 1e-30)) ** 0.5


def poison_next(shape, dtype) -> None:
    """Leave a NaN-filled block of this size in the caching allocator for the next output."""
    torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)


class Problem:
    """Random bf16 operands of one step of a shape, and torch references of each product."""

    def __init__(self, shape, load: str, seed: int) -> None:
        g = torch.Generator(device=DEVICE).manual_seed(seed)
        s = shape
        self.shape = s
        self.splits_list = split_sizes(s, load)
        self.splits = torch.tensor(self.splits_list, dtype=torch.int32, device=DEVICE)
        self.offs = torch.tensor(list(accumulate(self.splits_list)), dtype=torch.int32).to(DEVICE)
        rows, hid, ffn, experts = s.rows, s.hidden, s.ffn, s.experts

        def randn(*size, scale=1.0):
            t = torch.randn(*size, generator=g, device=DEVICE, dtype=DTYPE)
            return t.mul_(scale)

        self.x = randn(rows, hid)
        self.w1 = randn(experts, 2 * ffn, hid, scale=hid**-0.5)
        self.w2 = randn(experts, hid, ffn, scale=ffn**-0.5)
        self.dy = randn(rows, hid)
        self.h = randn(rows, 2 * ffn)
        self.a = randn(rows, ffn)
        self.dh = randn(rows, 2 * ffn)

    def flops(self, kernel: str) -> float:
        s = self.shape
        per = {
            "fc1_forward": 2 * s.rows * s.hidden * 2 * s.ffn,
            "fc2_forward": 2 * s.rows * s.ffn * s.hidden,
            "fc2_dgrad": 2 * s.rows * s.hidden * s.ffn,
            "fc1_dgrad": 2 * s.rows * 2 * s.ffn * s.hidden,
            "wgrad_fc2": 2 * s.rows * s.hidden * s.ffn,
            "wgrad_fc1": 2 * s.rows * 2 * s.ffn * s.hidden,
            "wgrad_fc1_overwrite": 2 * s.rows * 2 * s.ffn * s.hidden,
        }
        return float(per[kernel])


def swiglu_backward(h: torch.Tensor, da: torch.Tensor) -> torch.Tensor:
    hf = h.float().requires_grad_()
    ffn = h.shape[1] // 2
    gate, lin = hf[:, :ffn], hf[:, ffn:]
    out = torch.nn.functional.silu(gate) * lin
    out.backward(da.float())
    return hf.grad


def make_case(p: Problem, kernel: str):
    """(call(tiles, ops) -> output, reference output, the same product by torch._grouped_mm,
    offset the reference lacks). ``ops`` is a launcher module (fused.grouped_ops or the saved
    old one); ``tiles`` None takes its default."""
    w1, w2 = list(p.w1.unbind(0)), list(p.w2.unbind(0))
    gmm = torch._grouped_mm

    def kw(tiles):
        return {"tiles": tiles} if tiles is not None else {}

    if kernel == "fc1_forward":
        ref = gmm(p.x, p.w1.transpose(-2, -1), offs=p.offs)

        def call(tiles, ops):
            return ops.fc1_forward(
                p.x, p.splits, w1, None, activation=SWIGLU, glu=True, probs=None, **kw(tiles)
            )

        return call, ref, lambda: gmm(p.x, p.w1.transpose(-2, -1), offs=p.offs), 0.0
    if kernel == "fc2_forward":
        ref = gmm(p.a, p.w2.transpose(-2, -1), offs=p.offs)

        def call(tiles, ops):
            return ops.grouped_gemm(p.a, p.splits, w2, transpose=True, **kw(tiles))

        return call, ref, lambda: gmm(p.a, p.w2.transpose(-2, -1), offs=p.offs), 0.0
    if kernel == "fc2_dgrad":
        ref = swiglu_backward(p.h, gmm(p.dy, p.w2, offs=p.offs))

        def call(tiles, ops):
            # Tile variants are the epilogue kernel's; the default (no tiles) takes whichever
            # path the package chooses (the derivative apart, for 16-bit, since 2026-12-03).
            apart = "apart" in inspect.signature(ops.fc2_dgrad_activation).parameters
            extra = {"apart": False} if tiles is not None and apart else {}
            return ops.fc2_dgrad_activation(
                p.dy,
                p.splits,
                w2,
                p.h,
                activation=SWIGLU,
                glu=True,
                probs=None,
                **kw(tiles),
                **extra,
            )[0]

        return call, ref, lambda: gmm(p.dy, p.w2, offs=p.offs), 0.0
    if kernel == "fc1_dgrad":
        ref = gmm(p.dh, p.w1, offs=p.offs)

        def call(tiles, ops):
            return ops.grouped_gemm(p.dh, p.splits, w1, transpose=False, **kw(tiles))

        return call, ref, lambda: gmm(p.dh, p.w1, offs=p.offs), 0.0
    if kernel.startswith("wgrad"):
        dy, x = (p.dy, p.a) if kernel == "wgrad_fc2" else (p.dh, p.x)
        accumulate_mode = not kernel.endswith("overwrite")
        ref = gmm(dy.t(), x, offs=p.offs)
        region = torch.empty(ref.shape, dtype=torch.float32, device=DEVICE)
        regions = list(enumerate(region.unbind(0)))

        def call(tiles, ops):
            ops.grouped_wgrad(dy, x, p.splits, regions, accumulate=accumulate_mode, **kw(tiles))
            return region

        # Checked runs accumulate onto ones (the offset) or overwrite NaN.
        call.reset = lambda: region.fill_(1.0 if accumulate_mode else float("nan"))
        return call, ref, lambda: gmm(dy.t(), x, offs=p.offs), 1.0 if accumulate_mode else 0.0
    raise ValueError(kernel)


def checked(call, tiles, ops, ref) -> torch.Tensor:
    """One run whose output starts as NaN (row GEMMs: a NaN block left in the allocator)."""
    if hasattr(call, "reset"):
        call.reset()
    else:
        poison_next(ref.shape, ref.dtype)
    out = call(tiles, ops)
    if isinstance(out, tuple):  # fc1: (h, act(h)); the activation is checked against h's
        h, a = out
        ffn = a.shape[1]
        act = torch.nn.functional.silu(h[:, :ffn].float()) * h[:, ffn:].float()
        if rel_error(a, act) > TOLERANCE:
            return torch.full_like(h, float("nan"))
        out = h
    return out


def bench(fn) -> float:
    if DEVICE == "cpu":
        started = time.perf_counter()
        fn()
        return (time.perf_counter() - started) * 1e3
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def tune_shape(name: str, kernels: list[str], old_ops, results: list, write) -> None:
    shape = PRESETS[name]
    problem = Problem(shape, "uniform", seed=0)
    for kernel in kernels:
        call, ref, yardstick, offset = make_case(problem, kernel)
        flops = problem.flops(kernel)
        try:
            ms = bench(yardstick)
            results.append(
                {
                    "shape": name,
                    "kernel": kernel,
                    "variant": "torch._grouped_mm",
                    "ms": ms,
                    "tflops": flops / ms / 1e9,
                    "ok": True,
                }
            )
        except Exception as error:  # the yardstick is optional
            print(f"{name} {kernel} yardstick failed: {error}", flush=True)
        wanted = SHAPE_VARIANTS.get(name)
        for label, tiles in KERNELS[kernel]:
            if wanted is not None and label not in wanted:
                continue
            ops = grouped_ops
            if label == "old":
                if old_ops is None:
                    continue
                ops = old_ops
            row = {
                "shape": name,
                "kernel": kernel,
                "variant": label,
                "tiles": None if tiles is None else vars(tiles),
            }
            started = time.perf_counter()
            try:
                err = rel_error(checked(call, tiles, ops, ref), ref, offset)
                row["rel_error"] = err
                row["ok"] = err < TOLERANCE
                ms = bench(lambda c=call, t=tiles, o=ops: c(t, o))
                row["ms"] = ms
                row["tflops"] = flops / ms / 1e9
            except Exception as error:
                row["ok"] = False
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
                traceback.print_exc()
            row["wall_s"] = time.perf_counter() - started
            results.append(row)
            nan = float("nan")
            print(
                f"{name:9s} {kernel:20s} {label:24s} ok={row.get('ok')} "
                f"err={row.get('rel_error', nan):.2e} ms={row.get('ms', nan):.3f} "
                f"TF={row.get('tflops', nan):.0f} ({row['wall_s']:.1f}s) {row.get('error', '')}",
                flush=True,
            )
            write()
    del problem
    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def time_steps(name: str, impls: list[str], results: list, write, old_backends) -> None:
    """forward+backward accumulating into fp32 main_grad, as the bench's step phase."""
    shape = PRESETS[name]
    for load in ("uniform",):
        splits = split_sizes(shape, load)
        for impl in impls:
            module = None
            try:
                kwargs = dict(
                    num_experts=shape.experts,
                    hidden=shape.hidden,
                    ffn=shape.ffn,
                    activation="swiglu",
                    single_grouped_weight=True,
                    accumulate_into_main_grad=True,
                    dtype=DTYPE,
                    device=DEVICE,
                )
                spec = "triton" if impl.startswith("triton") else impl
                if impl == "triton-old":
                    module = old_backends.create(spec, **kwargs)
                else:
                    module = backends.load(spec).build(MLPConfig(**kwargs))
                for p in module.parameters():
                    p.main_grad = torch.zeros(p.numel(), dtype=torch.float32, device=DEVICE)
                    p.grad_added_to_main_grad = False
                g = torch.Generator(device=DEVICE).manual_seed(1)
                x = torch.randn(shape.rows, shape.hidden, generator=g, device=DEVICE)
                x = x.to(DTYPE).requires_grad_()
                dy = torch.randn(shape.rows, shape.hidden, generator=g, device=DEVICE).to(DTYPE)
                times = []
                for _ in range(7):
                    for p in module.parameters():
                        p.grad = None
                    x.grad = None
                    times.append(_timed_step(module, x, splits, dy))
                times = times[2:]
                ms = statistics.median(times)
                flops = 3 * (2 * shape.rows * shape.hidden * 3 * shape.ffn)
                row = {
                    "shape": name,
                    "load": load,
                    "kernel": "step",
                    "variant": impl,
                    "ms": ms,
                    "tflops": flops / ms / 1e9,
                    "ok": True,
                    "times": times,
                    "peak_gb": peak_gb(),
                }
            except Exception as error:
                row = {
                    "shape": name,
                    "load": load,
                    "kernel": "step",
                    "variant": impl,
                    "ok": False,
                    "error": f"{type(error).__name__}: {error}"[:400],
                }
                traceback.print_exc()
            results.append(row)
            nan = float("nan")
            print(
                f"{name:9s} step {impl:20s} ms={row.get('ms', nan):.2f} "
                f"TF={row.get('tflops', nan):.0f} {row.get('error', '')}",
                flush=True,
            )
            write()
            del module
            gc.collect()
            if DEVICE == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()


def peak_gb() -> float:
    return torch.cuda.max_memory_allocated() / 1e9 if DEVICE == "cuda" else 0.0


def _timed_step(module, x, splits, dy) -> float:
    if DEVICE == "cpu":
        started = time.perf_counter()
        module(x, splits).backward(dy)
        return (time.perf_counter() - started) * 1e3
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    module(x, splits).backward(dy)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", default="qwen3,mixtral,deepseek")
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--old", help="folder holding the package fused_old")
    parser.add_argument("--steps", default="", help="implementations to time whole steps of")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shape: code paths only")
    args = parser.parse_args()
    global DEVICE
    global DTYPE
    if args.dry_run:
        DEVICE, DTYPE = "cpu", torch.float16
    old_ops = old_backends = None
    if args.old:
        sys.path.insert(0, args.old)
        old_ops = importlib.import_module("fused_old.grouped_ops")
        old_backends = importlib.import_module("fused_old.backends")
    results: list[dict] = []
    meta = {
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
        "torch": torch.__version__,
        "triton": triton.__version__,
    }

    def write() -> None:
        Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))

    kernels = [k for k in args.kernels.split(",") if k]
    for name in [s for s in args.shapes.split(",") if s]:
        tune_shape(name, kernels, old_ops, results, write)
        steps = [s for s in args.steps.split(",") if s]
        if steps:
            time_steps(name, steps, results, write, old_backends)
    summarize(results)


def summarize(results: list[dict]) -> None:
    print("\nbest per (shape, kernel):")
    keys = sorted({(r["shape"], r["kernel"]) for r in results})
    for key in keys:
        rows = [r for r in results if (r["shape"], r["kernel"]) == key and r.get("ok")]
        rows.sort(key=lambda r: r.get("ms", float("inf")))
        old = next((r for r in rows if r["variant"] == "old"), None)
        yard = next((r for r in rows if r["variant"] == "torch._grouped_mm"), None)
        best = next((r for r in rows if r["variant"] not in ("old", "torch._grouped_mm")), None)
        if best is None:
            print(key, "no passing variant")
            continue
        print(
            f"{key[0]:9s} {key[1]:20s} best {best['variant']:24s} {best['ms']:.3f} ms "
            f"{best['tflops']:.0f} TF | old {old['ms'] if old else float('nan'):.3f} | "
            f"torch {yard['ms'] if yard else float('nan'):.3f}"
        )


if __name__ == "__main__":
    main()
