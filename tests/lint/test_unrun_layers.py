"""GMLP040 (lint/analysis/unrun_layers.py): ``backward_dw`` called on a delayed weight layer
whose forward never runs (issue #19, class 6: absorbed multi-latent attention, Megatron-LM
60704e19). Each case pins one behaviour: what makes the layer delayed, what counts as
running it, how ``backward_dw`` reaches it, and what excuses the call."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import pytest

from gmlp_check.lint import engine

CODE = "GMLP040"
ENABLED = frozenset({CODE})

# A class that absorbs ``self.kv_up``; BUILD, USE and DW are spliced in.
TEMPLATE = """
class Absorbed(MegatronModule):
    def __init__(self, config, specs):
        self.config = config
        self.q_proj = build_module(specs.q_proj, config=config)
{build}

    def forward(self, x):
{use}
        return torch.matmul(self.q_proj(x), w)

    def backward_dw(self):
        self.q_proj.backward_dw()
{dw}
"""
BUILD = "        self.kv_up = build_module(specs.linear_kv_up, config=config)"
USE = "        w = self.kv_up.weight.view(8, 64, -1)"
DW = "        self.kv_up.backward_dw()"


def source(build: str = BUILD, use: str = USE, dw: str = DW, extra: str = "") -> str:
    """The class, with ``extra`` (methods) added to it."""
    methods = textwrap.indent(textwrap.dedent(extra), "    ")
    return TEMPLATE.format(build=build, use=use, dw=dw) + methods


def lines(text: str) -> list[int]:
    return [f.line for f in engine.lint_source(text, "absorbed.py", ENABLED)]


def dw_line(text: str) -> int:
    return next(
        i for i, line in enumerate(text.splitlines(), 1) if "self.kv_up.backward_dw()" in line
    )


def test_the_absorbed_layers_backward_dw_call_is_reported():
    text = source()
    assert lines(text) == [dw_line(text)]


@pytest.mark.parametrize(
    "build",
    [
        "        self.kv_up = build_module(specs['linear_kv_up'], config=config)",
        "        self.kv_up = TELinear(64, 512, delay_wgrad_compute=config.delay_wgrad_compute)",
        "        self.kv_up = SomeProjector(64, 512, delay_wgrad_compute=True)",
        "        self.kv_up = TEColumnParallelLinear(64, 512, config=self.config)",
        "        self._build(config, specs)",
    ],
    ids=["spec-by-key", "te-linear-delay", "any-callee-delay", "linear-config", "helper"],
)
def test_builds_that_delay(build):
    extra = """
    def _build(self, config, specs):
        self.kv_up = build_module(specs.kv_up_proj, config=config)
    """
    text = source(build=build, extra=extra)
    assert lines(text) == [dw_line(text)]


@pytest.mark.parametrize(
    "build",
    [
        "        self.kv_up = TELinear(64, 512)",
        "        self.kv_up = build_module(specs.linear_kv_up, delay_wgrad_compute=False)",
        "        eager = copy.copy(config)\n        eager.delay_wgrad_compute = False\n"
        "        self.kv_up = build_module(specs.linear_kv_up, config=eager)",
        "        eager = dataclasses.replace(config, delay_wgrad_compute=False)\n"
        "        self.kv_up = build_module(specs.linear_kv_up, config=eager)",
        "        self.eager = copy.copy(config)\n"
        "        setattr(self.eager, 'delay_wgrad_compute', False)\n"
        "        self.kv_up = build_module(specs.linear_kv_up, config=self.eager)",
        "        self.kv_up = build_module(specs.kv_norm, config=config)",
    ],
    ids=["no-config", "delay-false", "copy-switched-off", "replace", "setattr-on-self", "no-layer"],
)
def test_builds_that_do_not_delay_are_left_alone(build):
    assert lines(source(build=build)) == []


@pytest.mark.parametrize(
    "use",
    [
        "        w = self.kv_up.weight if self.absorb else self.kv_up(x)",
        "        w = self.kv_up.forward(x)",
        "        w = run_layer(self.kv_up, x) + self.kv_up.weight",
        "        w = [m(x) for m in (self.kv_up, self.q_proj)] + self.kv_up.bias",
        "        w = self.kv_up.weight\n        self.kv_up.some_method(x)",
        "        w = self.kv_up.weight\n        w = getattr(self, self.names[0])(x)",
        "        w = self.kv_up.weight\n        self.kv_up.wgrad_store.put([x], gemm)",
        "        w = self.kv_up.weight + fused_forward(self, x)",
    ],
    ids=[
        "rare-branch",
        "forward",
        "handed-on",
        "iterated",
        "method",
        "computed-getattr",
        "queued-by-hand",
        "self-handed-on",
    ],
)
def test_a_layer_run_on_some_path_is_left_alone(use):
    assert lines(source(use=use)) == []


@pytest.mark.parametrize(
    "use",
    [
        "        w = getattr(self.kv_up, 'weight').t()",
        "        w = getattr(self, 'kv_up').weight.t()",
        "        w = self._w()\n        n = self.kv_up.out_features + self.kv_up.tp_size",
    ],
    ids=["getattr-param", "getattr-self", "helper-and-sizes"],
)
def test_weight_read_in_other_spellings_is_still_not_a_run(use):
    extra = """
        def _w(self):
            return self.kv_up.weight
    """
    text = source(use=use, extra=extra)
    assert lines(text) == [dw_line(text)]


def test_a_layer_whose_parameters_are_never_read_is_left_alone():
    # Mentioned only by its build and its backward_dw: a subclass may run it (GMLP014's
    # territory), nothing here says it is consumed through its weight.
    assert lines(source(use="        w = x")) == []


@pytest.mark.parametrize(
    "dw",
    [
        "        if self.kv_up.wgrad_store.delay_wgrad_compute():\n"
        "            self.kv_up.backward_dw()",
        "        getattr(self.kv_up, 'delayed', False) and self.kv_up.backward_dw()",
    ],
    ids=["if", "and"],
)
def test_a_call_guarded_on_the_layer_is_left_alone(dw):
    assert lines(source(dw=dw)) == []


def test_a_guard_on_the_global_mode_does_not_excuse_the_call():
    dw = "        if self.config.delay_wgrad_compute:\n            self.kv_up.backward_dw()"
    text = source(dw=dw)
    assert lines(text) == [dw_line(text)]


def test_a_call_outside_backward_dw_is_not_judged():
    text = source(dw="        pass", extra="def flush(self):\n    self.kv_up.backward_dw()\n")
    assert lines(text) == []


def test_backward_dw_reaches_the_layer_through_helpers_and_kept_callables():
    extra = "def _dw_kv(self):\n    self.kv_up.backward_dw()\n"
    helper = source(dw="        self._dw_kv()", extra=extra)
    assert lines(helper) == [dw_line(helper)]
    kept = source(
        build=BUILD + "\n        self.steps = [self.kv_up.backward_dw]",
        dw="        for step in self.steps:\n            step()",
    )
    assert len(lines(kept)) == 1


def test_a_kept_callable_backward_dw_never_walks_is_not_judged():
    build = BUILD + "\n        self.steps = [self.kv_up.backward_dw]"
    kept = source(build=build, dw="        pass")
    assert lines(kept) == []


def test_a_subclass_that_absorbs_a_layer_its_base_runs_is_reported_once():
    base = source(use="        w = self.kv_up(x)").replace("Absorbed(", "Base(")
    text = base + textwrap.dedent(
        """
        class Absorbed(Base):
            def forward(self, x):
                return x @ self.kv_up.weight.t()

        class AbsorbedAgain(Absorbed):
            pass
        """
    )
    assert lines(text) == [dw_line(text)]


def test_a_subclass_of_the_file_that_runs_the_layer_excuses_its_base():
    text = source() + textwrap.dedent(
        """
        class Plain(Absorbed):
            def forward(self, x):
                return self.kv_up(x)
        """
    )
    assert lines(text) == []


def test_a_subclass_calling_the_base_forward_through_super_runs_it():
    base = source(use="        w = self.kv_up(x)").replace("Absorbed(", "Base(")
    text = base + textwrap.dedent(
        """
        class Absorbed(Base):
            def forward(self, x):
                if x is None:
                    return super().forward(x)
                return x @ self.kv_up.weight.t()
        """
    )
    assert lines(text) == []


@pytest.mark.parametrize(("init", "found"), [("super().__init__(config, specs)", 1), ("pass", 0)])
def test_layers_a_base_builds_count_when_super_init_runs(init, found):
    base = source(use="        w = self.kv_up(x)").replace("Absorbed(", "Base(")
    text = base + textwrap.dedent(
        f"""
        class Absorbed(Base):
            def __init__(self, config, specs):
                {init}

            def forward(self, x):
                return x @ self.kv_up.weight.t()
        """
    )
    assert lines(text) == [dw_line(text)] * found


# -- a base of another file of the run ----------------------------------------------------
BASE = """
class LatentBase(MegatronModule):
    def __init__(self, config):
        self.config = config
        self.delay = config.delay_wgrad_compute

    def backward_dw(self):
        self._dw_kv()

    def _dw_kv(self):
        self.kv_up.backward_dw()
{more}
"""
SUBCLASS = """
from base import LatentBase


class Absorbed(LatentBase):
    def __init__(self, config, specs):
        super().__init__(config)
        self.kv_up = build_module(specs.linear_kv_up, config=config)

    def forward(self, x):
        return x @ self.kv_up.weight.t()
"""


def lint_run(files: dict[str, str]) -> list[tuple[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path, text in files.items():
            (root / path).write_text(textwrap.dedent(text), encoding="utf-8")
        jobs = [engine.Job(str(root / path), ENABLED) for path in sorted(files)]
        results = engine.run(jobs, engine.Mode(), workers=1)
        return sorted((Path(f.path).name, f.line) for result in results for f in result.findings)


def test_backward_dw_of_a_base_in_another_file_reaches_the_layer():
    found = lint_run({"base.py": BASE.format(more=""), "absorbed.py": SUBCLASS})
    assert found == [("absorbed.py", 8)]  # the build: the call is in the other file


def test_a_base_in_another_file_that_runs_the_layer_excuses_it():
    more = "\n    def project(self, x):\n        return self.kv_up(x)\n"
    assert lint_run({"base.py": BASE.format(more=more), "absorbed.py": SUBCLASS}) == []
