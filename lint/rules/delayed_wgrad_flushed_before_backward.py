"""GMLP027: a layer's delayed weight gradient flushed before that layer's backward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

dw_order = LazyModule("..analysis.dw_order", __package__)

CODE = "GMLP027"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="delayed-wgrad-flushed-before-backward",
    summary=(
        "A schedule calls a layer's `backward_dw()` before that layer's `backward(...)` on "
        "some path: the flush runs before the backward has queued this microbatch's "
        "weight-gradient work."
    ),
    flags=(
        "in one function, `R.backward_dw()` reached on a path that has not yet called "
        "`R.backward(...)` and that goes on to call it (`R` the same receiver as written, "
        "not `self` or `super()`); a flush helper (`call_shared_experts_backward_dw(...)`) "
        "called before a backward call whose argument names its component "
        "(`run_graph_backward(self.shared_experts_graph, ...)`)"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes), found from
        HYGON-AI/Megatron-LM-das e4d821e4. With `delay_wgrad_compute` a layer's `backward`
        computes the input gradient and queues its weight-gradient work; `backward_dw()`
        computes what was queued. A schedule that drives one layer's pieces itself (a 1F1B
        overlap plan interleaving the forward of one microbatch with the backward of
        another) must flush after the backward: flushed first, `backward_dw()` pops an empty
        store (an assertion) or the closures of an earlier microbatch, and this
        microbatch's work stays queued for a flush that may never come, or runs late on
        buffers already released. main_grad gets the gradients out of order or not at all.

        Seen: every function of the file; the calls `R.backward_dw()` and `R.backward(...)`
        with the same receiver text `R` (`b_layer.mlp`, `node`, `chunk.layers[i]`), on the
        function's control-flow graph: reported when some path from the entry reaches the
        flush without passing a backward of `R` and goes on to one. A loop that flushes the
        previous iteration's layer under the same name is reported too (it is the same
        object at that point of the path).

        Since blind corpus 13 (DualPipeV's fine-grained backward in Megatron-LM-FL and
        FlagScale): a call of a flush helper before the call that runs its component's
        backward. The helper's component is the rest of its name when it is named for the
        flush (`call_shared_experts_backward_dw` -> `shared_experts`, defined anywhere), or,
        for a function of the file, the last name of each object whose layers it calls
        `backward_dw()` on; a backward call is a call of a name spelling `backward`, and its
        components are the last names of its arguments without a `_graph` suffix
        (`self.shared_experts_graph` -> `shared_experts`). Names must match whole:
        `experts` is not `shared_experts`.

        Not seen: the order across functions (a schedule calling a helper that flushes and
        runs the backward itself),
        receivers spelled differently for one object (`layer.mlp` and `mlp = layer.mlp`),
        flushes through the store itself (`WeightGradStore.pop()`); whether the layer
        delays at all (a layer built without `delay_wgrad_compute` has an empty
        `backward_dw`, and the order does not matter for it).
    """,
    fix="""
        Call `R.backward(grad)` first and `R.backward_dw()` after it, as the other schedule
        variants do. No automatic fix.
    """,
    fix_summary="none (flush after the backward)",
    valid=(
        Example(
            """
            def run_backward(b_layer, b_grad, block_level_wgrad):
                b_grad = b_layer.mlp.backward(b_grad)
                if not block_level_wgrad:
                    b_layer.mlp.backward_dw()
                return b_layer.moe_dispatch.backward(b_grad)
            """
        ),
        Example(
            """
            class Layer(MegatronModule):
                def backward_dw(self):
                    self.linear_fc1.backward_dw()
                    self.backward(None)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def run_backward(b_layer, b_grad, block_level_wgrad):
                if not block_level_wgrad:
                    b_layer.mlp.backward_dw()
                b_grad = b_layer.mlp.backward(b_grad)
                return b_layer.moe_dispatch.backward(b_grad)
            """,
            line=3,
        ),
        Example(
            """
            def layer_backward(layer_graph, grad):
                turn_shared_experts_delay_wgrad_compute(layer_graph, enable=True)
                call_shared_experts_backward_dw(layer_graph)
                run_graph_backward(layer_graph.shared_experts_graph, grad)
                turn_shared_experts_delay_wgrad_compute(layer_graph, enable=False)
            """,
            line=3,
        ),
    ),
)


MESSAGE = (
    "`{receiver}.backward_dw()` runs here on a path that has not called "
    "`{receiver}.backward(...)` yet (line {line}): the flush comes before the backward "
    "queues this microbatch's weight-gradient work; call it after the backward"
)


HELPER_MESSAGE = (
    "`{receiver}(...)` flushes the delayed weight gradients here on a path that has not "
    "yet run that component's backward (line {line}): the flush finds an empty store or a "
    "previous microbatch's work, and this microbatch's is queued after it; call it after "
    "the backward"
)


def check(context: ModuleContext, out: Collector) -> None:
    for flush in context.shared(dw_order.early_flushes):
        template = HELPER_MESSAGE if flush.helper else MESSAGE
        out.report(
            CODE,
            flush.call,
            template.format(receiver=flush.receiver, line=flush.backward_line),
        )
