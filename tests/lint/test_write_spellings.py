"""Writes into main_grad in their many spellings (views, in-place methods that copy or add,
aliases), and locals that are another name for one weight: the rules judge the write by what
it does to main_grad's storage, and two names of one object as one weight."""

from __future__ import annotations

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES

# (statement in a weight-gradient producer that never asks overwrite_main_grad, whether it
# replaces what main_grad held)
PRODUCER_WRITES = [
    ("weight.main_grad.copy_(g)", True),
    ("weight.main_grad.data.copy_(g)", True),
    ("weight.main_grad[:].copy_(g)", True),
    ("weight.main_grad.view(-1).copy_(g.view(-1))", True),
    ("weight.main_grad.detach().copy_(g)", True),
    ("weight.main_grad.narrow(0, s, n).copy_(g)", True),
    ("torch.narrow(weight.main_grad, 0, s, n).copy_(g)", True),
    ("weight.main_grad.flatten()[off:off + n].copy_(g)", True),
    ("weight.main_grad.chunk(E)[e].copy_(g)", True),
    ("mg = weight.main_grad\n    mg.data.copy_(g)", True),
    ("grads = [weight.main_grad]\n    grads[0].copy_(g)", True),
    ("torch.matmul(dy.t(), x, out=weight.main_grad.data)", True),
    ("weight.main_grad.index_copy_(0, idx, g)", True),
    ("weight.main_grad.masked_scatter_(mask, g)", True),
    ("weight.main_grad.index_put_((idx,), g)", True),
    ("weight.main_grad.scatter_(0, idx, g)", True),
    ("weight.main_grad.data[...] = g", True),
    ("mg = weight.main_grad\n    mg[e] = g", True),
    ("weight.main_grad.view(E, -1)[e] = g", True),
    ("weight.main_grad.index_put_((idx,), g, accumulate=True)", False),
    ("weight.main_grad.index_put_((idx,), g, accumulate=False)", True),
    ("weight.main_grad.scatter_(0, idx, g, reduce='add')", False),
    ("weight.main_grad.index_add_(0, idx, g)", False),
    ("weight.main_grad.scatter_add_(0, idx, g)", False),
    ("weight.main_grad.view(-1).add_(g.view(-1))", False),
    ("weight.main_grad.zero_()", False),  # a reset, not a gradient's delivery
    ("general_gemm(x, dy, out=weight.main_grad)", True),  # TE's default: accumulate=False
    ("general_gemm(x, dy, out=weight.main_grad, accumulate=True)", False),
    ("torch.sum(dw, dim=0, out=weight.main_grad)", True),
    ("torch.cat(parts, out=weight.main_grad)", True),
    ("weight.main_grad = (dy.t() @ x).float()", True),
    ("wgrad = dy.t() @ x\n    weight.main_grad.data = wgrad", True),
    ("weight.main_grad = weight.get_main_grad()", False),
    ("weight.main_grad = buffer[a:b].view_as(weight)", False),
]


@pytest.mark.parametrize(
    ("write", "replaces"), PRODUCER_WRITES, ids=[w for w, _ in PRODUCER_WRITES]
)
def test_a_replacing_write_is_judged_by_what_it_does_to_main_grad(write, replaces):
    source = (
        f"def wgrad(weight, x, dy, g):\n    {write}\n    weight.grad_added_to_main_grad = True\n"
    )
    codes = {f.code for f in engine.lint_source(source, "m.py", ALL_CODES)}
    assert ("GMLP016" in codes) == replaces


# Writes that deliver the gradient: the mark after them claims nothing false.
DELIVERING = [
    "weight.main_grad.index_add_(0, idx, g)",
    "weight.main_grad.view(-1).add_(g.view(-1))",
    "weight.main_grad[e].add_(g)",
    "weight.main_grad.data += g",
    "torch.Tensor.add_(weight.main_grad, g)",
    "vars(weight)['main_grad'].add_(g)",
    "weight.main_grad.scatter_add_(0, idx, g)",
    "weight.main_grad.index_put_((i,), g, accumulate=True)",
    "weight.main_grad.narrow(0, s, n).add_(g)",
    "mg = weight.main_grad.view(E, -1)\n        mg[e].add_(g)",
    "wgrad_kernel[grid](x, dy, weight.main_grad, ACCUMULATE=True)",
    "torch._foreach_add_([weight.main_grad], [g])",
    "torch.stack(parts, out=weight.main_grad)",
]


@pytest.mark.parametrize("write", DELIVERING)
def test_a_mark_after_a_delivering_write_is_not_reported(write):
    source = (
        "def backward(ctx, dy, x, weight):\n"
        "    if ctx.use_grouped:\n"
        "        grouped_wgrad(x, dy, weight.main_grad)\n"
        "    else:\n"
        f"        {write}\n"
        "    weight.grad_added_to_main_grad = True\n"
        "    return None, make_dummy_wgrad(weight)\n"
    )
    codes = {f.code for f in engine.lint_source(source, "m.py", ALL_CODES)}
    assert "GMLP032" not in codes


def _block(binding: str) -> str:
    return (
        "def backward(ctx, dy):\n"
        "    x, w_saved = ctx.saved_tensors\n"
        "    weight = ctx.weight\n"
        f"    {binding}\n"
        "    general_gemm(x, dy, out=s.main_grad, accumulate=True)\n"
        "    weight.grad_added_to_main_grad = True\n"
        "    return None, make_dummy_wgrad(weight)\n"
    )


@pytest.mark.parametrize("binding", ["s = weight", "s = ctx.weight"])
def test_another_name_for_the_marked_weight_is_that_weight(binding):
    assert engine.lint_source(_block(binding), "m.py", ALL_CODES) == []


@pytest.mark.parametrize(
    "binding",
    [
        "s = weight.data",
        "s = weight.detach().clone()",
        "s = cast_to_fp8(weight)",
        "s = all_gather(weight)",
        "s = w_saved",
        "s = ctx.weight_fp8",
        # bound twice: which object ``s`` holds depends on the path
        "s = weight\n    if ctx.fp8:\n        s = cast_to_fp8(weight)",
    ],
)
def test_a_stand_in_or_a_name_bound_twice_is_still_another_object(binding):
    found = engine.lint_source(_block(binding), "m.py", ALL_CODES)
    assert any(f.code == "GMLP007" for f in found)
