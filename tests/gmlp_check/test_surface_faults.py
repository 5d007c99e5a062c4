"""Surface faults on any backend: `gmlp-check mutants` on a third party's factory (a plain
per-expert torch module in tests/thirdparty) and on our torch-grouped-mm backend catches
every applicable fault, each diagnosed as its own class; no applicable fault proves nothing.
(The triton backend: test_mutants.py.)"""

import json

import pytest
from click.testing import CliRunner

from gmlp_check.backends import Backend
from gmlp_check.cli import main
from gmlp_check.faults import FAULTS, SURFACE_FAULTS
from gmlp_check.fused.grouped_mm import TorchGroupedMMMLP
from gmlp_check.inputs import Sizes
from gmlp_check.mutants import run_mutants
from gmlp_check.session import Checker

from ..fused.harness import allow_grouped_mm_on_cpu
from .support import CPU, MATRIX

THIRD_PARTY = "tests.thirdparty.per_expert_mlp:make"
SURFACE = [f.name for f in SURFACE_FAULTS]


def mutants_json(*args):
    result = CliRunner().invoke(main, ["mutants", *args, "--format", "json"])
    return result.exit_code, result


def test_mutants_on_a_third_party_factory_catches_and_diagnoses_the_surface_faults():
    code, result = mutants_json("--fused", THIRD_PARTY, "--device", "cpu", "--full-matrix")
    doc = json.loads(result.stdout)
    assert code == 0, result.output
    assert doc["clean"]["failed"] == 0 and doc["proven"] and doc["passed"]
    applicable = [f for f in doc["faults"] if f["applicable"]]
    surface = [f for f in applicable if f["kind"] == "surface"]
    assert len(surface) >= 8 and all(f["caught"] for f in surface)
    assert {f["name"] for f in applicable} == {f["name"] for f in surface}  # no policy
    for fault in applicable:
        assert fault["diagnosed"], (fault["name"], fault["diagnoses"], fault["misdiagnosed"])
        # Its own class is the likely one, except where RULES declare the observations
        # ambiguous (accumulating onto the NaN sentinel leaves it NaN, like not writing).
        ambiguous = fault["name"] == "accumulate-for-overwrite"
        assert ambiguous or FAULTS[fault["name"]].bug_class in fault["diagnoses"]


def test_a_run_where_no_fault_applies_proves_nothing_and_exits_2():
    code, result = mutants_json(
        "--fused", THIRD_PARTY, "--device", "cpu", "--fault", "reduce-hook-not-fired",
        "-k", "delay=0",
    )  # fmt: skip
    assert code == 2
    assert "nothing was proven" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["proven"] is False and doc["passed"] is False
    (fault,) = doc["faults"]
    assert fault["applicable"] is False and "delayed weight gradients" in fault["reason"]


def test_mutants_on_torch_grouped_mm_catches_every_applicable_fault(monkeypatch):
    allow_grouped_mm_on_cpu(monkeypatch)
    cases = [c for c in MATRIX if c.activation == "swiglu" and c.dtype == "fp32"]
    # torch._grouped_mm wants hidden and ffn multiples of 8.
    sizes = Sizes(experts=4, hidden=16, ffn=8, tokens=20, seed=0)
    checker = Checker(Backend("torch-grouped-mm", TorchGroupedMMMLP), CPU, sizes)
    run = run_mutants(checker, list(FAULTS), cases, stop_early=True)
    assert run.clean_passed
    missed = [f.name for f in run.applicable if not f.caught]
    assert missed == []
    # Policy faults go in too; the quantized-copy faults need FP8 cases, which need TE and CUDA.
    fp8_only = {"flag-from-quantized-copy", "write-through-quantized-copy"}
    assert {f.name for f in run.applicable} == set(FAULTS) - fp8_only
    wrong = [(f.name, dict(f.diagnoses)) for f in run.applicable if not f.diagnosed]
    assert wrong == []


# -- the mechanics: the real backend's effects, post-processed ----------------------------------


def fused_side(fault_name: str | None, case_id: str):
    from gmlp_check.backends import load
    from gmlp_check.matrix import Case
    from gmlp_check.pair import run_pair

    from .support import SIZES

    fault = None if fault_name is None else FAULTS[fault_name]
    return run_pair(Case.from_id(case_id), SIZES, CPU, load(THIRD_PARTY), fault).fused


DDP_CASE = (
    "mode=accumulate-ddp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=fp32,"
    "splits=ragged-empty,mb=1"
)


def test_a_lost_expert_write_leaves_that_experts_region_as_it_was_and_the_rest_as_written():
    import torch

    clean = fused_side(None, DDP_CASE)
    faulty = fused_side("expert-write-lost", DDP_CASE)
    before, clean_after = faulty.before, clean.after_backward[0].main_grad
    after = faulty.after_backward[0].main_grad
    for name in ("fc1.weight0", "fc2.weight0"):  # expert 0 is the first with tokens
        assert torch.equal(after[name], before[name])
        assert not torch.equal(clean_after[name], before[name])
    others = [n for n in after if n.endswith(("weight1", "weight2", "weight3"))]
    assert others and all(torch.equal(after[n], clean_after[n]) for n in others)


def test_a_hook_fired_twice_is_seen_twice_and_a_dropped_one_not_at_all():
    from collections import Counter

    delayed = DDP_CASE.replace("delay=0", "delay=1")
    clean = Counter(h.param for h in fused_side(None, delayed).hooks)
    dropped = Counter(h.param for h in fused_side("reduce-hook-not-fired", delayed).hooks)
    assert clean and all(n == 1 for n in clean.values())
    weights = [n for n in clean if ".weight" in n]
    assert weights and all(dropped[n] == 0 for n in weights)
    twice = fused_side("reduce-hook-fired-twice", delayed)
    assert twice.error is not None and twice.error.missing_grad  # DDP's assert on the 2nd call
    assert max(Counter(h.param for h in twice.hooks).values()) == 2


def test_surface_faults_apply_only_where_their_predicate_says():
    from gmlp_check import fp8
    from gmlp_check.matrix import DEVICE_DTYPES, MatrixSelection, default_matrix

    # The CPU matrix plus the FP8 part, where the quantized-copy faults apply.
    matrix = default_matrix(MatrixSelection(DEVICE_DTYPES["cpu"], fp8=tuple(fp8.RECIPES)))
    for fault in SURFACE_FAULTS:
        applies = [c for c in matrix if fault.applies(c)]
        assert 0 < len(applies) < len(matrix), fault.name


@pytest.mark.parametrize("name", ["flag-from-quantized-copy", "write-through-quantized-copy"])
def test_the_quantized_copy_faults_act_only_where_a_quantized_copy_exists(name):
    """FP8 with high-precision weights has a quantized copy apart from the Parameter; bf16 and
    FP8 primary weights have none, so there the fault changes nothing: only FP8 cases can
    catch it (issue #20's teeth)."""
    from dataclasses import replace

    import torch

    from gmlp_check.faults.intercept import Delivery
    from gmlp_check.matrix import Case

    fp8_case = Case.from_id(
        "mode=overwrite-fsdp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=bf16,"
        "splits=aligned-empty,mb=2,fp8=current"
    )
    for case, acts in (
        (fp8_case, True),
        (replace(fp8_case, fp8="none"), False),
        (replace(fp8_case, fp8_weights=True), False),
    ):
        param = torch.nn.Parameter(torch.zeros(3, 2))
        param.overwrite_main_grad = True
        param.grad_added_to_main_grad = True
        written = torch.randn(3, 2)
        region = written.clone()
        delivery = Delivery("fc1.weight0", param, case, [16, 0], torch.randn(3, 2), region)
        FAULTS[name].on_delivery(delivery)
        untouched = torch.equal(region, written) and param.grad_added_to_main_grad is True
        assert untouched is not acts, (case.id, acts)
