"""The GPU weight-gradient probes' kernels are correct in every variant they time, under
Triton's interpreter on CPU (TRITON_INTERPRET=1, fp16, tiles a quarter of the GPU's,
persistent programs looping over several tiles), against torch's fp32 sums:

* scripts/gpu/wgrad_variants_probe.py's --dry-run: each batch of variants in a child process
  as on the GPU, main_grad += dy_g^T x_g;
* scripts/gpu/wgrad_prologue_probe.py --interpret: per-entry row tables in place of the scan;
* scripts/gpu/wgrad_ws_probe.py's --interpret: the warp-specialised kernel accumulating and
  overwriting, the variants that clip x at the expert's end on ragged splits with an empty
  expert and rows past the last.

The GPU timings (docs/perf-notes.md) are only worth reading if this holds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton
from packaging.version import Version

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "gpu"

# The probes are written against the GPU machine's Triton (3.6): tl.range's flatten= and
# warp_specialize=, host tensor descriptors and those made on the device as 3.6 has them.
needs_triton_36 = pytest.mark.skipif(
    Version(triton.__version__) < Version("3.6"), reason="the probes target Triton >= 3.6"
)


def _interpreted_rows(script: str, flag: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / script), flag],
        env={**os.environ, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@needs_triton_36
def test_every_wgrad_variant_is_correct_under_the_interpreter():
    rows = _interpreted_rows("wgrad_variants_probe.py", "--dry-run")
    assert rows and all(row["error"] is None and row["relerr"] < 1e-5 for row in rows), rows
    names = [row["variant"] for row in rows]
    assert len(set(names)) == len(names) >= 20
    # Persistent (1 and 2 programs per SM) and one-program-per-tile schedules all ran.
    assert {name[:3] for name in names} == {"np_", "p1_", "p2_"}


@needs_triton_36
def test_every_warp_specialised_wgrad_variant_is_correct_under_the_interpreter():
    rows = _interpreted_rows("wgrad_ws_probe.py", "--interpret")
    assert rows and all(row["relerr"] < 1e-5 for row in rows), rows
    checked = {(row["checked"], row["accumulate"]) for row in rows}
    variants = {name for name, _ in checked}
    assert len(checked) == 2 * len(variants) >= 20  # every variant, both modes
    # Both schedules (persistent, one program per tile) and the clipped ragged splits ran.
    assert {name[:3] for name in variants} == {"np_", "p1_"}
    assert any(0 in row["sizes"] for row in rows if row["checked"].endswith("_clip"))


def test_the_prologue_probe_kernel_is_correct_under_the_interpreter():
    """scripts/gpu/wgrad_prologue_probe.py --interpret: ragged splits with an empty expert,
    experts listed backwards with one left out, both modes; the script itself asserts torch's
    fp32 sums and stops at the first variant that differs from production."""
    rows = _interpreted_rows("wgrad_prologue_probe.py", "--interpret")
    assert {(row["variant"], row["mode"]) for row in rows} == {
        (variant, mode)
        for variant in ("production", "entry-rows")
        for mode in ("overwrite", "accumulate")
    }
    assert all(row["identical"] for row in rows), rows
