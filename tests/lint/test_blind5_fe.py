"""Fifth blind corpus, held-out classes 5, 6 and 7 (helper fe): the variants made caught, and
the classes they stand for in other spellings.

* GMLP038: a ``backward_dw`` override that runs the base's version only under an ``if`` (or
  after an early ``return``) whose test is not about the delay (fusion, a feature switch);
* GMLP001/GMLP002: a flag ``overwrite_main_grad`` can switch off, handed to a helper of the
  module that gates the bookkeeping on it, is reported at the caller's argument (the helper
  is right given a right argument);
* class 5's variant was already caught by GMLP006 on the flag it skips; its mark moved there.
"""

from __future__ import annotations

import pytest

from gmlp_check.lint import engine

from . import variant_corpus_blind5_heldout
from .support import ALL_CODES, lint_snippet

BY_NAME = {v.name: v for v in variant_corpus_blind5_heldout.VARIANTS}


def test_inverted_fetch_guard_left_alone():
    """Class 8's variant: Transformer Engine's ops fetch main_grad from Megatron-FSDP
    themselves (``get_main_grad_from_param``), so a pre-fetch skipped is not a lost
    gradient with current Transformer Engine; no rule is made to fire on it."""
    variant = BY_NAME["blind5-fetch-guard-inverted-never-fetches-none"]
    assert engine.lint_source(variant.bug_source, "variant.py", ALL_CODES) == []


# (source, code, line) of buggy spellings not in the corpus.
BUGGY = (
    # the base's backward_dw run only when a feature switch is on, nested
    (
        """
        class ExpertFC1(te.pytorch.GroupedLinear):
            def __init__(self, n, i, o, cfg):
                super().__init__(n, i, o, delay_wgrad_compute=cfg.delay_wgrad_compute)
                self.cfg = cfg

            def backward_dw(self):
                if self.cfg.delay_wgrad_compute:
                    if self.cfg.moe_use_legacy_grouped_gemm:
                        super(ExpertFC1, self).backward_dw()
        """,
        "GMLP038",
        8,
    ),
    # an early return on the fusion switch before the base's call
    (
        """
        class RowLinear(te.pytorch.Linear):
            def __init__(self, i, o, config):
                super().__init__(i, o, delay_wgrad_compute=config.delay_wgrad_compute)
                self.fused = config.gradient_accumulation_fusion

            def backward_dw(self):
                if not self.fused:
                    return
                te.pytorch.Linear.backward_dw(self)
        """,
        "GMLP038",
        7,
    ),
    # the delay and an unrelated switch: with the switch off the work is lost
    (
        """
        class ColLinear(te.pytorch.Linear):
            def __init__(self, i, o, config):
                super().__init__(i, o, delay_wgrad_compute=config.delay_wgrad_compute)
                self.config = config

            def backward_dw(self):
                if self.config.delay_wgrad_compute and self.config.fp8:
                    super().backward_dw()
        """,
        "GMLP038",
        7,
    ),
    # a helper deciding the dummy wgrad on its parameter, the caller hands the local flag
    (
        """
        def _finish(w, g, into_main_grad):
            if into_main_grad:
                w.grad_added_to_main_grad = True
                return get_dummy_wgrad(list(w.size()), w.dtype, zero=w.zero_out_wgrad)
            return g


        def backward(ctx, dy, x):
            w = ctx.weight
            acc = ctx.fuse and not w.overwrite_main_grad
            general_gemm(x, dy, out=w.main_grad, accumulate=acc)
            result = _finish(w, None, into_main_grad=acc)
            return dy, result
        """,
        "GMLP002",
        12,
    ),
    (
        """
        def tail(param, grad, flag):
            return get_dummy_wgrad(list(param.size()), param.dtype, zero=True) if flag else grad


        def wgrad_step(op, param, x, dy):
            overwrite = getattr(param, "overwrite_main_grad", False)
            into = op.accumulate_into_main_grad and not overwrite
            gemm(x, dy, out=param.main_grad, accumulate=into)
            param.grad_added_to_main_grad = op.accumulate_into_main_grad
            return tail(param, dy @ x, into)
        """,
        "GMLP002",
        10,
    ),
)

# Correct spellings of the same shapes: no finding at all.
CLEAN = (
    # the base's backward_dw run under the delay test itself
    """
    class ExpertFC1(te.pytorch.GroupedLinear):
        def __init__(self, n, i, o, cfg):
            super().__init__(n, i, o, delay_wgrad_compute=cfg.delay_wgrad_compute)
            self.cfg = cfg

        def backward_dw(self):
            if not self.cfg.delay_wgrad_compute:
                return
            with torch.cuda.nvtx.range("dw"):
                super().backward_dw()
    """,
    # a switch only around extra work; the base runs on every path
    """
    class RowLinear(te.pytorch.Linear):
        def __init__(self, i, o, config):
            super().__init__(i, o, delay_wgrad_compute=config.delay_wgrad_compute)
            self.config = config

        def backward_dw(self):
            if self.config.fp8:
                self.log_fp8()
            if self.wgrad_store is None or self.weight.requires_grad:
                super().backward_dw()
    """,
    # the other path runs the base through a helper of the class
    """
    class FC2(te.pytorch.Linear):
        def __init__(self, i, o, config):
            super().__init__(i, o, delay_wgrad_compute=config.delay_wgrad_compute)
            self.fused = config.gradient_accumulation_fusion

        def backward_dw(self):
            if self.fused:
                super().backward_dw()
            else:
                self._unfused_dw()

        def _unfused_dw(self):
            with torch.no_grad():
                super().backward_dw()
    """,
    # the other path computes the stored work itself
    """
    class FC1(te.pytorch.Linear):
        def __init__(self, i, o, config):
            super().__init__(i, o, delay_wgrad_compute=config.delay_wgrad_compute)
            self.fused = config.gradient_accumulation_fusion

        def backward_dw(self):
            if self.fused:
                super().backward_dw()
            else:
                (wgrad, _), _ = self.wgrad_store.pop()
                self.weight.main_grad.add_(wgrad)
                self.weight.grad_added_to_main_grad = True
                self._trigger_wgrad_accumulation_and_reduce_hooks()
    """,
    # the caller hands the op-level flag, not the downgraded one
    """
    def _finish(w, g, into_main_grad):
        if into_main_grad:
            w.grad_added_to_main_grad = True
            return get_dummy_wgrad(list(w.size()), w.dtype, zero=w.zero_out_wgrad)
        return g


    def backward(ctx, dy, x):
        w = ctx.weight
        acc = ctx.fuse and not w.overwrite_main_grad
        general_gemm(x, dy, out=w.main_grad, accumulate=acc)
        return dy, _finish(w, None, into_main_grad=ctx.fuse)
    """,
    """
    def tail(param, grad, flag):
        return get_dummy_wgrad(list(param.size()), param.dtype, zero=True) if flag else grad


    def wgrad_step(op, param, x, dy):
        overwrite = getattr(param, "overwrite_main_grad", False)
        into = op.accumulate_into_main_grad and not overwrite
        gemm(x, dy, out=param.main_grad, accumulate=into)
        param.grad_added_to_main_grad = op.accumulate_into_main_grad
        return tail(param, dy @ x, op.accumulate_into_main_grad)
    """,
)


@pytest.mark.parametrize(("source", "code", "line"), BUGGY)
def test_other_buggy_spellings_caught(source, code, line):
    found = lint_snippet(source)
    assert (code, line) in {(f.code, f.line) for f in found}, found


@pytest.mark.parametrize("source", CLEAN)
def test_other_correct_spellings_clean(source):
    assert lint_snippet(source) == []
