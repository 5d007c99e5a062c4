"""The project's own code passes gmlp-lint: how CI lints it."""

from __future__ import annotations

from pathlib import Path

from .support import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_project_sources_are_clean():
    paths = [str(ROOT / name) for name in ("refimpl", "fused", "lint", "gmlp_check", "bench")]
    result = run_cli("--no-progress", *paths)
    assert result.exit_code == 0, result.stdout + result.stderr
