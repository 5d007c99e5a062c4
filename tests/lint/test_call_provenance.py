"""GMLP037's two checks of a copy handed to a weight user (analysis/callee_weights.py, with
an ``origin_`` twin; analysis/call_provenance.py, a copy on every path) meeting at one
argument: one finding, the one naming the twin to hand instead. The variants of what
call_provenance.py sees are in variant_corpus_class1_calls.py."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES

BOTH = """
    def _keep(ctx, w):
        ctx.ref = weakref.ref(w)
        return w.main_grad


    def forward(ctx, x, weight):
        origin_weight = weight
        weight = all_gather_along_first_dim(weight)
        _keep(ctx, weight)
        return x @ weight
"""


def test_a_copy_seen_by_both_checks_is_reported_once_with_its_twin():
    findings = engine.lint_source(textwrap.dedent(BOTH), "f.py", ALL_CODES)
    handed = [f for f in findings if f.code == "GMLP037"]
    assert [f.line for f in handed] == [10]
    assert "`origin_weight` names the Parameter" in handed[0].message


def test_a_copy_on_every_path_without_a_twin_says_what_it_is():
    source = textwrap.dedent(BOTH).replace("    origin_weight = weight\n", "")
    handed = [f for f in engine.lint_source(source, "f.py", ALL_CODES) if f.code == "GMLP037"]
    assert [f.line for f in handed] == [9]
    assert "a materialized (gathered) copy of the weight" in handed[0].message
    assert "`_keep` uses its parameter `w`" in handed[0].message


def test_a_helper_of_the_file_is_judged_by_its_returns_not_its_name():
    # ``_params_to_unshard`` is spelled like a gather, but the file shows it returns the
    # Parameters themselves (the shape of an FSDP unshard hook at Megatron-LM's head).
    source = textwrap.dedent(
        """
        def _params_to_unshard(module):
            return list(module.parameters(recurse=False))


        def _wait_ready(params):
            for p in params:
                p.main_grad.zero_()


        def pre_forward(module):
            todo = _params_to_unshard(module)
            _wait_ready(todo)
        """
    )
    assert engine.lint_source(source, "f.py", ALL_CODES) == []
    # the same call spelled by a helper the file does not define is taken at its word
    elsewhere = source.replace("def _params_to_unshard", "def _unused")
    handed = [f.line for f in engine.lint_source(elsewhere, "f.py", ALL_CODES)]
    assert handed == [13]


ALIASED = """
    class _Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.ref = weakref.ref(w)
            return x @ w.t()

        @staticmethod
        def backward(ctx, dy):
            ctx.ref().main_grad.add_(dy)


    def run(ctx, x, weight):
        {binding}
        copy = quantize(weight)
        return fn({args})
"""


@pytest.mark.parametrize(
    ("binding", "args", "lines"),
    [
        ("fn = _Fn.apply", "x, copy", [16]),  # apply binds ctx itself
        ("fn = _Fn.forward", "ctx, x, copy", [16]),  # forward called directly is given it
        # either entry and no leading ctx list: which parameter ``copy`` lands on is unknown
        ("fn = _Fn.apply if ctx else _Fn.forward", "x, copy", []),
    ],
)
def test_an_alias_of_apply_or_forward_binds_ctx_as_the_entry_does(binding, args, lines):
    source = textwrap.dedent(ALIASED).format(binding=binding, args=args)
    handed = [f.line for f in engine.lint_source(source, "f.py", ALL_CODES) if f.code == "GMLP037"]
    assert handed == lines
