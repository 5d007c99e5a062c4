"""scripts/gpu/wgrad_variants_probe.py's kernel variants are correct: its --dry-run interprets
every variant on CPU (TRITON_INTERPRET=1, fp16, tiny sizes, persistent programs looping over
several tiles), each batch in a child process as on the GPU, and checks main_grad += dy_g^T x_g
against torch. The GPU timings are only worth
reading if this holds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton
from packaging.version import Version

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu" / "wgrad_variants_probe.py"


# The probe is written against the GPU machine's Triton (3.6): tl.range's flatten= and
# warp_specialize= and host tensor descriptors as 3.6 has them.
@pytest.mark.skipif(
    Version(triton.__version__) < Version("3.6"), reason="the probe targets Triton >= 3.6"
)
def test_every_wgrad_variant_is_correct_under_the_interpreter():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run"],
        env={**os.environ, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows and all(row["error"] is None and row["relerr"] < 1e-5 for row in rows), rows
    names = [row["variant"] for row in rows]
    assert len(set(names)) == len(names) >= 20
    # Persistent (1 and 2 programs per SM) and one-program-per-tile schedules all ran.
    assert {name[:3] for name in names} == {"np_", "p1_", "p2_"}
