"""A main_grad write moved into a helper of the file (``analysis/writing_helpers.py``): the
mutation corpus's extract-write-helper rewrite of correct real code (Megatron-LM-das's
tensor-parallel layers, MindSpeed-LLM's LoRA experts) raised GMLP008 and GMLP006 findings
that the same code with the write in place does not. Each correct shape here is clean, and
each buggy sibling, where the helper changes nothing about the bug, is still reported."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine
from gmlp_check.lint.registry import CODES

ALL = frozenset(CODES)


def _codes(source: str) -> list[tuple[str, int]]:
    text = textwrap.dedent(source).lstrip("\n")
    return [(f.code, f.line) for f in engine.lint_source(text, "mod.py", ALL)]


FETCH = """
    def fetch(weight):
        if hasattr(weight, "__fsdp_param__"):
            weight.main_grad = weight.get_main_grad()
"""

CLEAN = {
    # Every call of the helper comes after its caller's fetch; two callers, one a method.
    "fsdp-fetch-in-every-caller": FETCH
    + """
    def _into_main_grad(x, dy, weight):
        general_gemm(x, dy, out=weight.main_grad, accumulate=True)


    class Linear(torch.autograd.Function):
        @staticmethod
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            if hasattr(weight, "__fsdp_param__"):
                weight.main_grad = weight.get_main_grad()
            _into_main_grad(x, dy, weight)
            return None, None


    def deferred(x, dy, weight):
        weight.main_grad = weight.get_main_grad()
        if weight.main_grad is not None:
            _into_main_grad(x, dy, weight)
    """,
    # The switch's body writes the weight's main_grad through a helper given it by keyword.
    "switch-body-writes-through-helper": """
    def _gmm_into(inputs, grads, group_list, weight):
        grouped_gemm_add(inputs, grads, group_list, weight.main_grad)


    def backward(ctx, inputs, grads, group_list, original_weight):
        if ctx.use_gmm:
            _gmm_into(inputs, grads, group_list, weight=original_weight)
            original_weight.grad_added_to_main_grad = True
            return None
        return grads.t() @ inputs
    """,
    # Two helpers deep: the writer is called by a helper whose only caller fetched, and the
    # switch's helper hands the weight on to the writer.
    "two-helpers-deep": FETCH
    + """
    def _write(x, dy, w):
        wgrad_gemm_accum_fp32(x, dy, w.main_grad)


    def _accumulate(x, dy, weight):
        _write(x, dy, weight)


    def backward(ctx, x, dy, weight):
        weight.main_grad = weight.get_main_grad()
        if ctx.use_gmm:
            _accumulate(x, dy, weight)
            weight.grad_added_to_main_grad = True
            return None
        return dy.t() @ x
    """,
}

BUGGY = {
    # One caller fetches, the other does not: the helper's write is reported.
    "fsdp-fetch-in-one-caller": (
        FETCH
        + """
    def _into_main_grad(x, dy, weight):
        general_gemm(x, dy, out=weight.main_grad, accumulate=True)


    def backward(x, dy, weight):
        fetch(weight)
        weight.main_grad = weight.get_main_grad()
        _into_main_grad(x, dy, weight)


    def backward_dw(x, dy, weight):
        _into_main_grad(x, dy, weight)
    """,
        ("GMLP008", 6),
    ),
    # Called only by itself and from module level: no caller's fetch to lean on.
    "fsdp-helper-called-from-module-level": (
        FETCH
        + """
    def _into_main_grad(x, dy, weight):
        general_gemm(x, dy, out=weight.main_grad, accumulate=True)


    _into_main_grad(X, DY, W)
    """,
        ("GMLP008", 6),
    ),
    # The helper writes another weight's main_grad (its own attribute), not the one handed.
    "switch-helper-writes-another-weight": (
        """
    def _gmm_into(self, inputs, grads, weight):
        grouped_gemm_add(inputs, grads, self.weight.main_grad)


    def backward(self, ctx, inputs, grads, original_weight):
        if ctx.use_gmm:
            self._gmm_into(inputs, grads, original_weight)
            original_weight.grad_added_to_main_grad = True
            return None
        return grads.t() @ inputs
    """,
        ("GMLP006", 8),
    ),
    # The helper writes the weight it is handed, but the switch hands it a different one.
    "switch-helper-handed-another-weight": (
        """
    def _gmm_into(inputs, grads, weight):
        grouped_gemm_add(inputs, grads, weight.main_grad)


    def backward(ctx, inputs, grads, weight1, weight2):
        if ctx.use_gmm:
            _gmm_into(inputs, grads, weight1)
            weight2.grad_added_to_main_grad = True
            return None
        return grads.t() @ inputs
    """,
        ("GMLP006", 8),
    ),
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_write_through_helper_is_seen(name: str) -> None:
    assert _codes(CLEAN[name]) == []


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_sibling_still_reported(name: str) -> None:
    source, expected = BUGGY[name]
    assert expected in _codes(source)
