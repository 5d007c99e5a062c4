"""A/B of the row GEMMs' weight loads with discrete weights on a GPU: a TMA descriptor per
expert made on the device (the launchers' choice) against pointer loads (the choice before
it), on every preset shape, both loads, phases forward, dgrad and step, triton only. Runs
`gmlp-check bench` in this process three times, A B A, so drift shows; writes the three
documents and a summary JSON (median ms per workload and pass) to the folder given.

    python scripts/gpu/per_expert_desc_ab.py OUTDIR
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from gmlp_check import cli
from gmlp_check.fused import grouped_ops, operands

ARGS = [
    "bench", "--device", "cuda", "--shape", "all", "--load", "both", "--weights", "discrete",
    "--impl", "triton", "--phases", "forward,dgrad,step", "--no-progress",
]  # fmt: skip


def pointers_instead(chosen):
    """row_operands, with a per-expert-descriptor choice replaced by pointer loads."""

    def row_operands(a, mats, *, transpose, tiles):
        ops = chosen(a, mats, transpose=transpose, tiles=tiles)
        if ops.per_expert_desc:
            return operands.RowOperands(False, False, a, a, 0, mats.pointers)
        return ops

    return row_operands


def run(out: Path, name: str) -> dict:
    path = out / f"{name}.json"
    with contextlib.suppress(SystemExit):
        cli.main([*ARGS, "--output", str(path)], standalone_mode=False)
    doc = json.loads(path.read_text())
    return {
        f"{r['shape']}/{r['load']}/{r['phase']}": r["median_ms"]
        for r in doc["results"]
        if r["impl"] == "triton"
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    chosen = grouped_ops.row_operands
    passes = {"per-expert-1": run(out, "per-expert-1")}
    grouped_ops.row_operands = pointers_instead(chosen)
    passes["pointers"] = run(out, "pointers")
    grouped_ops.row_operands = chosen
    passes["per-expert-2"] = run(out, "per-expert-2")
    keys = passes["pointers"].keys()
    summary = {
        k: {name: p.get(k) for name, p in passes.items()}
        | {"pointers / per-expert": round(passes["pointers"][k] / passes["per-expert-1"][k], 3)}
        for k in keys
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
