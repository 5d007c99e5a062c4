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
from gmlp_check.backends import Backend
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import Case, MatrixSelection, default_matrix
from gmlp_check.pair import run_fused_side, run_pair
from gmlp_check.refimpl import GroupedMLP

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


def test_nothing_to_warm_on_the_cpu_or_without_workers():
    cases = _cases()
    sizes = DEVICE_SIZES["cpu"]
    assert warmup.plan("triton", FUSED_SOURCES, torch.device("cpu"), sizes, cases, 4) is None
    assert warmup.plan("triton", FUSED_SOURCES, torch.device("cuda"), sizes, cases, 0) is None


def test_the_marker_is_keyed_by_sources_device_and_cases(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    cases = _cases()
    sizes = DEVICE_SIZES["cuda"]
    marker = warmup.warm_marker("triton", FUSED_SOURCES, "GPU A", sizes, cases)
    assert marker is not None and marker.parent == tmp_path / "cache" / "gmlp-check-warm"
    assert warmup.warm_marker("triton", FUSED_SOURCES, "GPU A", sizes, cases) == marker
    changed = tmp_path / "sources"
    changed.mkdir()
    (changed / "kernel.py").write_text("# another version\n")
    others = [
        warmup.warm_marker("triton", changed, "GPU A", sizes, cases),
        warmup.warm_marker("triton", FUSED_SOURCES, "GPU B", sizes, cases),
        warmup.warm_marker("triton", FUSED_SOURCES, "GPU A", sizes, cases[:1]),
    ]
    assert marker not in others and len(set(others)) == 3
    # Anyone's factory has no known sources: it warms every time it is asked to.
    assert warmup.warm_marker("triton", None, "GPU A", sizes, cases) is None


def test_a_finished_warm_up_leaves_its_marker(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    cases = tuple(_cases()[:2])
    marker = warmup.warm_marker("triton", FUSED_SOURCES, "GPU A", DEVICE_SIZES["cuda"], cases)
    assert marker is not None and not marker.exists()
    plan = warmup.Plan(torch.device("cuda"), DEVICE_SIZES["cuda"], 2, cases, marker)
    warmup.compile_kernels(plan, [], lambda n: None)
    assert marker.exists()


def test_the_workers_start_in_the_background_and_stop_on_leaving():
    """Starting the pool (the fork server's imports, each worker's start) is left to a thread,
    so the caller finds kernels meanwhile; leaving stops every worker."""
    plan = warmup.Plan(torch.device("cuda"), DEVICE_SIZES["cuda"], 2, tuple(_cases()[:1]), None)
    with warmup.workers(plan) as pool:
        # The fork server imports torch before the first worker exists: not done yet.
        assert not pool.done()
        assert pool.result().apply(os.getpid) != os.getpid()
        processes = list(pool.result()._pool)
    assert processes and not any(p.is_alive() for p in processes)


def test_every_fused_kernel_is_found_by_module_and_name():
    """What the workers look up from Triton's record of a launch (its kernel's module and
    qualified name) is the compiled kernel the fused path launches."""
    import importlib
    import pkgutil

    from gmlp_check.fused import kernels
    from gmlp_check.fused.dual_jit import DualKernel

    found = 0
    for info in pkgutil.iter_modules(kernels.__path__, kernels.__name__ + "."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, DualKernel) and value.fn.__module__ == info.name:
                assert value.compiled is not None
                assert warmup.jit_function(info.name, value.fn.__qualname__) is value.compiled
                found += 1
    assert found >= 5
    assert warmup.jit_function(kernels.__name__ + ".wgrad", "no_such_kernel") is None


def _recording_backend(calls: list) -> Backend:
    """The reference module as a fused side, recording what the checker feeds it."""

    def factory(**kwargs):
        module = GroupedMLP(**kwargs)
        forward, backward_dw = module.forward, module.backward_dw

        def recorded_forward(x, split_sizes, probs=None):
            splits = [int(s) for s in split_sizes]
            calls.append(("forward", x.dtype, float(x.double().sum()), splits))
            return forward(x, split_sizes, probs)

        def recorded_backward_dw():
            calls.append(("backward_dw",))
            return backward_dw()

        module.forward, module.backward_dw = recorded_forward, recorded_backward_dw
        return module

    return Backend("recording", factory)


@pytest.mark.parametrize("case_id", [c.id for c in _cases() if c.microbatches == 2][:3])
def test_the_fused_side_alone_gets_what_it_gets_in_a_pair(case_id):
    """What the warm-up runs to find a case's kernels feeds the fused side the same inputs,
    in the same calls, as the checked run does."""
    case = Case.from_id(case_id)
    in_pair, alone = [], []
    run_pair(case, DEVICE_SIZES["cpu"], torch.device("cpu"), _recording_backend(in_pair))
    run_fused_side(case, DEVICE_SIZES["cpu"], torch.device("cpu"), _recording_backend(alone))
    assert any(call[0] == "forward" for call in alone)
    assert alone == in_pair


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
def test_the_warm_up_compiles_every_kernel_the_run_launches(tmp_path):
    """In a fresh process with an empty cache: find the kernels of two cases, compile them
    in workers, then run the cases: the run adds nothing to the cache."""
    script = f"""
import torch
from pathlib import Path
from gmlp_check import backends, warmup
from gmlp_check.inputs import DEVICE_SIZES
from gmlp_check.matrix import Case
from gmlp_check.pair import run_pair

cases = tuple(Case.from_id(i) for i in {[c.id for c in _gpu_cases()]!r})
cache = Path({str(tmp_path / "cache")!r})
plan = warmup.Plan(torch.device("cuda"), DEVICE_SIZES["cuda"], 4, cases, None)
backend = backends.load("triton")
jobs = warmup.find_kernels(plan, backend, lambda n: None)
assert not list(cache.rglob("*.cubin")), "finding kernels compiled one"
warmup.compile_kernels(plan, jobs, lambda n: None)
compiled = set(cache.rglob("*.cubin"))
assert 0 < len(compiled) <= len(jobs), (len(compiled), len(jobs))
# Triton before 3.7 compiles a launcher in C per signature at the first launch: the workers
# make those too (3.7 on has one launcher for all, and the set stays empty).
launchers = set(cache.rglob("__triton_launcher*"))
for case in cases:
    run = run_pair(case, DEVICE_SIZES["cuda"], torch.device("cuda"), backend)
    assert run.fused is not None and run.fused.error is None
assert set(cache.rglob("*.cubin")) == compiled, "the run compiled kernels the warm-up missed"
assert set(cache.rglob("__triton_launcher*")) == launchers, "the run compiled launchers"
print("launchers", len(launchers))
print("jobs", len(jobs))
"""
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _gpu_cases():
    cases = default_matrix(MatrixSelection(dtypes=("bf16", "fp32")))
    wanted = [c for c in cases if c.microbatches == 1 and c.mode == "accumulate-ddp"][:2]
    assert len(wanted) == 2
    return wanted


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
    launchers = {p for p in (tmp_path / "cache").rglob("__triton_launcher*")}
    assert compiled
    warm = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert warm.returncode == 0, warm.stderr[-2000:]
    # Nothing new compiled: every kernel (and launcher) came from the cache the workers filled.
    assert {p for p in (tmp_path / "cache").rglob("*.cubin")} == compiled
    assert {p for p in (tmp_path / "cache").rglob("__triton_launcher*")} == launchers
