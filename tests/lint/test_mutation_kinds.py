"""Each mutation of tests/lint/mutations.py does what its name says on a sample, keeps the
sample valid Python, and leaves code it does not apply to alone."""

from __future__ import annotations

import textwrap

import pytest

from .mutations import MARK, MUTATIONS, mutate

SAMPLE = textwrap.dedent(
    """
    import torch


    class Op:
        def wgrad_step(self, ctx, weight, dy, x):
            origin_weight = ctx.origin_weight
            if ctx.fuse:  # bug
                out = weight.main_grad
            else:
                out = None
            torch.matmul(dy, x, out=out)
            weight.main_grad += dy
            weight.main_grad.add_(dy)  # bug
            weight.grad_added_to_main_grad = True
            flag = getattr(origin_weight, "zero_out_wgrad", False)
            self.helper(weight, flag=flag)
            grad = weight.main_grad if flag else None
            return grad


    def helper(w, flag):
        first, second = w.chunk(2)
        return torch.zeros_like(w, dtype=w.dtype, device=w.device)
    """
).lstrip()

# mutation -> lines the mutant must hold (stripped), and lines it must no longer hold.
EXPECTED = {
    "rename-locals": (
        ["def wgrad_step(self, ctx, w1, d, x1):", "origin_w1 = ctx.origin_weight"],
        ["origin_weight = ctx.origin_weight"],
    ),
    "rename-ctx-attrs": (["origin_weight = ctx.origin_w1_kept"], []),
    "rename-classes": (["class Block0:"], ["class Op:"]),
    "rename-functions": (["def step1(self, ctx, weight, dy, x):", "def step0(w, flag):"], []),
    "extract-write-helper": (
        [
            "def _write_main_grad1(weight, dy):",
            f"_write_main_grad1(weight, dy)  {MARK}",
            f"weight.main_grad.add_(dy)  {MARK}",
        ],
        [],
    ),
    "bind-main-grad-local": (
        [f"mg_local = weight.main_grad  {MARK}", f"mg_local.add_(dy)  {MARK}"],
        [],
    ),
    "bind-main-grad-named": (["main_grad = weight.main_grad", "out = main_grad"], []),
    "swap-if-else": ([f"if not ctx.fuse:  {MARK}"], []),
    "if-to-ifexp": ([f"out = weight.main_grad if ctx.fuse else None  {MARK}"], []),
    "ifexp-to-if": (["if flag:", "grad = weight.main_grad"], []),
    "early-return": (["return grad", "out = None"], ["else:"]),
    "wrap-no-grad": (["with torch.no_grad():"], []),
    "wrap-try-finally": (["try:", "finally:"], []),
    "getattr": (['out = getattr(weight, "main_grad")'], []),
    "setattr": (['setattr(weight, "grad_added_to_main_grad", True)'], []),
    "hasattr": (
        [
            'flag = (origin_weight.zero_out_wgrad if hasattr(origin_weight, "zero_out_wgrad") '
            "else False)"
        ],
        [],
    ),
    "tensor-method-unbound": ([f"torch.Tensor.add_(weight.main_grad, dy)  {MARK}"], []),
    "augassign-as-add_": (["weight.main_grad.add_(dy)"], ["weight.main_grad += dy"]),
    "positional-to-keyword": (
        ["torch.matmul(input=dy, other=x, out=out)", "self.helper(w=weight, flag=flag)"],
        [],
    ),
    "keyword-to-positional": (["self.helper(weight, flag)"], []),
    "keyword-order": (["return torch.zeros_like(w, device=w.device, dtype=w.dtype, )"], []),
    "keywords-to-dict": (
        ['gemm_kwargs = {"out": out}', "torch.matmul(dy, x, **gemm_kwargs)"],
        ["torch.matmul(dy, x, out=out)"],
    ),
    "unpack-by-index": (
        ["saved = w.chunk(2)", "first = saved[0]", "second = saved[1]"],
        ["first, second = w.chunk(2)"],
    ),
    "unrelated-context-functions": (
        [
            "def _describe_gradient_strategy(config):",
            "config.overwrite_main_grad,",
            "def _get_dummy_wgrad(shape, dtype):",
        ],
        [],
    ),
}


def test_every_mutation_has_an_expectation():
    assert set(EXPECTED) == set(MUTATIONS)


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_on_the_sample(name):
    mutant = mutate(name, SAMPLE)  # compiles it
    assert mutant is not None
    lines = {line.strip() for line in mutant.splitlines()}
    present, absent = EXPECTED[name]
    for line in present:
        assert line in lines, (line, mutant)
    for line in absent:
        assert line not in lines, (line, mutant)


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_leaves_unrelated_code_alone(name):
    assert mutate(name, "print(len([1, 2]))\n") is None
