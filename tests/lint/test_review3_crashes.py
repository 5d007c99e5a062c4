"""Files that made gmlp-lint report "internal error, please report it" (H-review3's run over
the heads of the mirrored repositories, and reading the analyses added with GMLP024-026 and
GMLP034-035): each is linted whole, as a run of several files, and must come back checked,
every entry with a rule code."""

from __future__ import annotations

import json

import pytest

from .support import run_cli, write

# Each case: the files of one run (name -> text).
CASES = {
    # saved.py read an index of ctx.saved_tensors with int(), which refuses ``0x1``.
    "saved-tensors-index-in-hex": {
        "function.py": """
import torch


class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight.main_grad)
        return x

    @staticmethod
    def backward(ctx, g):
        main_grad = ctx.saved_tensors[0x1]
        main_grad.add_(g)
        return g, None
""",
    },
}


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("files", CASES.values(), ids=CASES.keys())
def test_the_file_is_checked_without_an_internal_error(here, files):
    for name, text in files.items():
        write(here / name, text)
    result = run_cli("--no-cache", "--no-progress", "--format", "json", *files)
    unchecked = [e for e in json.loads(result.stdout) if e["code"] is None]
    assert unchecked == [], unchecked
    assert result.exit_code in (0, 1), result.stdout
