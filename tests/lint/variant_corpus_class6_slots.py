"""Issue #19, class 6 (delayed wgrad across classes) through specs: a module class plugged
into a layer's slot whose ``backward_dw`` the run calls, with none of its own (GMLP039).
Each case is a small tree of files linted together as one run (``test_variant_corpus_xfile``
runs them): a buggy version (``# expect: CODE`` on each line that must be reported) and its
fixed twin (no finding at all).

Written from how Megatron-style models wire their layers, not copied: a spec names the class
(``ModuleSpec(module=C, submodules=CSubmodules(...))``), a layer spec hands it to a slot
(``self_attention=``, ``mlp=``), and a schedule that overlaps the weight-gradient pass calls
``layer.<slot>.backward_dw()`` or keeps it as a callable. The variants (weak spot "s"):
the spec built where it is plugged, returned by a function of another file through a local
and a conditional, given as a dict entry, named through an import alias, bound at the top
of the spec file, and a class whose layers come from a base of another file.
"""

from __future__ import annotations

from .variant_corpus_class6_xfile import XCase

# A schedule that keeps each layer's slot callables for the delayed weight-gradient pass.
SCHEDULE = """
    class LayerCallables:
        def __init__(self, layer):
            self.attn_dw = layer.self_attention.backward_dw
            self.mlp_dw = layer.mlp.backward_dw

        def backward_dw(self):
            self.attn_dw()
            self.mlp_dw()
"""

# The dense MLP every case plugs into ``mlp=``: it has its backward_dw.
MLP = """
    class DenseMLP(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            self.linear_fc1 = build_module(submodules.linear_fc1, config)
            self.linear_fc2 = build_module(submodules.linear_fc2, config)

        def backward_dw(self):
            self.linear_fc2.backward_dw()
            self.linear_fc1.backward_dw()
"""


def _mixer(name: str, expect: bool, dw: bool) -> str:
    """A mixer class with an input and an output projection; with ``dw`` its backward_dw."""
    mark = "  # expect: GMLP039" if expect else ""
    text = f"""
    class {name}(MegatronModule):{mark}
        def __init__(self, config, submodules):
            super().__init__(config)
            self.in_proj = build_module(submodules.in_proj, config)
            self.conv = torch.nn.Conv1d(config.hidden, config.hidden, 4)
            self.out_proj = build_module(submodules.out_proj, config)

        def forward(self, x):
            return self.out_proj(self.conv(self.in_proj(x)))
"""
    if dw:
        text += """
        def backward_dw(self):
            self.in_proj.backward_dw()
            self.out_proj.backward_dw()
"""
    return text


def _pair(name: str, files: dict[str, str], mixer_path: str, mixer: str) -> XCase:
    """The case whose ``mixer_path`` holds class ``mixer`` without backward_dw (buggy) and
    with it (twin); the other files are shared."""
    bug = {**files, mixer_path: _mixer(mixer, True, False)}
    twin = {**files, mixer_path: _mixer(mixer, False, True)}
    return XCase(name, "s", bug, twin)


CASES = (
    # The spec built where it is plugged in, one file; the schedule in another.
    _pair(
        "spec-built-in-slot-keyword",
        {
            "model/mlp.py": MLP,
            "model/specs.py": """
                from model.mixer import ConvMixer, ConvMixerSubmodules
                from model.mlp import DenseMLP
                from megatron.core.transformer.spec_utils import ModuleSpec


                def hybrid_layer_spec(backend):
                    return ModuleSpec(
                        module=TransformerLayer,
                        submodules=TransformerLayerSubmodules(
                            self_attention=ModuleSpec(
                                module=ConvMixer,
                                submodules=ConvMixerSubmodules(
                                    in_proj=backend.column_parallel_linear(),
                                    out_proj=backend.row_parallel_linear(),
                                ),
                            ),
                            mlp=ModuleSpec(module=DenseMLP),
                        ),
                    )
            """,
            "pipeline/schedule.py": SCHEDULE,
        },
        "model/mixer.py",
        "ConvMixer",
    ),
    # A function of another spec file returns the spec; the layer spec picks it through a
    # conditional between two locals, one bound from that call.
    _pair(
        "spec-returned-across-files-through-conditional",
        {
            "model/mlp.py": MLP,
            "model/variant_specs.py": """
                from megatron.core.transformer.spec_utils import ModuleSpec
                from model.retention import RetentionMixer


                def retention_spec(config):
                    spec = ModuleSpec(module=RetentionMixer, params={"chunk": config.chunk})
                    return spec


                def variant_attention_spec(config):
                    if config.attention_variant == "retention":
                        return retention_spec(config)
                    raise ValueError(config.attention_variant)
            """,
            "model/block_specs.py": """
                from megatron.core.transformer.spec_utils import ModuleSpec
                from model.mlp import DenseMLP
                from model.variant_specs import variant_attention_spec


                def block_spec(config, pattern):
                    variant = variant_attention_spec(config) if 1 in pattern else None
                    standard = standard_attention_spec(config)
                    layers = []
                    for kind in pattern:
                        attention = variant if kind == 1 else standard
                        layers.append(
                            ModuleSpec(
                                module=TransformerLayer,
                                submodules=TransformerLayerSubmodules(
                                    self_attention=attention, mlp=ModuleSpec(module=DenseMLP)
                                ),
                            )
                        )
                    return layers
            """,
            "pipeline/schedule.py": SCHEDULE,
        },
        "model/retention.py",
        "RetentionMixer",
    ),
    # The slot given as a dict entry; the schedule calls the slot's backward_dw on a layer.
    _pair(
        "spec-in-dict-entry",
        {
            "model/specs.py": """
                from megatron.core.transformer.spec_utils import ModuleSpec
                from model.router_mixer import RouterMixer

                SUBMODULES = {
                    "mlp": ModuleSpec(module=RouterMixer),
                    "self_attention": None,
                }
            """,
            "pipeline/overlap.py": """
                def run_delayed_wgrad(layers):
                    for layer in reversed(layers):
                        layer.mlp.backward_dw()
            """,
        },
        "model/router_mixer.py",
        "RouterMixer",
    ),
    # The class named through an import alias in the spec, bound at the top of the file.
    _pair(
        "spec-through-alias-at-module-level",
        {
            "model/mlp.py": MLP,
            "model/specs.py": """
                from megatron.core.transformer.spec_utils import ModuleSpec
                from model.mlp import DenseMLP
                from model.lightning import LightningMixer as Lightning

                LIGHTNING_SPEC = ModuleSpec(module=Lightning)


                def layer_spec():
                    return TransformerLayerSubmodules(
                        self_attention=LIGHTNING_SPEC, mlp=ModuleSpec(module=DenseMLP)
                    )
            """,
            "pipeline/schedule.py": SCHEDULE,
        },
        "model/lightning.py",
        "LightningMixer",
    ),
)


# The layers come from a base of another file with no backward_dw: the subclass is the
# class the spec plugs in, and it is reported (the fix: a backward_dw on the base).
_BASE_BUG = """
    class ProjectedMixer(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            self.in_proj = build_module(submodules.in_proj, config)
            self.out_proj = build_module(submodules.out_proj, config)
"""
_BASE_FIXED = (
    _BASE_BUG
    + """
        def backward_dw(self):
            self.in_proj.backward_dw()
            self.out_proj.backward_dw()
"""
)
_SUBCLASS = """
    from model.base import ProjectedMixer


    class GatedMixer(ProjectedMixer):{mark}
        def forward(self, x):
            return self.out_proj(torch.sigmoid(self.in_proj(x)))
"""
_BASE_FILES = {
    "model/specs.py": """
        from megatron.core.transformer.spec_utils import ModuleSpec
        from model.gated import GatedMixer


        def gated_layer_spec():
            return TransformerLayerSubmodules(self_attention=ModuleSpec(module=GatedMixer))
    """,
    "pipeline/node.py": """
        class AttentionNode:
            def backward_dw(self):
                self.layer.self_attention.backward_dw()
    """,
}
CASES += (
    XCase(
        "layers-from-base-of-another-file",
        "s",
        {
            **_BASE_FILES,
            "model/base.py": _BASE_BUG,
            "model/gated.py": _SUBCLASS.format(mark="  # expect: GMLP039"),
        },
        {**_BASE_FILES, "model/base.py": _BASE_FIXED, "model/gated.py": _SUBCLASS.format(mark="")},
    ),
)
