"""Every JSON document the command-line tools write goes through ``dumps``: gmlp-lint's json
and sarif formats, and gmlp-check's diff, mutants, faults, ``--list`` and bench documents.
It lives here, not in gmlp_check/, because gmlp-lint also runs as ``python -m lint``, which
can import nothing outside this folder.

A file name that is not UTF-8 reaches Python as text holding surrogate escapes (the byte 0xff
becomes U+DCFF, PEP 383), and so can a message that quotes one. ``json.dumps`` writes such a
character as ``"\\udcff"``: a lone surrogate, which RFC 8259 leaves undefined and strict
consumers (a strict UTF-8 decoder, serde_json, Go's encoding/json, jq) reject or mangle.
So every string is written in its display form, as ruff shows such a path: each run of bytes
that is not UTF-8 becomes U+FFFD, as ``bytes.decode("utf-8", "replace")`` decodes it. That is
lossy by design (two names that differ only in such bytes look alike); the exact bytes stay
in SARIF's ``artifactLocation.uri``, which percent-encodes them (lint/sarif.py).
"""

from __future__ import annotations

import json
from typing import Any

REPLACEMENT = "\ufffd"


def display(text: str) -> str:
    """``text`` with every surrogate replaced, so that it encodes as strict UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        # The bytes a name had on disk, decoded as ruff (Rust's from_utf8_lossy) shows them.
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte (made by other code)
        return "".join(REPLACEMENT if "\ud800" <= c <= "\udfff" else c for c in text)


def _displayed(value: Any) -> Any:
    if isinstance(value, str):
        return display(value)
    if isinstance(value, dict):
        return {display(k) if isinstance(k, str) else k: _displayed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_displayed(v) for v in value]
    return value


def dumps(document: Any, **options: Any) -> str:
    """``json.dumps(document, indent=2, **options)`` with every string in its display form."""
    return json.dumps(_displayed(document), indent=2, **options)
