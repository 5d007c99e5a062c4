"""Do side streams close Mixtral's weight-gradient gap to te-ops? (issue #21)

The alternated probe (wgrad_alternated_vs_te.py, H100, 2026-12-07) found te-ops 2.5 % ahead on
Mixtral's accumulating weight gradients, half of it on the device with the host hidden: both
run the same per-expert cuBLAS GEMM (fp32 output, beta = 1), but te-ops spreads a layer's
experts over four streams, so one GEMM's last partial wave overlaps the next one's first.
An earlier A/B of four side streams (2026-12-03, do_bench, no te-ops beside it) saw nothing.

This probe answers it in alternating rounds on one device: our module with the per-expert
route as shipped (serial), the same module with each layer's experts dealt round-robin over
two or four side streams that wait on the current stream and are waited for before the call
returns, and te-ops; the order rotates every round. Per way: the bench's events, the events
with the host hidden behind a spin kernel (wgrad_alternated_vs_te._Built), and the main_grads
compared with the serial way's (the same GEMMs on other streams: bit-identical expected).
Without Transformer Engine installed, te-ops is left out and the ways are compared among
themselves.

The stream variant lives here, not in fused/, until it is measured to help.

    python scripts/gpu/wgrad_streams_vs_te.py [--shapes mixtral] [--rounds 6]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Sequence

import probe_shapes  # beside this file
import torch
import triton
from wgrad_alternated_vs_te import _Built, _median  # beside this file

import gmlp_check.fused.mlp as fused_mlp
from gmlp_check.bench.phases import Workload
from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused.cublas_wgrad import per_expert_wgrad
from gmlp_check.fused.main_grad import WgradPlan

_SIDE: dict[int, list[torch.cuda.Stream]] = {}


def per_expert_wgrad_on_streams(
    dy: torch.Tensor, x: torch.Tensor, sizes: Sequence[int], plan: WgradPlan, count: int
) -> None:
    """per_expert_wgrad with expert i's GEMM on side stream i % count. The side streams start
    after everything already queued on the current stream (operands, zeroed regions) and the
    current stream waits for all of them before anything queued after this call: the
    operands and regions outlive their GEMMs for the caching allocator."""
    side = _SIDE.setdefault(count, [torch.cuda.Stream(dy.device) for _ in range(count)])
    main = torch.cuda.current_stream(dy.device)
    ready = main.record_event()
    starts = [0]
    for rows in sizes:
        starts.append(starts[-1] + rows)
    for stream in side:
        stream.wait_event(ready)
    for i, expert in enumerate(plan.experts):
        first, end = starts[expert.expert], starts[expert.expert + 1]
        if first == end and expert.accumulate:
            continue
        dy_g, x_g = dy[first:end], x[first:end]
        with torch.cuda.stream(side[i % count]):
            if expert.accumulate:
                torch.addmm(
                    expert.region, dy_g.t(), x_g, out_dtype=torch.float32, out=expert.region
                )
            else:
                torch.mm(dy_g.t(), x_g, out_dtype=torch.float32, out=expert.region)
    for stream in side:
        main.wait_stream(stream)


WAYS = {
    "serial": per_expert_wgrad,
    "streams2": lambda dy, x, s, p: per_expert_wgrad_on_streams(dy, x, s, p, 2),
    "streams4": lambda dy, x, s, p: per_expert_wgrad_on_streams(dy, x, s, p, 4),
}


def _te_ops_available() -> bool:
    """te-ops is compared where Transformer Engine is installed."""
    return importlib.util.find_spec("transformer_engine") is not None


def _timed(ours: _Built, theirs: _Built | None, way: str) -> dict:
    if way == "te-ops":
        return theirs.timed()
    fused_mlp.per_expert_wgrad = WAYS[way]
    return ours.timed()


def _sample(ours: _Built, way: str) -> torch.Tensor:
    fused_mlp.per_expert_wgrad = WAYS[way]
    return ours.sample()


def measure_mode(work: Workload, overwrite: bool, rounds: int) -> dict:
    ours = _Built("triton", work, overwrite)
    theirs = _Built("te-ops", work, overwrite) if _te_ops_available() else None
    names = (*WAYS, "te-ops") if theirs is not None else tuple(WAYS)
    for way in names:  # compile, autotune, warm the allocator and the side streams
        for _ in range(2):
            _timed(ours, theirs, way)
    per_round = []
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        per_round.append({"first": order[0], **{w: _timed(ours, theirs, w) for w in order}})
    # Accumulating, each sample adds one more step onto main_grad: a way is judged on what it
    # added (its sample less the one before), the serial way's increment being the reference.
    last = _sample(ours, "serial")

    def added(way: str) -> torch.Tensor:
        nonlocal last
        before, last = last, _sample(ours, way)
        return last if overwrite else last - before

    reference = added("serial")
    errors = {w: float((added(w) - reference).abs().max()) for w in WAYS}
    if theirs is not None:
        before = theirs.sample()
        theirs_added = theirs.sample() if overwrite else theirs.sample() - before
        errors["te-ops"] = float((theirs_added - reference).norm() / reference.norm())
    fused_mlp.per_expert_wgrad = per_expert_wgrad

    def medians(key: str) -> dict:
        return {w: _median([r[w][key] for r in per_round]) for w in names}

    def ratios(key: str, over: str, ways) -> dict:
        return {w: round(_median([r[over][key] / r[w][key] for r in per_round]), 4) for w in ways}

    return {
        "rounds": per_round,
        "median_events_ms": medians("events_ms"),
        "median_device_only_ms": medians("device_only_ms"),
        "median_te_over_way": ratios("events_ms", "te-ops", WAYS) if theirs is not None else {},
        "median_serial_over_way_device_only": ratios("device_only_ms", "serial", names),
        "max_abs_diff_vs_serial": {w: errors[w] for w in WAYS},
        "te_rel_error_vs_serial": errors.get("te-ops"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=probe_shapes.shape_names, default="mixtral")
    parser.add_argument("--loads", default="uniform,skewed")
    parser.add_argument("--rounds", type=int, choices=range(2, 41), default=6, metavar="2..40")
    args = parser.parse_args()
    results = []
    for name in args.shapes:
        shape = PRESETS[name]
        for load in args.loads.split(","):
            sizes = split_sizes(shape, load)
            work = Workload(shape, load, sizes, torch.bfloat16, torch.device("cuda"), False)
            doc: dict = {"shape": name, "load": load}
            for mode, overwrite in (("accumulate", False), ("overwrite", True)):
                doc[mode] = measure_mode(work, overwrite, args.rounds)
                torch.cuda.empty_cache()
            results.append(doc)
            keys = ("median_events_ms", "median_serial_over_way_device_only")
            brief = {m: {k: doc[m][k] for k in keys} for m in ("accumulate", "overwrite")}
            print(json.dumps({"shape": name, "load": load, **brief}), file=sys.stderr, flush=True)
    versions = {"torch": torch.__version__, "triton": triton.__version__}
    print(json.dumps({**versions, "device": torch.cuda.get_device_name(), "results": results}))


if __name__ == "__main__":
    main()
