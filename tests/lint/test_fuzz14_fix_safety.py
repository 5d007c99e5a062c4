"""What a fuzzing of ``--fix`` found on 2026-12-05 (a helper mutating the rules' examples and
fixtures, 1,472 mutants plus ~70 written by hand; ``tests/lint/fixtures/fuzz14/``, one file
per defect, kept as the helper wrote it). Each fix below wrote valid code that did something
else (a name unbound or bound to another object where the fix wrote it, a tuple's
parentheses dropped, a line inserted after a ``return``, a suppression orphaned, comments
deleted), or code that did not parse or never settled, blocking every other fix of the file.

Where the fix cannot be made right it is no longer offered: the finding stays, the text is
untouched. Where it can, the fixed text is checked to be what the rule means."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import assert_fix_writes, fix_settled, run_cli, write

CASES = Path(__file__).parent / "fixtures" / "fuzz14"


def _fixed(name: str) -> tuple[str, str, list[str]]:
    return fix_settled(CASES / name)


# file: the rule whose finding stays, with no fix offered (why the fix would be wrong)
DECLINED = {
    # the weight's name read off `p.size()` inside a comprehension / a lambda's parameter
    "gmlp003_safe_fix_comprehension_var.py": "GMLP003",
    "gmlp003_safe_fix_lambda_param.py": "GMLP003",
    # `zero=` would land inside the last argument's parentheses: `(weight.dtype, zero=...)`
    "gmlp003_safe_fix_parenthesized_last_arg.py": "GMLP003",
    # `from torch import empty_like`: `zeros_like` is not imported
    "gmlp003_from_import_zeros_like_unbound.py": "GMLP003",
    # comments inside `not (...)` and `bool(...)` would be deleted
    "gmlp004_safe_fix_drops_comments.py": "GMLP004",
    # code after the mark on its line: the dummy would come after a `return` / a rebinding
    "gmlp005_insert_after_return_same_line.py": "GMLP005",
    "gmlp005_insert_after_rebind_same_line.py": "GMLP005",
    # the flag's source names `op`, deleted / rebound / shadowed where the test is
    "gmlp002_flag_spliced_after_del.py": "GMLP002",
    "gmlp001_flag_spliced_after_rebind.py": "GMLP001",
    "gmlp002_flag_spliced_into_comprehension_shadow.py": "GMLP001",
    "gmlp001_flag_spliced_into_lambda_shadow.py": "GMLP001",
    # `origin_weight` bound after the edit; `fc1_weight` a comprehension's variable there
    "gmlp007_origin_weight_used_before_assignment.py": "GMLP007",
    "gmlp007_comprehension_shadow.py": "GMLP007",
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_a_fix_that_would_change_behaviour_is_not_offered(name):
    source, fixed, remaining = _fixed(name)
    assert fixed == source
    assert DECLINED[name] in remaining


# file: (text the fixed file must hold, text it must not)
FIXED = {
    # `X or Y` -> `X if X is not None else Y` keeps Y's own parentheses
    "gmlp004_or_tuple_parens.py": (
        [
            "else (1, 2)\n",
            "else (make(), None)\n",
            "use(param.main_grad if param.main_grad is not None else (0, 0))",
            "else (x for x in xs))",
        ],
        [" or ("],
    ),
    "gmlp004_or_empty_tuple_invalid.py": (["else ()\n"], [" or ()"]),
    # parenthesized where a bare conditional expression does not parse
    "gmlp004_or_in_comprehension_star_yield.py": (
        ["for y in (param.main_grad if param.main_grad is not None else ())]"],
        [" or ()"],
    ),
    # the fetch goes above the suppression comment, which stays on the line before its `if`
    "gmlp008_fix_orphans_suppression.py": (
        [
            "weight.get_main_grad()\n        # gmlp: ignore[GMLP004] a one-element buffer",
            "intended\n        if weight.main_grad and",
        ],
        [],
    ),
    # a tab-indented file gets tabs
    "gmlp008_tabs_mixed_indent.py": (
        ["\n\t\t\tweight.main_grad = weight.get_main_grad()\n"],
        ["\t "],
    ),
    # the method's own first parameter, not `self`
    "gmlp011_self_not_first_param.py": (["op._trigger_wgrad_hooks()\n"], ["self._trigger"]),
    # applied once: the fix's own `buf.dtype if ...` is not reported again
    "gmlp012_local_buffer_fix_loops.py": (
        ["out_dtype=(buf.dtype if buf is not None else ctx.dtype)"],
        ["(buf.dtype if buf is not None else (buf.dtype"],
    ),
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_a_fix_writes_what_the_rule_means(name):
    assert_fix_writes(CASES / name, *FIXED[name])


def test_the_suppression_still_silences_its_line_after_the_fetch_is_inserted():
    _, fixed, remaining = _fixed("gmlp008_fix_orphans_suppression.py")
    assert "# gmlp: ignore[GMLP004]" in fixed
    assert "GMLP004" not in remaining and "GMLP100" not in remaining


def test_diff_marks_a_last_line_without_newline(tmp_path):
    path = tmp_path / "fetch.py"
    path.write_bytes((CASES / "diff_no_newline_marker.py").read_bytes())
    result = run_cli("--no-cache", "--diff", str(path))
    lines = result.stdout.splitlines()
    # the removed and the added last line each followed by the marker patch expects
    assert lines.count("\\ No newline at end of file") == 1
    assert lines[-1] == "\\ No newline at end of file"
    assert not path.read_bytes().endswith(b"\n")  # --diff writes nothing


def test_diff_of_a_file_ending_in_a_newline_has_no_marker(tmp_path):
    path = write(tmp_path / "fetch.py", (CASES / "diff_no_newline_marker.py").read_text() + "\n")
    result = run_cli("--no-cache", "--diff", str(path))
    assert "+    if param.main_grad is None:" in result.stdout
    assert "No newline at end of file" not in result.stdout
