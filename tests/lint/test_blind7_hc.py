"""The seventh blind corpus, class 6 (helper hc): a layer's backward_dw() run under a test of
another delay mode than the layer was built with is reported at that test, the line that
reads the wrong mode (GMLP021), not at the call, which is right as written."""

from __future__ import annotations

import textwrap

import pytest

from . import variant_corpus_blind7
from .support import lint_snippet

TARGETED = ("blind7-megatron-grouped-linear-dw-config-flag",)
VARIANTS = [v for v in variant_corpus_blind7.VARIANTS if v.name in TARGETED]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_variant_caught_on_its_bug_line(variant):
    findings = lint_snippet(variant.bug)
    assert any(f.line in variant.bug_lines for f in findings), findings


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_twin_clean(variant):
    assert lint_snippet(variant.twin) == []


# Each buggy spelling marks the test that reads the other mode with ``# here``.
WRONG_MODE_TESTS = {
    "nested-under-an-unrelated-test": """
        class Experts(MegatronModule):
            def __init__(self, config, overlap):
                self.delay_wgrad_compute = config.delay_wgrad_compute or overlap
                self.fc2 = TEGroupedLinear(4, 8, delay_wgrad_compute=self.delay_wgrad_compute)

            def backward_dw(self):
                if self.fc2 is not None:
                    if self.config.delay_wgrad_compute:  # here
                        self.fc2.backward_dw()
        """,
    "early-return-then-loop": """
        class Mixer(torch.nn.Module):
            def __init__(self, cfg):
                self.out_proj = TELinear(8, 8, delay_wgrad_compute=True)
                self.in_proj = TELinear(8, 8, delay_wgrad_compute=True)

            def backward_dw(self):
                if not cfg_delay(self.args["delay_wgrad_compute"]):  # here
                    return
                for _ in range(1):
                    self.out_proj.backward_dw()
        """,
    "elif-branch": """
        class Wrapper(te.pytorch.Linear):
            def __init__(self, config, overlap):
                self.delay_wgrad_compute = config.delay_wgrad_compute or overlap
                kwargs = {}
                if self.delay_wgrad_compute:
                    kwargs["delay_wgrad_compute"] = True
                super().__init__(8, 8, **kwargs)

            def backward_dw(self):
                if self.frozen:
                    return None
                elif self.config.delay_wgrad_compute:  # here
                    super().backward_dw()
        """,
}

SAME_MODE_TESTS = {
    "nested-under-the-layers-own-mode": """
        class Experts(MegatronModule):
            def __init__(self, config, overlap):
                self.delay_wgrad_compute = config.delay_wgrad_compute or overlap
                self.fc2 = TEGroupedLinear(4, 8, delay_wgrad_compute=self.delay_wgrad_compute)

            def backward_dw(self):
                if self.fc2 is not None:
                    if self.fc2.delay_wgrad_compute:
                        self.fc2.backward_dw()
        """,
    "early-return-on-the-built-mode": """
        class Mixer(torch.nn.Module):
            def __init__(self, cfg):
                self.out_proj = TELinear(8, 8, delay_wgrad_compute=cfg.delay_wgrad_compute)

            def backward_dw(self):
                if not self.cfg.delay_wgrad_compute:
                    return
                for _ in range(1):
                    self.out_proj.backward_dw()
        """,
    "elif-on-the-own-mode": """
        class Wrapper(te.pytorch.Linear):
            def __init__(self, config, overlap):
                self.delay_wgrad_compute = config.delay_wgrad_compute or overlap
                kwargs = {}
                if self.delay_wgrad_compute:
                    kwargs["delay_wgrad_compute"] = True
                super().__init__(8, 8, **kwargs)

            def backward_dw(self):
                if self.frozen:
                    return None
                elif self.delay_wgrad_compute:
                    super().backward_dw()
        """,
}


@pytest.mark.parametrize("source", WRONG_MODE_TESTS.values(), ids=WRONG_MODE_TESTS.keys())
def test_wrong_mode_reported_at_its_test(source):
    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    here = next(i for i, line in enumerate(lines, start=1) if "# here" in line)
    found = [(f.code, f.line) for f in lint_snippet(source)]
    assert ("GMLP021", here) in found, found


@pytest.mark.parametrize("source", SAME_MODE_TESTS.values(), ids=SAME_MODE_TESTS.keys())
def test_same_mode_clean(source):
    assert lint_snippet(source) == []
