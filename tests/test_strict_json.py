"""Every JSON document the tools write is strict UTF-8 JSON, even for file names that are not
UTF-8 (and messages quoting them): such bytes are shown as U+FFFD, as ruff shows them, never
as a lone surrogate escape ("\\udcff") that strict consumers reject (docs/json.md). JUnit XML
shows them the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path

import pytest
from click.testing import CliRunner

from gmlp_check.cli import main
from gmlp_check.lint.json_text import display
from gmlp_check.lint.registry import rule
from gmlp_check.refimpl import GroupedMLP

from .gmlp_check.support import overwrite_case_id

FINDING = rule("GMLP004").invalid[0].source
NOT_PYTHON = "def f(:\n"
ONE_CASE = overwrite_case_id()


def strict(data: bytes | str):
    """The document, read as a strict consumer reads it: UTF-8 without surrogates, JSON whose
    every string encodes as UTF-8 again."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    document = json.loads(text)
    json.dumps(document, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    assert "\\ud" not in text.lower(), "a surrogate escape in the JSON text"
    return document


def strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


@pytest.fixture
def odd_names(tmp_path):
    """A file with a finding named caf<0xe9>.py, one that does not parse named <0xff>.py."""
    (tmp_path / os.fsdecode(b"caf\xe9.py")).write_text(FINDING)
    (tmp_path / os.fsdecode(b"\xff.py")).write_text(NOT_PYTHON)
    return tmp_path


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gmlp_check.lint", *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_lint_json_shows_names_that_are_not_utf_8_lossily(odd_names):
    done = lint("--no-cache", "--format", "json", ".", cwd=odd_names)
    assert done.returncode == 2, done.stderr
    entries = strict(done.stdout)
    assert [(e["path"], e["code"]) for e in entries] == [
        ("caf\ufffd.py", "GMLP004"),
        ("\ufffd.py", None),
    ]


def test_sarif_is_strict_and_its_uris_keep_the_exact_bytes(odd_names):
    done = lint("--no-cache", "--format", "sarif", ".", cwd=odd_names)
    assert done.returncode == 2, done.stderr
    (run,) = strict(done.stdout)["runs"]
    (finding,) = run["results"]
    assert finding["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "caf%E9.py"
    (error,) = run["invocations"][0]["toolExecutionNotifications"]
    assert error["message"]["text"].startswith("\ufffd.py:1:7: cannot parse")


def test_a_sarif_path_outside_the_working_directory_is_a_strict_file_uri(odd_names, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = lint("--no-cache", "--format", "sarif", str(odd_names), cwd=elsewhere)
    (run,) = strict(done.stdout)["runs"]
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]
    }
    assert uris == {(odd_names / "caf").as_uri() + "%E9.py"}


class FailsNamingAFile(GroupedMLP):
    def forward(self, *args, **kwargs):
        raise RuntimeError(f"cannot open {os.fsdecode(b'/data/caf' + bytes([0xE9]) + b'.bin')}")


def fails_naming_a_file(**kwargs):
    return FailsNamingAFile(**kwargs)


def test_diff_json_quoting_a_name_that_is_not_utf_8_is_strict():
    spec = f"{__name__}:fails_naming_a_file"
    result = CliRunner().invoke(
        main, ["diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE, "--format", "json"]
    )
    assert result.exit_code == 1, result.output
    document = strict(result.stdout)
    assert any("/data/caf\ufffd.bin" in s for s in strings(document["cases"]))


def test_junit_xml_quoting_a_name_that_is_not_utf_8_is_well_formed(tmp_path):
    junit = tmp_path / "diff.xml"
    spec = f"{__name__}:fails_naming_a_file"
    command = ["diff", "--device", "cpu", "--fused", spec, "-k", ONE_CASE, "--format", "json"]
    result = CliRunner().invoke(main, [*command, "--junit-xml", str(junit)])
    assert result.exit_code == 1, result.output
    document = xml.dom.minidom.parseString(junit.read_bytes())  # a strict XML parser
    (failure,) = document.getElementsByTagName("failure")
    assert "/data/caf\ufffd.bin" in failure.getAttribute("message")


@pytest.mark.parametrize("to_file", [False, True], ids=["stdout", "output-file"])
def test_bench_json_quoting_a_name_that_is_not_utf_8_is_strict(tmp_path, to_file):
    output = tmp_path / "bench.json"
    where = ["--output", str(output)] if to_file else []
    result = CliRunner().invoke(
        main,
        ["bench", "--device", "cpu", "--impl", f"{__name__}:fails_naming_a_file",
         "--phases", "forward", "--format", "json", *where],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    document = strict(output.read_bytes() if to_file else result.stdout)
    assert any("/data/caf\ufffd.bin" in s for s in strings(document["results"]))


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain.py", "plain.py"),
        ("caf\u00e9.py", "caf\u00e9.py"),  # valid UTF-8 is kept as it is
        (os.fsdecode(b"caf\xe9.py"), "caf\ufffd.py"),
        (os.fsdecode(b"\xe2\x82.py"), "\ufffd.py"),  # a truncated sequence: one U+FFFD
        ("\ud800x", "\ufffdx"),  # a surrogate that stands for no byte
    ],
)
def test_display_replaces_what_is_not_utf_8(text, shown):
    assert display(text) == shown
    display(text).encode("utf-8")
