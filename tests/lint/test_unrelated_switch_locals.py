"""GMLP006 judges a switch held in a local by what the local was bound to, not by its name: a
writer may call the fusion flag ``f`` (found by renaming the locals of the fifth blind
corpus's correct twins, which then raised GMLP006), and a feature switch copied into a
local is still a feature switch."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine

ENABLED = frozenset({"GMLP006"})


def _codes(source: str) -> list[tuple[str, int]]:
    text = textwrap.dedent(source).lstrip("\n")
    return [(f.code, f.line) for f in engine.lint_source(text, "mod.py", ENABLED)]


CORRECT = {
    "assigned-from-the-fusion-flag": """
        def backward(ctx, dy, x, w):
            f = ctx.gradient_accumulation_fusion
            wgrad = general_gemm(x, dy, out=w.main_grad if f else None, accumulate=f)[0]
            if f and hasattr(w, "grad_added_to_main_grad"):
                w.grad_added_to_main_grad = True
            return dy @ w, wgrad
        """,
    "unpacked-beside-the-weights": """
        def backward(ctx, dy, x):
            ws, a = ctx.weights, ctx.accumulate_into_main_grad
            grads = [general_gemm(x, dy, out=w.main_grad if a else None)[0] for w in ws]
            for w in ws:
                if a and hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
            return grads
        """,
}

BUGGY = {
    "feature-switch-copied-into-a-local": (
        """
        def after_replay(runner):
            r = runner.gtp_remat
            if r:
                for p in runner.params_to_backprop:
                    p.grad = None
                    if hasattr(p, "grad_added_to_main_grad"):
                        p.grad_added_to_main_grad = True
            return (None,) * len(runner.params_to_backprop)
        """,
        7,
    ),
    "feature-switch-unpacked-into-a-local": (
        """
        def after_replay(runner, params):
            n, off = len(params), runner.cpu_offloading
            if off:
                for p in params:
                    if hasattr(p, "grad_added_to_main_grad"):
                        p.grad_added_to_main_grad = True
            return (None,) * n
        """,
        6,
    ),
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_a_local_bound_to_a_related_flag_is_related(name):
    assert _codes(CORRECT[name]) == []


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_a_local_bound_to_a_feature_switch_is_still_one(name):
    source, line = BUGGY[name]
    assert ("GMLP006", line) in _codes(source)
