"""The result cache: a second run takes its findings from it, and whatever a file's findings
depend on (its bytes, the configuration, the rule selection, the other files' overwrite
helpers, the linter's version) changes its key; a cache that cannot be used is no cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gmlp_check.lint import cache as cache_module
from gmlp_check.lint import engine
from gmlp_check.lint.registry import rule

from .support import run_cli, run_process, write
from .test_precision import OVERWRITE_HELPER, USES_HELPER

TRUTH = rule("GMLP004").invalid[0]  # one GMLP004 finding, with a safe fix
CLEAN = rule("GMLP004").valid[0]


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


def lint(cache_dir: Path, *args: str):
    return run_cli("--no-progress", "--format", "json", "--cache-dir", str(cache_dir), *args)


def codes(result) -> list[tuple[str, str, int]]:
    return [(f["path"], f["code"], f["line"]) for f in json.loads(result.stdout)]


def packs(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*/pack-*.json"))


def entries(cache_dir: Path) -> int:
    return sum(len(json.loads(pack.read_text())) for pack in packs(cache_dir))


@pytest.fixture
def linted_again(monkeypatch):
    """The files the next in-process run lints itself (not from the cache)."""
    seen: list[str] = []
    real = engine.process

    def recording(job, mode):
        seen.append(Path(job.path).name)
        return real(job, mode)

    monkeypatch.setattr(engine, "process", recording)
    return seen


def test_a_second_run_takes_the_findings_from_the_cache(here, cache_dir, linted_again):
    write(here / "a.py", TRUTH.source)
    write(here / "b.py", CLEAN.source)
    first = lint(cache_dir, ".")
    assert sorted(linted_again) == ["a.py", "b.py"]
    assert (len(packs(cache_dir)), entries(cache_dir)) == (1, 2)
    linted_again.clear()
    second = lint(cache_dir, ".")
    assert linted_again == []
    assert len(packs(cache_dir)) == 1  # a run that linted nothing writes nothing
    assert (second.exit_code, second.stdout) == (first.exit_code, first.stdout)
    assert codes(second) == [("a.py", "GMLP004", TRUTH.line)]


def test_a_changed_file_is_linted_again(here, cache_dir, linted_again):
    write(here / "a.py", TRUTH.source)
    write(here / "b.py", CLEAN.source)
    lint(cache_dir, ".")
    write(here / "a.py", CLEAN.source)
    write(here / "b.py", TRUTH.source)
    linted_again.clear()
    result = lint(cache_dir, ".")
    assert sorted(linted_again) == ["a.py", "b.py"]
    assert codes(result) == [("b.py", "GMLP004", TRUTH.line)]


def test_a_changed_configuration_is_a_new_key(here, cache_dir):
    write(here / "a.py", TRUTH.source)
    assert codes(lint(cache_dir, ".")) == [("a.py", "GMLP004", TRUTH.line)]
    write(here / "pyproject.toml", '[tool.gmlp-lint]\nper-file-ignores = {"a.py" = ["GMLP004"]}\n')
    assert codes(lint(cache_dir, ".")) == []


def test_a_changed_rule_selection_is_a_new_key(here, cache_dir):
    write(here / "a.py", TRUTH.source)
    assert codes(lint(cache_dir, ".")) == [("a.py", "GMLP004", TRUTH.line)]
    assert codes(lint(cache_dir, "--ignore", "GMLP004", ".")) == []
    assert codes(lint(cache_dir, "--select", "GMLP004", ".")) == [("a.py", "GMLP004", TRUTH.line)]


def test_a_changed_helper_in_another_file_is_a_new_key(here, cache_dir):
    write(here / "flags.py", OVERWRITE_HELPER)
    write(here / "user.py", USES_HELPER)
    assert [c for _, c, _ in codes(lint(cache_dir, "."))] == ["GMLP002"]
    # user.py is unchanged; what its helper returns is not.
    write(here / "flags.py", OVERWRITE_HELPER.replace('"overwrite_main_grad"', '"frozen"'))
    assert codes(lint(cache_dir, ".")) == []


def test_a_changed_linter_version_is_a_new_key(here, cache_dir, linted_again, monkeypatch):
    write(here / "a.py", TRUTH.source)
    lint(cache_dir, ".")
    linted_again.clear()
    version = cache_module.linter_fingerprint()
    monkeypatch.setattr(cache_module, "linter_fingerprint", lambda: "another" + version)
    assert codes(lint(cache_dir, ".")) == [("a.py", "GMLP004", TRUTH.line)]
    assert linted_again == ["a.py"]


def test_the_linter_fingerprint_follows_its_source_files(tmp_path):
    package = Path(cache_module.__file__).parent
    copy = tmp_path / "lint"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert cache_module.linter_fingerprint(copy) == cache_module.linter_fingerprint(package)
    rules = copy / "rules" / "main_grad_truthiness.py"
    rules.write_text(rules.read_text() + "\n# edited\n")
    assert cache_module.linter_fingerprint(copy) != cache_module.linter_fingerprint(package)


def test_a_cache_entry_that_cannot_be_read_is_a_miss(here, cache_dir, linted_again):
    write(here / "a.py", TRUTH.source)
    lint(cache_dir, ".")
    (pack,) = packs(cache_dir)
    (key,) = json.loads(pack.read_text())
    pack.write_text(json.dumps({key: [["GMLP004"]]}))
    linted_again.clear()
    assert codes(lint(cache_dir, ".")) == [("a.py", "GMLP004", TRUTH.line)]
    assert linted_again == ["a.py"]


def test_a_pack_that_is_not_json_is_passed_over(here, cache_dir, linted_again):
    write(here / "a.py", TRUTH.source)
    lint(cache_dir, ".")
    (pack,) = packs(cache_dir)
    pack.write_bytes(b"\x00 not json")
    linted_again.clear()
    assert codes(lint(cache_dir, ".")) == [("a.py", "GMLP004", TRUTH.line)]
    assert linted_again == ["a.py"]


def test_packs_are_merged_when_they_pile_up(here, cache_dir, linted_again):
    versions = [TRUTH.source + f"\nedit = {n}\n" for n in range(cache_module.MAX_PACKS + 3)]
    for n, source in enumerate(versions):
        write(here / "a.py", source)
        lint(cache_dir, ".")
        # One pack per run that linted a file, until the run that would make one too many.
        limit = cache_module.MAX_PACKS
        assert len(packs(cache_dir)) == (n + 1 if n < limit else n + 1 - limit)
    assert entries(cache_dir) == len(versions)  # every version of the file is still known
    linted_again.clear()
    for source in versions:
        write(here / "a.py", source)
        assert codes(lint(cache_dir, ".")) == [("a.py", "GMLP004", TRUTH.line)]
    assert linted_again == []


def test_a_merge_past_the_entry_limit_keeps_the_entries_of_the_run(here, cache_dir, monkeypatch):
    monkeypatch.setattr(cache_module, "MAX_PACKS", 2)
    monkeypatch.setattr(cache_module, "MAX_ENTRIES", 3)
    write(here / "b.py", CLEAN.source)
    for n in range(3):  # a.py in three versions: packs of 2, 1 and 1 entries
        write(here / "a.py", TRUTH.source + f"\nedit = {n}\n")
        lint(cache_dir, ".")
    # The third run merged: 4 entries known, over the limit, so only b.py and this a.py stay.
    assert (len(packs(cache_dir)), entries(cache_dir)) == (1, 2)
    assert codes(lint(cache_dir, ".")) == [("a.py", "GMLP004", TRUTH.line)]


def test_folders_of_versions_unused_for_a_week_go_when_a_new_version_makes_its_own(here, cache_dir):
    import os
    import time

    write(here / "a.py", TRUTH.source)
    lint(cache_dir, ".")  # makes the cache: tagged for backup tools
    assert (cache_dir / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172")
    (current,) = [p for p in cache_dir.iterdir() if p.is_dir()]
    stale, recent = cache_dir / ("0" * 16), cache_dir / ("1" * 16)
    for folder, days in ((stale, cache_module.STALE_DAYS + 1), (recent, 1)):
        folder.mkdir()
        (folder / "pack-0.json").write_text("{}")
        then = time.time() - days * 86400
        os.utime(folder, (then, then))
    shutil.rmtree(current)  # the next run makes its version's folder again
    lint(cache_dir, ".")
    assert sorted(p.name for p in cache_dir.iterdir()) == sorted(
        ["CACHEDIR.TAG", current.name, recent.name]
    )


def test_a_cache_directory_that_is_a_file_is_no_cache(here, tmp_path):
    write(here / "a.py", TRUTH.source)
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder")
    for _ in range(2):
        result = run_process("--format", "json", "--cache-dir", str(blocked), "a.py", cwd=here)
        assert (result.returncode, result.stderr) == (1, "")
        assert [f["code"] for f in json.loads(result.stdout)] == ["GMLP004"]
    assert blocked.read_text() == "not a folder"


def test_an_unwritable_cache_directory_is_no_cache(here, tmp_path):
    write(here / "a.py", TRUTH.source)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        result = run_process(
            "--format", "json", "--cache-dir", str(locked), "a.py", cwd=here, unprivileged=True
        )
    finally:
        locked.chmod(0o700)
    assert (result.returncode, result.stderr) == (1, "")
    assert [f["code"] for f in json.loads(result.stdout)] == ["GMLP004"]
    assert list(locked.iterdir()) == []


def test_no_cache_neither_reads_nor_writes(here, cache_dir, linted_again):
    write(here / "a.py", TRUTH.source)
    run_cli("--no-progress", "--no-cache", "--cache-dir", str(cache_dir), ".")
    assert not cache_dir.exists()
    lint(cache_dir, ".")
    linted_again.clear()
    run_cli("--no-progress", "--no-cache", "--cache-dir", str(cache_dir), ".")
    assert linted_again == ["a.py"]


def test_fixing_lints_the_file_itself_whatever_the_cache_holds(here, cache_dir):
    target = write(here / "a.py", TRUTH.source)
    lint(cache_dir, ".")
    result = run_cli("--no-progress", "--cache-dir", str(cache_dir), "--fix", ".")
    assert result.exit_code == 0, result.output
    assert target.read_text() == TRUTH.fixed


def test_the_default_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(cache_module.ENV_DIR, str(tmp_path / "chosen"))
    assert cache_module.default_directory() == tmp_path / "chosen"
    monkeypatch.delenv(cache_module.ENV_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_module.default_directory() == tmp_path / "xdg" / "gmlp-lint"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_module.default_directory() == tmp_path / "home" / ".cache" / "gmlp-lint"


def test_an_empty_cache_dir_is_a_usage_error_not_the_current_directory(here):
    # ``--cache-dir "$UNSET"`` was Path(""), the current directory: the cache's folder
    # appeared inside the linted tree.
    write(here / "a.py", TRUTH.source)
    result = run_cli("--no-progress", "--cache-dir", "", "a.py")
    assert result.exit_code == 2
    assert "--cache-dir" in result.stderr and "expected a directory name, got ''" in result.stderr
    assert sorted(p.name for p in here.iterdir()) == ["a.py"]
