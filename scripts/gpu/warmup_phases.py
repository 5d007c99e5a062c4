"""Time the two phases of the parallel warm-up (gmlp_check/warmup.py) on a GPU, with an empty
Triton cache: finding the kernels of the default CUDA matrix, then compiling them on workers.
Finding is timed twice: first running each case's pair (reference, fused side, comparison),
as the warm-up did before it ran the fused side alone (nothing is compiled, so the cache stays
empty), then as the warm-up does. Writes one JSON object to stdout: the counts, the seconds of
each phase, whether both findings agree, the kernels per name.

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


def find_with_pairs(plan: warmup.Plan, backend) -> list[warmup.KernelJob]:
    """The plan's kernels found by running each case's whole pair, every launch skipped."""
    import contextlib

    from gmlp_check.pair import run_pair

    jobs: dict[tuple[str, str, str], warmup.KernelJob] = {}

    def record(*, key, fn, compile, **_):
        module = getattr(fn.module, "__name__", fn.module)
        job = warmup.KernelJob(module, fn.name, compile["device"], compile["specialization_data"])
        jobs.setdefault((module, fn.name, str(key)), job)
        return True

    with warmup._jit_cache_hook(record):
        for case in plan.cases:
            with contextlib.suppress(Exception):
                run_pair(case, plan.sizes, plan.device, backend)
    return list(jobs.values())


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
    with_pairs = find_with_pairs(plan, backend)
    start_alone = time.perf_counter()
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
        "find_with_pairs_s": round(start_alone - start, 2),
        "find_s": round(found - start_alone, 2),
        "same_jobs": [(j.module, j.name, j.specialization) for j in with_pairs]
        == [(j.module, j.name, j.specialization) for j in jobs],
        "compile_s": round(compiled - found, 2),
        "per_kernel": dict(collections.Counter(j.name for j in jobs)),
    }
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
