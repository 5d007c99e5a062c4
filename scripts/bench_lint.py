"""Benchmark gmlp-lint and write the figures as JSON.

Measures, each as a whole ``gmlp-lint`` process (interpreter start included, as pre-commit
sees it), the median wall time of several runs:

* single_file: one file with main_grad code (parsed and analysed), one without (skipped
  unparsed), and ``python -c pass`` for the interpreter alone;
* tree: a generated tree of many files, a fraction of them holding real-world-shaped
  main_grad code (tests/lint/fixtures), with the default worker count and with one worker;
* real_trees (``--tree NAME=PATH``, repeatable): a checkout as it is (Transformer Engine's
  or Megatron-LM's whole repository), with the default worker count, and its CPU time
  (user + system of the whole process tree, which other load on the machine does not
  inflate the way it inflates wall time); with no cache, and with a filled cache. Each
  run's wall and CPU seconds are kept, with the machine's 1-minute load before and after
  the tree's runs (other work on a shared machine stretches both).

Every figure but the last lints with ``--no-cache``: each file is linted, every run.
``--trees-only`` leaves out the single-file and generated-tree figures.

    python scripts/bench_lint.py --output bench_lint.json
    python scripts/bench_lint.py --tree TE=/path/TransformerEngine --tree MLM=/path/Megatron-LM
    python scripts/bench_lint.py --trees-only --tree-runs 5 --tree MLM=/path/Megatron-LM
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "lint" / "fixtures"

PLAIN_MODULE = '''"""Generated module {index}: ordinary code without any gradient bookkeeping."""

import math


class Accumulator{index}:
    def __init__(self, size):
        self.values = [0.0] * size
        self.count = 0

    def add(self, sample):
        for i, value in enumerate(sample):
            self.values[i] += value
        self.count += 1

    def mean(self):
        if not self.count:
            return list(self.values)
        return [v / self.count for v in self.values]

    def norm(self):
        return math.sqrt(sum(v * v for v in self.values))


def scale(values, factor={index}):
    out = []
    for value in values:
        if value < 0:
            continue
        out.append(value * factor)
    return out
'''


def lint_command() -> list[str]:
    """The installed ``gmlp-lint`` beside this interpreter (a venv's, even when the venv is
    not activated), else on PATH, else the package run as a module. (``-m lint`` would name
    the source folder, which is not importable from the tree being timed: every run would
    fail at once with exit 1 and be timed as a clean lint.)"""
    beside = Path(sys.executable).with_name("gmlp-lint")
    script = str(beside) if beside.is_file() else shutil.which("gmlp-lint")
    return [script] if script else [sys.executable, "-m", "gmlp_check.lint"]


def median_seconds(command: list[str], runs: int, cwd: Path | None = None) -> dict:
    return summary(timed_runs(command, runs, cwd))


def timed_runs(command: list[str], runs: int, cwd: Path | None = None) -> list[tuple[float, float]]:
    """(wall seconds, CPU seconds of the process tree: user + system) of each run."""
    measured = []
    for _ in range(runs):
        before = os.times()
        start = time.perf_counter()
        completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        after = os.times()
        cpu = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
        measured.append((wall, cpu))
        if completed.returncode not in (0, 1):
            raise SystemExit(
                f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr}"
            )
    return measured


def summary(measured: list[tuple[float, float]]) -> dict:
    times = [wall for wall, _ in measured]
    return {
        "median_s": round(statistics.median(times), 4),
        "min_s": round(min(times), 4),
        "max_s": round(max(times), 4),
        "runs": len(times),
    }


def timed_tree(command: list[str], runs: int, root: Path) -> dict:
    """Wall times (as ``median_seconds``) and CPU seconds (children's user + system) of
    linting ``root`` as it is: with no cache (every file linted: the figure a first run, CI
    without a kept cache, or a new gmlp-lint version sees), and again with a cache that one
    earlier run filled (the figure of a run after editing a few files, or none)."""
    load_before = os.getloadavg()[0]
    figures = cpu_timed([*command, "--no-cache", "--no-progress", "."], runs, root)
    with tempfile.TemporaryDirectory(prefix="gmlp-lint-bench-cache-") as cache:
        cached = [*command, "--cache-dir", cache, "--no-progress", "."]
        timed_runs(cached, 1, root)  # fills the cache
        warm = cpu_timed(cached, runs, root)
    files = sum(1 for _ in root.rglob("*.py"))
    load = {"before": load_before, "after": os.getloadavg()[0]}
    return {"files": files, **figures, "cached": warm, "load_average_1min": load}


def cpu_timed(command: list[str], runs: int, root: Path) -> dict:
    measured = timed_runs(command, runs, root)
    cpu = [round(c, 3) for _, c in measured]
    return {
        "default_jobs": summary(measured),
        "cpu_s_per_run": round(sum(cpu) / runs, 3),
        "cpu_s_median": round(statistics.median(cpu), 3),
        "runs_wall_s": [round(wall, 3) for wall, _ in measured],
        "runs_cpu_s": cpu,
    }


def available_cpus() -> int:
    """CPUs the benchmark may run on (a container's share, as gmlp-lint counts them)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def tree_pair(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not Path(path).is_dir():
        raise argparse.ArgumentTypeError(f"expected NAME=DIRECTORY, got {text}")
    return name, Path(path)


def make_tree(root: Path, files: int, every: int) -> dict:
    """``files`` modules in directories of 50; every ``every``-th one is a fixture copy."""
    samples = sorted(FIXTURES.glob("*.py"))
    if not samples:
        raise SystemExit(f"no fixtures found under {FIXTURES}")
    with_main_grad = lines = 0
    for index in range(files):
        directory = root / f"pkg{index // 50:03d}"
        directory.mkdir(parents=True, exist_ok=True)
        if every and index % every == 0:
            text = samples[(index // every) % len(samples)].read_text()
            with_main_grad += 1
        else:
            text = PLAIN_MODULE.format(index=index)
        lines += text.count("\n")
        (directory / f"module_{index:05d}.py").write_text(text)
    return {"files": files, "files_with_main_grad": with_main_grad, "lines": lines}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def generated_figures(command: list[str], args: argparse.Namespace) -> tuple[dict, dict]:
    """The single-file figures and the generated tree's."""
    with tempfile.TemporaryDirectory(prefix="gmlp-lint-bench-") as scratch:
        scratch = Path(scratch)
        heavy = scratch / "fused_mlp.py"
        heavy.write_text((FIXTURES / "te_grouped_mlp_backward_prefix.py").read_text())
        light = scratch / "plain.py"
        light.write_text(PLAIN_MODULE.format(index=0))
        single = {
            "interpreter_only": median_seconds([sys.executable, "-c", "pass"], args.runs),
            "file_with_main_grad": median_seconds([*command, str(heavy)], args.runs),
            "file_without_main_grad": median_seconds([*command, str(light)], args.runs),
            "file_with_main_grad_lines": heavy.read_text().count("\n"),
        }
        tree_root = scratch / "tree"
        tree = make_tree(tree_root, args.files, args.main_grad_every)
        tree["default_jobs"] = median_seconds(
            [*command, "--no-progress", "."], args.tree_runs, tree_root
        )
        tree["one_job"] = median_seconds(
            [*command, "--no-progress", "-j", "1", "."], args.tree_runs, tree_root
        )
    return single, tree


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, help="JSON file to write (default: stdout)")
    parser.add_argument("--runs", type=positive, default=7, help="runs per single-file figure")
    parser.add_argument("--tree-runs", type=positive, default=3, help="runs per tree figure")
    parser.add_argument("--files", type=positive, default=3000, help="files in the tree")
    parser.add_argument(
        "--main-grad-every", type=positive, default=20, help="every N-th file holds main_grad code"
    )
    parser.add_argument(
        "--tree", type=tree_pair, action="append", default=[], metavar="NAME=PATH",
        help="also time linting this checkout as it is (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--trees-only", action="store_true",
        help="time only the --tree checkouts (no single-file or generated-tree figures)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    load_before = os.getloadavg()  # other work on the machine stretches wall times
    command = [*lint_command(), "--no-cache"]  # every figure but "cached" lints every file
    single = tree = None
    if not args.trees_only:
        single, tree = generated_figures(command, args)
    real_trees = {
        name: timed_tree(lint_command(), args.tree_runs, path) for name, path in args.tree
    }
    report = {
        "tool": "gmlp-lint",
        "command": [Path(command[0]).name, *command[1:]],
        "benchmark": " ".join(
            [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "cpus_available": available_cpus(),
            "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        },
        "single_file": single,
        "tree": tree,
        "real_trees": real_trees,
    }
    text = json.dumps(report, indent=2) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
