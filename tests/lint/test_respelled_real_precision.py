"""Correct real code, respelled by the mutation corpus's rewrites (scripts/lint_mutation_real.py
over the repository heads), raised findings in three shapes; each is mended by what the code
does, not by its spelling, and the buggy sibling of each is still reported.

* GMLP013: the same buffer bound to a local twice (read by a test, then bound again before
  the GEMM) is a destination that is written.
* GMLP003: a dummy made in either arm of a conditional expression on ``zero_out_wgrad`` is
  the expression form of an ``if`` on it.
* GMLP006: a switch whose body writes the weight's main_grad through a local bound to it
  is about where the gradient went.
* GMLP012: a GEMM told its output's own dtype (``out=mg, out_dtype=mg.dtype``) writes
  main_grad in main_grad's dtype.
"""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine
from gmlp_check.lint.registry import CODES

ALL = frozenset(CODES)


def _findings(source: str) -> list[tuple[str, int]]:
    text = textwrap.dedent(source).lstrip("\n")
    return [(f.code, f.line) for f in engine.lint_source(text, "mod.py", ALL)]


CORRECT = {
    "same-buffer-bound-again-before-the-gemm": """
        def wgrad_compute(x, dy, weight, fuse):
            if fuse:
                mg = weight.main_grad
                if mg.dtype == torch.float32:
                    mg = weight.main_grad
                    wgrad_gemm_accum_fp32(x, dy, mg)
                else:
                    mg = weight.main_grad
                    wgrad_gemm_accum_fp16(x, dy, mg)
                return None
            return dy.t() @ x
        """,
    "dummy-chosen-by-a-conditional-expression-on-zero-out": """
        def finish(ctx, weight, shape):
            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
                wgrad = (
                    get_dummy_wgrad(shape, weight.dtype, zero=True)
                    if getattr(weight, "zero_out_wgrad", False)
                    else get_dummy_wgrad(shape, weight.dtype)
                )
                return wgrad
            return None
        """,
    "switch-body-writes-through-a-local": """
        def backward(ctx, x, dy, w_a, w_b, fusion):
            if ctx.use_grouped_kernel:
                if fusion:
                    buf = w_a.main_grad
                    grouped_matmul_add_fp32(x, dy, buf)
                    buf = w_b.main_grad
                    grouped_matmul_add_fp32(x, dy, buf)
                    w_a.grad_added_to_main_grad = True
                    w_b.grad_added_to_main_grad = True
            return None
        """,
}

CORRECT["output-dtype-read-off-the-local-output"] = """
    def wgrad(ctx, weight, x, dy):
        if ctx.fuse_wgrad_accumulation:
            mg = weight.main_grad
            general_gemm(x, dy, out_dtype=mg.dtype, out=mg, accumulate=True)
            weight.grad_added_to_main_grad = True
            return None
        return dy.t() @ x
"""

BUGGY = {
    "output-dtype-of-the-activations-into-a-local-main-grad": (
        """
        def wgrad(ctx, weight, x, dy):
            if ctx.fuse_wgrad_accumulation:
                mg = weight.main_grad
                general_gemm(x, dy, out_dtype=ctx.activation_dtype, out=mg, accumulate=True)
                weight.grad_added_to_main_grad = True
                return None
            return dy.t() @ x
        """,
        "GMLP012",
        4,
    ),
    "destination-bound-on-the-fused-path-never-written": (
        """
        def wgrads(weights, x, dy, fuse):
            if fuse:
                out = weights[0].main_grad
            else:
                out = torch.empty_like(weights[0])
                general_gemm(x, dy, out=out)
            return out
        """,
        "GMLP013",
        3,
    ),
    "dummy-chosen-by-a-conditional-expression-on-another-switch": (
        """
        def finish(ctx, weight, shape):
            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
                wgrad = (
                    get_dummy_wgrad(shape, weight.dtype)
                    if ctx.cpu_offloading
                    else get_dummy_wgrad(shape, weight.dtype)
                )
                return wgrad
            return None
        """,
        "GMLP003",
        5,
    ),
    "switch-body-writes-another-weight-through-a-local": (
        """
        def backward(ctx, x, dy, w_a, w_b, fusion):
            buf = w_b.main_grad
            grouped_matmul_add_fp32(x, dy, buf)
            if ctx.use_grouped_kernel:
                buf = w_b.main_grad
                grouped_matmul_add_fp32(x, dy, buf)
                w_a.grad_added_to_main_grad = True
            return None
        """,
        "GMLP006",
        7,
    ),
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_respelled_correct_code_is_clean(name):
    assert _findings(CORRECT[name]) == []


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_the_buggy_sibling_is_still_reported(name):
    source, code, line = BUGGY[name]
    assert (code, line) in _findings(source)
