"""Pieces of the twenty-seventh session's changes that no rule example pins on its own: the
weight-gradient spellings ``dweight`` / ``d_weight``, a kernel's keywords that name an
output (which keep it from counting as writing nothing), and GMLP002's fall-through dummy
found through a local the name is carried into before the ``return``."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine
from gmlp_check.lint.wgrad_words import names_weight_gradient

from .support import ALL_CODES


def codes_at(source: str) -> set[tuple[str, int]]:
    found = engine.lint_source(textwrap.dedent(source).lstrip("\n"), "case.py", ALL_CODES)
    return {(f.code, f.line) for f in found}


@pytest.mark.parametrize(
    ("word", "says"),
    [
        ("dweight", True),
        ("fc1_dweights", True),
        ("d_weight", True),
        ("expert_d_weights", True),
        ("dw", True),
        ("hidden_weight", False),
        ("d_model", False),
        ("weight", False),
    ],
)
def test_weight_gradient_spellings(word, says):
    assert names_weight_gradient(word) is says


KERNEL = """
class GMMFunction(torch.autograd.Function):
    @staticmethod
    def backward(ctx, dy):
        x, weight, original_weight = ctx.saved_tensors
        dx, dw = npu_gmm_backward([dy], [x], [weight], {keyword}=ctx.groups)
        original_weight.grad_added_to_main_grad = True
        return dx[0], dw[0], None
"""


def test_a_keyword_saying_how_to_compute_leaves_the_kernel_writing_nothing():
    assert ("GMLP032", 6) in codes_at(KERNEL.format(keyword="group_list"))


@pytest.mark.parametrize("keyword", ["out", "out_dw", "main_grad", "accumulate_into", "c"])
def test_a_keyword_that_may_name_an_output_keeps_the_kernel_a_possible_write(keyword):
    assert ("GMLP032", 6) not in codes_at(KERNEL.format(keyword=keyword))


CARRIED = """
def compute_grad_params(fc_op, weights, biases, grouped_x, grouped_dy):
    if fc_op._accumulate_into_main_grad:
        w_list = [get_main_grad_from_param(w) for w in weights]
    else:
        w_list = [torch.empty_like(w) for w in weights]
    delay_wgrad = fc_op.wgrad_store.delay_wgrad_compute()
    if delay_wgrad:
        fc_op.wgrad_store.put([grouped_x, grouped_dy, w_list], gemm)
    else:
        gemm(grouped_x, grouped_dy, w_list)
    if fc_op._accumulate_into_main_grad and delay_wgrad:
        w_list = get_dummy_wgrads_for_params(weights)
    grads = w_list + biases
    return grads
"""


def test_the_fall_through_is_followed_into_the_local_that_is_returned():
    assert ("GMLP002", 11) in codes_at(CARRIED)
    fixed = CARRIED.replace(
        " and delay_wgrad:\n        w_list = get_dummy", ":\n        w_list = get_dummy"
    )
    assert ("GMLP002", 11) not in codes_at(fixed)
