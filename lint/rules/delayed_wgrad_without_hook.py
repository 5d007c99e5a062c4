"""GMLP019: a backward_dw runs the delayed weight-gradient work and fires no hook after it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
hooks = LazyModule("..analysis.hooks", __package__)
paths = LazyModule("..analysis.paths", __package__)

CODE = "GMLP019"
BACKWARD_DW = "backward_dw"
RULE = Rule(
    code=CODE,
    name="delayed-wgrad-without-hook",
    summary=(
        "A `backward_dw` runs the delayed weight-gradient work itself (pops the wgrad "
        "store, replays a captured graph) and reaches its end on a path that fires no "
        "grad-accumulation / reduce hook."
    ),
    flags=(
        "`<wgrad store>.pop()` / `<graph>.replay()` in a function named `backward_dw` "
        "from which a return is reached without a call of a hook (`hook()`, "
        "`self._trigger_..._hooks()`) or a loop whose body fires one"
    ),
    explanation="""
        Issue #19, class 5, the converse (a hook never fired, or fired too early). With
        `delay_wgrad_compute`, the backward pass computes only the input gradient; the
        weight gradient (accumulated into main_grad under wgrad fusion) is computed later
        by `backward_dw`. Megatron's DDP learns that a weight's gradient is ready from a
        hook; autograd fires it from AccumulateGrad during the backward pass, that is
        before `backward_dw` has written main_grad. Delayed-wgrad code therefore skips that
        firing and fires the hooks registered with the module at the end of `backward_dw`.
        A `backward_dw` that does the work and fires nothing leaves the reduce to start
        on a main_grad that does not hold this microbatch yet, or never start. Setting
        `.grad` in `backward_dw` does not help: outside autograd nothing fires for it.
        Transformer Engine #1976: the base module's, GroupedLinear's and LayerNormMLP's
        `backward_dw` popped `wgrad_store` and returned; the fix fires
        `wgrad_accumulation_and_reduce_hooks` after the work.

        GMLP011 covers the other half: a class that marks its weights
        `skip_backward_post_hook` (autograd fires nothing for them) and whose `backward_dw`
        misses the hooks on some way out; this rule leaves such classes to it and reports
        the `backward_dw` of code that marks nothing, where the hook fired in the backward
        pass, too early, and never after the work.

        Seen: functions and methods named `backward_dw` (nested ones too); the work is a
        `.pop()` on a receiver whose name says wgrad or a `.replay()` with no arguments;
        over the function's control-flow graph, a normal exit reachable from the work
        without passing a statement that calls a hook-firing callee (a name with `hook`
        that does not register, remove, make, set up or create one) or the head of a
        loop whose body does (a loop over the modules or the hooks: each item that needs
        it is taken as notified).

        Not seen: work done under other names (a stored closure called directly, a helper
        of another file that pops the store), hooks fired by the caller after
        `backward_dw` returns (such code is reported; suppress it with a reason), and
        which of the popped gradients actually went to main_grad.
    """,
    fix="""
        After the delayed work, fire the hooks registered for the module's weights (TE:
        `self._trigger_wgrad_accumulation_and_reduce_hooks()`), on every path that did the
        work. No automatic fix.
    """,
    fix_summary="none (fire the wgrad accumulation / reduce hooks)",
    valid=(
        Example(
            """
            class Linear(BaseModule):
                def backward_dw(self):
                    if not self.need_backward_dw():
                        return
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        accumulate_grad(self.weight, wgrad.to(self.weight.dtype))
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
            """
        ),
        Example(
            """
            def make_backward_dw(graph, modules):
                def backward_dw():
                    graph.replay()
                    for module in modules:
                        if module.need_backward_dw():
                            module._trigger_wgrad_accumulation_and_reduce_hooks()

                return backward_dw
            """
        ),
        Example(
            """
            class Block(MegatronModule):
                def backward_dw(self):
                    self.linear_fc1.backward_dw()
                    self.linear_fc2.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class Linear(BaseModule):
                def backward_dw(self):
                    if not self.need_backward_dw():
                        return
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        accumulate_grad(self.weight, wgrad.to(self.weight.dtype))
            """,
            line=5,
        ),
        Example(
            """
            class Linear(BaseModule):
                def backward_dw(self):
                    wgrad, _ = self.wgrad_store.pop()
                    if self.fuse_wgrad_accumulation:
                        return
                    accumulate_grad(self.weight, wgrad)
                    for hook in self.wgrad_accumulation_and_reduce_hooks:
                        hook()
            """,
            line=3,
        ),
        Example(
            """
            def make_backward_dw(graph):
                def backward_dw():
                    graph.replay()

                return backward_dw
            """,
            line=3,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{name}` runs the delayed weight-gradient work here, but a path from it leaves "
    "without firing a grad-accumulation / reduce hook, and nothing here marks the weights "
    "`skip_backward_post_hook`: Megatron's DDP heard from autograd that they were ready "
    "before this wgrad reached main_grad, and hears nothing after"
)


def check(context: ModuleContext, out: Collector) -> None:
    if BACKWARD_DW not in context.source:
        return
    announced = _announced_by_backward_dw(context)
    for unit in context.units:
        if unit.name != BACKWARD_DW or id(unit.owner) in announced:
            continue
        work = [
            (call, node)
            for root, node in unit.expression_roots()
            if (call := hooks.runs_delayed_wgrad(root)) is not None
        ]
        if not work:
            continue
        notified = hooks.notifying_nodes(unit)
        for call, node in work:
            if paths.exits_avoiding(unit.graph, node, notified):
                out.report(CODE, call, MESSAGE.format(name=unit.name))
                break  # one finding per function: the first work left unannounced


def _announced_by_backward_dw(context: ModuleContext) -> set[int]:
    """The ``backward_dw`` methods of classes that mark their weights
    ``skip_backward_post_hook``: autograd fires nothing for them, and GMLP011 holds their
    ``backward_dw`` to firing the hooks on every way out."""
    found = set()
    for unit in context.units:
        if not isinstance(unit.owner, cst.ClassDef):
            continue
        methods = [s for s in unit.body if isinstance(s, cst.FunctionDef)]
        if hooks.skips_backward_post_hook(methods):
            found.update(id(m) for m in methods if m.name.value == BACKWARD_DW)
    return found
