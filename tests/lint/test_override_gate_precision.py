"""GMLP038's gated-override and predicate shapes on correct code a review wrote: a version or
capability check around the base's backward_dw, a switch assigned from the delay, a
predicate whose "no" is the base's own default or lets the work run; and the message names
the condition under which the base's version really runs."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine

ENABLED = frozenset({"GMLP038"})


def _findings(source: str):
    return engine.lint_source(textwrap.dedent(source).lstrip("\n"), "mod.py", ENABLED)


HEAD = """
    import transformer_engine as te


    class TELinear(te.pytorch.Linear):
        def __init__(self, in_features, out_features, config):
            super().__init__(
                in_features, out_features, delay_wgrad_compute=config.delay_wgrad_compute
            )
            self.enable_dw = config.delay_wgrad_compute
            self.use_fused = config.use_fused
"""

CORRECT = {
    "version-check": HEAD
    + """
        def backward_dw(self):
            if is_te_min_version("2.3.0"):
                super().backward_dw()
    """,
    "capability-check-with-early-return": HEAD
    + """
        def backward_dw(self):
            if not hasattr(super(), "backward_dw"):
                return
            super().backward_dw()
    """,
    "switch-assigned-from-the-delay": HEAD
    + """
        def backward_dw(self):
            if self.enable_dw:
                super().backward_dw()
    """,
    "predicate-whose-no-lets-the-work-run": """
        class Base:
            def __init__(self):
                self._store = []

            def forward(self, x):
                self._store.append(x)
                return x

            def backward_dw(self):
                if self.skip_delayed():
                    return
                x = self._store.pop()
                self.weight.main_grad.add_(x)

            def skip_delayed(self):
                return True


        class Child(Base):
            skip_delayed = lambda self: None
    """,
    "predicate-with-nothing-stored": """
        class Base:
            def is_wgrad_delayed(self):
                return True

            def backward_dw(self):
                if not self.is_wgrad_delayed():
                    return
                for w in self.ws:
                    w.main_grad += self.store.pop()


        class Eager(Base):
            def is_wgrad_delayed(self):
                return False
    """,
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_override_is_not_reported(name):
    assert _findings(CORRECT[name]) == []


def test_a_gate_passed_by_returning_early_is_named_negated():
    source = (
        HEAD
        + """
        def backward_dw(self):
            if self.use_fused:
                return
            super().backward_dw()
    """
    )
    (finding,) = _findings(source)
    assert "only when `not (self.use_fused)`" in finding.message


def test_a_gate_the_call_sits_in_is_named_as_written():
    source = (
        HEAD
        + """
        def backward_dw(self):
            if self.use_fused:
                super().backward_dw()
    """
    )
    (finding,) = _findings(source)
    assert "only when `self.use_fused`" in finding.message
