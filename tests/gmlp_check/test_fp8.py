"""The FP8 axis: its ids, splits and bounds, the tight check against the backend's own run, and
how CPU runs leave it out. The FP8 runs themselves need Transformer Engine on a GPU (the gpu
test at the end)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from gmlp_check import fp8
from gmlp_check.checks import Context, main_grad
from gmlp_check.inputs import case_seed, make_arena, make_inputs, make_state, split_sizes
from gmlp_check.matrix import Case, MatrixSelection, default_matrix
from gmlp_check.options import RunOptions
from gmlp_check.pair import CaseRun
from gmlp_check.refimpl import GroupedMLP
from gmlp_check.side_observations import observe
from gmlp_check.tolerance import Precision, compare_close, tolerance_for

from .planted import planted
from .support import CPU, MATRIX, SIZES, checker_for

FP8_CASE = Case.from_id(
    "mode=accumulate-ddp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=bf16,"
    "splits=aligned-empty,mb=2,fp8=current"
)


def test_ids_without_fp8_are_unchanged_and_fp8_ids_round_trip():
    assert all("fp8" not in c.id for c in MATRIX)
    fp8_cases = default_matrix(MatrixSelection(("fp32",), fp8=tuple(fp8.RECIPES)))
    quantized = [c for c in fp8_cases if c.quantized]
    assert {c.fp8 for c in quantized} == set(fp8.RECIPES)
    assert {c.fp8_weights for c in quantized} == {False, True}
    for case in quantized:
        assert Case.from_id(case.id) == case
        assert case.splits == "aligned-empty" and case.dtype == "bf16"
    with pytest.raises(ValueError, match="fp8w"):
        replace(FP8_CASE, fp8="none", fp8_weights=True)


@pytest.mark.parametrize("experts,tokens", [(4, 20), (8, 1000), (2, 33), (3, 15)])
def test_aligned_splits_are_multiples_of_16_with_empty_experts(experts, tokens):
    for mb in range(3):
        sizes = split_sizes("aligned-empty", experts, tokens, mb)
        assert len(sizes) == experts and all(s % fp8.ROW_MULTIPLE == 0 for s in sizes)
        assert sum(sizes) == tokens // fp8.ROW_MULTIPLE * fp8.ROW_MULTIPLE
        if tokens >= fp8.ROW_MULTIPLE * experts:
            assert 0 in sizes


def _bf16_fp8(recipe: str) -> Precision:
    return Precision(torch.bfloat16, "ieee", recipe)


@pytest.mark.parametrize("recipe", ["delayed", "current", "block"])
def test_the_fp8_bound_admits_the_recipes_rounding_and_rejects_lost_or_doubled_gradients(recipe):
    """Values off by the recipe's rounding model pass; the bookkeeping faults' signatures (a
    gradient dropped, doubled, or the expert's rows of another) fail."""
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 256, generator=gen)
    other = torch.randn(64, 256, generator=gen)
    sigma = fp8.RECIPES[recipe].rounding_sigma()
    # The model (tolerance.py, FP8): an error of sigma times the RMS of the value, per element.
    noisy = ref + sigma * ref.pow(2).mean().sqrt() * torch.randn(ref.shape, generator=gen)
    tol = tolerance_for(_bf16_fp8(recipe), 1000)
    assert compare_close(noisy, ref, tol).passed
    for wrong in (torch.zeros_like(ref), 2 * ref, other):
        assert not compare_close(wrong, ref, tol).passed


def test_fp8_bounds_follow_the_formats():
    hybrid = tolerance_for(_bf16_fp8("current"), 1000).scale_factor
    block = tolerance_for(_bf16_fp8("block"), 1000).scale_factor
    plain = tolerance_for(torch.bfloat16, 1000).scale_factor
    assert block < hybrid and plain < block
    assert tolerance_for(_bf16_fp8("delayed"), 1000) == tolerance_for(_bf16_fp8("current"), 1000)


def _own_run_check(case: Case, factory) -> bool:
    """main_grad.own_run for ``factory`` as the fused side, its own gradients from the clean
    reference run the way pair.py runs FP8 cases (no autocast on the CPU: the same path with
    the recipe's context a no-op)."""
    from gmlp_check.own_run import own_gradients

    case = replace(case, fp8="none", dtype="fp32")
    gen = torch.Generator().manual_seed(case_seed(SIZES.seed, case))
    reference = GroupedMLP(case.mlp_config(SIZES, CPU))
    shapes = {n: p.shape for n, p in reference.named_parameters()}
    state = make_state(shapes, case, SIZES, CPU, gen)
    inputs = make_inputs(case, SIZES, state, CPU, gen)
    arena = make_arena(case, shapes, CPU, gen)

    def build(c: Case):
        module = GroupedMLP(c.mlp_config(SIZES, CPU))
        module.load_state_dict(state)
        return module

    fused = factory(**case.mlp_config(SIZES, CPU).as_kwargs())
    fused.load_state_dict(state)
    own = own_gradients(build, case, fused.state_dict(), inputs)
    run = CaseRun(
        observe(reference, case, inputs, arena.clone()),
        observe(fused, case, inputs, arena),
        precision=Precision(torch.float32),
        own_grads=own,
    )
    check = main_grad.own_run(Context(case, SIZES, run))
    assert check is not None
    return check.passed


@pytest.mark.parametrize("mode", ["accumulate-ddp", "overwrite-fsdp", "accumulate-fsdp", "off"])
def test_the_own_run_check_passes_a_correct_side(mode):
    assert _own_run_check(replace(FP8_CASE, mode=mode), GroupedMLP)


@pytest.mark.parametrize(
    "bug,mode",
    [
        ("overwrite-accumulate-swapped", "overwrite-fsdp"),
        ("overwrite-accumulate-swapped", "accumulate-ddp"),
        ("empty-expert-skipped", "overwrite-fsdp"),
    ],
)
def test_the_own_run_check_catches_bookkeeping_against_the_same_numerics(bug, mode):
    assert not _own_run_check(replace(FP8_CASE, mode=mode), planted(bug))


def test_cpu_runs_leave_the_axis_out_with_one_line_and_explicit_recipes_skip():
    checker = checker_for(GroupedMLP)
    cases = checker.select(RunOptions(device="cpu"))
    assert not any(c.quantized for c in cases)
    assert [n for n in checker.notes if n.startswith("fp8:")] != []
    explicit = checker_for(GroupedMLP).select(RunOptions(device="cpu", fp8=("current",)))
    quantized = [c for c in explicit if c.quantized]
    assert quantized
    result = checker.run(quantized[0])
    assert result.status == "skipped"
    assert "Transformer Engine is not importable" in result.skip_reason


def test_cli_prints_the_skip_line_once_on_cpu():
    # The console script beside this interpreter: the suite may run from an unactivated venv.
    exe = Path(sys.executable).parent / "gmlp-check"
    assert exe.is_file()
    done = subprocess.run(
        [exe, "diff", "--device", "cpu", "--list"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0
    assert done.stderr.count("fp8:") == 1
    assert "fp8=" not in done.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["te-ops", "te-grouped-linear"])
def test_fp8_recipes_run_on_the_te_backends(backend):
    pytest.importorskip("transformer_engine.pytorch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    done = subprocess.run(
        [sys.executable, "-m", "gmlp_check.cli", "diff", "--fused", backend, "--device", "cuda",
         "--megatron", "emulated", "--fp8", "current", "-k", "fp8=current", "--format", "json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"failed": 0' in done.stdout
