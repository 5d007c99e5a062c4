"""GMLP041's choice between a once-per-step guard and a choice of how to write: shapes its
examples do not hold (they run through the mutation harness with every rule, where a copy
into main_grad is GMLP016's business)."""

from __future__ import annotations

import textwrap

from gmlp_check.lint import engine

from .support import ALL_CODES


def _codes(source: str) -> list[tuple[str, int]]:
    findings = engine.lint_source(textwrap.dedent(source).lstrip("\n"), "example.py", ALL_CODES)
    return [(f.code, f.line) for f in findings if f.code == "GMLP041"]


def test_copy_on_the_first_microbatch_and_add_on_the_others_is_a_choice_of_how():
    for later in (
        "    else:\n        w.main_grad.add_(g)\n",
        "        return\n    w.main_grad.add_(g)\n",
        "    else:\n        mg = w.main_grad\n        mg.add_(g)\n",
    ):
        source = (
            "def accumulate(w, g):\n"
            "    if not w.grad_added_to_main_grad:\n"
            "        w.main_grad.copy_(g)\n"
            "        w.grad_added_to_main_grad = True\n" + later
        )
        assert _codes(source) == [], later


def test_a_guard_whose_other_path_writes_nothing_is_reported():
    source = """
        def accumulate(w, g):
            if not w.grad_added_to_main_grad:
                w.main_grad.add_(g)
                w.grad_added_to_main_grad = True
                return
            log_skipped(w)
    """
    assert _codes(source) == [("GMLP041", 2)]
