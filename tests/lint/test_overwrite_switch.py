"""GMLP016's overwrite-or-add choice (H-classes5): the shapes of the statement tree it walks
that its examples and variants do not hold."""

from __future__ import annotations

import textwrap

from gmlp_check.lint import engine

from .support import ALL_CODES


def _lint(source: str):
    return engine.lint_source(textwrap.dedent(source).lstrip("\n"), "example.py", ALL_CODES)


def test_an_elif_that_leaves_is_read_without_a_suite():
    # An ``elif`` sits in its ``if``'s orelse, not in a suite: when its body leaves, there
    # are no statements "after" it to read (this raised ValueError at TE's head).
    source = """
        def reduce(param, mode, x):
            buf = param.main_grad
            if mode == 0:
                buf.add_(x)
            elif mode == 1:
                buf.copy_(x)
                return
            buf.add_(x)
    """
    assert _lint(source) == []


def test_a_replacing_write_outside_the_choice_is_reported_once():
    source = """
        def reduce(shard, grad, overwrite):
            if grad.numel() == 0:
                shard.zero_()
                return
            if overwrite:
                shard.copy_(grad)
            else:
                shard.add_(grad)
            shard.main_grad = None
    """
    findings = _lint(source)
    assert [(f.code, f.line) for f in findings] == [("GMLP016", 3)]


_MASKED_AFTER_THE_CHOICE = """
    # a file that also handles main_grad elsewhere (and so is analysed)
    def backward(ctx, dout, steps, pad):
        dq = torch.empty_like(dout)
        for i in range(steps):
            part = attention_step_grad(ctx, dout, i)
            if i == 0:
                dq.copy_(part)
            else:
                dq.add_(part)
        {write}
        return dq
"""


def test_a_constant_over_a_range_after_the_choice_is_padding_not_a_lost_sum():
    # TE's context-parallel attention backward (v2.0): after the copy-or-add loop over the
    # steps, the rows past the last sequence are zeroed on purpose.
    for write in ("dq[pad:].fill_(0)", "dq[:, pad:].zero_()", "dq[pad:-1].fill_(0.0)"):
        assert _lint(_MASKED_AFTER_THE_CHOICE.format(write=write)) == [], write


def test_values_or_the_whole_buffer_replaced_after_the_choice_are_still_reported():
    for write in (
        "dq[pad:].copy_(dout[pad:])",
        "dq.zero_()",
        "dq[0].fill_(0)",
        "dq[:].zero_()",
        "dq[pad:].fill_(part)",
    ):
        findings = _lint(_MASKED_AFTER_THE_CHOICE.format(write=write))
        assert [(f.code, f.line) for f in findings] == [("GMLP016", 10)], write


_COMPUTED = """
    def update(weight, lhs, rhs, sparse, acc):
        {binding}
        if sparse:
            sparse_matmul(lhs, rhs, out=weight.grad_buffer, accumulate={switch})
        else:
            {other}
"""


def _codes(binding: str, switch: str, other: str):
    source = textwrap.dedent(_COMPUTED).format(binding=binding, switch=switch, other=other)
    return [(f.code, f.line) for f in _lint(source)]


def test_a_computed_switch_decides_its_destination_against_an_unasked_replace():
    replace = "torch.mm(lhs, rhs, out=weight.grad_buffer)"
    assert _codes("pass", "not is_zero(weight)", replace) == [("GMLP016", 6)]
    # the same value asked on the other path too: decided there as well
    asked = "if is_zero(weight): weight.grad_buffer.copy_(lhs @ rhs)"
    assert _codes("pass", "not is_zero(weight)", asked) == []


def test_a_switch_bound_only_to_literals_is_no_computed_choice():
    replace = "torch.mm(lhs, rhs, out=weight.grad_buffer)"
    # ``acc`` is rebound to a constant before the call: the switch is that constant, and
    # a constant decides nothing for the other path to ignore
    assert _codes("acc = True", "acc", replace) == []
    assert _codes("acc = flag(weight)", "acc", replace) == [("GMLP016", 6)]


def test_a_computed_switch_on_storage_the_function_allocated_is_its_own():
    source = """
        def chunked(chunks, dys, shape):
            out = torch.empty(shape)
            for i, (x, dy) in enumerate(zip(chunks, dys)):
                gemm(x, dy, out=out, accumulate=i > 0)
            out.copy_(out * 0.5)
            return out
    """
    assert _lint(source) == []
