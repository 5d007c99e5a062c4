"""Which kernel specializations a real run compiles that the warm-up's search did not find
(gmlp_check/warmup.py). Records Triton's launch keys three ways: the warm-up's search over
one case per compile key, the same search over every case, and a real run of every case
(the hook records, then lets Triton compile). Prints JSON: the counts and, for each key the
real run compiled that neither search found, its kernel, first case and constants.

    TRITON_CACHE_DIR=DIR python scripts/gpu/warmup_coverage.py
"""

from __future__ import annotations

import json
from typing import Any

import torch

from gmlp_check import backends, warmup
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import DEVICE_DTYPES, MatrixSelection, default_matrix
from gmlp_check.pair import run_pair


def search(cases, backend) -> dict[str, str]:
    plan = warmup.Plan(torch.device("cuda"), DEVICE_SIZES["cuda"], 1, tuple(cases), None)
    return {j.specialization: j.name for j in warmup.find_kernels(plan, backend, lambda n: None)}


def main() -> None:
    import triton

    cases = default_matrix(MatrixSelection(dtypes=DEVICE_DTYPES["cuda"]))
    backend = backends.load("triton")
    found = search(warmup.representatives(cases), backend)
    found_all = search(cases, backend)
    real: dict[str, dict[str, Any]] = {}
    current = {"case": ""}

    def record(*, key: Any, fn: Any, compile: dict, **_: Any) -> bool:
        data = compile["specialization_data"]
        real.setdefault(data, {"kernel": fn.name, "case": current["case"]})
        return False

    triton.knobs.runtime.jit_cache_hook = record
    for case in cases:
        current["case"] = case.id
        run_pair(case, DEVICE_SIZES["cuda"], torch.device("cuda"), backend)
    triton.knobs.runtime.jit_cache_hook = None
    missed = {k: v for k, v in real.items() if k not in found}
    missed_by_all = {k: v for k, v in real.items() if k not in found_all}
    extra = [v for k, v in found.items() if k not in real]
    doc = {
        "found": len(found),
        "found_all_cases": len(found_all),
        "real": len(real),
        "missed": len(missed),
        "missed_by_all_cases": len(missed_by_all),
        "found_not_run": extra,
        "missed_detail": [
            {**v, "specialization": json.loads(k)} for k, v in list(missed.items())[:12]
        ],
        "found_same_kernel": [
            json.loads(k)
            for k, name in found.items()
            if missed and name == next(iter(missed.values()))["kernel"]
        ][:3],
    }
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
