"""gmlp-lint never imports torch, and does not even import its parser (libcst) for files
that cannot hold a finding. Checked in a fresh interpreter, since the test process has
torch loaded already."""

from __future__ import annotations

import json
import subprocess
import sys

from gmlp_check.lint import engine
from gmlp_check.lint.registry import rule

from .support import FIXTURES, write, write_plain_bulk

PROBE = """
import json, sys
from gmlp_check.lint.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    status = done.code
print(json.dumps({"status": status, "modules": sorted(m.split(".")[0] for m in sys.modules)}))
"""


def run_isolated(*args: str, output_format: str | None = "json") -> dict:
    options = ["--format", output_format] if output_format else []
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *options, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_linting_real_world_code_never_imports_torch():
    probe = run_isolated("-j", "1", str(FIXTURES))
    assert probe["status"] == 1
    assert "libcst" in probe["modules"]  # the files were really parsed here
    assert "torch" not in probe["modules"]


def test_parallel_linting_never_imports_torch(tmp_path):
    source = rule("GMLP001").invalid[0].source
    for i in range(30):
        write(tmp_path / f"m{i}.py", source)
    write_plain_bulk(tmp_path, engine.PARALLEL_MIN_WORK)  # enough work for the pool
    probe = run_isolated("-j", "2", str(tmp_path))
    assert probe["status"] == 1
    # Parsing happened in the workers, which the parent forks before it loads anything heavy.
    assert "libcst" not in probe["modules"]
    assert "torch" not in probe["modules"]


def test_files_without_main_grad_never_load_the_parser(tmp_path):
    write(tmp_path / "a.py", "def add(a, b):\n    return a + b\n")
    probe = run_isolated(str(tmp_path))
    assert probe["status"] == 0
    assert "libcst" not in probe["modules"] and "torch" not in probe["modules"]


def test_python_dash_m_lint_runs_the_cli(tmp_path):
    path = write(tmp_path / "a.py", rule("GMLP004").invalid[0].source)
    completed = subprocess.run(
        [sys.executable, "-m", "lint", str(path)], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 1 and "GMLP004" in completed.stdout


def test_rule_documentation_never_loads_the_parser():
    probe = run_isolated("rule", "--all", output_format=None)
    assert probe["status"] == 0
    assert "libcst" not in probe["modules"]


def test_sarif_of_files_without_main_grad_never_loads_the_parser(tmp_path):
    write(tmp_path / "a.py", "def add(a, b):\n    return a + b\n")
    probe = run_isolated(str(tmp_path), output_format="sarif")
    assert probe["status"] == 0
    assert "libcst" not in probe["modules"]
