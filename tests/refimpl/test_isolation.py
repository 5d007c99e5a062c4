"""The oracle's tests do not import the checker: tests/refimpl/*.py and tests/harness.py import
of gmlp_check only gmlp_check.refimpl, and of the tests only tests/harness.py and each other.
A checker bug must not be able to hide in the tests that judge the reference."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ORACLE_TEST_FILES = [
    *sorted((ROOT / "tests" / "refimpl").glob("*.py")),
    ROOT / "tests" / "harness.py",
]


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, module: str, is_package: bool = False) -> list[str]:
    """Every dotted name an import statement of ``source`` (module ``module``) binds, relative
    imports resolved: ``from a.b import c`` gives ``a.b.c``."""
    package = module if is_package else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def allowed(name: str) -> bool:
    def within(prefix: str) -> bool:
        return name == prefix or name.startswith(prefix + ".")

    top = name.split(".")[0]
    if top == "gmlp_check":
        return within("gmlp_check.refimpl")
    if top == "tests":
        return within("tests.harness") or within("tests.refimpl")
    return True  # the standard library, torch, pytest


def forbidden_imports(path: Path) -> list[str]:
    names = imported_names(path.read_text(), module_of(path), path.name == "__init__.py")
    return [f"{path.relative_to(ROOT)}: {n}" for n in names if not allowed(n)]


def test_oracle_tests_import_only_the_reference_and_the_shared_harness():
    assert len(ORACLE_TEST_FILES) > 2  # found them (tests/refimpl has several modules)
    assert [f for path in ORACLE_TEST_FILES for f in forbidden_imports(path)] == []


@pytest.mark.parametrize(
    ("line", "forbidden"),
    [
        ("from gmlp_check.refimpl import GroupedMLP", False),
        ("from gmlp_check.refimpl.megatron import install_hooks", False),
        ("import gmlp_check.refimpl.validation", False),
        ("from ..harness import same_bits", False),
        ("from .. import harness", False),
        ("from .dense import dense_gradients", False),
        ("import torch", False),
        ("from gmlp_check.fused import TritonGroupedMLP", True),
        ("import gmlp_check.backends", True),
        ("import gmlp_check", True),
        ("from gmlp_check import refimpl, faults", True),
        ("from ..fused.harness import run_pair", True),
        ("from tests.fused import harness", True),
        (
            "def f():\n    from gmlp_check.side_observations import uninitialized_memory_as_nan",
            True,
        ),
    ],
)
def test_the_scan_tells_forbidden_imports(line, forbidden):
    names = imported_names(line, "tests.refimpl.test_example")
    assert names  # the scan saw the import
    assert (not all(allowed(n) for n in names)) is forbidden


def test_importing_the_oracle_tests_loads_nothing_of_the_checker():
    """What the scan cannot see (an import the reference itself might make, a dynamic one)."""
    modules = [module_of(p) for p in ORACLE_TEST_FILES]
    script = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'gmlp_check')))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert "gmlp_check.refimpl" in loaded
    assert [m for m in loaded if m != "gmlp_check" and not allowed(m)] == []
