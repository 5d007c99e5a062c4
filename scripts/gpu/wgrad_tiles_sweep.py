"""Sweep on a GPU: tile and store variants of the short-reduction weight-gradient kernel
("wgrad" tiles: Qwen3's and DeepSeek-V3's experts), overwriting and accumulating.

Question: DeepSeek-V3's wgrad-overwrite trails te-ops (0.77x in docs/bench-h200.json); its
kernels write 45 GB of fp32 at about 2.7 TB/s with two 8-warp programs per multiprocessor.
The overwrite kernel was only ever timed with 8-warp 128x128 / 128x256 tiles
(scripts/tune_variants.py). Do smaller tiles with more programs in flight, one reduction step
per program (BLOCK_T = 128 for DeepSeek's 128 rows per expert), fewer stages, or an
evict-first hint on the fp32 store (``Tiles.evict_first_dest``) raise the write rate, and what
do they do to the accumulate mode and to Qwen3?

For each shape (bf16, uniform load, discrete fp32 regions as the module hands them) and each
of fc1's and fc2's weight gradients, production's result is computed first in both modes
(overwrite over NaN-poisoned regions, so a tile left unwritten shows; accumulate from a known
start); each variant is checked against it (max |difference| / max |result|), then timed with
triton.testing.do_bench (median ms, L2 cleared before each call), two passes in turn. One JSON
line per (shape, gemm, mode, variant) on stdout as it is measured, so a run cut short keeps
what it measured.

    python scripts/gpu/wgrad_tiles_sweep.py [--shapes deepseek,qwen3] [--table tiles|raster|paired]
        [--load uniform|skewed]

The ``paired`` table (2026-12-06, eighteenth session) asks why DeepSeek-V3's skewed accumulate
loses to te-ops (0.90x) while its uniform one wins: with expert-major programs a heavy
expert's long, compute-bound programs run together and the light experts' short, memory-bound
ones after them. ``Tiles.paired`` alternates the programs of a heavy and a light expert. A
first question of the same session, answered no on an H100
(docs/gpu-runs/h100-session-2026-12-06c/): an expert's last partial row block through TMA
with the rows past its end zeroed (5-20 % slower, also where no expert has such a block), and
leaving the experts without rows out of an accumulating launch (within 1 %).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import probe_shapes  # beside this file
import torch
import triton

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.tiles import Tiles, tiles_for

T = Tiles


def variants() -> list[tuple[str, Tiles]]:
    """(label, tiles): production first. A label spells BLOCK_T x BLOCK_N x BLOCK_K, warps,
    stages, then r (register cap), g (group), e (evict-first store) where set."""
    prod = tiles_for("wgrad", torch.device("cuda"), torch.bfloat16)
    tma = {"tma": True, "start_from_dest": True}
    return [
        ("production", prod),
        ("production+e", dataclasses.replace(prod, evict_first_dest=True)),
        ("64x128x128w8s2r128", T(64, 128, 128, 8, 2, max_registers=128, **tma)),
        ("128x128x128w8s2", T(128, 128, 128, 8, 2, **tma)),
        ("128x128x128w8s2r128", T(128, 128, 128, 8, 2, max_registers=128, **tma)),
        ("64x64x128w4s2r128", T(64, 64, 128, 4, 2, max_registers=128, **tma)),
        (
            "64x64x128w4s2r128e",
            T(64, 64, 128, 4, 2, max_registers=128, evict_first_dest=True, **tma),
        ),
        ("64x128x64w4s2r128", T(64, 128, 64, 4, 2, max_registers=128, **tma)),
        ("128x64x128w4s2", T(128, 64, 128, 4, 2, **tma)),
        ("64x64x64w4s3", T(64, 64, 64, 4, 3, **tma)),
        ("32x128x128w8s3r128", T(32, 128, 128, 8, 3, max_registers=128, **tma)),
        ("64x128x128w8s3r128g16", dataclasses.replace(prod, group=16)),
        ("64x128x128w8s3r128g2", dataclasses.replace(prod, group=2)),
        ("64x256x128w8s2", T(64, 256, 128, 8, 2, **tma)),
        ("64x128x128w4s2", T(64, 128, 128, 4, 2, **tma)),
    ]


def emit(doc: dict) -> None:
    print(json.dumps(doc), flush=True)


def raster_variants() -> list[tuple[str, Tiles]]:
    """The 2026-12-05 question: the order in which an expert's output tiles run. With group g,
    g row tiles of main_grad sweep its columns together; g = 1 writes each 128-row band left to
    right, so the programs in flight write long runs of the same rows (fewer DRAM pages open)
    instead of 512-byte pieces of g bands. In the 2026-12-04 sweep group 2 beat production's 8
    on DeepSeek fc1 overwrite (10.54 against 11.01 ms) and 16 lost."""
    prod = tiles_for("wgrad", torch.device("cuda"), torch.bfloat16)
    tma = {"tma": True, "start_from_dest": True}
    return [
        ("production", prod),
        ("production-g1", dataclasses.replace(prod, group=1)),
        ("production-g2", dataclasses.replace(prod, group=2)),
        ("production-g4", dataclasses.replace(prod, group=4)),
        ("production-g1+e", dataclasses.replace(prod, group=1, evict_first_dest=True)),
        ("64x64x256w8s3r128g1", T(64, 64, 256, 8, 3, group=1, max_registers=128, **tma)),
        ("64x128x256w8s3g1", T(64, 128, 256, 8, 3, group=1, **tma)),
        ("64x128x64w4s2r128g1", T(64, 128, 64, 4, 2, group=1, max_registers=128, **tma)),
        ("64x128x128w4s2g1", T(64, 128, 128, 4, 2, group=1, **tma)),
    ]


def paired_variants() -> list[tuple[str, Tiles]]:
    """The eighteenth session's question (module docstring): heavy-light pairs."""
    prod = tiles_for("wgrad", torch.device("cuda"), torch.bfloat16)
    return [("production", prod), ("production+paired", dataclasses.replace(prod, paired=True))]


TABLES = {"tiles": variants, "raster": raster_variants, "paired": paired_variants}


def sweep_gemm(shape: str, load: str, label: str, dy, x, splits, table) -> None:
    experts = splits.shape[0]
    n, k = dy.shape[1], x.shape[1]
    # The accumulating start is drawn again from seed 1 at every reset rather than kept, and
    # production's result is kept in host memory: two more copies of DeepSeek-V3's fc1
    # regions (30 GB each) beside them would not fit an H100's memory.
    regions = [torch.empty(n, k, device=dy.device) for _ in range(experts)]
    destinations = list(enumerate(regions))

    def run(tiles: Tiles, accumulate: bool) -> None:
        grouped_ops.grouped_wgrad(dy, x, splits, destinations, accumulate=accumulate, tiles=tiles)

    def reset(accumulate: bool) -> None:
        g = torch.Generator(device=dy.device).manual_seed(1)
        for region in regions:
            if accumulate:
                region.normal_(generator=g)
            else:
                region.fill_(float("nan"))

    for mode, accumulate in (("overwrite", False), ("accumulate", True)):
        reset(accumulate)
        run(table[0][1], accumulate)
        reference = [r.cpu() for r in regions]
        scale = max(r.abs().max().item() for r in regions)
        checked: list[tuple[str, Tiles]] = []
        for name, tiles in table:
            doc = {"shape": shape, "gemm": label, "mode": mode, "variant": name, "n": n, "k": k,
                   "load": load}  # fmt: skip
            try:
                reset(accumulate)
                run(tiles, accumulate)
                torch.cuda.synchronize()
            except Exception as exc:  # a compiler refusal is this variant's answer
                emit({**doc, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            worst = max(
                (r - ref.to(r.device)).abs().max().item() for r, ref in zip(regions, reference)
            )
            doc["max_rel_difference"] = worst / scale
            doc["nan"] = any(r.isnan().any().item() for r in regions)
            emit({**doc, "checked": True})
            if not doc["nan"] and doc["max_rel_difference"] < 1e-4:
                checked.append((name, tiles))
        del reference
        times: dict[str, list[float]] = {}
        for _ in range(2):
            for name, tiles in checked:
                ms = triton.testing.do_bench(lambda tiles=tiles, acc=accumulate: run(tiles, acc))
                times.setdefault(name, []).append(round(ms, 3))
        for name, ms in times.items():
            emit({"shape": shape, "load": load, "gemm": label, "mode": mode, "variant": name,
                  "ms": ms})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    # argparse hands a string default through ``type`` too
    parser.add_argument("--shapes", type=probe_shapes.shape_names, default="deepseek,qwen3")
    parser.add_argument("--table", choices=sorted(TABLES), default="tiles")
    parser.add_argument("--load", choices=("uniform", "skewed"), default="uniform")
    args = parser.parse_args()
    table = TABLES[args.table]()
    emit({"torch": torch.__version__, "triton": triton.__version__,
          "device": torch.cuda.get_device_name()})  # fmt: skip
    for name in args.shapes:
        ops = probe_shapes.wgrad_operands(name, load=args.load)
        for label, (a, b) in (("fc2", (ops.dy, ops.act)), ("fc1", (ops.dh, ops.x))):
            sweep_gemm(name, args.load, label, a, b, ops.splits, table)
            torch.cuda.empty_cache()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
