"""Class variants for issue #19's class 6 (delayed wgrad across classes), the absorbed
projection: a class builds a weight layer with delayed wgrad, only ever consumes its weight
(viewed per head, multiplied or contracted in by hand) and never runs its forward, yet its
``backward_dw`` calls the layer's ``backward_dw`` (GMLP040). Written from the shape of the
bug (absorbed multi-latent attention, Megatron-LM 60704e19), not from its code: other
attribute names, the weight read through a helper or ``getattr``, ``backward_dw`` reached
through ``self.`` helpers, a base of the file or a container of callables. Each twin is the
correct version: the layer built with delay off, its forward run on some path, the call
left out or guarded on the layer. Same format as variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    Variant(
        6,
        "absorbed-up-projection-weight-viewed-per-head",
        """
        class LatentAttention(MegatronModule):
            def __init__(self, config, submodules):
                self.q_proj = build_module(submodules.q_proj, config=config)
                self.kv_up_proj = build_module(submodules.kv_up_proj, config=config)

            def forward(self, x, latent):
                w = self.kv_up_proj.weight.view(8, 128, -1)
                q = torch.einsum("sbhd,hdc->sbhc", self.q_proj(x), w)
                return q

            def backward_dw(self):
                self.q_proj.backward_dw()
                self.kv_up_proj.backward_dw()  # bug
        """,
        """
        class LatentAttention(MegatronModule):
            def __init__(self, config, submodules):
                self.q_proj = build_module(submodules.q_proj, config=config)
                eager_config = copy.copy(config)
                eager_config.delay_wgrad_compute = False
                self.kv_up_proj = build_module(submodules.kv_up_proj, config=eager_config)

            def forward(self, x, latent):
                w = self.kv_up_proj.weight.view(8, 128, -1)
                q = torch.einsum("sbhd,hdc->sbhc", self.q_proj(x), w)
                return q

            def backward_dw(self):
                self.q_proj.backward_dw()
                self.kv_up_proj.backward_dw()
        """,
    ),
    Variant(
        6,
        "absorbed-weight-through-getattr-helper-dw-in-a-piece",
        """
        class MLADecoder(MegatronModule):
            def __init__(self, config, layer_specs):
                self.linear_proj = TERowParallelLinear(config.hidden, config.hidden, config=config)
                self.linear_uk = build_module(layer_specs["linear_uk"], config.rank, config=config)

            def _absorbed_weight(self):
                return getattr(self.linear_uk, "weight").t()

            def forward(self, h):
                return self.linear_proj(torch.matmul(h, self._absorbed_weight()))

            def backward_dw(self):
                self._dw_proj()
                self._dw_latent()

            def _dw_proj(self):
                self.linear_proj.backward_dw()

            def _dw_latent(self):
                getattr(self, "linear_uk").backward_dw()  # bug
        """,
        """
        class MLADecoder(MegatronModule):
            def __init__(self, config, layer_specs):
                self.linear_proj = TERowParallelLinear(config.hidden, config.hidden, config=config)
                self.linear_uk = build_module(layer_specs["linear_uk"], config.rank, config=config)

            def _absorbed_weight(self):
                return getattr(self.linear_uk, "weight").t()

            def forward(self, h):
                return self.linear_proj(torch.matmul(h, self._absorbed_weight()))

            def backward_dw(self):
                self._dw_proj()

            def _dw_proj(self):
                self.linear_proj.backward_dw()
        """,
    ),
    Variant(
        6,
        "absorbed-layer-handed-delay-mode-driven-from-a-list",
        """
        class FusedHead(MegatronModule):
            def __init__(self, config, delay_wgrad_compute=False):
                self.out = TELinear(
                    config.hidden, config.vocab, delay_wgrad_compute=delay_wgrad_compute
                )
                self.dw_steps = [self.out.backward_dw]  # bug

            def forward(self, h):
                return fused_logits(h, self.out.weight, self.out.bias)

            def backward_dw(self):
                for step in self.dw_steps:
                    step()
        """,
        """
        class FusedHead(MegatronModule):
            def __init__(self, config, delay_wgrad_compute=False):
                self.out = TELinear(
                    config.hidden, config.vocab, delay_wgrad_compute=delay_wgrad_compute
                )
                self.dw_steps = [self.out.backward_dw]

            def forward(self, h, fused=True):
                if fused:
                    return fused_logits(h, self.out.weight, self.out.bias)
                return self.out(h)

            def backward_dw(self):
                for step in self.dw_steps:
                    step()
        """,
    ),
    Variant(
        6,
        "subclass-absorbs-a-projection-its-base-runs",
        """
        class LatentAttention(MegatronModule):
            def __init__(self, config, submodules):
                self.linear_kv_up = build_module(submodules.linear_kv_up, config=config)

            def project(self, latent):
                return self.linear_kv_up(latent)

            def backward_dw(self):
                self.linear_kv_up.backward_dw()  # bug

        class AbsorbedLatentAttention(LatentAttention):
            def project(self, latent):
                return torch.matmul(latent, self.linear_kv_up.weight.t())
        """,
        """
        class LatentAttention(MegatronModule):
            def __init__(self, config, submodules):
                self.linear_kv_up = build_module(submodules.linear_kv_up, config=config)

            def project(self, latent):
                return self.linear_kv_up(latent)

            def backward_dw(self):
                self.linear_kv_up.backward_dw()

        class AbsorbedLatentAttention(LatentAttention):
            def project(self, latent):
                if self.training:
                    return self.linear_kv_up(latent)
                return torch.matmul(latent, self.linear_kv_up.weight.t())
        """,
    ),
    Variant(
        6,
        "absorbed-dw-call-guarded-on-the-global-mode-only",
        """
        class Compressor(MegatronModule):
            def __init__(self, config, submodules):
                self.config = config
                self.down_proj = build_module(submodules.down_proj, config=self.config)

            def forward(self, x):
                return x @ self.down_proj.weight.t()

            def backward_dw(self):
                if self.config.delay_wgrad_compute:
                    self.down_proj.backward_dw()  # bug
        """,
        """
        class Compressor(MegatronModule):
            def __init__(self, config, submodules):
                self.config = config
                self.down_proj = build_module(submodules.down_proj, config=self.config)

            def forward(self, x):
                return x @ self.down_proj.weight.t()

            def backward_dw(self):
                if self.down_proj.wgrad_store.delay_wgrad_compute():
                    self.down_proj.backward_dw()
        """,
    ),
)
