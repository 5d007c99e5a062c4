"""The semantic model under the issue-#19 rules: which object a weight name holds
(analysis/provenance.py) and the class model of a file (analysis/classes.py)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gmlp_check.lint.analysis import classes, module_provenance, provenance
from gmlp_check.lint.analysis.module import ModuleContext

BACKWARD = """
def _cast(weight):
    return quantize(weight, fp8_dtype)


def backward(ctx, grad_output, weight, origin_weight):
    saved, other = ctx.saved_tensors
    restored = ctx.weight
    param = ctx.origin_weight_ref()
    weight_fp8 = cast_to_fp8(weight)
    full_weight = all_gather(weight)
    cast = _cast(weight)
    alias = weight_fp8
    return grad_output
"""


def unit_named(context: ModuleContext, name: str):
    return next(u for u in context.units if u.name == name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("origin_weight", provenance.PARAMETER),
        ("param", provenance.PARAMETER),  # a weakref of ctx.origin_weight, dereferenced
        ("saved", provenance.SAVED),
        ("restored", provenance.SAVED),
        ("weight_fp8", provenance.QUANTIZED),
        ("alias", provenance.QUANTIZED),  # follows the plain assignment
        ("cast", provenance.QUANTIZED),  # the module's helper returns a quantized copy
        ("full_weight", provenance.MATERIALIZED),
        ("weight", provenance.SAVED),  # its origin_ twin is in scope: this one stands in
        ("grad_output", None),
    ],
)
def test_names_are_classified_by_what_is_assigned_and_how_they_are_spelled(name, expected):
    context = ModuleContext(textwrap.dedent(BACKWARD), "x.py")
    names = module_provenance.of_unit(unit_named(context, "backward"))
    assert names.of(cst.Name(name)) == expected


def test_a_parameter_and_its_stand_in_differ_but_two_unknowns_do_not():
    context = ModuleContext(textwrap.dedent(BACKWARD), "x.py")
    names = module_provenance.of_unit(unit_named(context, "backward"))
    assert names.differ(cst.Name("origin_weight"), cst.Name("weight"))
    assert names.differ(cst.Name("grad_output"), cst.Name("weight_fp8"))  # a copy
    assert not names.differ(cst.Name("grad_output"), cst.Name("restored"))  # TE saves params
    assert not names.differ(cst.Name("origin_weight"), cst.Name("param"))


LAYERS = """
class Base(MegatronModule):
    def __init__(self, config):
        self.linear_q = TELinear(config.h, config.h)
        self.gate = torch.nn.Linear(config.h, 2)
        self.norm = build_module(submodules.layernorm, config)
        self.linear_kv = build_module(submodules.linear_kv, config)

    def backward_dw(self):
        self.linear_q.backward_dw()
        self._rest()

    def _rest(self):
        self.linear_kv.backward_dw()


class Child(Base):
    def __init__(self, config):
        self.linear_qkv = TELinear(config.h, 3 * config.h)

    def _rest(self):
        self.linear_qkv.backward_dw()


class Elsewhere(SomeImportedModule):
    def __init__(self, config, delay_wgrad_compute=True):
        self.linear_fc1 = TELinear(config.h, config.f)
"""


def test_the_class_model_resolves_methods_through_bases_of_the_same_file():
    index = classes.ClassIndex(ModuleContext(textwrap.dedent(LAYERS), "x.py"))
    base, child, elsewhere = (index.classes[n] for n in ("Base", "Child", "Elsewhere"))
    assert set(base.layers) == {"linear_q", "linear_kv"}  # nn.Linear and a norm are not
    assert {"linear_q", "linear_kv"} <= index.reached_attributes(base, "backward_dw")
    # Child inherits backward_dw, whose self._rest() call resolves to Child's override.
    reached = index.reached_attributes(child, "backward_dw")
    assert "linear_qkv" in reached and "linear_kv" not in reached
    assert index.method(child, "backward_dw") is base.methods["backward_dw"]
    assert not index.may_inherit_unknown(child)
    assert index.may_inherit_unknown(elsewhere) and index.spells_delay(elsewhere)


@pytest.mark.parametrize(
    ("code", "fires"),
    [
        ("hook()", True),
        ("self._trigger_wgrad_accumulation_and_reduce_hooks()", True),
        ("module.register_wgrad_accumulation_and_reduce_hooks(hook)", False),
        ("self.hooks.append(hook)", False),
        ("handle.remove_hook()", False),
    ],
)
def test_a_hook_is_fired_by_calling_it_not_by_registering_it(code, fires):
    from gmlp_check.lint.analysis import hooks

    assert hooks.fires_hooks(cst.parse_expression(code)) is fires


@pytest.mark.parametrize(
    ("code", "runs"),
    [
        ("self.wgrad_store.pop()", True),
        ("bwd_dw_graphs[i].replay()", True),
        ("self.queue.pop()", False),
        ("cache.pop(key)", False),
        ("graph.replay(stream)", False),
    ],
)
def test_delayed_wgrad_work_is_a_wgrad_store_pop_or_a_graph_replay(code, runs):
    from gmlp_check.lint.analysis import hooks

    assert (hooks.runs_delayed_wgrad(cst.parse_expression(code)) is not None) is runs
