"""What the review tests share: a reviewer's cases kept as files under ``fixtures/<dir>``
(``fa-*`` correct code a first version flagged, ``miss-*`` buggy code, ``hit-*`` / ``ok-*``
controls, ``crash-*`` odd syntax), and the codes each reports with every rule on."""

from __future__ import annotations

from gmlp_check.lint import engine

from .support import ALL_CODES, FIXTURES


def case_files(directory: str) -> list[str]:
    return sorted(path.name for path in (FIXTURES / directory).glob("*.py"))


def case_codes(directory: str, name: str) -> set[str]:
    source = (FIXTURES / directory / name).read_text()
    return {f.code for f in engine.lint_source(source, name, ALL_CODES)}
