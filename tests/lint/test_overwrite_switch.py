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
