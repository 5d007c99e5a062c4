"""`--write-repro`: a failing case written as one Python file that needs only torch and the
backend; run without gmlp_check importable it fails for a buggy third-party factory and
passes for the clean one."""

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from gmlp_check import repro
from gmlp_check.backends import load
from gmlp_check.cli import main
from gmlp_check.matrix import Case
from gmlp_check.session import Checker

from .support import CPU, SIZES

REPO = Path(__file__).resolve().parents[2]
BUGGY = "tests.thirdparty.buggy_mlp:make_skipping_empty_experts"
CLEAN = "tests.thirdparty.per_expert_mlp:make"
CASE = Case.from_id(
    "mode=overwrite-fsdp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=fp32,"
    "splits=ragged-empty,mb=2"
)
# gmlp_check made unimportable: the reproduction must not need it.
RUN_WITHOUT_GMLP_CHECK = (
    "import runpy, sys; sys.modules['gmlp_check'] = None; sys.path.insert(0, sys.argv[2]); "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


def run_standalone(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_GMLP_CHECK, str(path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
    )


def test_diff_writes_a_reproduction_that_fails_without_gmlp_check(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "diff",
            "--fused",
            BUGGY,
            "--device",
            "cpu",
            "-k",
            CASE.id,
            "--write-repro",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 1, result.output
    (path,) = tmp_path.glob("*.py")
    assert path.name == repro.file_name(CASE.id)
    source = path.read_text()
    assert "gmlp_check" not in source.split('"""', 2)[2]  # only in the docstring's rerun text
    ran = run_standalone(path)
    assert ran.returncode != 0
    assert "AssertionError" in ran.stderr and "fc1.weight1: main_grad is not W" in ran.stdout


def test_the_same_reproduction_passes_for_the_clean_factory(tmp_path):
    checker = Checker(load(CLEAN), CPU, SIZES)
    result = checker.run(CASE)
    assert result.status == "passed"
    path = repro.write(tmp_path, result, CLEAN, SIZES, CPU, checker.precision(CASE))
    ran = run_standalone(path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "the main_grad contract holds" in ran.stdout


def test_a_reproduction_judges_values_by_the_backends_precision():
    """A backend whose fp32 GEMMs run in TF32 (Transformer Engine's) gets TF32's bound in its
    reproduction, as in gmlp-check's own check; otherwise its rounding reads as a wrong W."""
    from gmlp_check.tolerance import Precision

    checker = Checker(load(CLEAN), CPU, SIZES)
    result = checker.run(CASE)
    fp32 = CASE.torch_dtype

    def scale(precision) -> float:
        text = repro.render(result, CLEAN, SIZES, CPU, precision)
        line = next(ln for ln in text.splitlines() if ln.startswith("RTOL, ATOL_FLOOR, ATOL_SCALE"))
        return float(line.rsplit(",", 1)[1])

    assert scale(Precision(fp32, "tf32")) > scale(Precision(fp32, "ieee"))


def test_write_repro_refuses_an_injected_fault(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "diff",
            "--device",
            "cpu",
            "--inject",
            "expert-write-lost",
            "--write-repro",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 2
    assert "--write-repro" in result.output and not list(tmp_path.iterdir())
