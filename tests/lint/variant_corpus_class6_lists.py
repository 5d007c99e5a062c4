"""Issue #19, class 6 (delayed wgrad across classes) through lists of layers: code outside a
layer class names the layer's delayed-wgrad members one by one for their ``backward_dw``,
while the class builds other layers in place of one of them on another path (GMLP043).
Each case is a small tree of files linted together as one run (``test_variant_corpus_xfile``
runs them): a buggy version (``# expect: CODE`` on each line that must be reported) and its
fixed twin (no finding at all).

Written from the shape of Megatron-LM #5471 (the MTP layer's ``eh_proj`` replaced by
``e_proj`` / ``h_proj`` under hyper-connections, the fine-grained callables still listing
``eh_proj``), not copied: other layers (a split fc1, separate q/k/v, a fused input
projection), the class choosing in ``__init__`` or in a helper it calls, through ``elif``,
with the None set before the ``if``; the listing as a list kept on a schedule, a ``for``
over a tuple, a direct ``backward_dw`` call, a dict of callables, ``extend`` with a starred
list, and a list that names some of the alternatives but not all (weak spot "l").
"""

from __future__ import annotations

from .variant_corpus_class6_xfile import XCase

# fc1 split into gate and up projections when the config asks, fused otherwise.
SPLIT_FC1 = """
    class ExpertMLP(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            if config.split_fc1:
                self.linear_fc1_gate = build_module(submodules.linear_fc1, config=config)
                self.linear_fc1_up = build_module(submodules.linear_fc1, config=config)
                self.linear_fc1 = None
            else:
                self.linear_fc1 = build_module(submodules.linear_fc1, config=config)
                self.linear_fc1_gate = None
                self.linear_fc1_up = None
            self.linear_fc2 = build_module(submodules.linear_fc2, config=config)
"""

# Separate q/k/v projections or one fused qkv, chosen in a helper __init__ calls; the fused
# one set to None before the choice.
SEPARATE_QKV = """
    from transformer_engine.pytorch import Linear as TELinear


    class Attention(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self._build_projections(config)
            self.proj = TELinear(config.hidden, config.hidden, config=config)

        def _build_projections(self, config):
            self.qkv = None
            if config.separate_qkv:
                self.q = TELinear(config.hidden, config.hidden, config=config)
                self.k = TELinear(config.hidden, config.kv, config=config)
                self.v = TELinear(config.hidden, config.kv, config=config)
            else:
                self.qkv = TELinear(
                    config.hidden, config.hidden + 2 * config.kv, config=config
                )
"""

# Three ways to build the input projection, through an elif chain.
MIXER = """
    class Mixer(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            if config.mixer_mode == "fused":
                self.in_proj = build_module(submodules.in_proj, config=config)
                self.x_proj = None
                self.z_proj = None
            elif config.mixer_mode == "split":
                self.x_proj = build_module(submodules.x_proj, config=config)
                self.z_proj = build_module(submodules.z_proj, config=config)
                self.in_proj = None
            else:
                raise ValueError(config.mixer_mode)
            self.out_proj = build_module(submodules.out_proj, config=config)
"""

CASES = (
    XCase(
        "split-fc1-list-on-schedule",
        "l",
        {
            "model/mlp.py": SPLIT_FC1,
            "schedule/callables.py": """
                class MLPCallables:
                    def __init__(self, mlp):
                        self.mlp = mlp
                        self.wgrad_layers = [mlp.linear_fc2, mlp.linear_fc1]  # expect: GMLP043

                    def backward_dw(self):
                        for layer in self.wgrad_layers:
                            layer.backward_dw()
            """,
        },
        {
            "model/mlp.py": SPLIT_FC1,
            "schedule/callables.py": """
                class MLPCallables:
                    def __init__(self, mlp):
                        self.mlp = mlp
                        fc1 = (
                            [mlp.linear_fc1_gate, mlp.linear_fc1_up]
                            if mlp.linear_fc1 is None
                            else [mlp.linear_fc1]
                        )
                        self.wgrad_layers = [mlp.linear_fc2, *fc1]

                    def backward_dw(self):
                        for layer in self.wgrad_layers:
                            layer.backward_dw()
            """,
        },
    ),
    XCase(
        "separate-qkv-for-over-tuple",
        "l",
        {
            "model/attention.py": SEPARATE_QKV,
            "schedule/overlap.py": """
                def attention_backward_dw(attn):
                    for module in (attn.qkv, attn.proj):  # expect: GMLP043
                        module.backward_dw()
            """,
        },
        {
            "model/attention.py": SEPARATE_QKV,
            "schedule/overlap.py": """
                def attention_backward_dw(attn):
                    if attn.qkv is None:
                        modules = (attn.q, attn.k, attn.v, attn.proj)
                    else:
                        modules = (attn.qkv, attn.proj)
                    for module in modules:
                        module.backward_dw()
            """,
        },
    ),
    XCase(
        "mixer-elif-direct-call",
        "l",
        {
            "model/mixer.py": MIXER,
            "pipeline/schedule.py": """
                def flush_mixer(node):
                    node.layer.mixer.out_proj.backward_dw()
                    node.layer.mixer.in_proj.backward_dw()  # expect: GMLP043
            """,
        },
        {
            "model/mixer.py": MIXER,
            "pipeline/schedule.py": """
                def flush_mixer(node):
                    mixer = node.layer.mixer
                    mixer.out_proj.backward_dw()
                    if mixer.in_proj is not None:
                        mixer.in_proj.backward_dw()
                    else:
                        mixer.x_proj.backward_dw()
                        mixer.z_proj.backward_dw()
            """,
        },
    ),
    XCase(
        "split-fc1-dict-of-callables",
        "l",
        {
            "model/mlp.py": SPLIT_FC1,
            "pipeline/chunks.py": """
                def build_mlp_chunk(layer):
                    forward = [layer.mlp.forward]
                    dw_callables = {
                        "fc1": layer.mlp.linear_fc1,  # expect: GMLP043
                        "fc2": layer.mlp.linear_fc2,
                    }
                    return forward, dw_callables


                def run_mlp_dw(dw_callables):
                    for module in dw_callables.values():
                        module.backward_dw()
            """,
        },
        {
            "model/mlp.py": SPLIT_FC1,
            "pipeline/chunks.py": """
                def build_mlp_chunk(layer):
                    forward = [layer.mlp.forward]
                    if layer.mlp.linear_fc1 is None:
                        fc1 = [layer.mlp.linear_fc1_gate, layer.mlp.linear_fc1_up]
                    else:
                        fc1 = [layer.mlp.linear_fc1]
                    dw_callables = {"fc1": fc1, "fc2": layer.mlp.linear_fc2}
                    return forward, dw_callables


                def run_mlp_dw(dw_callables):
                    for modules in dw_callables.values():
                        for module in modules if isinstance(modules, list) else [modules]:
                            module.backward_dw()
            """,
        },
    ),
    XCase(
        "mixer-augmented-starred",
        "l",
        {
            "model/mixer.py": MIXER,
            "pipeline/chunks.py": """
                def add_mixer_wgrads(node, backward_dw):
                    mixer = node.layer.mixer
                    projections = [*[mixer.in_proj], mixer.out_proj]
                    backward_dw["mixer"].extend(projections)
                    backward_dw["mixer"] += [*[mixer.in_proj]]  # expect: GMLP043
                    return backward_dw
            """,
        },
        {
            "model/mixer.py": MIXER,
            "pipeline/chunks.py": """
                def add_mixer_wgrads(node, backward_dw):
                    mixer = node.layer.mixer
                    split = [mixer.x_proj, mixer.z_proj]
                    projections = [mixer.in_proj] if mixer.in_proj is not None else split
                    backward_dw["mixer"].extend([*projections, mixer.out_proj])
                    return backward_dw
            """,
        },
    ),
    XCase(
        "separate-qkv-partly-listed",
        "l",
        {
            "model/attention.py": SEPARATE_QKV,
            "schedule/overlap.py": """
                def attention_backward_dw(attn):
                    wgrad_modules = []
                    if attn.qkv is None:
                        wgrad_modules.extend([attn.q, attn.k])
                    else:
                        wgrad_modules.append(attn.qkv)  # expect: GMLP043
                    wgrad_modules.append(attn.proj)
                    for module in wgrad_modules:
                        module.backward_dw()
            """,
        },
        {
            "model/attention.py": SEPARATE_QKV,
            "schedule/overlap.py": """
                def attention_backward_dw(attn):
                    wgrad_modules = []
                    if attn.qkv is None:
                        wgrad_modules.extend([attn.q, attn.k, attn.v])
                    else:
                        wgrad_modules.append(attn.qkv)
                    wgrad_modules.append(attn.proj)
                    for module in wgrad_modules:
                        module.backward_dw()
            """,
        },
    ),
)
