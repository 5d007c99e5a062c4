"""lint/slot_facts.py: which classes of a run are plugged into a slot whose backward_dw the
run calls, with none of their own (GMLP039), and what keeps a class out."""

from __future__ import annotations

import textwrap

from gmlp_check.lint import engine
from gmlp_check.lint.slot_facts import called_slots, candidate_files, slot_facts
from gmlp_check.lint.workload import files_ahead

from .support import ALL_CODES

MIXER = """
    class ConvMixer(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            self.in_proj = build_module(submodules.in_proj, config)
            self.out_proj = build_module(submodules.out_proj, config)
"""
SPECS = """
    from megatron.core.transformer.spec_utils import ModuleSpec
    from model.mixer import ConvMixer


    def layer_spec():
        return TransformerLayerSubmodules(self_attention=ModuleSpec(module=ConvMixer))
"""
CALLER = """
    def flush(layer):
        layer.self_attention.backward_dw()
"""


def _files(**texts: str) -> list[tuple[str, bytes]]:
    """Files as the engine reads them; keyword ``a__b`` is path ``a/b.py``."""
    return [
        (name.replace("__", "/") + ".py", textwrap.dedent(text).lstrip("\n").encode())
        for name, text in texts.items()
    ]


def _run(mixer=MIXER, specs=SPECS, caller=CALLER, **more) -> dict:
    return slot_facts(_files(model__mixer=mixer, model__specs=specs, sched=caller, **more))


def test_the_plugged_class_without_backward_dw_is_found_with_its_spec_and_caller():
    (fact,) = _run()["model/mixer.py"]
    assert (fact.name, fact.slot, fact.layers) == (
        "ConvMixer",
        "self_attention",
        ("in_proj", "out_proj"),
    )
    assert (fact.spec, fact.caller) == ("model/specs.py:6", "sched.py:2")


def test_calls_on_comment_lines_and_guarded_slots_are_not_calls():
    assert called_slots(_files(a="# layer.mlp.backward_dw()\n")) == {}
    guarded = """
        def flush(layer):
            if hasattr(layer.self_attention, "backward_dw"):
                layer.self_attention.backward_dw()
    """
    assert called_slots(_files(a=guarded)) == {}
    assert _run(caller=guarded) == {}
    read = "def keep(layer):\n    return getattr(layer.self_attention, 'backward_dw', None)\n"
    assert called_slots(_files(a=read)) == {}


def test_calls_spelled_in_docstrings_strings_and_trailing_comments_are_not_calls():
    prose = '''
        def flush(layer):
            """Runs ``layer.self_attention.backward_dw()`` when the schedule asks."""
            log("skipping layer.mlp.backward_dw() here; a '#' in a string")
            keep = 1  # then layer.mixer.backward_dw() "later"
            message = 'it\\'s layer.router.backward_dw()'
    '''
    assert called_slots(_files(a=prose)) == {}
    assert _run(caller=prose) == {}
    # The same file with one real call after the prose: only that slot is called.
    called = prose + "    layer.self_attention.backward_dw()\n"
    assert list(called_slots(_files(a=called))) == ["self_attention"]


def test_a_slot_nobody_calls_plugs_nothing():
    assert _run(caller="def flush(layer):\n    layer.mlp.backward_dw()\n") == {}
    # A wrapper forwarding to ``self.module`` names ModuleSpec's keyword, not a slot.
    assert _run(caller="def flush(self):\n    self.module.backward_dw()\n") == {}


def test_a_backward_dw_in_the_lineage_or_a_refusal_keeps_the_class_out():
    with_dw = MIXER + "\n        def backward_dw(self):\n            self.in_proj.backward_dw()\n"
    assert _run(mixer=with_dw) == {}
    base = "class Base(MegatronModule):\n    def backward_dw(self):\n        pass\n"
    sub = MIXER.replace("(MegatronModule)", "(Base)").replace(
        "class ConvMixer", "from model.base import Base\n\n\n    class ConvMixer"
    )
    assert _run(mixer=sub, model__base=base) == {}
    asserted = MIXER.replace(
        "super().__init__(config)",
        "super().__init__(config)\n            assert not config.delay_wgrad_compute",
    )
    assert _run(mixer=asserted) == {}
    raised = MIXER.replace(
        "super().__init__(config)",
        "super().__init__(config)\n            if config.delay_wgrad_compute:\n"
        "                raise NotImplementedError('no backward_dw')",
    )
    assert _run(mixer=raised) == {}
    forwarding = MIXER + "\n        def __getattr__(self, name):\n            return 1\n"
    assert _run(mixer=forwarding) == {}


def test_a_base_outside_the_run_or_no_weight_layer_keeps_the_class_out():
    assert _run(mixer=MIXER.replace("(MegatronModule)", "(te.pytorch.LayerNormLinear)")) == {}
    eager = MIXER.replace("build_module(submodules.in_proj, config)", "torch.nn.Linear(4, 4)")
    eager = eager.replace("build_module(submodules.out_proj, config)", "torch.nn.Conv1d(4, 4, 2)")
    assert _run(mixer=eager) == {}


def test_a_name_two_files_define_is_the_one_the_spec_imports():
    other = MIXER.replace("build_module(submodules.in_proj, config)", "torch.nn.Identity()")
    found = _run(other__mixer=other)
    assert set(found) == {"model/mixer.py"}
    unimported = SPECS.replace("from model.mixer import ConvMixer", "from model import *")
    assert _run(specs=unimported, other__mixer=other) == {}


def test_specs_followed_through_names_conditionals_and_functions():
    specs = """
        from megatron.core.transformer.spec_utils import ModuleSpec
        from model.mixer import ConvMixer as CM

        DEFAULT = ModuleSpec(CM)


        def variant(config):
            return variant(config) if config.again else DEFAULT


        def layers(config, standard):
            chosen = variant(config) or standard
            return [{"self_attention": chosen}]
    """
    (fact,) = _run(specs=specs)["model/mixer.py"]
    assert fact.spec == "model/specs.py:4"
    direct = "def layer_spec():\n    return Submodules(self_attention=ConvMixer)\n"
    direct = "from model.mixer import ConvMixer\n" + direct
    (fact,) = _run(specs="ModuleSpec = None\n" + direct)["model/mixer.py"]
    assert fact.spec == "model/specs.py:4"


def test_candidate_files_hold_every_file_given_facts_and_go_last():
    files = _files(model__mixer=MIXER, model__specs=SPECS, sched=CALLER, other="x = 1\n")
    assert candidate_files(files) == {"model/mixer.py"}
    assert candidate_files(_files(model__mixer=MIXER, model__specs=SPECS)) == set()
    jobs = [engine.Job(path, ALL_CODES, data) for path, data in files]
    ahead = {jobs[i].path for i in files_ahead(jobs, [False] * len(jobs))}
    assert "model/mixer.py" not in ahead and "other.py" in ahead


def test_every_file_given_a_fact_is_a_candidate_whatever_its_class_is_called():
    # A file given a fact must not be linted ahead of the facts (its result, cached under a
    # key holding the fact, would lack the finding): the names are slot_facts' own.
    mixer = MIXER.replace("ConvMixer", "conv_mixer_impl")
    specs = SPECS.replace("ConvMixer", "conv_mixer_impl")
    files = _files(model__mixer=mixer, model__specs=specs, sched=CALLER)
    assert set(slot_facts(files)) == {"model/mixer.py"}
    assert candidate_files(files) == {"model/mixer.py"}


def test_the_engine_gives_the_facts_to_the_defining_file_only():
    files = _files(model__mixer=MIXER, model__specs=SPECS, sched=CALLER)
    jobs = engine.with_project_facts([engine.Job(p, ALL_CODES, d) for p, d in files])
    given = {job.path: job.slot_facts for job in jobs}
    assert [f.name for f in given["model/mixer.py"]] == ["ConvMixer"]
    assert given["model/specs.py"] == () and given["sched.py"] == ()
    results = engine.run(jobs, engine.Mode(), workers=1)
    codes = {(r.path, f.code, f.line) for r in results for f in r.findings}
    assert codes == {("model/mixer.py", "GMLP039", 1)}
    without = frozenset(ALL_CODES - {"GMLP039"})
    jobs = engine.with_project_facts([engine.Job(p, without, d) for p, d in files])
    assert all(job.slot_facts == () for job in jobs)
