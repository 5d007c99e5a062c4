"""GMLP059: a layer whose delay the file switches on, left out of its component's flush."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
unflushed_layers = LazyModule("..analysis.unflushed_layers", __package__)

CODE = "GMLP059"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="delayed-layer-left-out-of-flush",
    summary=(
        "The file switches the delayed wgrad on for a component's layers "
        "(`C.linear_fc1.wgrad_store.enable_delay_wgrad_compute()`), and a function flushing "
        "that component (`C.linear_fc2.backward_dw()`) leaves one of them out."
    ),
    flags=(
        "`C.a.backward_dw()` calls in one function for some of the layers that "
        "`C.a.wgrad_store.enable_delay_wgrad_compute()` switches on anywhere in the file, "
        "and not for another; `C` a local bound to an attribute path (matched by that path "
        "without its first name) or the receiver as written; reported at the function's "
        "last flush of the component"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes). Overlapping schedules
        (DualPipeV's fine-grained backward in FlagScale and Megatron-LM-FL) turn a
        component's delay on by hand for the span of its backward, then flush each of its
        layers with `backward_dw()`. The flush is a list the author keeps in step with the
        switch by hand; a layer switched on and missing from the flush keeps its weight
        gradient in the wgrad store, so main_grad misses it for the step and the next
        flush finds stale work (blind corpus 13: `call_experts_backward_dw` flushing
        `linear_fc2` alone).

        Seen: per file, the layers whose store's `enable_delay_wgrad_compute()` is called,
        grouped by component: the object the layers hang on, a local bound to an attribute
        path compared by that path without its first name (`bwd_layer_graph.layer.mlp.
        experts` and `layer_graph.layer.mlp.experts` are one component), or the receiver as
        written; each function's `backward_dw()` calls on layers of a component it flushes
        at least one switched-on layer of. Layers switched on in different branches
        (self-attention's `linear_qkv` or MLA's projections) all count, so a flush must
        name every one, under the same branches or not.

        Not seen: delay switched on through constructors (`delay_wgrad_compute=True`) or
        helpers of other files; flushes through loops over a list of layers; which branch a
        layer belongs to.
    """,
    fix="""
        Flush every layer the component's switch turns on (`C.linear_fc1.backward_dw()`
        beside `C.linear_fc2.backward_dw()`). No automatic fix.
    """,
    fix_summary="none (flush every layer switched to delayed wgrad)",
    valid=(
        Example(
            """
            def turn_experts_delay_wgrad_compute(graph, enable=False):
                experts = graph.layer.mlp.experts
                if enable:
                    experts.linear_fc2.wgrad_store.enable_delay_wgrad_compute()
                    experts.linear_fc1.wgrad_store.enable_delay_wgrad_compute()


            def call_experts_backward_dw(graph):
                experts = graph.layer.mlp.experts
                experts.linear_fc2.backward_dw()
                experts.linear_fc1.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            def turn_experts_delay_wgrad_compute(graph, enable=False):
                experts = graph.layer.mlp.experts
                if enable:
                    experts.linear_fc2.wgrad_store.enable_delay_wgrad_compute()
                    experts.linear_fc1.wgrad_store.enable_delay_wgrad_compute()


            def call_experts_backward_dw(graph):
                experts = graph.layer.mlp.experts
                experts.linear_fc2.backward_dw()
            """,
            line=10,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "this flush of `{component}` leaves out {missing}, whose delayed wgrad this file "
    "switches on: its weight gradient stays in the store and main_grad misses it for the "
    "step; call its `backward_dw()` here too"
)


def check(context: ModuleContext, out: Collector) -> None:
    for found in unflushed_layers.left_out(context):
        missing = ", ".join(f"`{name}`" for name in found.missing)
        out.report(CODE, found.call, MESSAGE.format(component=found.component, missing=missing))
