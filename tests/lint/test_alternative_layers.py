"""lint/alternative_layers.py (which layers a class builds in place of one another) and
GMLP043's reading of the lists that name them (analysis/listed_layers.py)."""

from __future__ import annotations

import textwrap

from gmlp_check.lint import engine
from gmlp_check.lint.alternative_layers import alternatives_in
from gmlp_check.lint.project import facts_in, run_facts

from .support import ALL_CODES

LAYER = """
    class MTPLayer(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            if config.enable_hyper_connections:
                self.e_proj = build_module(submodules.e_proj, config=config)
                self.h_proj = build_module(submodules.h_proj, config=config)
                self.eh_proj = None
            else:
                self.eh_proj = build_module(submodules.eh_proj, config=config)
                self.e_proj = None
                self.h_proj = None
"""
CALLER = """
    def callables(layer, backward_dw):
        backward_dw["attn"].append(layer.eh_proj)
"""


def _files(**texts: str) -> list[tuple[str, bytes]]:
    return [
        (f"{name}.py", textwrap.dedent(text).lstrip("\n").encode()) for name, text in texts.items()
    ]


def test_each_branch_gives_the_other_branch_layers_as_alternatives():
    assert alternatives_in(_files(mtp=LAYER, sched=CALLER)) == {
        "MTPLayer.eh_proj=e_proj,h_proj",
        "MTPLayer.e_proj=eh_proj",
        "MTPLayer.h_proj=eh_proj",
    }


def test_only_attributes_listed_outside_self_in_a_backward_dw_file_are_looked_for():
    assert alternatives_in(_files(mtp=LAYER)) == set()
    no_dw = "def callables(layer, fns):\n    fns.append(layer.eh_proj)\n"
    assert alternatives_in(_files(mtp=LAYER, sched=no_dw)) == set()
    on_self = "class L:\n    def backward_dw(self):\n        self.eh_proj.backward_dw()\n"
    assert alternatives_in(_files(mtp=LAYER, sched=on_self)) == set()


def test_none_set_before_the_if_and_elif_chains_count():
    before = """
        class Attention(Module):
            def __init__(self, config):
                super().__init__()
                self.qkv = None
                if config.separate:
                    self.q = TELinear(config.h, config.h)
                    self.kv = TELinear(config.h, config.kv)
                else:
                    self.qkv = TELinear(config.h, config.h + config.kv)
    """
    caller = "def f(attn):\n    attn.qkv.backward_dw()\n"
    assert alternatives_in(_files(attn=before, sched=caller)) == {"Attention.qkv=q,kv"}
    chain = """
        class Mixer(Module):
            def __init__(self, config, submodules):
                super().__init__()
                if config.mode == "fused":
                    self.in_proj = build_module(submodules.in_proj, config=config)
                elif config.mode == "split":
                    self.x_proj = build_module(submodules.x_proj, config=config)
                    self.in_proj = None
                else:
                    raise ValueError(config.mode)
    """
    caller = "def f(m):\n    m.in_proj.backward_dw()\n"
    assert alternatives_in(_files(mixer=chain, sched=caller)) == {"Mixer.in_proj=x_proj"}


def test_no_alternative_when_the_other_branch_keeps_the_layer_or_builds_none():
    same = """
        class A(Module):
            def __init__(self, config, submodules):
                if config.te:
                    self.eh_proj = build_module(submodules.eh_proj, config=config)
                    self.gate_proj = build_module(submodules.gate_proj, config=config)
                else:
                    self.eh_proj = build_module(submodules.eh_proj_local, config=config)
                    self.gate_proj = None
    """
    both = "def f(layer):\n    layer.eh_proj.backward_dw()\n    layer.gate_proj.backward_dw()\n"
    assert alternatives_in(_files(a=same, sched=both)) == set()
    nothing_instead = """
        class B(Module):
            def __init__(self, config, submodules):
                if config.mtp:
                    self.eh_proj = build_module(submodules.eh_proj, config=config)
                else:
                    self.eh_proj = None
                    self.norm = build_module(submodules.norm, config=config)
    """
    assert alternatives_in(_files(b=nothing_instead, sched=CALLER)) == set()


def test_run_facts_and_a_single_file_carry_the_alternatives():
    assert (
        "MTPLayer.eh_proj=e_proj,h_proj" in run_facts(_files(mtp=LAYER, sched=CALLER)).alternatives
    )
    alone = textwrap.dedent(LAYER) + textwrap.dedent(CALLER)
    assert "MTPLayer.eh_proj=e_proj,h_proj" in facts_in(alone).alternatives


def _lint(files: list[tuple[str, bytes]], tmp_path) -> list[tuple[str, int, str]]:
    for name, data in files:
        (tmp_path / name).write_bytes(data)
    jobs = [engine.Job(str(tmp_path / name), ALL_CODES) for name, _ in files]
    results = engine.run(jobs, engine.Mode(), workers=1)
    return sorted((r.path.rsplit("/", 1)[-1], f.line, f.code) for r in results for f in r.findings)


def test_a_listing_is_reported_unless_its_function_names_every_alternative(tmp_path):
    assert _lint(_files(mtp=LAYER, sched=CALLER), tmp_path) == [("sched.py", 2, "GMLP043")]
    named = """
        def callables(layer, backward_dw):
            projs = [layer.e_proj, getattr(layer, "h_proj")] if layer.mhc else [layer.eh_proj]
            backward_dw["attn"].extend(projs)
            backward_dw["attn"].append(layer.eh_proj)
    """
    assert _lint(_files(mtp=LAYER, sched=named), tmp_path) == []


def test_containers_not_named_for_wgrad_work_are_not_listings(tmp_path):
    other = """
        def callables(layer, backward_dw):
            forward_funcs = [layer.eh_proj]
            bandwidth = [layer.eh_proj]
            return forward_funcs, bandwidth, backward_dw
    """
    assert _lint(_files(mtp=LAYER, sched=other), tmp_path) == []
    wgrad_list = """
        def callables(layer, backward_dw):
            delayed_wgrad_modules = [layer.eh_proj]
            return delayed_wgrad_modules
    """
    assert _lint(_files(mtp=LAYER, sched=wgrad_list), tmp_path) == [("sched.py", 2, "GMLP043")]


def test_a_file_that_names_the_alternatives_elsewhere_makes_its_choice_there(tmp_path):
    # The listing of each configuration sits in its own function; the file picks one.
    split = """
        def plain(layer, backward_dw):
            backward_dw["attn"].append(layer.eh_proj)

        def hyper(layer, backward_dw):
            backward_dw["attn"].extend([layer.e_proj, layer.h_proj])

        def callables(layer, backward_dw):
            (plain if layer.eh_proj is not None else hyper)(layer, backward_dw)
    """
    assert _lint(_files(mtp=LAYER, sched=split), tmp_path) == []
    names = """
        HYPER = (r"e_proj", "h_proj")

        def callables(layer, backward_dw):
            backward_dw["attn"].append(layer.eh_proj)
    """
    assert _lint(_files(mtp=LAYER, sched=names), tmp_path) == []


def test_listings_only_looked_at_and_listings_in_tests_are_not_reported(tmp_path):
    looked_at = """
        def check(layer, backward_dw):
            assert layer.eh_proj is None or layer.eh_proj.backward_dw is not None
            return layer.eh_proj.backward_dw is None
    """
    assert _lint(_files(mtp=LAYER, sched=looked_at), tmp_path) == []
    (tmp_path / "tests").mkdir()
    assert _lint(_files(mtp=LAYER, **{"tests/test_mtp": CALLER}), tmp_path) == []


def test_classes_defined_twice_layers_without_delay_and_rebuilt_layers_give_no_fact():
    vendored = "class MTPLayer(MegatronModule):\n    pass\n"
    assert alternatives_in(_files(mtp=LAYER, copy=vendored, sched=CALLER)) == set()
    no_delay = LAYER.replace(
        "build_module(submodules.e_proj, config=config)",
        "TELinear(4, 4, config=config, delay_wgrad_compute=False)",
    ).replace(
        "build_module(submodules.h_proj, config=config)",
        "TELinear(4, 4, config=config, delay_wgrad_compute=False)",
    )
    assert "MTPLayer.eh_proj=e_proj,h_proj" not in alternatives_in(
        _files(mtp=no_delay, sched=CALLER)
    )
    rebuilt = LAYER + (
        "            if self.eh_proj is None:\n"
        "                self.eh_proj = build_module(submodules.eh_proj, config=config)\n"
    )
    assert "MTPLayer.eh_proj=e_proj,h_proj" not in alternatives_in(
        _files(mtp=rebuilt, sched=CALLER)
    )


# Correct projects of the adversarial review (2026-12-04) still reported after its mends.
def test_an_attribute_another_class_of_the_run_also_builds_decides_nothing(tmp_path):
    # ``projector.eh_proj`` may be the Projector's, which builds eh_proj on every path.
    projector = """
        class Projector(MegatronModule):
            def __init__(self, config):
                super().__init__(config)
                self.eh_proj = TELinear(config.h, config.h, config=config)

            def backward_dw(self):
                self.eh_proj.backward_dw()
    """
    sched = """
        def projector_callables(projector, backward_dw):
            backward_dw["proj"].append(projector.eh_proj)
            return backward_dw
    """
    files = _files(mtp=LAYER, other=projector, sched=sched)
    assert "MTPLayer.eh_proj=e_proj,h_proj" not in alternatives_in(files)
    assert _lint(files, tmp_path) == []


def test_a_second_class_with_the_same_alternatives_keeps_the_listing_reported(tmp_path):
    twin = LAYER.replace("class MTPLayer", "class MTPLayerV2")
    files = _files(mtp=LAYER, mtp2=twin, sched=CALLER)
    assert _lint(files, tmp_path) == [("sched.py", 2, "GMLP043")]


def test_alternatives_an_fstring_can_spell_count_as_named(tmp_path):
    fstring = """
        def build_mtp_callables(layer, backward_dw):
            if layer.eh_proj is None:
                for p in ("e", "h"):
                    backward_dw["attn"].append(getattr(layer, f"{p}_proj"))
            else:
                backward_dw["attn"].append(layer.eh_proj)
            return backward_dw
    """
    assert _lint(_files(mtp=LAYER, sched=fstring), tmp_path) == []
    # An f-string that cannot spell them (``{p}_norm``), or has no text of its own, names
    # nothing.
    for text in ('f"{p}_norm"', 'f"{p}"'):
        other = fstring.replace('f"{p}_proj"', text)
        assert _lint(_files(mtp=LAYER, sched=other), tmp_path) == [("sched.py", 6, "GMLP043")]


def test_a_wgrad_container_of_a_file_that_runs_no_backward_dw_is_no_listing(tmp_path):
    offload = """
        def offload_plan(layer, backward_dw):
            wgrad_offload_modules = [layer.eh_proj]
            dw_bytes = {"eh": layer.eh_proj}
            return wgrad_offload_modules, dw_bytes
    """
    assert _lint(_files(mtp=LAYER, sched=offload), tmp_path) == []
    # The same containers in a file that runs the delayed work hold it.
    runs = (
        offload
        + """
        def run(modules):
            for m in modules:
                m.backward_dw()
    """
    )
    assert _lint(_files(mtp=LAYER, sched=runs), tmp_path) == [
        ("sched.py", 2, "GMLP043"),
        ("sched.py", 3, "GMLP043"),
    ]
