"""The README and docs/: their tables are generated from the declarations they document (the
scenario matrix, the observables, the faults, the backends, the lint rules, the known
deviations), none is stale and every generated block has a generator; and every command the
README shows is run by this suite (or, for installs, by CI verbatim)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "readme_tables.py"


def load_script():
    spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_table_in_the_docs_is_current():
    script = load_script()
    texts = {path.name: path.read_text() for path in script.documents()}
    everything = "".join(texts.values())
    for name in ("axes", "parts", "modes", "observables", "faults", "backends", "lint-rules"):
        assert f"<!-- generated: {name} -->" in everything, name
    for name, text in texts.items():
        rendered, unknown = script.render(text)
        assert unknown == [], name
        assert rendered == text, f"stale tables in {name}: run python scripts/readme_tables.py"


def test_a_stale_table_is_detected(tmp_path, monkeypatch):
    script = load_script()
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- generated: faults -->\nold\n<!-- end: faults -->\n")
    monkeypatch.setattr(script, "README", readme)
    assert script.main(["--check"]) == 1
    assert script.main([]) == 0 and "old" not in readme.read_text()
    assert script.main(["--check"]) == 0


# Every command the README shows, and how the suite runs it: "run" (here, expecting that exit
# status), "ci" (.ci/run runs the given text verbatim: installs, and the CPU-torch index that
# CI's machine cannot reach, whose install CI does its own way), "gpu" (the gpu test below,
# expecting that exit status). A command added to the README without an entry fails the test.
README_COMMANDS: dict[str, tuple[str, object]] = {
    "python -m pip install torch --index-url https://download.pytorch.org/whl/cpu && "
    "python -m pip install -e . && gmlp-check diff": (
        "ci",
        "python -m pip install -e . && gmlp-check diff",
    ),
    "python -m pip install -e . && gmlp-check diff": (
        "ci",
        "python -m pip install -e . && gmlp-check diff",
    ),
    "python -m pip install -e '.[test]' && ruff check . && ruff format --check . && "
    "python -m pytest": (
        "ci",
        "python -m pip install -e '.[test]' && ruff check . && ruff format --check . && "
        "python -m pytest",
    ),
    "gmlp-lint tests/lint/fixtures/te_grouped_mlp_backward_prefix.py": ("run", 1),
    "gmlp-lint --diff --unsafe-fixes tests/lint/fixtures/te_grouped_mlp_backward_prefix.py": (
        "run",
        1,
    ),
    "gmlp-lint rule GMLP001": ("run", 0),
    "gmlp-check diff --fused triton --device cpu -k 'mode=overwrite-fsdp and delay=0'": ("run", 0),
    "gmlp-check diff --fused te-grouped-linear --device cuda --megatron emulated": ("gpu", 0),
    "gmlp-check diff --fused docs.examples.contract_mlp:make --device cpu -k "
    "'mb=1 and dtype=fp32'": ("run", 0),
    "gmlp-check faults": ("run", 0),
    "gmlp-check mutants --fused docs.examples.contract_mlp:make --device cpu -k "
    "'mode=accumulate-ddp and mb=2'": ("run", 0),
    "python -m pytest --gmlp-fused triton --gmlp-device cpu --gmlp-k "
    "'mode=off and dtype=fp32' -q": ("run", 0),
}
_EXECUTABLES = ("python -m pip", "python -m pytest", "gmlp-check", "gmlp-lint")
ROOT = SCRIPT.parents[1]


def readme_commands() -> list[str]:
    """The README's shell commands: indented code lines that start with one of ours."""
    lines = (ROOT / "README.md").read_text().splitlines()
    return [ln[4:] for ln in lines if ln.startswith("    ") and ln[4:].startswith(_EXECUTABLES)]


def test_every_readme_command_is_declared_here():
    shown = readme_commands()
    assert len(shown) == len(set(shown)) > 5
    assert set(shown) == set(README_COMMANDS)


def test_ci_runs_the_install_commands_verbatim():
    ci = (ROOT / ".ci" / "run").read_text()
    for how, text in README_COMMANDS.values():
        if how == "ci":
            assert text in ci, text


def test_a_failure_anywhere_in_a_readme_chain_fails_ci():
    """Each README chain runs as one subshell: under `set -e` a bare `a && b && c` stops CI
    only when its last command fails, so a failing `ruff check` would skip pytest and pass."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci
    chains = {text for how, text in README_COMMANDS.values() if how == "ci" and "&&" in text}
    for text in chains:
        assert f"({text})" in ci, text
    # And bash behaves so: the bare chain's failure passes, the subshell's fails.
    bare = subprocess.run(["bash", "-c", "set -e; false && true; echo reached"], text=True,
                          capture_output=True)  # fmt: skip
    wrapped = subprocess.run(["bash", "-c", "set -e; (false && true); echo reached"], text=True,
                             capture_output=True)  # fmt: skip
    assert bare.stdout == "reached\n" and wrapped.returncode != 0 and wrapped.stdout == ""


def _run(command: str) -> subprocess.CompletedProcess:
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        ["bash", "-c", command.replace("python -m", f"{sys.executable} -m", 1)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.mark.parametrize("command", [c for c, (how, _) in README_COMMANDS.items() if how == "run"])
def test_the_readme_commands_run_as_shown(command):
    done = _run(command)
    expected = README_COMMANDS[command][1]
    assert done.returncode == expected, (done.stdout[-3000:], done.stderr[-3000:])
    assert "Traceback" not in done.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("command", [c for c, (how, _) in README_COMMANDS.items() if how == "gpu"])
def test_the_readme_gpu_commands_run_as_shown(command):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    pytest.importorskip("transformer_engine.pytorch")
    done = _run(command)
    assert done.returncode == README_COMMANDS[command][1], done.stdout[-3000:]
