"""Surface faults on any backend: `gmlp-check mutants` on a third party's factory (a plain
per-expert torch module in tests/thirdparty) and on our torch-grouped-mm backend catches
every applicable fault, each diagnosed as its own class; no applicable fault proves nothing.
(The triton backend: test_mutants.py.)"""

import json

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
        assert set(fault["diagnoses"]) >= {FAULTS[fault["name"]].bug_class} or fault["name"] in (
            "accumulate-for-overwrite"  # the NaN sentinel: a second class, see RULES
        )


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
    assert {f.name for f in run.applicable} == set(FAULTS)  # policy faults go in too
    wrong = [(f.name, dict(f.diagnoses)) for f in run.applicable if not f.diagnosed]
    assert wrong == []
