"""scripts/bench_lint.py runs end to end and writes the JSON it documents (tiny sizes; the
figures themselves are the script's business, not a test's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_lint.py"


def test_bench_script_writes_its_json(tmp_path):
    output = tmp_path / "bench.json"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--runs", "1", "--tree-runs", "1", "--files", "12",
         "--main-grad-every", "4", "--output", str(output)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    report = json.loads(output.read_text())
    single, tree = report["single_file"], report["tree"]
    for key in ("interpreter_only", "file_with_main_grad", "file_without_main_grad"):
        assert single[key]["runs"] == 1 and single[key]["median_s"] > 0
    assert (tree["files"], tree["files_with_main_grad"]) == (12, 3)
    assert tree["default_jobs"]["median_s"] > 0 and tree["one_job"]["median_s"] > 0


def test_bench_script_rejects_bad_sizes():
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--files", "0"], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 2
    assert "--files" in completed.stderr and "positive integer" in completed.stderr


def test_bench_script_times_a_real_tree(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "pkg").mkdir(parents=True)
    (checkout / "pkg" / "a.py").write_text("x = 1\n")
    (checkout / "pkg" / "b.py").write_text("def f(p):\n    return p.main_grad\n")
    output = tmp_path / "bench.json"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--runs", "1", "--tree-runs", "1", "--files", "4",
         "--tree", f"mine={checkout}", "--output", str(output)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    mine = json.loads(output.read_text())["real_trees"]["mine"]
    assert mine["files"] == 2
    assert mine["default_jobs"]["runs"] == 1 and mine["default_jobs"]["median_s"] > 0
    assert mine["cpu_s_per_run"] > 0
    # Timed with a cache too, one the script made and removed: nothing is left in the tree.
    assert mine["cached"]["default_jobs"]["runs"] == 1 and mine["cached"]["cpu_s_per_run"] > 0
    assert sorted(p.name for p in checkout.rglob("*")) == ["a.py", "b.py", "pkg"]


def test_bench_script_rejects_a_tree_that_is_not_a_directory(tmp_path):
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", f"gone={tmp_path / 'gone'}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert completed.returncode == 2
    assert "--tree" in completed.stderr and "NAME=DIRECTORY" in completed.stderr


def test_bench_script_times_the_linter_itself(tmp_path):
    """The command it times runs gmlp-lint from any directory (a broken command exits 1 at
    once, which would be timed as a clean lint)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from bench_lint import lint_command
    finally:
        sys.path.remove(str(SCRIPT.parent))
    completed = subprocess.run(
        [*lint_command(), "--version"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert "gmlp-lint" in completed.stdout


def test_bench_script_times_only_trees_and_keeps_each_run(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "b.py").write_text("def f(p):\n    return p.main_grad\n")
    output = tmp_path / "bench.json"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--trees-only", "--tree-runs", "2",
         "--tree", f"mine={checkout}", "--output", str(output)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    report = json.loads(output.read_text())
    assert report["single_file"] is None and report["tree"] is None
    mine = report["real_trees"]["mine"]
    for figures in (mine, mine["cached"]):
        assert len(figures["runs_wall_s"]) == len(figures["runs_cpu_s"]) == 2
        assert all(cpu > 0 for cpu in figures["runs_cpu_s"])
        assert figures["cpu_s_median"] > 0
    assert set(mine["load_average_1min"]) == {"before", "after"}
    assert report["machine"]["cpus_available"] >= 1
