"""Real-world-shaped code (tests/lint/fixtures, written for these tests after the shapes of
Transformer Engine's fused grouped MLP and GroupedLinear op before and after their fixes,
Megatron's DDP hook and linear backward, and Megatron-FSDP's lazy main_grad).

Each fixture marks the lines that must be flagged with ``# expect: CODE``; everything else
must stay quiet. The pre-fix shapes are flagged at every site, the post-fix shapes not at
all, and fixing the pre-fix shapes leaves parseable code with no findings."""

from __future__ import annotations

import re

import libcst
import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES, FIXTURES, expected_findings

FIXTURE_FILES = sorted(FIXTURES.glob("*.py"))
FLAGGED = [p for p in FIXTURE_FILES if expected_findings(p)]


def lint(path):
    return engine.lint_source(path.read_text(), str(path), ALL_CODES)


PAIRED_CASES = (
    "te_grouped_mlp_backward",
    "te_grouped_linear_op",
    "megatron_linear_wgrad",
    "te_linear_backward",
    "te_layernorm_mlp_wgrad",
    "te_ops_linear_backward",
    "te_grouped_linear_module",
    "te_grouped_linear_op_backward_dw",
    "megatron_cuda_graph_replay",
    "megatron_fsdp_overwrite",
    "megatron_fsdp_fetch",
)


def test_fixture_set_covers_each_real_world_case():
    names = {p.stem for p in FIXTURE_FILES}
    for case in PAIRED_CASES:
        assert {f"{case}_prefix", f"{case}_postfix"} <= names
    assert {
        "megatron_ddp_hook",
        "fsdp_lazy_main_grad_buggy",
        "fsdp_lazy_main_grad_correct",
    } <= names


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_findings_are_exactly_the_expected_ones(path):
    assert sorted((f.code, f.line) for f in lint(path)) == expected_findings(path)


def test_te_fused_grouped_mlp_prefix_is_flagged_at_both_sites():
    codes = {f.code for f in lint(FIXTURES / "te_grouped_mlp_backward_prefix.py")}
    assert codes == {"GMLP001", "GMLP002"}  # the aliasing site and the bookkeeping site


@pytest.mark.parametrize("path", [p for p in FIXTURE_FILES if "_postfix" in p.stem])
def test_post_fix_shapes_are_quiet(path):
    assert expected_findings(path) == []


@pytest.mark.parametrize("path", FLAGGED, ids=lambda p: p.stem)
def test_fixing_leaves_parseable_code_with_only_the_unfixable_findings(path):
    source = path.read_text()
    found = lint(path)
    unfixable = sorted(f.code for f in found if f.fix is None)
    fixed, applied, remaining = engine.fix_source(source, str(path), ALL_CODES, unsafe=True)
    assert applied == len(found) - len(unfixable)
    libcst.parse_module(fixed)
    assert sorted(f.code for f in remaining) == unfixable
    assert sorted(f.code for f in engine.lint_source(fixed, str(path), ALL_CODES)) == unfixable


@pytest.mark.parametrize("case", ["te_grouped_mlp_backward", "te_grouped_linear_op"])
def test_te_fix_gates_on_the_op_level_setting(case):
    """The unsafe fix rewrites each flagged gate to the op-level attribute, as TE's fixes did."""
    path = FIXTURES / f"{case}_prefix.py"
    fixed, _, _ = engine.fix_source(path.read_text(), str(path), ALL_CODES, unsafe=True)
    fixed_lines = fixed.splitlines()
    for _, line in expected_findings(path):
        gate = fixed_lines[line - 1]
        assert re.search(r"\b(fc_op|self)\._accumulate_into_main_grad\b", gate), gate
        assert not re.search(r"(?<![._])\baccumulate_into_main_grad\b", gate), gate
