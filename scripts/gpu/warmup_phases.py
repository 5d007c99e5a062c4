"""Time the two phases of the parallel warm-up (gmlp_check/warmup.py) on a GPU, with an empty
Triton cache: finding the kernels of the default CUDA matrix, then compiling them on workers.
Writes one JSON object to stdout: the counts, the seconds of each phase, the kernels per name.

    TRITON_CACHE_DIR=$(mktemp -d) python scripts/gpu/warmup_phases.py [WORKERS]
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from pathlib import Path

import torch

from gmlp_check import backends, warmup
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import DEVICE_DTYPES, MatrixSelection, default_matrix


def main() -> None:
    workers = (
        int(sys.argv[1])
        if len(sys.argv) > 1
        else warmup.default_workers(True, torch.device("cuda"), 2)
    )
    device = torch.device("cuda")
    cases = default_matrix(MatrixSelection(dtypes=DEVICE_DTYPES["cuda"]))
    chosen = tuple(warmup.representatives(cases))
    plan = warmup.Plan(device, DEVICE_SIZES["cuda"], workers, chosen, None)
    backend = backends.load("triton")
    start = time.perf_counter()
    jobs = warmup.find_kernels(plan, backend, lambda n: None)
    found = time.perf_counter()
    warmup.compile_kernels(plan, jobs, lambda n: None)
    compiled = time.perf_counter()
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    doc = {
        "cases": len(cases),
        "representatives": len(chosen),
        "workers": workers,
        "jobs": len(jobs),
        "cubins": len(list(cache.rglob("*.cubin"))),
        "find_s": round(found - start, 2),
        "compile_s": round(compiled - found, 2),
        "per_kernel": dict(collections.Counter(j.name for j in jobs)),
    }
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
