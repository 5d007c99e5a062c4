"""`--write-repro`: a failing case written as one Python file that needs only torch and the
backend; run without gmlp_check importable it fails for a buggy third-party factory and
passes for the clean one."""

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gmlp_check import backends, repro, repro_embed
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
# Neither gmlp_check nor the tests importable, the repository not on the path: what an upstream
# maintainer has who holds only this file, torch and the library.
RUN_WITH_TORCH_ONLY = (
    "import runpy, sys; sys.modules['gmlp_check'] = None; sys.modules['tests'] = None; "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


def run_standalone(path: Path, runner: str = RUN_WITHOUT_GMLP_CHECK) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", runner, str(path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
    )


def write_buggy_repro(into: Path, *sizes: str) -> str:
    """``diff --write-repro`` of the planted bug's CASE into ``into`` (exit 1); its output."""
    args = ["diff", "--fused", BUGGY, "--device", "cpu", "-k", CASE.id, *sizes]
    result = CliRunner().invoke(main, [*args, "--write-repro", str(into)])
    assert result.exit_code == 1, result.output
    return result.output


def test_diff_writes_a_reproduction_that_fails_without_gmlp_check(tmp_path):
    write_buggy_repro(tmp_path)
    (path,) = tmp_path.glob("*.py")
    assert path.name == repro.file_name(CASE.id)
    source = path.read_text()
    assert "gmlp_check" not in source.split('"""', 2)[2]  # only in the docstring's rerun text
    ran = run_standalone(path)
    assert ran.returncode != 0
    assert "AssertionError" in ran.stderr and "fc1.weight1: main_grad is not W" in ran.stdout


def test_the_printed_path_of_a_reproduction_is_its_name_on_disk(tmp_path):
    # A directory name that is not UTF-8 was printed with a backslash escape for each odd
    # byte (stderr's backslashreplace of the surrogates): a path naming no file.
    into = tmp_path / os.fsdecode(b"repros-\xff\xe9")
    args = ["diff", "--fused", BUGGY, "--device", "cpu", "-k", CASE.id]
    result = CliRunner().invoke(main, [*args, "--write-repro", str(into)])
    assert result.exit_code == 1, result.output
    (path,) = into.glob("*.py")
    line = next(ln for ln in result.stderr_bytes.splitlines() if ln.startswith(b"reproduction"))
    assert line == f"reproduction of {CASE.id}: ".encode() + os.fsencode(path)
    assert os.path.isfile(line.split(b": ", 1)[1])


def test_a_large_reproduction_says_how_to_get_a_smaller_one(tmp_path):
    small = write_buggy_repro(tmp_path / "small")
    sizes = ("--experts", "4", "--hidden", "256", "--ffn", "256", "--tokens", "64")
    large = write_buggy_repro(tmp_path / "large", *sizes)
    (path,) = (tmp_path / "large").glob("*.py")
    assert path.stat().st_size > repro.LARGE_BYTES
    assert "rerun with smaller --experts/--hidden/--ffn/--tokens" in large
    assert "rerun with smaller" not in small


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


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("", "--write-repro: expected a directory name, got ''"),
        ("/dev/full", "--write-repro '/dev/full': is not a directory"),
        ("{tmp}/file/sub", "is not a directory ('{tmp}/file' is not one)"),
        ("/proc/gmlp-check/repros", "cannot create a file in '/proc'"),
    ],
    ids=["empty", "device", "under-a-file", "proc"],
)
def test_a_repro_directory_that_cannot_be_made_is_refused_before_any_case_runs(
    tmp_path, where, message
):
    (tmp_path / "file").write_text("keep")
    where, message = where.format(tmp=tmp_path), message.format(tmp=tmp_path)
    args = ["diff", "--fused", BUGGY, "--device", "cpu", "-k", CASE.id, "--write-repro", where]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1].startswith("Error: --write-repro")
    assert message in result.output
    assert "Traceback" not in result.output and "failed" not in result.output
    assert (tmp_path / "file").read_text() == "keep"


def test_a_reproduction_that_cannot_be_written_is_one_line_exit_2_and_no_partial_file(tmp_path):
    # The reproduction's own name taken by a directory: the write fails after the run.
    (tmp_path / repro.file_name(CASE.id)).mkdir()
    args = ["diff", "--fused", BUGGY, "--device", "cpu", "-k", CASE.id]
    result = CliRunner().invoke(main, [*args, "--write-repro", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "1 case: 0 passed, 1 failed" in result.stdout  # the report came first
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"Error: --write-repro {str(tmp_path)!r}: ")
    assert "Traceback" not in result.output
    assert [p.name for p in tmp_path.iterdir()] == [repro.file_name(CASE.id)]


# -- embedding: a factory inside a package the maintainer does not have ------------------------

TE_ADAPTERS = ("te-ops", "te-grouped-linear", "te-sequential", "megatron-te-grouped-mlp")


def test_a_reproduction_embedding_the_factorys_package_fails_with_torch_only(tmp_path):
    """The planted bug's module and the module it imports relatively, embedded: the written
    file runs with neither gmlp_check nor tests importable, and fails as the checker did."""
    result = CliRunner().invoke(
        main,
        [
            *("diff", "--fused", BUGGY, "--device", "cpu", "-k", CASE.id),
            *("--write-repro", str(tmp_path), "--repro-embed", "tests.thirdparty"),
        ],
    )
    assert result.exit_code == 1, result.output
    (path,) = tmp_path.glob("*.py")
    source = path.read_text()
    assert "tests.thirdparty.buggy_mlp -> _embedded.buggy_mlp" in source
    assert "tests.thirdparty.per_expert_mlp -> _embedded.per_expert_mlp" in source
    ran = run_standalone(path, RUN_WITH_TORCH_ONLY)
    assert ran.returncode != 0
    assert "AssertionError" in ran.stderr, ran.stderr
    assert "fc1.weight1: main_grad is not W" in ran.stdout


def test_an_embedded_reproduction_of_a_passing_case_says_the_contract_holds(tmp_path):
    checker = Checker(load(CLEAN), CPU, SIZES)
    result = checker.run(CASE)
    assert result.status == "passed"
    path = repro.write(
        tmp_path, result, CLEAN, SIZES, CPU, checker.precision(CASE), embed="tests.thirdparty"
    )
    ran = run_standalone(path, RUN_WITH_TORCH_ONLY)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "the main_grad contract holds" in ran.stdout


def _embedded(text: str) -> tuple[dict[str, str], dict[str, str], tuple[str, ...]]:
    """EMBEDDED, ORIGINS and PACKAGES of a written reproduction, read without running it."""
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(text).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("EMBEDDED", "ORIGINS", "PACKAGES")
    }
    return values["EMBEDDED"], values["ORIGINS"], values["PACKAGES"]


def _imports(name: str, source: str, packages: tuple[str, ...]) -> list[str]:
    """Every module an embedded module's import statements name, relative ones resolved."""
    package = name if name in packages else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            found.append(f"{base}.{node.module}" if node.module else base)
    return found


@pytest.fixture(scope="module")
def passing_result():
    checker = Checker(load(CLEAN), CPU, SIZES)
    return checker.run(CASE), checker.precision(CASE)


@pytest.mark.parametrize("spec", TE_ADAPTERS)
def test_a_te_adapters_reproduction_imports_no_gmlp_check_at_any_depth(spec, passing_result):
    """Transformer Engine runs on the GPU only, so this reads the written file: every import
    in it and in each module it embeds is torch, the standard library or the library under
    test, or resolves to a module it embeds; and each embedded source is the file gmlp-check
    imports, byte for byte."""
    result, precision = passing_result
    text = repro.render(result, spec, SIZES, CPU, precision)
    embedded, origins, packages = _embedded(text)
    target = backends.resolve(spec).split(":")[0]
    assert f"_embedded{target.removeprefix('gmlp_check')}" in embedded
    top_level = _imports("__main__", text.split("\nEMBEDDED = {")[0], ())
    assert not [m for m in top_level if m.split(".")[0] == "gmlp_check"]
    allowed = {"torch", "transformer_engine", "megatron", *sys.stdlib_module_names}
    for name, source in embedded.items():
        for module in _imports(name, source, packages):
            assert module.split(".")[0] != "gmlp_check", (name, module)
            if module.startswith("_embedded"):
                assert module in embedded or module in packages, (name, module)
            else:
                assert module.split(".")[0] in allowed, (name, module)
        original = origins[name].removeprefix("<embedded ").removesuffix(">")
        spec_ = importlib.util.find_spec(original)
        assert source == Path(spec_.origin).read_text(encoding="utf-8")
    # The closure stays small: the adapter, what the adapters share, the reference's small
    # leaf modules, not the checker.
    assert not [o for o in origins.values() if "backends" in o or "session" in o]


def test_a_fused_backends_reproduction_imports_it_by_name_and_says_why(passing_result):
    result, precision = passing_result
    text = repro.render(result, "triton", SIZES, CPU, precision)
    assert "EMBEDDED" not in text
    assert "gmlp-check's own fused package (gmlp_check.fused)" in text
    assert "BACKEND = 'gmlp_check.fused.mlp:TritonGroupedMLP'" in text


def test_a_package_importing_itself_absolutely_cannot_be_embedded():
    """gmlp_check.fused imports gmlp_check.refimpl by its absolute name: embedded under another
    name it would still need gmlp_check, so it is refused, naming the module and line."""
    with pytest.raises(repro_embed.EmbedError, match=r"gmlp_check\.fused\.\w+ \(line \d+\)"):
        repro_embed.closure("gmlp_check.fused.mlp:TritonGroupedMLP", "gmlp_check")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--repro-embed", "tests.thirdparty"], "--repro-embed: needs --write-repro DIR"),
        (
            ["--write-repro", "DIR", "--repro-embed", "tests.engines"],
            f"--repro-embed tests.engines: the factory {BUGGY} is not in the package",
        ),
        (
            ["--fused", "triton", "--write-repro", "DIR", "--repro-embed", "gmlp_check"],
            "imports gmlp_check by its absolute name",
        ),
    ],
)
def test_repro_embed_usage_errors_are_one_line_before_any_case_runs(tmp_path, args, message):
    args = [str(tmp_path / "out") if a == "DIR" else a for a in args]
    fused = [] if "--fused" in args else ["--fused", BUGGY]
    result = CliRunner().invoke(main, ["diff", *fused, "--device", "cpu", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
