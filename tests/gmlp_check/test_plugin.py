"""The pytest plugin, the way a user runs it: from a directory outside the repository, on a
small package of their own whose factory wraps refimpl.GroupedMLP, correctly and with a bug."""

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .support import MATRIX, overwrite_case_id

REPO = Path(__file__).resolve().parents[2]

USER_MODULE = textwrap.dedent(
    """
    from gmlp_check.refimpl import GroupedMLP


    def make_mlp(**kwargs):
        return GroupedMLP(**kwargs)


    def returns_none(**kwargs):
        return None


    def raises(**kwargs):
        raise RuntimeError("broken")


    def no_single(**kwargs):
        if kwargs.get("single_grouped_weight"):
            raise NotImplementedError("no single grouped weight")
        return GroupedMLP(**kwargs)


    def none_when_single(**kwargs):
        # Breaks the protocol for a single grouped weight only: found when that case runs.
        return None if kwargs.get("single_grouped_weight") else GroupedMLP(**kwargs)


    def make_mlp_dropping_the_flag(**kwargs):
        # A wrapper bug: the output-into-main-grad setting never reaches the module.
        kwargs["accumulate_into_main_grad"] = False
        return GroupedMLP(**kwargs)
    """
)


def plugin_registered() -> bool:
    return any(ep.name == "gmlp_check" for ep in importlib.metadata.entry_points(group="pytest11"))


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    package = tmp_path / "mypkg"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "mlp.py").write_text(USER_MODULE)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    path = [str(tmp_path)]
    if not plugin_registered():  # not pip-installed: load the plugin by name, as -p allows
        command[3:3] = ["-p", "gmlp_check.pytest_plugin"]
        path.append(str(REPO))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_suite_passes_on_a_correct_user_factory(tmp_path):
    out = run_pytest(tmp_path, "--gmlp-fused", "mypkg.mlp:make_mlp", "--gmlp-device", "cpu")
    assert out.returncode == 0, out.stdout + out.stderr
    n = len(MATRIX)
    assert f"{n} passed" in out.stdout


def test_the_suite_fails_on_a_buggy_user_factory_with_rerun_lines(tmp_path):
    spec = "mypkg.mlp:make_mlp_dropping_the_flag"
    out = run_pytest(
        tmp_path,
        *("--gmlp-fused", spec, "--gmlp-device", "cpu"),
        *("--gmlp-mode", "overwrite-fsdp", "--gmlp-dtype", "fp32", "--gmlp-activation", "swiglu"),
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "failed" in out.stdout
    assert "FAILED gmlp-check::test_gmlp_diff[mode=overwrite-fsdp," in out.stdout
    assert "grad_added_to_main_grad" in out.stdout
    assert f"rerun: gmlp-check diff --fused {spec} --device cpu" in out.stdout


def test_options_narrow_the_suite(tmp_path):
    out = run_pytest(
        tmp_path,
        *("--gmlp-fused", "mypkg.mlp:make_mlp", "--gmlp-device", "cpu"),
        *("--gmlp-k", "splits=t0", "--collect-only", "-q"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    collected = [line for line in out.stdout.splitlines() if "::test_gmlp_diff[" in line]
    expected = [c.id for c in MATRIX if c.splits == "t0"]
    assert expected
    assert [line.split("[", 1)[1].rstrip("]") for line in collected] == expected


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gmlp-fused", "mypkg.mlp:nothing"], "has no attribute 'nothing'"),
        (["--gmlp-fused", "mypkg.mlp:make_mlp", "--gmlp-dtype", "fp64"], "--gmlp-dtype"),
        (["--gmlp-fused", "mypkg.mlp:returns_none"], "the factory returned NoneType"),
        (["--gmlp-fused", "mypkg.mlp:raises"], "the factory failed to build"),
        (["--gmlp-fused", "mypkg.mlp:make_mlp", "--gmlp-experts", "1"], "--experts"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, args, message):
    out = run_pytest(tmp_path, *args, "--gmlp-device", "cpu")
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage-error exit code
    assert message in out.stderr


def test_a_factory_broken_mid_run_fails_its_case_without_a_traceback(tmp_path):
    spec = "mypkg.mlp:none_when_single"
    case = overwrite_case_id(single="1")
    out = run_pytest(tmp_path, "--gmlp-fused", spec, "--gmlp-device", "cpu", "--gmlp-k", case)
    assert out.returncode == 1, out.stdout + out.stderr
    message = f"gmlp-check: --fused {spec}: the factory returned NoneType"
    assert "1 failed" in out.stdout and message in out.stdout
    # No traceback: neither the exception's type nor the checker's frames are shown.
    assert "UsageError" not in out.stdout and "session.py" not in out.stdout


def test_unsupported_cases_are_skipped_with_their_reason(tmp_path):
    out = run_pytest(
        tmp_path,
        *("--gmlp-fused", "mypkg.mlp:no_single", "--gmlp-device", "cpu", "-rs"),
        *("--gmlp-k", "mode=off and delay=0 and zero=0 and splits=ragged-empty and mb=2"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed, 1 skipped" in out.stdout
    assert "no single grouped weight" in out.stdout


def test_without_the_option_the_plugin_adds_nothing(tmp_path):
    (tmp_path / "test_own.py").write_text("def test_own():\n    pass\n")
    out = run_pytest(tmp_path, "-q")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def test_without_gmlp_fused_the_plugin_imports_no_torch(tmp_path):
    # The plugin is loaded by every pytest run where gmlp-check is installed: a user's unrelated
    # test session must not pay for importing torch (nor the checker) because of it.
    (tmp_path / "test_unrelated.py").write_text(
        "import sys\n\n\n"
        "def test_torch_is_not_imported():\n"
        "    assert 'gmlp_check.pytest_plugin' in sys.modules\n"
        "    assert 'torch' not in sys.modules\n"
    )
    out = run_pytest(tmp_path, "test_unrelated.py", "--gmlp-device", "cpu")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout
