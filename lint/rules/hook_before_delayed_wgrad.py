"""GMLP056: a function that runs the delayed weight-gradient work fires the hooks on a path
that skipped that work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
delayed_work = LazyModule("..analysis.delayed_work", __package__)
paths = LazyModule("..analysis.paths", __package__)
consistent_paths = LazyModule("..analysis.consistent_paths", __package__)

CODE = "GMLP056"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="hook-before-delayed-wgrad",
    summary=(
        "A function that runs the delayed weight-gradient work fires the grad-accumulation "
        "/ reduce hooks on a path that has not run that work and leaves without it."
    ),
    flags=(
        "a hook firing (as GMLP019 sees one) that no path reaches after the work, reached "
        "from the function's entry on a run through none of its delayed work (`<wgrad "
        "store>.pop()`, a wgrad graph's `replay()`, a loop over deferred wgrads, a helper "
        "doing one of these), from which a way out is reached still without the work, in a "
        "function that does the work on another path"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping). Under `delay_wgrad_compute` the
        hooks a `backward_dw` fires tell Megatron's DDP that the weights' gradients are in
        main_grad (or `.grad`) and may be reduced. They belong after the delayed work. A
        path that fires them and leaves without popping the wgrad store announces a
        gradient that is not there: DDP reduces main_grad without this microbatch's weight
        gradient, and the work still queued in the store is either lost or lands later,
        after the reduce, unannounced. Blind corpus 12 found three spellings in
        Transformer Engine forks' `backward_dw`: firing under `if not
        self.need_backward_dw():` before the `return`, firing when the store is empty,
        and a subclass firing and returning under `fuse_wgrad_accumulation` before the pop
        (the fused path still defers its GEMMs into main_grad).

        GMLP019 holds the other half (work done, no hook after it). Together: on every
        path out of the function, the hooks fire if and only if the work ran.

        Classes caught: 5.

        Seen: the work and the firings as GMLP019 finds them (by what the function does,
        `lint/analysis/delayed_work.py`); a firing statement that no path reaches after
        any work (the firing that announces the work is left alone even where a path
        without work also reaches it: frozen weights, an empty loop over layers) and that
        some run from the entry reaches through no work and then leaves through no work,
        runs being those `consistent_paths` allows (a local tested twice, `delayed =
        self.need_backward_dw()`, answers the same both times). A loop's head counts by the
        firing statements in its body.

        Not seen: hooks fired before the work on a path that then does the work (the
        announcement comes early there, and the path still works: GMLP019 may report it for
        the later way out); a function whose only work is a helper of another file that is a
        method, or work under names that do not say deferred weight gradients (as GMLP019);
        hooks fired for other modules than the popped one (any firing counts); firing on the
        empty-store path when the class computes its weight gradients at once in that case
        and marks none of them to skip autograd's hook (no such code was seen).
    """,
    fix="""
        Fire the hooks only after the work: leave the early `return` paths without firing,
        or pop the store before firing. No automatic fix.
    """,
    fix_summary="none (fire the hooks after the delayed work only)",
    valid=(
        Example(
            """
            class Linear(BaseModule):
                def backward_dw(self):
                    if not self.need_backward_dw():
                        return
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        accumulate_grad(self.weight, wgrad)
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
            """
        ),
        Example(
            """
            class GroupedLinear(BasicOperation):
                def backward_dw(self):
                    if self.wgrad_store.context is None or self.wgrad_store.context.empty():
                        return
                    _, tensor_list = self.wgrad_store.pop()
                    if self._accumulate_into_main_grad:
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    accumulate_grad(self.weight, tensor_list[2][0])
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class Linear(BaseModule):
                def backward_dw(self):
                    if not self.need_backward_dw():
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        accumulate_grad(self.weight, wgrad)
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
            """,
            line=4,
        ),
        Example(
            """
            class FusedLinear(Linear):
                def backward_dw(self):
                    if self.fuse_wgrad_accumulation:
                        for hook in self.wgrad_accumulation_and_reduce_hooks:
                            hook()
                        return
                    (wgrad, _), _ = self.wgrad_store.pop()
                    accumulate_grad(self.weight, wgrad)
                    for hook in self.wgrad_accumulation_and_reduce_hooks:
                        hook()
            """,
            line=5,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{name}` fires the grad-accumulation / reduce hooks here on a path that has not run "
    "its delayed weight-gradient work and leaves without it: DDP reduces main_grad (or "
    "takes `.grad`) before this microbatch's weight gradient is in it, and the work left "
    "in the store lands after the reduce or never"
)


def check(context: ModuleContext, out: Collector) -> None:
    for unit, facts, work in delayed_work.working_functions(context):
        work_nodes = [node for _, node in work]
        work_indices = frozenset(node.index for node in work_nodes)
        graph = unit.graph
        for fired in delayed_work.notifying_nodes(unit, facts):
            if fired.owner is None or type(fired.owner) in (cst.For, cst.While):
                # the head of a loop whose body fires (the firing statements in it are
                # judged themselves: a body may do the work first), or the end of an exit
                # stack's block (its callbacks run after whatever the block did)
                continue
            # A firing some path reaches after the work is the one that announces it (a
            # path without the work there fires for weights that had none to do: frozen
            # ones, an empty loop); only a firing reached on no-work paths alone is early.
            if any(paths.reaches(w, (fired.index,)) or w is fired for w in work_nodes):
                continue
            if consistent_paths.passes_in_order(
                graph, (graph.entry, fired, graph.exit), (work_indices, work_indices)
            ):
                out.report(CODE, fired.owner, MESSAGE.format(name=unit.name))
                break  # one finding per function: the first early firing
