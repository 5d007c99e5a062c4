"""Which kernels a real run compiles again after the warm-up filled the cache, and how their
cache entries differ from the warm-up's (Triton's metadata JSON of each entry). Prints JSON.

    TRITON_CACHE_DIR=$(mktemp -d) python scripts/gpu/warmup_mismatch.py
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import torch

from gmlp_check import backends, warmup
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import DEVICE_DTYPES, MatrixSelection, default_matrix
from gmlp_check.pair import run_pair


def entries(cache: Path) -> dict[str, dict]:
    found = {}
    for cubin in cache.rglob("*.cubin"):
        meta = cubin.with_suffix(".json")
        found[str(cubin.parent)] = json.loads(meta.read_text()) if meta.exists() else {}
    return found


def main() -> None:
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    cases = default_matrix(MatrixSelection(dtypes=DEVICE_DTYPES["cuda"]))
    device = torch.device("cuda")
    plan = warmup.Plan(device, DEVICE_SIZES["cuda"], 15, tuple(warmup.representatives(cases)), None)
    backend = backends.load("triton")
    jobs = warmup.find_kernels(plan, backend, lambda n: None)
    warmup.compile_kernels(plan, jobs, lambda n: None)
    before = entries(cache)
    for case in cases:
        run_pair(case, DEVICE_SIZES["cuda"], device, backend)
    after = entries(cache)
    new = {d: m for d, m in after.items() if d not in before}
    diffs = []
    for meta in list(new.values())[:6]:
        same = [m for m in before.values() if m.get("name") == meta.get("name")]
        best = min(same, key=lambda m: sum(m.get(k) != v for k, v in meta.items()), default={})
        diffs.append(
            {
                "name": meta.get("name"),
                "differs": {k: [best.get(k), v] for k, v in meta.items() if best.get(k) != v},
            }
        )
    doc = {
        "jobs": len(jobs),
        "after_warm_up": len(before),
        "new_in_run": len(new),
        "new_by_kernel": dict(collections.Counter(m.get("name") for m in new.values())),
        "diffs": diffs,
    }
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
