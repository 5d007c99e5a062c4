"""The seventh blind corpus, class 6 (helper hc): a layer's backward_dw() run under a test of
another delay mode than the layer was built with is reported at that test, the line that
reads the wrong mode (GMLP021), not at the call, which is right as written."""

from __future__ import annotations

import textwrap

import pytest

from .support import lint_snippet

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


# -- the fused path's stand-ins (GMLP014) ------------------------------------------------
# A builder for the spellings below: the up projection first, then the down projection.
BUILDER = """
        class FusedFFN(torch.nn.Module):
            def build_fused(self):
                seq = te_ops.Sequential()
                first = te_ops.GroupedLinear(self.up.num_gemms, delay_wgrad_compute=True)
                seq.append(first)
                seq.append(te_ops.SwiGLU())
                second = te_ops.GroupedLinear(self.down.num_gemms, delay_wgrad_compute=True)
                seq.append(second)
                return seq
"""
SEQUENTIAL_BUILDER = """
        class FusedFFN(torch.nn.Module):
            def build_fused(self):
                up = te_ops.BasicLinear(self.up.in_features, delay_wgrad_compute=True)
                act = te_ops.GELU()
                down = te_ops.BasicLinear(self.down.in_features, delay_wgrad_compute=True)
                return te_ops.Sequential(up, act, down)
"""

SKIPPED_STAND_INS = {
    "negative-index-up-skipped": BUILDER
    + """
            def backward_dw(self):
                kids = list(self._fused[0].children())
                kids[-1].backward_dw()
                self.down._trigger_wgrad_accumulation_and_reduce_hooks()
                self.up._trigger_wgrad_accumulation_and_reduce_hooks()  # here
        """,
    "down-skipped-inside-a-branch": BUILDER
    + """
            def backward_dw(self):
                if self.use_fused:
                    ops = tuple(self.fused_ops.children())
                    ops[0].backward_dw()
                    self.down._trigger_wgrad_accumulation_and_reduce_hooks()  # here
                    self.up._trigger_wgrad_accumulation_and_reduce_hooks()
                else:
                    self.down.backward_dw()
                    self.up.backward_dw()
        """,
    "sequential-of-locals-under-with": SEQUENTIAL_BUILDER
    + """
            def backward_dw(self):
                with torch.no_grad():
                    mods = list(self.fused.children())
                    mods[2].backward_dw()
                    self.up.fire_wgrad_hooks()  # here
        """,
}

COMPUTED_STAND_INS = {
    "negative-and-positive-index": BUILDER
    + """
            def backward_dw(self):
                kids = list(self._fused[0].children())
                kids[-1].backward_dw()
                kids[0].backward_dw()
                self.down._trigger_wgrad_accumulation_and_reduce_hooks()
                self.up._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    "the-layer-itself-computes": BUILDER
    + """
            def backward_dw(self):
                if self.use_fused:
                    ops = tuple(self.fused_ops.children())
                    ops[0].backward_dw()
                    self.down.backward_dw()
                    self.down._trigger_wgrad_accumulation_and_reduce_hooks()
                    self.up._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    "a-loop-over-all-ops": SEQUENTIAL_BUILDER
    + """
            def backward_dw(self):
                mods = list(self.fused.children())
                mods[2].backward_dw()
                for op in mods[:1]:
                    op.backward_dw()
                self.up.fire_wgrad_hooks()
        """,
}


@pytest.mark.parametrize("source", SKIPPED_STAND_INS.values(), ids=SKIPPED_STAND_INS.keys())
def test_skipped_stand_in_reported_at_the_firing(source):
    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    here = next(i for i, line in enumerate(lines, start=1) if "# here" in line)
    found = [(f.code, f.line) for f in lint_snippet(source)]
    assert ("GMLP014", here) in found, found


@pytest.mark.parametrize("source", COMPUTED_STAND_INS.values(), ids=COMPUTED_STAND_INS.keys())
def test_computed_stand_ins_clean(source):
    assert lint_snippet(source) == []
