"""Test files a walk finds are compiled but not analysed (``lint/test_scope.py``), unless
configured; a file or test directory named on the command line is analysed. The shapes are
the declarations' own (``TEST_DIRS`` and the name patterns), with look-alikes that are not
tests beside them."""

from __future__ import annotations

import json

import pytest

from gmlp_check.lint import test_scope
from gmlp_check.lint.registry import rule

from .support import run_cli, write

GATE = rule("GMLP001").invalid[0].source  # one GMLP001 finding

# A path of each kind the declarations name, and paths that only look like one.
TEST_PATHS = (
    *(f"{directory}/layer.py" for directory in sorted(test_scope.TEST_DIRS)),
    *(f"pkg/{directory}/deep/layer.py" for directory in sorted(test_scope.TEST_DIRS)),
    *(f"pkg/{prefix}layer.py" for prefix in test_scope.TEST_FILE_PREFIXES),
    *(f"pkg/layer{suffix}" for suffix in test_scope.TEST_FILE_SUFFIXES),
    *(f"pkg/{name}" for name in sorted(test_scope.TEST_FILE_NAMES)),
)
NOT_TEST_PATHS = (
    "pkg/testing.py",
    "pkg/tests.py",
    "pkg/latest.py",
    "pkg/contest.py",
    "pkg/attest_layer.py",
    "testing/layer.py",
    "pkg/unit_tests_helpers/layer.py",
)


def found_paths(*args: str) -> set[str]:
    result = run_cli("--format", "json", *args)
    assert result.exit_code in (0, 1), result.stderr
    return {finding["path"] for finding in json.loads(result.stdout)}


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pyproject.toml", "[tool.gmlp-lint]\n")
    for path in TEST_PATHS + NOT_TEST_PATHS:
        write(tmp_path / path, GATE)
    return tmp_path


def test_a_walk_analyses_no_test_file_and_every_look_alike(project):
    assert found_paths(".") == set(NOT_TEST_PATHS)


def test_configured_analyse_tests_analyses_them_all(project):
    write(project / "pyproject.toml", "[tool.gmlp-lint]\nanalyse-tests = true\n")
    assert found_paths(".") == set(TEST_PATHS + NOT_TEST_PATHS)


@pytest.mark.parametrize("path", TEST_PATHS)
def test_a_test_file_named_explicitly_is_analysed_unless_forced(project, path):
    assert found_paths(path) == {path}
    assert found_paths("--force-exclude", path) == set()


@pytest.mark.parametrize("directory", sorted(test_scope.TEST_DIRS))
def test_a_named_test_directory_is_analysed_whole(project, directory):
    write(project / directory / "test_layer.py", GATE)  # a test name below a named test dir
    assert found_paths(directory) == {f"{directory}/layer.py", f"{directory}/test_layer.py"}


def test_below_a_named_directory_the_tests_are_still_left_out(project):
    assert found_paths("pkg") == {p for p in NOT_TEST_PATHS if p.startswith("pkg/")}


@pytest.mark.parametrize("path", TEST_PATHS)
def test_a_syntax_error_in_a_test_file_is_still_reported(project, path):
    write(project / path, "def broken(:\n")
    result = run_cli(".")
    assert result.exit_code == 2
    assert f"error: {path}:1:" in result.stderr


def test_stdin_named_as_a_test_is_analysed_unless_forced(project):
    shown = "tests/layer.py"
    named = run_cli("--format", "json", "--stdin-filename", shown, "-", stdin=GATE)
    assert [f["path"] for f in json.loads(named.stdout)] == [shown]
    forced = run_cli(
        "--format", "json", "--force-exclude", "--stdin-filename", shown, "-", stdin=GATE
    )
    assert (forced.exit_code, json.loads(forced.stdout)) == (0, [])


def test_the_cache_tells_the_two_scopes_apart(project, tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("cache"))
    assert found_paths("--cache-dir", cache, ".") == set(NOT_TEST_PATHS)
    write(project / "pyproject.toml", "[tool.gmlp-lint]\nanalyse-tests = true\n")
    assert found_paths("--cache-dir", cache, ".") == set(TEST_PATHS + NOT_TEST_PATHS)


def test_a_checkout_inside_a_directory_named_test_still_leaves_its_tests_out(tmp_path, monkeypatch):
    # Only the path below the configuration's directory says whether a named directory is a
    # test directory: a project kept under .../test/ is not one.
    project = tmp_path / "test" / "project"
    write(project / "pyproject.toml", "[tool.gmlp-lint]\n")
    write(project / "pkg" / "layer.py", GATE)
    write(project / "tests" / "layer.py", GATE)
    monkeypatch.chdir(project)
    assert found_paths(".") == {"pkg/layer.py"}
    assert found_paths(str(project)) == {f"{project}/pkg/layer.py"}
