"""User code (a --fused or --impl module, its factory, its forward, a --repro-embed package)
that leaves by a BaseException that is not an Exception: sys.exit with a message,
GeneratorExit, a class of its own. Each is one line naming the option and exit 2 (diff), the
implementation's error (bench), or passed over (warm-up); never a traceback. A
KeyboardInterrupt raised by user code is Ctrl-C: the run's usual interrupted exit, 130."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gmlp_check import source_pointing, warmup
from gmlp_check.backends import Backend
from gmlp_check.cli import main
from gmlp_check.matrix import Case
from gmlp_check.refimpl import GroupedMLP

from .support import CPU, SIZES, overwrite_case_id

REPO = Path(__file__).resolve().parents[2]
ONE_CASE = overwrite_case_id()


class OwnExit(BaseException):
    """A BaseException of the user's own, as some frameworks define to unwind."""


# (how it is raised, the words the report gives for it)
EXITS = {
    "sys-exit-message": (lambda: sys.exit("stopping here"), "called sys.exit('stopping here')"),
    "generator-exit": (
        lambda: (_ for _ in ()).throw(GeneratorExit),
        "raised GeneratorExit (a BaseException that is not an Exception)",
    ),
    "own-base-exception": (
        lambda: (_ for _ in ()).throw(OwnExit("unwinding")),
        "raised OwnExit: unwinding (a BaseException that is not an Exception)",
    ),
}
KIND = "sys-exit-message"  # set by each test before the CLI loads a factory of this module


def leave(**kwargs):
    """The factory: leaves by the BaseException named by KIND."""
    EXITS[KIND][0]()


class LeavingForward(GroupedMLP):
    def forward(self, *args, **kwargs):
        EXITS[KIND][0]()


def leaves_in_forward(**kwargs):
    return LeavingForward(**kwargs)


class InterruptedForward(GroupedMLP):
    def forward(self, *args, **kwargs):
        raise KeyboardInterrupt


def interrupted_in_forward(**kwargs):
    return InterruptedForward(**kwargs)


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def last_line(result) -> str:
    return result.output.strip().splitlines()[-1]


@pytest.fixture(params=list(EXITS))
def kind(request, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "KIND", request.param)
    return request.param


def test_a_factory_leaving_by_a_base_exception_is_one_line_exit_2(kind):
    spec = f"{__name__}:leave"
    result = invoke("diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert last_line(result) == (
        f"Error: --fused {spec}: the factory {EXITS[kind][1]}; a factory must return a module "
        "or raise an Exception"
    )


def test_a_forward_leaving_by_a_base_exception_stops_the_run_naming_the_case(kind):
    spec = f"{__name__}:leaves_in_forward"
    result = invoke("diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE)
    assert result.exit_code == 2, result.output
    assert last_line(result) == (
        f"Error: --fused {spec}: {EXITS[kind][1]} in case {ONE_CASE}; a factory or a forward "
        "must raise an Exception, never exit"
    )


def test_a_forward_raising_keyboard_interrupt_is_the_interrupted_exit():
    spec = f"{__name__}:interrupted_in_forward"
    result = invoke("diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE)
    assert result.exit_code == 130, result.output
    assert last_line(result) == "interrupted after 0 of 1 cases"


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Writes a module of the working directory, importable under a name of its own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> str:
        path = tmp_path.joinpath(*name.split("."))
        if "." in name:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".py").write_text(source)
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    return write


EXIT_SOURCE = {
    "sys-exit-message": "import sys\nsys.exit('stopping here')\n",
    "generator-exit": "raise GeneratorExit\n",
    "own-base-exception": "class OwnExit(BaseException):\n    pass\nraise OwnExit('unwinding')\n",
}
IMPORT_WORDS = {
    "sys-exit-message": "SystemExit: stopping here",
    "generator-exit": "GeneratorExit",
    "own-base-exception": "OwnExit: unwinding",
}


def test_a_module_leaving_by_a_base_exception_at_import_is_one_line_exit_2(kind, user_module):
    name = user_module(f"leaves_at_import_{kind.replace('-', '_')}", EXIT_SOURCE[kind])
    result = invoke("diff", "--device", "cpu", "--fused", f"{name}:make")
    assert result.exit_code == 2, result.output
    assert last_line(result) == (
        f"Error: --fused {name}:make: cannot import module {name!r} ({IMPORT_WORDS[kind]})"
    )


def test_a_module_getattr_leaving_by_a_base_exception_is_one_line_exit_2(kind, user_module):
    source = EXIT_SOURCE[kind].replace("\n", "\n    ").rstrip()
    name = user_module(f"lazy_{kind.replace('-', '_')}", f"def __getattr__(name):\n    {source}\n")
    result = invoke("diff", "--device", "cpu", "--fused", f"{name}:make")
    assert result.exit_code == 2, result.output
    assert last_line(result) == (
        f"Error: --fused {name}:make: reading {name}.make failed ({IMPORT_WORDS[kind]})"
    )


def test_a_repro_embed_package_leaving_at_import_is_one_line_exit_2(user_module, tmp_path):
    user_module("embedpkg.__init__", EXIT_SOURCE["own-base-exception"])
    user_module("embedpkg.mlp", "def make(**kwargs):\n    pass\n")
    repros = str(tmp_path / "repros")
    result = invoke("diff", "--device", "cpu", "--fused", "embedpkg.mlp:make",
                    "--write-repro", repros, "--repro-embed", "embedpkg")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert last_line(result) == (
        "Error: --repro-embed embedpkg: embedpkg.mlp: importing its package failed "
        "(OwnExit: unwinding)"
    )


@pytest.mark.parametrize("spec", ["leave", "leaves_in_forward"])
def test_bench_records_a_base_exception_as_the_implementations_error(kind, spec):
    result = CliRunner().invoke(main, ["bench", "--device", "cpu", "--impl", f"{__name__}:{spec}",
                                       "--phases", "forward", "--format", "json"])  # fmt: skip
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    (errors,) = {r["reason"] for r in document["results"] if r["status"] == "error"}
    words = EXITS[kind][1] if spec == "leave" else IMPORT_WORDS[kind]
    assert words in errors and "--fused" not in errors


def test_pointing_at_sources_of_a_forward_that_leaves_is_a_report_line(kind):
    backend = Backend("test-factory", leaves_in_forward)
    lines = source_pointing.point_case(backend, Case.from_id(ONE_CASE), SIZES, CPU, ())
    assert len(lines) == 1 and lines[0].startswith("source: not pointed")


def test_a_warm_up_worker_passes_over_a_module_that_leaves_at_import(kind, user_module):
    name = user_module(f"kernels_{kind.replace('-', '_')}", EXIT_SOURCE[kind])
    job = warmup.KernelJob(name, "kernel", 0, "{}")
    warmup._compile(((), job))  # returns: the worker lives on to answer its next job


def test_under_pytest_a_factory_leaving_by_a_base_exception_is_a_usage_error(tmp_path):
    (tmp_path / "ownexit.py").write_text(
        "class OwnExit(BaseException):\n    pass\n\n\n"
        "def make(**kwargs):\n    raise OwnExit('unwinding')\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--gmlp-fused", "ownexit:make", "--gmlp-device", "cpu"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])},
    )  # fmt: skip
    assert out.returncode == 4, out.stdout + out.stderr
    assert "INTERNALERROR" not in out.stdout + out.stderr
    assert "the factory raised OwnExit: unwinding" in out.stderr
