""".pre-commit-hooks.yaml installs gmlp-lint without torch: pre-commit runs
``pip install . <additional_dependencies>``, the list starts with ``--no-deps`` (so ``.`` comes
without its heavy dependencies) and must then name everything gmlp-lint needs at run time.
These tests keep that list from rotting: every third-party module imported under lint/, and
every distribution those need in turn (read from the installed metadata), must be on it,
with markers that hold wherever the dependency applies; and nothing else may be."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from itertools import product
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from packaging.markers import Marker
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / ".pre-commit-hooks.yaml"
LINT = ROOT / "lint"
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")  # requires-python >= 3.10
PLATFORMS = (("linux", "Linux", "posix"), ("darwin", "Darwin", "posix"), ("win32", "Windows", "nt"))
ENVIRONMENTS = [
    {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": sys_platform,
        "platform_system": system,
        "os_name": os_name,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    for python, (sys_platform, system, os_name) in product(PYTHONS, PLATFORMS)
]


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def hook_lists() -> dict[str, list[str]]:
    hooks = yaml.safe_load(HOOKS.read_text())
    return {hook["id"]: hook.get("additional_dependencies", []) for hook in hooks}


def hook_requirements() -> dict[str, list[Requirement]]:
    """The runtime list (options left out), by normalized distribution name."""
    (runtime,) = {tuple(deps) for deps in hook_lists().values()}
    found: dict[str, list[Requirement]] = {}
    for entry in runtime:
        if not entry.startswith("-"):
            requirement = Requirement(entry)
            found.setdefault(normalized(requirement.name), []).append(requirement)
    return found


def applies(marker: Marker | None) -> list[dict]:
    return [env for env in ENVIRONMENTS if marker is None or marker.evaluate(env)]


def imported_modules() -> dict[str, bool]:
    """Top-level names of the modules lint/ imports, lazily or not, outside the project and
    the standard library: True when always needed, False for a fallback imported only where
    another module is missing (``except ImportError: import tomli``)."""
    found: dict[str, bool] = {}
    for path in LINT.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        fallbacks = {
            id(node)
            for handler in ast.walk(tree)
            if isinstance(handler, ast.ExceptHandler)
            for node in ast.walk(handler)
        }
        for node in ast.walk(tree):
            for name in _imported_names(node):
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "gmlp_check":
                    found[top] = found.get(top, False) or id(node) not in fallbacks
    return found


def _imported_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None))
        in ("LazyModule", "import_module")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and not str(node.args[0].value).startswith(".")
    ):
        return [str(node.args[0].value)]
    return []


def runtime_closure() -> dict[str, list[dict]]:
    """Every distribution gmlp-lint needs at run time, with the environments it is surely
    needed in (none for a fallback: where is the business of its marker, checked against
    pyproject), following the installed distributions' own requirements to the end."""
    owners = packages_distributions()
    needed: dict[str, list[dict]] = {}
    pending = [
        (owners.get(module, [module])[0], ENVIRONMENTS if always else [])
        for module, always in imported_modules().items()
    ]
    while pending:
        name, environments = pending.pop()
        key = normalized(name)
        first = key not in needed
        known = needed.setdefault(key, [])
        new = [env for env in environments if env not in known]
        if not new and not first:
            continue
        known.extend(new)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue  # not installed here (tomli on Python >= 3.11): it has no requirements
        for text in requires:
            requirement = Requirement(text)
            where = [env for env in applies(requirement.marker) if env in new]
            if where:
                pending.append((requirement.name, where))
    return needed


def test_both_hooks_install_the_same_list_without_the_packages_dependencies():
    lists = hook_lists()
    assert set(lists) == {"gmlp-lint", "gmlp-lint-fix"}
    (runtime,) = {tuple(deps) for deps in lists.values()}
    assert runtime[0] == "--no-deps"


def test_the_list_covers_everything_gmlp_lint_imports_at_run_time():
    listed = hook_requirements()
    closure = runtime_closure()
    assert {"libcst", "click", "pyyaml"} <= set(closure)  # the scan found the real imports
    for name, environments in closure.items():
        assert name in listed, f"{name} is needed at run time but not in the hook's list"
        covered = [env for r in listed[name] for env in applies(r.marker)]
        missing = [env["python_version"] for env in environments if env not in covered]
        assert not missing, f"{name} is needed on Python {missing} but its marker leaves it out"


def test_the_list_holds_nothing_gmlp_lint_does_not_need():
    assert set(hook_requirements()) <= set(runtime_closure())


@pytest.mark.parametrize("name", ["click", "libcst", "rich", "tomli"])
def test_the_list_asks_what_pyproject_asks(name):
    with open(ROOT / "pyproject.toml", "rb") as handle:
        declared = [Requirement(r) for r in tomllib.load(handle)["project"]["dependencies"]]
    (ours,) = [r for r in declared if normalized(r.name) == name]
    (listed,) = hook_requirements()[name]
    assert (listed.specifier, listed.marker) == (ours.specifier, ours.marker)
