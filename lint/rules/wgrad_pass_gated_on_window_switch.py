"""GMLP065: the pass that runs deferred weight-gradient work gated on a switch that is on
only while another function runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
store_calls = LazyModule("..analysis.store_calls", __package__)
window_switches = LazyModule("..analysis.window_switches", __package__)

CODE = "GMLP065"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="wgrad-pass-gated-on-window-switch",
    summary=(
        "The pass that takes deferred weight-gradient work out of its store returns early "
        "unless a switch is on, and every function that turns that switch on turns it off "
        "before it ends: the pass never runs its work and the weights get no gradient."
    ),
    flags=(
        "`if ... not S: return` before (or `if S:` around) `WeightGradStore.pop()` / "
        "`flush()`, where every function of the file writing `S`'s attribute other than to "
        "a false constant ends with a top-level `X.S = False` (or one in a top-level "
        "`finally`) and does not return in between"
    ),
    explanation="""
        Issue #19, class 6 (a split backward whose weight-gradient part is never run). A
        zero-bubble schedule turns its store on around the backward it splits
        (`WeightGradStore.enabled = enable_zb`, the backward, `WeightGradStore.enabled =
        False`): the backward queues the weight-gradient work, and the W pass, run later by
        the schedule, takes it out (`WeightGradStore.pop()`). Outside the backward the
        switch is always off. DualPipe's `_weight_chunk` in blind corpus 18, gated on it
        (`if self.forward_only or not WeightGradStore.enabled: return`), returned every
        time: the queued work piled up and no weight got its gradient.

        Seen: a *window switch*, an attribute (grouped by its name, whatever the object:
        `cls.enabled` in the store's class and `WeightGradStore.enabled` are one) that every
        function of the file writing it with anything but a false constant (`False`, `None`,
        `0`; `setattr` too) turns off with a top-level statement after every other write of
        it, with no `return` in between (in a top-level `try`'s `finally` counts); and, in a
        function that does not turn it on, an `if T: return` whose `T` is false only with
        the switch on (`not S`, `A or not S`) before a take from a store named for weight
        gradients (`pop`, `popleft`, `flush` on `WeightGradStore`, `wgrad_store`), or an
        `if T:` around the take with `T` true only with the switch on, where a window's
        reset writes the object the gate reads (or `cls.` / `self.` in the class of that
        name). Left alone: a gated function that code inside a window may run (named in a
        window function as a callee, a callback or a `getattr` string, transitively; every
        function where a window function calls through a table or `getattr(...)()`), and a
        window that is a generator (`@contextmanager`), whose caller's block runs inside
        it.

        Not seen: windows across files (the switch turned on in one module, the pass in
        another: the file must hold both), a switch reset by a helper call or a context
        manager, a pass that takes work through a store named otherwise, a gate through a
        local (`enabled = WeightGradStore.enabled; if not enabled: return`).
    """,
    fix="""
        Gate the pass on what says a W pass is due (the schedule's own mode, or whether the
        store holds work: `if not WeightGradStore.funcs_queue: return`), not on the switch
        that is on only while the backward queues it. No automatic fix.
    """,
    fix_summary="none (gate the pass on the schedule's mode or the queue, not the window)",
    valid=(
        Example(
            """
            from dualpipe.utils import WeightGradStore


            class Schedule:
                def backward_chunk(self, enable_zb=False):
                    WeightGradStore.enabled = enable_zb
                    self.run_backward()
                    WeightGradStore.enabled = False
                    if enable_zb:
                        WeightGradStore.flush()

                def weight_chunk(self):
                    if self.forward_only:
                        return
                    WeightGradStore.pop()
            """
        ),
        Example(
            """
            from dualpipe.utils import WeightGradStore


            class Schedule:
                def configure(self, enable_zb):
                    WeightGradStore.enabled = enable_zb

                def weight_chunk(self):
                    if not WeightGradStore.enabled:
                        return
                    WeightGradStore.pop()
            """
        ),
        Example(
            """
            from dualpipe.utils import WeightGradStore


            class Schedule:
                def backward_chunk(self, enable_zb=False):
                    WeightGradStore.enabled = enable_zb
                    self.run_backward()
                    self.weight_chunk()
                    WeightGradStore.enabled = False

                def weight_chunk(self):
                    if not WeightGradStore.enabled:
                        return
                    WeightGradStore.pop()
            """
        ),
    ),
    invalid=(
        Example(
            """
            from dualpipe.utils import WeightGradStore


            class Schedule:
                def backward_chunk(self, enable_zb=False):
                    WeightGradStore.enabled = enable_zb
                    self.run_backward()
                    WeightGradStore.enabled = False
                    if enable_zb:
                        WeightGradStore.flush()

                def weight_chunk(self):
                    if self.forward_only or not WeightGradStore.enabled:
                        return
                    WeightGradStore.pop()
            """,
            line=13,
        ),
    ),
)


MESSAGE = (
    "`{switch}` is on only while a function that turns it on runs (it turns it off again, "
    "line {reset}); read here, outside that window, it is always off, so `{take}` never "
    "runs and the queued weight-gradient work is lost; gate this pass on the schedule's "
    "mode or on the store's queue"
)


def check(context: ModuleContext, out: Collector) -> None:
    if not store_calls.names_a_store(context.source):
        return
    for found in window_switches.gated_passes(context):
        take = out.text(found.take.func)
        line = context.line_of(found.reset)
        out.report(CODE, found.test, MESSAGE.format(switch=found.switch, reset=line, take=take))
