"""Fixes on shapes of code the rules' examples do not use: a parenthesized or walrus test the
fix gates on, a statement that shares its line, a suppression followed by another tool's
comment; and the place of a parse error in a file with lone ``\\r`` endings or a lone
surrogate. Each was found by mutating real files and checking that the fixed text means
what the original meant where no finding was."""

from __future__ import annotations

import ast
import textwrap

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES, run_cli

# GMLP001's example with the op-level test written in other shapes: the fix replaces the
# downgraded ``accumulate`` with what the enclosing test reads.
DOWNGRADED = """
def compute_wgrad(op, weight, x, dy, ready):
    accumulate = False
    out = None
    if {test}:
        main_grad = weight.main_grad
        accumulate = not getattr(weight, "overwrite_main_grad", False)
        if ready and accumulate:
            out = main_grad
    if out is None:
        out = torch.empty_like(weight)
    gemm(x, dy, out=out, accumulate=accumulate)
    return out
"""


def fixed(source: str) -> str:
    text, _, _ = engine.fix_source(textwrap.dedent(source).lstrip("\n"), "m.py", ALL_CODES, True)
    return text


def fixed_test(source: str) -> ast.expr:
    """The test of the branch that read ``accumulate``, after the fix."""
    tree = ast.parse(fixed(source))
    inner = tree.body[0].body[2].body[2]
    assert isinstance(inner, ast.If)
    return inner.test


@pytest.mark.parametrize(
    "test, gate",
    [
        # Spliced without its parentheses, ``ready and a or b`` would run the branch
        # whenever b holds.
        (
            "(op.accumulate_into_main_grad or op.fuse_wgrad_accumulation)",
            "ready and (op.accumulate_into_main_grad or op.fuse_wgrad_accumulation)",
        ),
        # A walrus stands for its value; splicing it whole gave ``(_w := _w := ...)``
        # (invalid, so nothing was written and the run failed) or bound the name again.
        ("(flag := op.accumulate_into_main_grad)", "ready and op.accumulate_into_main_grad"),
        (
            "(flag := op.accumulate_into_main_grad or op.fuse_wgrad_accumulation)",
            "ready and (op.accumulate_into_main_grad or op.fuse_wgrad_accumulation)",
        ),
    ],
)
def test_the_fix_gates_on_what_the_enclosing_test_means(test, gate):
    got = fixed_test(DOWNGRADED.format(test=test))
    assert ast.dump(got) == ast.dump(ast.parse(gate, mode="eval").body)


def test_a_walrus_in_the_branch_itself_is_fixed_into_valid_code():
    source = DOWNGRADED.format(test="(_w := op.accumulate_into_main_grad)").replace(
        "if ready and accumulate:", "if (_w := accumulate):"
    )
    text = fixed(source)
    assert "if (_w := op.accumulate_into_main_grad):" in text.splitlines()[6]


# GMLP005: the mark ``weight.grad_added_to_main_grad = True`` not first on its line. The
# fix inserted ``wgrad = torch.zeros_like(weight)`` after it with the text before the mark
# as "indentation": ``ctx.calls += 1;`` ran twice, or the ``if ...:`` was repeated on every
# fix pass (nothing written, exit 2).
DUMMY = """
import torch


def backward_wgrad(ctx, weight, x, dy):
    wgrad = gemm(x, dy, out=weight.main_grad if ctx.fuse_wgrad_accumulation else None)
    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
{mark}
    return wgrad
"""


@pytest.mark.parametrize(
    "mark",
    [
        "        ctx.calls += 1; weight.grad_added_to_main_grad = True",
        "        if ctx.calls: weight.grad_added_to_main_grad = True",
    ],
)
def test_a_mark_sharing_its_line_gets_no_fix_that_copies_the_line(mark):
    source = DUMMY.format(mark=mark).lstrip("\n")
    found = [f for f in engine.lint_source(source, "m.py", ALL_CODES) if f.code == "GMLP005"]
    assert found and all(f.fix is None for f in found)
    assert fixed(source) == source


def test_a_mark_alone_on_its_line_is_still_fixed():
    source = DUMMY.format(mark="        weight.grad_added_to_main_grad = True").lstrip("\n")
    assert "        wgrad = torch.zeros_like(weight)\n" in fixed(source)


# GMLP100: removing an unused suppression removed every comment after it on the line.
@pytest.mark.parametrize(
    "line, kept",
    [
        (
            "x = 1  # gmlp: ignore[GMLP004] stale  # type: ignore[attr-defined]",
            "x = 1  # type: ignore[attr-defined]",
        ),
        (
            "x = 1  # noqa: E501  # gmlp: ignore[GMLP004]  # pragma: no cover",
            "x = 1  # noqa: E501  # pragma: no cover",
        ),
        ("# gmlp: ignore[GMLP004] see #12  # keep", "# keep"),
        ("x = 1  # gmlp: ignore[GMLP004] see #12", "x = 1"),
    ],
)
def test_removing_a_suppression_keeps_the_comments_after_it(line, kept):
    source = f"def f(p):\n    {line}\n    return p\n"
    assert fixed(source) == f"def f(p):\n    {kept}\n    return p\n"


# -- where a parse error is --------------------------------------------------------------------
def test_a_null_byte_in_a_file_with_cr_endings_is_placed_on_its_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_bytes(b'x = 1\ry = 2\rz = "\0"\r')
    result = run_cli("--no-cache", "a.py")
    assert result.exit_code == 2
    assert "a.py:3:6: cannot parse: the source contains a null byte" in result.stderr


def test_a_lone_surrogate_is_named_not_taken_for_a_null_byte(tmp_path, monkeypatch):
    # raw_unicode_escape decodes the six characters \ud800 to a lone surrogate, which
    # Python's compiler refuses ("surrogates not allowed"); the message said "null byte" at
    # a negative column.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_bytes(b'# -*- coding: raw_unicode_escape -*-\nx = "\\ud800"\n')
    result = run_cli("--no-cache", "a.py")
    assert result.exit_code == 2
    assert "a.py:2:6: cannot parse: surrogates not allowed ('\\ud800')" in result.stderr
    assert "null byte" not in result.stderr


@pytest.mark.parametrize("operator", ["==", "!=", "is", "is not", "in", "<"])
def test_bool_of_main_grad_right_of_a_comparison_is_fixed_in_parentheses(operator):
    # GMLP004's safe fix spliced `p.main_grad is not None` bare after the operator: a chained
    # comparison (`flag == p.main_grad and p.main_grad is not None`), not what was written.
    source = f"def ready(p, flag):\n    return flag {operator} bool(p.main_grad)\n"
    text = fixed(source)
    assert text == f"def ready(p, flag):\n    return flag {operator} (p.main_grad is not None)\n"
    original, new = (ast.parse(t).body[0].body[0].value for t in (source, text))
    assert len(new.comparators) == 1 and isinstance(new.comparators[0], ast.Compare)
    assert ast.dump(new.left) == ast.dump(original.left)


OFFLOADING = """
def mark_for_offload(weights, fuse_wgrad_accumulation):
    for w in weights:
        {marking}
        y = flag = 1
"""


def fixed_gmlp010(marking: str) -> tuple[str, str, list]:
    source = textwrap.dedent(OFFLOADING).lstrip("\n").format(marking=marking)
    text, _, _ = engine.fix_source(source, "m.py", frozenset({"GMLP010"}), True)
    return source, text, engine.lint_source(source, "m.py", frozenset({"GMLP010"}))


@pytest.mark.parametrize(
    "marking",
    [
        "mark_activation_offload(w, w.main_grad)",  # w must stay marked
        "flag = w.main_grad.weight_offloading = True",  # flag must stay bound
        "w.main_grad.weight_offloading = compute(w)",  # compute must still run
        "log(mark_activation_offload(w.main_grad))",  # log must still run
        "mark_activation_offload(next(weights).main_grad)",  # the iterator must advance
        "next(weights).main_grad.weight_offloading = True",
    ],
)
def test_a_marking_that_does_more_than_mark_is_reported_but_not_deleted(marking):
    # GMLP010's fix deleted the whole statement, and with it what else it did.
    source, text, findings = fixed_gmlp010(marking)
    assert [f.code for f in findings] == ["GMLP010"]
    assert text == source


@pytest.mark.parametrize(
    "marking",
    [
        "mark_activation_offload(w.main_grad)",
        "te.offload.mark_activation_offload(weights[0].main_grad, cpu=True)",
        'mark_activation_offload(getattr(w, "main_grad"))',
        "weights[i].main_grad.weight_offloading = True",
    ],
)
def test_a_marking_that_only_marks_is_still_deleted(marking):
    source, text, _ = fixed_gmlp010(marking)
    assert text == source.replace(f"        {marking}\n", "")


FSDP_READ = """
def deferred_wgrad(config, weights, x, dy):
    if config.gradient_accumulation_fusion:
        {read}


def fetch(param):
    if hasattr(param, "__fsdp_param__"):
        param.main_grad = param.get_main_grad()
"""


@pytest.mark.parametrize(
    "read",
    [
        # The owner is bound inside the statement: before it, `w` is another variable or none.
        "results = [wgrad_gemm_accum_fp32(x, dy, w.main_grad) for w in weights]",
        "list(map(lambda w: wgrad_gemm_accum_fp32(x, dy, w.main_grad), weights))",
        # The owner calls something: the fetch would call it three more times.
        "wgrad_gemm_accum_fp32(x, dy, next(weights).main_grad)",
    ],
)
def test_gmlp008_fetches_only_an_owner_it_can_name_before_the_read(read):
    source = textwrap.dedent(FSDP_READ).lstrip("\n").format(read=read)
    enabled = frozenset({"GMLP008"})
    assert [f.code for f in engine.lint_source(source, "m.py", enabled)] == ["GMLP008"]
    text, _, _ = engine.fix_source(source, "m.py", enabled, True)
    assert text == source


def test_gmlp008_still_fetches_a_loop_variable_inside_the_loop():
    source = FSDP_READ.format(
        read="for w in weights[0:]:\n            wgrad_gemm_accum_fp32(x, dy, w.main_grad)"
    )
    text = fixed(source)
    assert '            if hasattr(w, "__fsdp_param__"):\n' in text
    assert "                w.main_grad = w.get_main_grad()\n" in text


GEMM_OUT = """
def fc2_wgrad(ctx, ws, w, fuse, act_out, grad_output):
    return general_gemm(
        act_out,
        grad_output,
        out_dtype=ctx.dtype,
        out={out},
    )
"""


@pytest.mark.parametrize(
    "out",
    [
        # Copied into out_dtype, evaluated first: another weight's buffer, fuse() run twice.
        "next(ws).main_grad if fuse else None",
        "w.main_grad if fuse() else None",
        "w.main_grad if (f := fuse) else None",
    ],
)
def test_gmlp012_copies_no_buffer_or_condition_that_calls_something(out):
    source = textwrap.dedent(GEMM_OUT).lstrip("\n").format(out=out)
    enabled = frozenset({"GMLP012"})
    assert [f.code for f in engine.lint_source(source, "m.py", enabled)] == ["GMLP012"]
    text, _, _ = engine.fix_source(source, "m.py", enabled, True)
    assert text == source


def test_gmlp012_still_copies_a_plain_buffer_and_condition():
    text = fixed(GEMM_OUT.format(out="ws[0].main_grad if fuse and not ctx.fp8 else None"))
    assert "out_dtype=(ws[0].main_grad.dtype if fuse and not ctx.fp8 else ctx.dtype)," in text


@pytest.mark.parametrize("value", ["next(params).main_grad", 'getattr(next(params), "main_grad")'])
def test_gmlp004_reads_no_main_grad_twice_that_calls_something(value):
    # `X if X is not None else Y` evaluates X twice: another parameter's buffer came back.
    source = f"def fetch(params):\n    return {value} or make()\n"
    enabled = frozenset({"GMLP004"})
    assert [f.code for f in engine.lint_source(source, "m.py", enabled)] == ["GMLP004"]
    text, _, _ = engine.fix_source(source, "m.py", enabled, True)
    assert text == source
    plain = fixed("def fetch(params):\n    return params[0].main_grad or make()\n")
    assert "params[0].main_grad if params[0].main_grad is not None else make()" in plain
