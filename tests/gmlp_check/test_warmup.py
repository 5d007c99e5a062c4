"""The parallel compile before a run (gmlp_check.warmup): which cases it runs, where, and that
a finished warm-up is not repeated. The GPU test checks that it fills Triton's cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gmlp_check import warmup
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import MatrixSelection, default_matrix

FUSED_SOURCES = Path(__file__).resolve().parents[2] / "fused"


def _cases():
    return default_matrix(MatrixSelection(dtypes=("fp32",)))


def test_one_case_per_compile_key_and_no_key_twice():
    cases = _cases()
    chosen = warmup.representatives(cases)
    keys = [warmup.compile_key(c) for c in chosen]
    assert len(set(keys)) == len(keys)
    assert {warmup.compile_key(c) for c in cases} == set(keys)
    assert len(chosen) < len(cases)  # microbatches, delay and zero_out share kernels


def test_no_workers_on_cpu_or_for_a_backend_that_does_not_compile():
    cuda = torch.device("cuda")
    assert warmup.default_workers(True, torch.device("cpu"), 10) == 0
    assert warmup.default_workers(False, cuda, 10) == 0
    assert warmup.default_workers(True, cuda, 1) == 0
    assert 0 <= warmup.default_workers(True, cuda, 10) <= warmup.MAX_WORKERS


def test_stages_cover_each_key_once(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    cases = _cases()
    plan = warmup.plan("triton", FUSED_SOURCES, torch.device("cpu"), DEVICE_SIZES["cpu"], cases, 3)
    assert plan is not None and plan.workers == 3
    spread = [c for stage in plan.stages for c in stage]
    assert sorted(map(repr, spread)) == sorted(map(repr, warmup.representatives(cases)))
    # The first stage holds one case per set of shared kernels, the second none of those.
    first = [warmup.shared_key(c) for c in plan.stages[0]]
    assert len(first) == len(set(first)) == len({warmup.shared_key(c) for c in cases})
    assert plan.marker is not None and plan.marker.is_relative_to(tmp_path)


def test_a_finished_warm_up_is_not_repeated(monkeypatch, tmp_path):
    """Real worker processes run two cases' pairs (CPU, the interpreter); the marker they
    leave makes the same plan empty, and a change of the backend's sources does not."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    cases = [c for c in _cases() if c.mode == "accumulate-ddp"][:2]
    sizes = DEVICE_SIZES["cpu"]
    cpu = torch.device("cpu")
    plan = warmup.plan("triton", FUSED_SOURCES, cpu, sizes, cases, 2)
    assert plan is not None
    done: list[int] = []
    warmup.run(plan, done.append)
    assert sum(done) == plan.cases == 2
    assert plan.marker is not None and plan.marker.exists()
    assert warmup.plan("triton", FUSED_SOURCES, cpu, sizes, cases, 2) is None
    changed = tmp_path / "sources"
    changed.mkdir()
    (changed / "kernel.py").write_text("# another version\n")
    assert warmup.plan("triton", changed, cpu, sizes, cases, 2) is not None
    # Anyone's factory has no known sources: it warms every time it is asked to.
    assert warmup.plan("triton", None, cpu, sizes, cases, 2) is not None


def test_negative_workers_is_a_usage_error():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gmlp_check.cli",
            "diff",
            "--device",
            "cpu",
            "-k",
            "mb=1",
            "--compile-workers",
            "-1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--compile-workers" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.gpu
def test_cold_run_compiles_in_workers_then_a_warm_run_starts_none(tmp_path):
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    command = [
        sys.executable,
        "-m",
        "gmlp_check.cli",
        "diff",
        "--device",
        "cuda",
        "--dtype",
        "bf16",
        "-k",
        "mb=1 and bias=0",
        "--format",
        "json",
    ]
    cold = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert cold.returncode == 0, cold.stderr[-2000:]
    markers = list((tmp_path / "cache" / "gmlp-check-warm").iterdir())
    assert len(markers) == 1
    compiled = {p for p in (tmp_path / "cache").rglob("*.cubin")}
    assert compiled
    warm = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert warm.returncode == 0, warm.stderr[-2000:]
    # Nothing new compiled: every kernel came from the cache the workers filled.
    assert {p for p in (tmp_path / "cache").rglob("*.cubin")} == compiled
