"""Helpers shared by the gmlp-lint tests: running the CLI in-process or in a process of its
own, and writing files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gmlp_check.lint import engine
from gmlp_check.lint.cli import cli
from gmlp_check.lint.registry import CODES

ALL_CODES = frozenset(CODES)
FIXTURES = Path(__file__).parent / "fixtures"


def lint_snippet(source: str):
    """Every rule's findings on an indented snippet (dedented, leading newline dropped)."""
    return engine.lint_source(textwrap.dedent(source).lstrip("\n"), "variant.py", ALL_CODES)


def fix_settled(path: Path) -> tuple[str, str, list[str]]:
    """(source, text after every unsafe fix, codes still reported) for the file at ``path``;
    the fixed text must compile and a second pass must leave it alone."""
    source = path.read_bytes().decode()
    fixed, _, remaining = engine.fix_source(source, path.name, ALL_CODES, unsafe=True)
    compile(fixed, path.name, "exec")
    again, applied, _ = engine.fix_source(fixed, path.name, ALL_CODES, unsafe=True)
    assert (again, applied) == (fixed, 0), "a second --fix changed the text again"
    return source, fixed, [finding.code for finding in remaining]


def assert_fix_writes(path: Path, present: list[str], absent: list[str]) -> None:
    """The file's settled fix changes it, and holds every text of ``present`` and none of
    ``absent``."""
    source, fixed, _ = fix_settled(path)
    assert fixed != source
    for text in present:
        assert text in fixed, text
    for text in absent:
        assert text not in fixed, text


def run_cli(*args: str, stdin: str | None = None):
    """Invoke ``gmlp-lint`` with ``args``; the result has exit_code, stdout and stderr."""
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def write_plain_bulk(directory: Path, size: int) -> list[Path]:
    """Files without main_grad (so only CPython's parser reads them) of ``size`` bytes in all."""
    # No comprehensions: CPython 3.11 compiles a module with thousands of them in quadratic time.
    line = "value = max(index * 2, limit) + len(names)  # plain code, no gradients\n"
    body = line * (100_000 // len(line))
    count = -(-size // len(body))
    return [write(directory / f"bulk{i:02d}.py", body) for i in range(count)]


def expected_findings(path: Path) -> list[tuple[str, int]]:
    """(code, line) for every ``# expect: CODE`` comment in a fixture."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if "# expect:" in line:
            for code in line.split("# expect:", 1)[1].replace(",", " ").split():
                found.append((code, number))
    return sorted(found)


def run_process(
    *args: str,
    cwd: Path,
    unprivileged: bool = False,
    timeout: float = 60,
    input_bytes: bytes | None = None,
):
    """``gmlp-lint args`` as a process of its own (for what must not hang or be mocked).
    ``unprivileged``: file permissions apply even when the tests run as root (root keeps
    its user id but loses the capabilities that override them). With ``input_bytes`` on
    stdin, stdout and stderr are bytes too."""
    command = [sys.executable, "-m", "gmlp_check.lint", *args]
    if unprivileged and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: file permissions cannot be enforced")
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--", *command]
    return subprocess.run(
        command,
        cwd=cwd,
        input=input_bytes,
        capture_output=True,
        text=input_bytes is None,
        timeout=timeout,
        check=False,
    )
