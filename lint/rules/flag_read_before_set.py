"""GMLP060: a helper that reads `grad_added_to_main_grad` is asked before the flag is set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
flag_read_order = LazyModule("..analysis.flag_read_order", __package__)

CODE = "GMLP060"
RULE = Rule(
    code=CODE,
    classes=(3, 5),
    name="flag-read-before-set",
    summary=(
        "A function calls a helper of the file that decides from `grad_added_to_main_grad` "
        "(which gradients are dummies) and only afterwards sets or restores that flag: the "
        "helper sees the value a hook left, hands back real gradients, and the hooks add "
        "them into main_grad a second time."
    ),
    flags=(
        "`obj.m(...)`, where `m` is the one function of the file by that name and reads "
        "`p.grad_added_to_main_grad` / `getattr(p, 'grad_added_to_main_grad', ...)`, "
        "followed in the caller (same block, or after the block around the call) by a "
        "statement restoring the flag from a value (not a constant), with no set of the flag "
        "before the call"
    ),
    explanation="""
        Issue #19, classes 3 and 5 (flags and hooks around paths that finish the weight
        gradients outside the producer). A CUDA-graph replay has accumulated the weight
        gradients into main_grad; it restores each parameter's `grad_added_to_main_grad`
        as recorded at capture time, then asks the runner which gradients to hand back as
        dummies, and the runner decides from that flag. Blind corpus 14 moved the restore
        after the call ("restore state once grads are collected"): by then Megatron's DDP
        hook has reset the flags to False, so the runner hands back the captured real
        gradients, and the hooks fired on them add them into main_grad again.

        Seen: functions of the file whose own body reads the flag (as a value or by
        `getattr`; a store or `del` is no read), found by name (the only function of that
        name in the file, named for gradients, dummies or flags, whatever the receiver:
        `runner.get_input_grads_with_dummy_flags()` for `runner = ctx.runner`); calls of
        them as `obj.m(...)` in simple statements; a later statement of the same block
        before any `return` / `raise` / `continue` / `break`, or one after the block around
        the call, that restores the flag (`X.flag = v`, `setattr`, also inside a loop) from
        a value, not a constant. Reported at the call. Left alone: a constant set after the
        read (a reset to False is what a hook does once it has added the gradient; True is
        how a producer marks what it has just written, after asking whether it was added
        already); a function that sets the flag, to any value, at or before the call's line;
        helpers of other files, two functions of one name, and helpers named otherwise
        (`wait()`: an unrelated handle's `wait` must not stand for a bucket's).

        Not seen: a read through a further helper; a helper called as a plain function
        (`m(obj)`) or in a compound statement's test; a restore in `finally:` after a call
        in `try:`; and a function that sets the flag on another path above the call (an
        earlier branch that returns), since "before" is judged by line.
    """,
    fix="""
        Set or restore the flag before calling the helper that reads it. No automatic fix.
    """,
    fix_summary="none (set the flag before asking the helper)",
    valid=(
        Example(
            """
            class Replay(torch.autograd.Function):
                @staticmethod
                def backward(ctx, *grads):
                    runner = ctx.runner
                    runner.bwd_graph.replay()
                    for param, added in runner.recorded_flags.items():
                        param.grad_added_to_main_grad = added
                    grads, dummy = runner.input_grads_with_dummies()
                    return grads


            class Runner:
                def input_grads_with_dummies(self):
                    dummy = [getattr(p, "grad_added_to_main_grad", False) for p in self.params]
                    return self.static_grads, dummy
            """
        ),
        Example(
            """
            class Hook:
                def flush(self, params):
                    ready = self.ready_params(params)
                    for param in ready:
                        param.grad_added_to_main_grad = False
                    return ready

                def ready_params(self, params):
                    return [p for p in params if p.grad_added_to_main_grad]
            """
        ),
    ),
    invalid=(
        Example(
            """
            class Replay(torch.autograd.Function):
                @staticmethod
                def backward(ctx, *grads):
                    runner = ctx.runner
                    runner.bwd_graph.replay()
                    grads, dummy = runner.input_grads_with_dummies()
                    for param, added in runner.recorded_flags.items():
                        param.grad_added_to_main_grad = added
                    return grads


            class Runner:
                def input_grads_with_dummies(self):
                    dummy = [getattr(p, "grad_added_to_main_grad", False) for p in self.params]
                    return self.static_grads, dummy
            """,
            line=6,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{call}` decides from `grad_added_to_main_grad` (line {read}) before this function "
    "sets that flag (line {late}): it sees the value a hook left, hands back real gradients "
    "where dummies belong, and the hooks add them into main_grad again; set the flag first"
)


def check(context: ModuleContext, out: Collector) -> None:
    if context.source.count("grad_added_to_main_grad") < 2:
        return
    reading = context.shared(flag_read_order.readers)
    if not reading:
        return
    for unit in context.units:
        if not unit.survey.spells_grad_added:
            continue
        for call, name, later in flag_read_order.late_sets(unit, reading):
            out.report(
                CODE,
                call,
                MESSAGE.format(call=f"{name}()", read=reading[name], late=context.line_of(later)),
            )
