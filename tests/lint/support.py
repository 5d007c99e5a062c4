"""Helpers shared by the gmlp-lint tests: running the CLI in-process and writing files."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner

from lint.catalog import CODES
from lint.cli import cli

ALL_CODES = frozenset(CODES)
FIXTURES = Path(__file__).parent / "fixtures"


def run_cli(*args: str, stdin: str | None = None):
    """Invoke ``gmlp-lint`` with ``args``; the result has exit_code, stdout and stderr."""
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def expected_findings(path: Path) -> list[tuple[str, int]]:
    """(code, line) for every ``# expect: CODE`` comment in a fixture."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if "# expect:" in line:
            for code in line.split("# expect:", 1)[1].replace(",", " ").split():
                found.append((code, number))
    return sorted(found)
