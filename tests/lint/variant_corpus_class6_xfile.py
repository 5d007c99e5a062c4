"""Issue #19, class 6 (delayed wgrad across classes) across files: each case is a small tree
of files linted together as one run, a buggy version (``# expect: CODE`` marks each line that
must be reported, with the rule that must report it) and its correct twin (no finding at all).

Written from how Transformer Engine and Megatron-LM structure delayed wgrad, not copied:
TE's ``TransformerEngineBaseModule.backward_dw`` pops the module's wgrad store and its
subclasses (``GroupedLinear``, ``LayerNormMLP``) override it; Megatron-LM's ``SequentialMLP``
fills ``self.local_experts = ModuleList()`` one expert at a time and loops over it in
``backward_dw``; its ``TEGroupedMLP`` drives ``linear_fc2`` then ``linear_fc1``. The shapes
the class model did not see before (issue #19's weak spots):

* (a) layer containers filled one at a time: ``append`` in a loop, ``self.layers[name] = ...``,
  ``add_module``;
* (b) bases named through imports or aliases of other files
  (``from .base import GroupedMLP as _Base``);
* (c) layers built by helper methods ``__init__`` calls (``self._build()``), in the base's
  file or the subclass's;
* (d) registrations from outside the class: a factory that hangs a delayed layer on an
  instance, or replaces an instance's ``backward_dw`` with a wrapper that drops the work.

``python -m tests.lint.test_variant_corpus_xfile`` prints how many buggy cases are caught.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class XCase:
    name: str
    weak_spot: str  # a, b, c or d (see above)
    bug: dict[str, str]  # path -> source
    twin: dict[str, str]

    def files(self, which: str) -> dict[str, str]:
        chosen = self.bug if which == "bug" else self.twin
        return {path: textwrap.dedent(text).lstrip("\n") for path, text in chosen.items()}


# A base of another file whose backward_dw reaches one shared projection (Megatron-style).
MOE_BASE = """
    class BaseMoELayer(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            self.shared_proj = build_module(submodules.shared_proj, config)

        def backward_dw(self):
            self.shared_proj.backward_dw()
"""

# A TE-style base module: its own backward_dw pops the store and fires the hooks.
TE_BASE = """
    class DelayedBase(torch.nn.Module):
        def __init__(self, delay_wgrad_compute=False):
            super().__init__()
            self.wgrad_store = WeightGradStore(delay_wgrad_compute)

        def backward_dw(self):
            if not self.wgrad_store.delay_wgrad_compute():
                return
            (wgrad, _), _ = self.wgrad_store.pop()
            self.weight.main_grad.add_(wgrad)
            self._trigger_wgrad_accumulation_and_reduce_hooks()
"""

# A block whose backward_dw drives two projections (the fc1/fc2 order of an MLP).
MLP_BASE = """
    class ExpertMLP(MegatronModule):
        def __init__(self, config, submodules):
            super().__init__(config)
            self.linear_fc1 = build_module(submodules.linear_fc1, config)
            self.linear_fc2 = build_module(submodules.linear_fc2, config)

        def backward_dw(self):
            self.linear_fc2.backward_dw()
            self.linear_fc1.backward_dw()
"""

CASES = (
    # ---------------------------------------------------------- (a) append in a loop
    XCase(
        "experts-appended-in-loop",
        "a",
        {
            "moe/base.py": MOE_BASE,
            "moe/sequential.py": """
                from moe.base import BaseMoELayer


                class SequentialExperts(BaseMoELayer):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.local_experts = torch.nn.ModuleList()
                        for _ in range(config.num_local_experts):
                            expert = TELinear(config.hidden, config.ffn)
                            self.local_experts.append(expert)  # expect: GMLP020
            """,
        },
        {
            "moe/base.py": MOE_BASE,
            "moe/sequential.py": """
                from moe.base import BaseMoELayer


                class SequentialExperts(BaseMoELayer):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.local_experts = torch.nn.ModuleList()
                        for _ in range(config.num_local_experts):
                            expert = TELinear(config.hidden, config.ffn)
                            self.local_experts.append(expert)

                    def backward_dw(self):
                        super().backward_dw()
                        for expert in self.local_experts:
                            expert.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (a) append of a call
    XCase(
        "experts-appended-call-own-backward-dw",
        "a",
        {
            "moe/base.py": MOE_BASE,
            "moe/grouped.py": """
                from moe.base import BaseMoELayer


                class GroupedExperts(BaseMoELayer):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.experts = torch.nn.ModuleList()
                        for i in range(config.num_local_experts):
                            self.experts.append(  # expect: GMLP020
                                TEColumnParallelLinear(config.hidden, config.ffn)
                            )

                    def backward_dw(self):
                        super().backward_dw()
            """,
        },
        {
            "moe/base.py": MOE_BASE,
            "moe/grouped.py": """
                from moe.base import BaseMoELayer


                class GroupedExperts(BaseMoELayer):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.experts = torch.nn.ModuleList()
                        for i in range(config.num_local_experts):
                            self.experts.append(
                                TEColumnParallelLinear(config.hidden, config.ffn)
                            )

                    def backward_dw(self):
                        super().backward_dw()
                        for expert in reversed(self.experts):
                            expert.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (a) dict-style item
    XCase(
        "projections-set-by-key",
        "a",
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/gated.py": """
                from blocks.mlp import ExpertMLP


                class GatedMLP(ExpertMLP):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.gates = torch.nn.ModuleDict()
                        for name in config.gate_names:
                            self.gates[name] = TELinear(config.hidden, 8)  # expect: GMLP020
            """,
        },
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/gated.py": """
                from blocks.mlp import ExpertMLP


                class GatedMLP(ExpertMLP):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.gates = torch.nn.ModuleDict()
                        for name in config.gate_names:
                            self.gates[name] = TELinear(config.hidden, config.ffn)

                    def backward_dw(self):
                        for gate in self.gates.values():
                            gate.backward_dw()
                        super().backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (a) add_module
    XCase(
        "layer-added-with-add-module",
        "a",
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/adapter.py": """
                from blocks.mlp import ExpertMLP


                class AdapterMLP(ExpertMLP):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.add_module(  # expect: GMLP020
                            "adapter_proj", TELinear(config.hidden, config.adapter_size)
                        )
            """,
        },
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/adapter.py": """
                from blocks.mlp import ExpertMLP


                class AdapterMLP(ExpertMLP):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self.add_module(
                            "adapter_proj", TELinear(config.hidden, config.adapter_size)
                        )

                    def backward_dw(self):
                        super().backward_dw()
                        self.adapter_proj.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (a) in the base's file
    XCase(
        "base-fills-list-subclass-overrides-backward-dw",
        "a",
        {
            "moe/experts.py": """
                class SequentialMLP(MegatronModule):
                    def __init__(self, config, submodules):
                        super().__init__(config)
                        self.local_experts = torch.nn.ModuleList()
                        for _ in range(config.num_local_experts):
                            self.local_experts.append(build_module(submodules.linear_fc1, config))

                    def backward_dw(self):
                        for expert in self.local_experts:
                            expert.backward_dw()
            """,
            "moe/capped.py": """
                from moe.experts import SequentialMLP


                class CappedSequentialMLP(SequentialMLP):
                    def backward_dw(self):  # expect: GMLP020
                        self.record_capacity()
            """,
        },
        {
            "moe/experts.py": """
                class SequentialMLP(MegatronModule):
                    def __init__(self, config, submodules):
                        super().__init__(config)
                        self.local_experts = torch.nn.ModuleList()
                        for _ in range(config.num_local_experts):
                            self.local_experts.append(build_module(submodules.linear_fc1, config))

                    def backward_dw(self):
                        for expert in self.local_experts:
                            expert.backward_dw()
            """,
            "moe/capped.py": """
                from moe.experts import SequentialMLP


                class CappedSequentialMLP(SequentialMLP):
                    def backward_dw(self):
                        self.record_capacity()
                        super().backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (a) setattr in the base
    XCase(
        "base-sets-layer-with-setattr-subclass-drops-it",
        "a",
        {
            "blocks/routed.py": """
                class RoutedMLP(MegatronModule):
                    def __init__(self, config, submodules):
                        super().__init__(config)
                        self.linear_fc1 = build_module(submodules.linear_fc1, config)
                        setattr(self, "router_proj", TELinear(config.hidden, config.experts))

                    def backward_dw(self):
                        self.router_proj.backward_dw()
                        self.linear_fc1.backward_dw()
            """,
            "blocks/fast.py": """
                from blocks.routed import RoutedMLP


                class FastRoutedMLP(RoutedMLP):
                    def backward_dw(self):  # expect: GMLP020
                        self.linear_fc1.backward_dw()
            """,
        },
        {
            "blocks/routed.py": """
                class RoutedMLP(MegatronModule):
                    def __init__(self, config, submodules):
                        super().__init__(config)
                        self.linear_fc1 = build_module(submodules.linear_fc1, config)
                        setattr(self, "router_proj", TELinear(config.hidden, config.experts))

                    def backward_dw(self):
                        self.router_proj.backward_dw()
                        self.linear_fc1.backward_dw()
            """,
            "blocks/fast.py": """
                from blocks.routed import RoutedMLP


                class FastRoutedMLP(RoutedMLP):
                    def backward_dw(self):
                        self.linear_fc1.backward_dw()
                        self.router_proj.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (b) aliased base
    XCase(
        "base-imported-under-alias",
        "b",
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/latent.py": """
                from blocks.mlp import ExpertMLP as _Base


                class LatentMLP(_Base):
                    def __init__(self, c, submodules):
                        super().__init__(c, submodules)
                        self.latent_proj = build_module(submodules.latent_proj, c)  # expect:GMLP020
            """,
        },
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/latent.py": """
                from blocks.mlp import ExpertMLP as _Base


                class LatentMLP(_Base):
                    def __init__(self, c, submodules):
                        super().__init__(c, submodules)
                        self.latent_proj = build_module(submodules.latent_proj, c)

                    def backward_dw(self):
                        super().backward_dw()
                        self.latent_proj.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (b) alias, override drops
    XCase(
        "aliased-base-override-skips-fc1",
        "b",
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/fast.py": """
                from blocks import mlp
                from blocks.mlp import ExpertMLP as MLPBase


                class FastMLP(MLPBase):
                    def backward_dw(self):  # expect: GMLP020
                        self.linear_fc2.backward_dw()
            """,
        },
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/fast.py": """
                from blocks import mlp
                from blocks.mlp import ExpertMLP as MLPBase


                class FastMLP(MLPBase):
                    def backward_dw(self):
                        self.linear_fc2.backward_dw()
                        self.linear_fc1.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (b) aliased layer class
    XCase(
        "layer-class-imported-under-alias",
        "b",
        {
            "te/grouped.py": """
                class GroupedLinear(DelayedBase):
                    def __init__(self, num_gemms, delay_wgrad_compute=False):
                        super().__init__(delay_wgrad_compute=delay_wgrad_compute)

                    def backward_dw(self):
                        super().backward_dw()
            """,
            "blocks/mlp.py": """
                from te.grouped import GroupedLinear as GL


                class ExpertsMLP(MegatronModule):
                    def __init__(self, config):
                        super().__init__(config)
                        self.fc1 = GL(config.num_experts)
                        self.fc2 = GL(config.num_experts)  # expect: GMLP014

                    def backward_dw(self):
                        self.fc1.backward_dw()
            """,
        },
        {
            "te/grouped.py": """
                class GroupedLinear(DelayedBase):
                    def __init__(self, num_gemms, delay_wgrad_compute=False):
                        super().__init__(delay_wgrad_compute=delay_wgrad_compute)

                    def backward_dw(self):
                        super().backward_dw()
            """,
            "blocks/mlp.py": """
                from te.grouped import GroupedLinear as GL


                class ExpertsMLP(MegatronModule):
                    def __init__(self, config):
                        super().__init__(config)
                        self.fc1 = GL(config.num_experts)
                        self.fc2 = GL(config.num_experts)

                    def backward_dw(self):
                        self.fc2.backward_dw()
                        self.fc1.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (c) helper in subclass
    XCase(
        "subclass-builds-layer-in-helper",
        "c",
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/shared.py": """
                from blocks.mlp import ExpertMLP


                class SharedExpertMLP(ExpertMLP):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self._build_gate(config)

                    def _build_gate(self, config):
                        self.gate_proj = TERowParallelLinear(config.hidden, 1)  # expect: GMLP020
            """,
        },
        {
            "blocks/mlp.py": MLP_BASE,
            "blocks/shared.py": """
                from blocks.mlp import ExpertMLP


                class SharedExpertMLP(ExpertMLP):
                    def __init__(self, config, submodules):
                        super().__init__(config, submodules)
                        self._build_gate(config)

                    def _build_gate(self, config):
                        self.gate_proj = TERowParallelLinear(config.hidden, 1)

                    def backward_dw(self):
                        super().backward_dw()
                        self.gate_proj.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (c) helper in the base
    XCase(
        "base-builds-layers-in-helper",
        "c",
        {
            "blocks/attention.py": """
                class Attention(MegatronModule):
                    def __init__(self, config, submodules):
                        super().__init__(config)
                        self._build_projections(config, submodules)

                    def _build_projections(self, config, submodules):
                        self.linear_qkv = build_module(submodules.linear_qkv, config)
                        self.linear_proj = build_module(submodules.linear_proj, config)

                    def backward_dw(self):
                        self.linear_qkv.backward_dw()
                        self.linear_proj.backward_dw()
            """,
            "blocks/cross.py": """
                from blocks.attention import Attention


                class CrossAttention(Attention):
                    def backward_dw(self):  # expect: GMLP020
                        self.linear_proj.backward_dw()
            """,
        },
        {
            "blocks/attention.py": """
                class Attention(MegatronModule):
                    def __init__(self, config, submodules):
                        super().__init__(config)
                        self._build_projections(config, submodules)

                    def _build_projections(self, config, submodules):
                        self.linear_qkv = build_module(submodules.linear_qkv, config)
                        self.linear_proj = build_module(submodules.linear_proj, config)

                    def backward_dw(self):
                        self.linear_qkv.backward_dw()
                        self.linear_proj.backward_dw()
            """,
            "blocks/cross.py": """
                from blocks.attention import Attention


                class CrossAttention(Attention):
                    def backward_dw(self):
                        self.linear_proj.backward_dw()
                        self.linear_qkv.backward_dw()
            """,
        },
    ),
    # ---------------------------------------------------------- (d) factory adds a layer
    XCase(
        "factory-hangs-delayed-layer-on-instance",
        "d",
        {
            "blocks/mlp.py": MLP_BASE,
            "models/build.py": """
                from blocks.mlp import ExpertMLP


                def build_expert(config, submodules):
                    mlp = ExpertMLP(config, submodules)
                    mlp.lora_proj = TELinear(  # expect: GMLP014
                        config.hidden, config.rank, delay_wgrad_compute=config.delay_wgrad_compute
                    )
                    return mlp
            """,
        },
        {
            "blocks/mlp.py": MLP_BASE,
            "models/build.py": """
                from blocks.mlp import ExpertMLP


                def build_expert(config, submodules):
                    mlp = ExpertMLP(config, submodules)
                    mlp.linear_fc1 = TELinear(
                        config.hidden, config.ffn, delay_wgrad_compute=config.delay_wgrad_compute
                    )
                    return mlp
            """,
        },
    ),
    # ---------------------------------------------------------- (d) wrapper drops work
    XCase(
        "backward-dw-wrapped-without-original",
        "d",
        {
            "te/base.py": TE_BASE,
            "te/linear.py": """
                from te.base import DelayedBase


                class Linear(DelayedBase):
                    def __init__(self, in_features, out_features, delay_wgrad_compute=False):
                        super().__init__(delay_wgrad_compute=delay_wgrad_compute)
            """,
            "schedules/overlap.py": """
                from te.linear import Linear


                def attach_timer(layer: Linear, timer):
                    def timed_backward_dw():
                        timer.start("wgrad")
                        timer.stop("wgrad")

                    layer.backward_dw = timed_backward_dw  # expect: GMLP014
            """,
        },
        {
            "te/base.py": TE_BASE,
            "te/linear.py": """
                from te.base import DelayedBase


                class Linear(DelayedBase):
                    def __init__(self, in_features, out_features, delay_wgrad_compute=False):
                        super().__init__(delay_wgrad_compute=delay_wgrad_compute)
            """,
            "schedules/overlap.py": """
                from te.linear import Linear


                def attach_timer(layer: Linear, timer):
                    original = layer.backward_dw

                    def timed_backward_dw():
                        timer.start("wgrad")
                        original()
                        timer.stop("wgrad")

                    layer.backward_dw = timed_backward_dw
            """,
        },
    ),
    # ---------------------------------------------------------- (d) delay switched on
    XCase(
        "delay-switched-on-for-class-without-backward-dw",
        "d",
        {
            "blocks/router.py": """
                class Router(MegatronModule):
                    def __init__(self, config):
                        super().__init__(config)
                        self.gate = TELinear(config.hidden, config.num_experts)
            """,
            "models/setup.py": """
                from blocks.router import Router


                def enable_delayed_wgrad(model):
                    for module in model.modules():
                        if isinstance(module, Router):
                            module.delay_wgrad_compute = True  # expect: GMLP014
            """,
        },
        {
            "blocks/router.py": """
                class Router(MegatronModule):
                    def __init__(self, config):
                        super().__init__(config)
                        self.gate = TELinear(config.hidden, config.num_experts)

                    def backward_dw(self):
                        self.gate.backward_dw()
            """,
            "models/setup.py": """
                from blocks.router import Router


                def enable_delayed_wgrad(model):
                    for module in model.modules():
                        if isinstance(module, Router):
                            module.delay_wgrad_compute = True
            """,
        },
    ),
)
