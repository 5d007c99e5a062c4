"""GMLP040: backward_dw called on a delayed weight layer whose forward never runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

unrun_layers = LazyModule("..analysis.unrun_layers", __package__)

CODE = "GMLP040"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="delayed-wgrad-layer-never-run",
    summary=(
        "A class builds a weight layer with delayed wgrad but only ever uses its weight "
        "(an absorbed projection), never its forward, and its backward_dw still calls the "
        "layer's backward_dw: nothing was queued to compute."
    ),
    flags=(
        "`self.X.backward_dw()` reached from the class's `backward_dw` (its own or a base's, "
        "following `self.m()` calls and containers of callables), where `self.X` is built in "
        "`__init__` (or a method it calls) as a weight layer handed `delay_wgrad_compute` or "
        "a config not switched off there, and no method of the class, of its bases or of "
        "its subclasses in the file uses `self.X` other than for its `weight` / `bias` (also "
        "through `getattr`), state it does not call, its `backward_dw` or an assignment; a "
        "call under a test that mentions `self.X` is left alone"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes), found from Megatron-LM 60704e19
        (absorbed multi-latent attention). With `delay_wgrad_compute` a layer's backward
        computes the input gradient and queues the weight-gradient work; `backward_dw()`
        pops and runs it. A class that only consumes a layer's weight (`self.X.weight`
        viewed per head and multiplied in by hand: the "absorbed" K/V up-projection) never
        runs the layer's forward or backward, so nothing is queued: the class's
        `backward_dw` calling `self.X.backward_dw()` pops an empty store (an error) or
        computes nothing, and the weight's gradient goes through autograd on `.weight`,
        outside the delayed schedule and the main_grad bookkeeping it promises. Build such
        a layer without delayed wgrad and leave it out of `backward_dw`.

        Seen: the file's class model (GMLP014's): methods resolved through the bases of the
        file and, when the run summarised them, of other files; `backward_dw` followed
        through `self.m()` calls, `super()` and attributes holding `self.X.backward_dw`.
        The layer is built by `self.X = <call>` in `__init__` or a method it calls: a
        callee naming a `Linear` (not an eager one), `build_module` given a spec named
        `linear_*` / `*_proj` (also looked up by key, `specs["linear_kv_up"]`), or a call
        handed `delay_wgrad_compute`. It delays when handed `delay_wgrad_compute` (not a
        literal False) or, with none, an argument named `config` / `cfg`, unless that config
        was switched off in the same construction (`cfg.delay_wgrad_compute = False`, or
        bound to a call handed `delay_wgrad_compute=False`). Any other use of `self.X` (a
        call, `self.X.forward`, a method of it or of its state such as
        `self.X.wgrad_store.put(...)`, handing it on, a rarely taken branch) counts as
        running it,
        as does `getattr(self, name)` with a computed name or `self` handed to a function
        (`fused_forward(self, x)`: the class is left alone), and a method of a base of
        another file that mentions `self.X` outside `backward_dw`.

        Not seen: layers whose forward runs from outside the class (a function of another
        file calling `attn.linear_kv_up(x)`), layers built in containers or handed in to
        `__init__`, configurations switched off in another function or file, and whether
        the configuration actually turns delayed wgrad on; a guard that tests the delay
        mode without naming the layer (`if self.config.delay_wgrad_compute:`) does not
        excuse the call. A base outside the run is taken to run none of the class's layers:
        one that does (by the attribute's name, through `super().forward(x)`) would make
        this a false alarm.
    """,
    fix="""
        Build the layer without delayed wgrad (hand it a copy of the config with
        `delay_wgrad_compute = False`) and drop its `backward_dw()` call; its weight
        gradient then comes from autograd through the weight it consumes. No automatic fix.
    """,
    fix_summary="none (build the layer without delayed wgrad)",
    valid=(
        Example(
            """
            class AbsorbedAttention(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_q = build_module(submodules.linear_q, config=config)
                    eager = copy.copy(config)
                    eager.delay_wgrad_compute = False
                    self.linear_kv_up = build_module(submodules.linear_kv_up, config=eager)

                def forward(self, x):
                    return torch.matmul(self.linear_q(x), self.linear_kv_up.weight)

                def backward_dw(self):
                    self.linear_q.backward_dw()
            """
        ),
        Example(
            """
            class AbsorbedAttention(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_kv_up = build_module(submodules.linear_kv_up, config=config)

                def forward(self, x, absorbed=True):
                    if absorbed:
                        return torch.matmul(x, self.linear_kv_up.weight)
                    return self.linear_kv_up(x)

                def backward_dw(self):
                    self.linear_kv_up.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class AbsorbedAttention(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_q = build_module(submodules.linear_q, config=config)
                    self.linear_kv_up = build_module(submodules.linear_kv_up, config=config)

                def _kv_up_weight(self):
                    return self.linear_kv_up.weight.view(-1, 64, 512)

                def forward(self, x):
                    return torch.einsum("bhd,hkd->bhk", self.linear_q(x), self._kv_up_weight())

                def backward_dw(self):
                    self.linear_q.backward_dw()
                    self._backward_kv()

                def _backward_kv(self):
                    self.linear_kv_up.backward_dw()
            """,
            line=17,
        ),
    ),
    # A subclass in a file that never spells backward_dw may absorb a layer its base's
    # backward_dw (in another file of the run) drives.
    reads_subclasses=True,
)


MESSAGE = (
    "`self.{attr}` is built with delayed wgrad but `{owner}` only uses its weight, never "
    "its forward: nothing is queued for `backward_dw()` to compute (it pops an empty store, "
    "and the weight's gradient bypasses the delayed schedule); build it without delayed "
    "wgrad and leave it out of backward_dw"
)


def check(context: ModuleContext, out: Collector) -> None:
    for found in context.shared(unrun_layers.unrun_layers):
        out.report(CODE, found.node, MESSAGE.format(attr=found.attr, owner=found.owner))
