"""Where a `gmlp-check diff` run spends its time: the CLI run in this process with each phase
timed (imports, the warm-up's finding and compiling, the cases, the rest), and the Triton
cache counted before and after the cases (kernels and, for Triton before 3.7, the C launchers
a first launch compiles). Run it twice on one TRITON_CACHE_DIR, empty the first time, for a
cold and a warm timeline. Writes one JSON object to the file given, then exits with the CLI's
status.

    TRITON_CACHE_DIR=$(mktemp -d) python scripts/gpu/cold_timeline.py OUT.json \\
        --device cuda --megatron emulated --format json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

START = time.perf_counter()
marks: list[tuple[str, float]] = [("start", 0.0)]


def mark(name: str) -> None:
    marks.append((name, round(time.perf_counter() - START, 3)))


def cache_counts() -> dict[str, int]:
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    return {
        "cubins": len(list(cache.rglob("*.cubin"))),
        "launchers": len(list(cache.rglob("__triton_launcher*"))),
    }


def timed(module, name: str):
    """Wrap module.name so that its start and end are marked."""
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        mark(f"{name} start")
        try:
            return inner(*args, **kwargs)
        finally:
            mark(f"{name} end")

    setattr(module, name, wrapper)


def main() -> int:
    output = Path(sys.argv[1])
    from gmlp_check import cli, warmup

    mark("imported")
    timed(warmup, "find_kernels")
    timed(warmup, "compile_kernels")
    counts = {}
    run_cases = cli.run_with_progress

    def cases(*args, **kwargs):
        counts["before_cases"] = cache_counts()
        mark("cases start")
        try:
            return run_cases(*args, **kwargs)
        finally:
            mark("cases end")
            counts["after_cases"] = cache_counts()

    cli.run_with_progress = cases
    status = 0
    try:
        result = cli.main(["diff", *sys.argv[2:]], standalone_mode=False)
        status = result if isinstance(result, int) else 0
    except SystemExit as exc:
        status = exc.code or 0
    mark("done")
    output.write_text(json.dumps({"marks": dict(marks), "cache": counts}, indent=1) + "\n")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
