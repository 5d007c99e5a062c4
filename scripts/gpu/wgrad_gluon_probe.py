"""Probe on a GPU: the persistent Gluon weight-gradient kernel (scripts/gpu/gluon_wgrad.py)
against production's Triton kernel, the bare bf16 grouped GEMM and a plain fill of the same
fp32 bytes.

Question (issue #21): does a schedule in which each tile's fp32 store leaves asynchronously
while the next tile's products run (which Triton 3.6 does not generate on Hopper) raise
DeepSeek-V3's overwrite store rate from 2.8 towards the fill's 3.8-4.0 TB/s, and bring
Qwen3's accumulate within 1.25x of the bf16 GEMM? Prediction from the byte counts: DeepSeek
fc1+fc2 overwrite 16.2 -> 12-13 ms, accumulate 27.8 -> 20-23 ms; Qwen3 accumulate 3.1 -> 2.3-2.6
ms (bf16 1.98).

Every variant is first checked against torch (fp32 reference of each expert's dy_g^T @ x_g) on
small ragged cases: rows not a multiple of the row block, experts without rows, K not a
multiple of the tile, both modes, NaN-poisoned destinations when overwriting; then on each
preset's operands against production (uniform and skewed loads). Only variants that pass are
timed (triton.testing.do_bench medians, L2 cleared per call; two passes in turn). One JSON line
per measurement on stdout.

    python scripts/gpu/wgrad_gluon_probe.py [--shapes deepseek,qwen3,mixtral]
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import accumulate

import probe_shapes  # beside this file
import torch
import triton

from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused import grouped_ops
from gmlp_check.fused.operands import use_scratch_allocator

VARIANTS = {
    # label: keyword arguments of gluon_wgrad.persistent_wgrad
    "g-s3": {"stages": 3},
    "g-s2": {"stages": 2},
    "g-s3-devdesc": {"stages": 3, "device_desc": True},
    "g-s2-w4": {"stages": 2, "num_warps": 4},
    "g-s2-2x": {"stages": 2, "programs_per_sm": 2, "block_k": 64},
    "g-s4-c1": {"stages": 4, "c_bufs": 1},
    "g-256-s2-c1": {"stages": 2, "c_bufs": 1, "block_k": 256},
}


def emit(doc: dict) -> None:
    print(json.dumps(doc), flush=True)


def offsets_of(sizes: list[int], device) -> torch.Tensor:
    return torch.tensor([0, *accumulate(sizes)], dtype=torch.int32, device=device)


class Gluon:
    """One variant bound to one problem: G experts, [G, n, k] fp32 destination."""

    def __init__(self, options: dict, dy, x, sizes: list[int], dest: torch.Tensor):
        self.options = dict(options)
        self.dy, self.x, self.dest = dy, x, dest
        experts, n, k = dest.shape
        self.n, self.k = n, k
        device = dy.device
        self.offsets = offsets_of(sizes, device)
        self.entries = torch.arange(experts, dtype=torch.int32, device=device)
        self.rows = (self.entries * n).to(torch.int32)
        self.ptrs = None
        if self.options.pop("device_desc", False):
            self.ptrs = torch.tensor([dest[g].data_ptr() for g in range(experts)],
                                     dtype=torch.int64, device=device)  # fmt: skip
        per_sm = self.options.pop("programs_per_sm", 1)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        self.options["programs"] = self.options.get("programs") or sms * per_sm

    def __call__(self, accumulate_: bool) -> None:
        # Imported here, after the command line is checked: the Gluon API it uses is Triton
        # 3.6's, which older and newer Triton spell differently.
        import gluon_wgrad  # beside this file

        gluon_wgrad.persistent_wgrad(
            self.dy, self.x, self.dest.view(-1, self.k), self.rows, self.entries, self.offsets,
            self.n, self.k, accumulate_, dest_ptrs=self.ptrs, **self.options,
        )  # fmt: skip


def reference(dy, x, sizes, start, accumulate_):
    out = start.clone() if accumulate_ else torch.zeros_like(start)
    first = 0
    for g, rows in enumerate(sizes):
        if rows:
            out[g] += dy[first : first + rows].float().t() @ x[first : first + rows].float()
        first += rows
    return out


def check_small(label: str, options: dict) -> bool:
    """Ragged cases against torch; True when every one passes."""
    ok = True
    gen = torch.Generator(device="cuda").manual_seed(3)
    for sizes, n, k in (
        ([100, 0, 37, 200, 64, 1], 256, 320),
        ([0, 0, 129], 128, 128),
        ([64, 64, 64, 64], 384, 200),
        ([1000, 24, 0, 7], 128, 520),
    ):
        rows = sum(sizes)
        dy = torch.randn(rows, n, generator=gen, device="cuda").to(torch.bfloat16)
        x = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
        start = torch.randn(len(sizes), n, k, generator=gen, device="cuda")
        for accumulate_ in (False, True):
            dest = torch.empty_like(start)
            doc = {"check": label, "sizes": sizes, "n": n, "k": k, "accumulate": accumulate_}
            try:
                for programs in (None, 1, 3):
                    # One program (and three) walk several tiles each: the ring's phases,
                    # the store buffers and their waits across tiles, which the default
                    # grid (one tile per program at these sizes) never reaches.
                    dest.copy_(start) if accumulate_ else dest.fill_(float("nan"))
                    Gluon({**options, "programs": programs}, dy, x, sizes, dest)(accumulate_)
                    torch.cuda.synchronize()
                    want = reference(dy, x, sizes, start, accumulate_)
                    err = ((dest - want).abs().max() / want.abs().max()).item()
                    good = err < 1e-5 and not dest.isnan().any().item()
                    emit({**doc, "programs": programs, "max_rel_error": err, "ok": good})
                    ok = ok and good
            except Exception as exc:  # a compiler or launch refusal is this variant's answer
                emit({**doc, "error": f"{type(exc).__name__}: {exc}"[:400]})
                return False
    return ok


def fill_ms(dest: torch.Tensor) -> float:
    return triton.testing.do_bench(lambda: dest.fill_(0.0))


def probe_gemm(shape: str, load: str, gemm: str, dy, x, sizes, splits, good: dict) -> None:
    experts = len(sizes)
    n, k = dy.shape[1], x.shape[1]
    # Two [G, n, k] fp32 tensors (DeepSeek's fc1: 30 GB each), production's regions and the
    # variant's destination, plus every fourth expert of production's result and the
    # comparison's temporaries (about 83 GB at the peak: an H200 holds it, an 80 GB card
    # runs out on DeepSeek's fc1, which main() records); the accumulate mode's starting
    # values are drawn again from a seed.
    prod = torch.empty(experts, n, k, device="cuda")
    dest = torch.empty_like(prod)
    regions = list(prod.unbind(0))
    destinations = list(enumerate(regions))

    def reset(tensor: torch.Tensor, accumulate_: bool) -> None:
        if accumulate_:
            tensor.normal_(generator=torch.Generator(device="cuda").manual_seed(1))
        else:
            tensor.fill_(float("nan"))

    def production(accumulate_: bool) -> None:
        grouped_ops.grouped_wgrad(dy, x, splits, destinations, accumulate=accumulate_)

    base = {"shape": shape, "load": load, "gemm": gemm, "n": n, "k": k}
    offs = torch.tensor(list(accumulate(sizes)), dtype=torch.int32, device="cuda")
    timed = {"bf16-grouped-mm": lambda: torch._grouped_mm(dy.t(), x, offs=offs),
             "fill": lambda: dest.fill_(0.0)}  # fmt: skip
    for mode, accumulate_ in (("overwrite", False), ("accumulate", True)):
        reset(prod, accumulate_)
        production(accumulate_)
        want = prod[::4].clone()
        scale = want.abs().max().item()
        runs = {"production": lambda a=accumulate_: production(a)}
        for label, options in good.items():
            reset(dest, accumulate_)
            run = Gluon(options, dy, x, sizes, dest)
            try:
                run(accumulate_)
                torch.cuda.synchronize()
            except Exception as exc:
                emit({**base, "mode": mode, "variant": label,
                      "error": f"{type(exc).__name__}: {exc}"[:400]})  # fmt: skip
                continue
            err = (dest[::4] - want).abs().max().item() / scale
            emit({**base, "mode": mode, "variant": label, "max_rel_difference": err})
            if err < 1e-4 and not dest.isnan().any().item():  # NaN: a tile left unwritten
                runs[label] = lambda run=run, a=accumulate_: run(a)
        del want
        if mode == "overwrite":
            runs.update(timed)
        times: dict[str, list[float]] = {}
        for _ in range(2):
            for label, fn in runs.items():
                times.setdefault(label, []).append(round(triton.testing.do_bench(fn), 3))
        emit({**base, "mode": mode, "ms": times})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=probe_shapes.shape_names, default="deepseek,qwen3,mixtral")
    args = parser.parse_args()
    use_scratch_allocator()
    emit({"torch": torch.__version__, "triton": triton.__version__,
          "device": torch.cuda.get_device_name()})  # fmt: skip
    good = {label: opts for label, opts in VARIANTS.items() if check_small(label, opts)}
    emit({"passed_small_checks": sorted(good)})
    if not good:
        return
    for name in args.shapes:
        ops = probe_shapes.wgrad_operands(name)
        for load in ("uniform", "skewed"):
            sizes = split_sizes(PRESETS[name], load)
            splits = torch.tensor(sizes, dtype=torch.int32, device="cuda")
            for gemm, (a, b) in (("fc2", (ops.dy, ops.act)), ("fc1", (ops.dh, ops.x))):
                try:
                    probe_gemm(name, load, gemm, a, b, sizes, splits, good)
                except torch.cuda.OutOfMemoryError as exc:  # an 80 GB card on DeepSeek's fc1
                    emit({"shape": name, "load": load, "gemm": gemm, "error": str(exc)[:200]})
                torch.cuda.empty_cache()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
