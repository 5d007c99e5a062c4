"""The run's class facts (lint/class_facts.py): which files get them, what they hold, and
how they reach the rules and the cache key."""

from __future__ import annotations

import textwrap

from gmlp_check.lint import engine
from gmlp_check.lint.cache import Cache
from gmlp_check.lint.class_facts import class_facts

from .support import ALL_CODES

BASE = """
class MLP(MegatronModule):
    def __init__(self, config, submodules):
        self.linear_fc1 = build_module(submodules.linear_fc1, config)

    def backward_dw(self):
        self.linear_fc1.backward_dw()
"""
# A variant file that names none of the triggers: before, it was only syntax-checked.
VARIANT = """
from core.mlp import MLP


class GatedMLP(MLP):
    def __init__(self, config, submodules):
        super().__init__(config, submodules)
        self.linear_gate = build_module(submodules.linear_gate, config)
"""
UNRELATED = "class Config:\n    hidden = 4\n"


def _files(**texts: str) -> list[tuple[str, bytes]]:
    return [(path, textwrap.dedent(text).encode()) for path, text in texts.items()]


def _run(tmp_path, files: dict[str, str]):
    jobs = []
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        jobs.append(engine.Job(str(path), ALL_CODES))
    results = engine.run(jobs, engine.Mode(), workers=1)
    return {
        r.path[len(str(tmp_path)) + 1 :]: [(f.code, f.line) for f in r.findings] for r in results
    }


def test_only_a_subclassing_file_gets_facts_and_only_its_lineage():
    facts = class_facts(_files(**{"core/mlp.py": BASE, "gated.py": VARIANT, "cfg.py": UNRELATED}))
    assert set(facts) == {"gated.py"}
    (mlp,) = facts["gated.py"]
    assert (mlp.name, mlp.path, mlp.bases, mlp.layers) == (
        "MLP",
        "core/mlp.py",
        ("MegatronModule",),
        ("linear_fc1",),
    )
    assert dict(mlp.methods)["backward_dw"] == ("linear_fc1",)


def test_a_subclass_that_adds_no_layer_and_overrides_nothing_reached_gets_no_facts():
    plain = "from core.mlp import MLP\n\n\nclass TracedMLP(MLP):\n    def forward(self, x):\n"
    plain += "        return x\n"
    assert class_facts(_files(**{"core/mlp.py": BASE, "traced.py": plain})) == {}


def test_a_variant_file_without_triggers_is_analysed_with_its_base(tmp_path):
    found = _run(tmp_path, {"core/mlp.py": BASE, "gated.py": VARIANT, "cfg.py": UNRELATED})
    assert found == {"core/mlp.py": [], "gated.py": [("GMLP020", 8)], "cfg.py": []}
    # Alone (no facts), the variant file is only syntax-checked.
    assert engine.lint_source(textwrap.dedent(VARIANT), "gated.py", ALL_CODES) == []


def test_a_class_two_files_define_differently_is_unknown(tmp_path):
    other = BASE.replace("self.linear_fc1.backward_dw()", "self.linear_gate.backward_dw()")
    found = _run(tmp_path, {"core/mlp.py": BASE, "legacy/mlp.py": other, "gated.py": VARIANT})
    assert found["gated.py"] == []


def test_an_intermediate_class_in_a_plain_file_passes_the_protocol_on(tmp_path):
    middle = "from core.mlp import MLP\n\n\nclass PlainMLP(MLP):\n    pass\n"
    leaf = VARIANT.replace("from core.mlp import MLP", "from mid import PlainMLP").replace(
        "GatedMLP(MLP)", "GatedMLP(PlainMLP)"
    )
    found = _run(tmp_path, {"core/mlp.py": BASE, "mid.py": middle, "gated.py": leaf})
    assert found["gated.py"] == [("GMLP020", 8)]


def test_editing_the_base_changes_the_subclass_key_only(tmp_path):
    def keys(base: str) -> dict[str, str]:
        jobs = [
            engine.Job(path, ALL_CODES, data)
            for path, data in _files(
                **{"core/mlp.py": base, "gated.py": VARIANT, "cfg.py": UNRELATED}
            )
        ]
        cache = Cache(tmp_path)
        return {job.path: cache.key(job) for job in engine.with_project_facts(jobs)}

    before = keys(BASE)
    after = keys(
        BASE.replace(
            "self.linear_fc1.backward_dw()",
            "self.linear_fc1.backward_dw()\n        self.linear_gate.backward_dw()",
        )
    )
    assert before["gated.py"] != after["gated.py"]
    assert before["cfg.py"] == after["cfg.py"]


def test_class_blocks_survive_decorators_comments_and_brackets():
    text = """
    import torch


    @register
    class Block(
        Base,
        metaclass=Meta,
    ):
    # a comment at column 0 inside the class
        def __init__(self, config, delay_wgrad_compute=False):
            self.linear_fc1 = TELinear(1, 2)
            self.helpers = [
        self.linear_fc1.backward_dw,
    ]

        def backward_dw(self):
            for run in self.helpers:
                run()
    value = 1
    """
    facts = class_facts(
        _files(
            **{
                "block.py": text,
                "use.py": "class Sub(Block):\n    def backward_dw(self):\n        pass\n",
            }
        )
    )
    (block,) = facts["use.py"]
    assert block.bases == ("Base",) and block.spells_delay
    assert dict(block.stores)["helpers"] == ("linear_fc1",)


def test_in_a_file_analysed_for_its_bases_only_those_rules_run(tmp_path):
    # A hand-fired hook (GMLP017's) in a file that names no trigger is not analysed without
    # the subclass; with it, still only the rules that read subclasses run there.
    fired = VARIANT + "\n\ndef finish(param):\n    param._grad_accum_hook()\n"
    alone = engine.lint_source(textwrap.dedent(fired), "gated.py", ALL_CODES)
    found = _run(tmp_path, {"core/mlp.py": BASE, "gated.py": fired})
    assert alone == [] and found["gated.py"] == [("GMLP020", 8)]


def test_no_summaries_when_no_enabled_rule_reads_them():
    enabled = ALL_CODES - {"GMLP014", "GMLP020", "GMLP040"}  # the rules that read subclasses
    jobs = [
        engine.Job(path, enabled, data)
        for path, data in _files(**{"core/mlp.py": BASE, "gated.py": VARIANT})
    ]
    assert [job.class_facts for job in engine.with_project_facts(jobs)] == [(), ()]
