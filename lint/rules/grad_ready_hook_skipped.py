"""GMLP042: a path that completes a weight's gradient outside autograd skips the grad-ready
hook that a sibling path of the same code fires by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
skipped_hooks = LazyModule("..analysis.skipped_hooks", __package__)

CODE = "GMLP042"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="grad-ready-hook-skipped",
    summary=(
        "A path that completes weights' gradients outside autograd (hands their wgrads back, "
        "or adds into main_grad and sets `grad_added_to_main_grad`) fires no grad-ready hook, "
        "while a sibling path of the same code fires the hook stored on the parameter; or the "
        "hook is fired only while `grad_added_to_main_grad` is set."
    ),
    flags=(
        "in a file that fires a hook stored on a parameter by hand (`p._grad_accum_hook()`): "
        "a branch of an `if` that walks the same weights (`zip(weights, grads)`) as a sibling "
        "branch firing the hook for each, and fires none on the way out; a method that adds "
        "into `X.main_grad` and sets `X.grad_added_to_main_grad = True` and leaves without "
        "firing, in a class another method of which adds into main_grad and fires (a method "
        "the file calls: unless every call is followed by a firing); a stored hook fired "
        "only under a test that `X.grad_added_to_main_grad` is set"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping), the path that skips the hook. Code
        that finishes a weight's gradient outside autograd (a tensor-parallel
        reduce-scatter finalizer, a CUDA-graph replay) takes Megatron's grad-ready hook off
        autograd's AccumulateGrad (`register_grad_accum_hook` keeps it on the parameter,
        `param._grad_accum_hook`) and fires it itself once the gradient is in main_grad or
        handed back. Then every path that completes a gradient has to fire it: one that
        does not leaves DDP's bucket short of that parameter, so its reduce-scatter starts
        late, on a main_grad that does not hold this microbatch yet, or never. Which path
        completes a gradient is read from the code's own sibling that fires:
        * TE #2960 (extended tensor parallelism): the synchronous reduce-scatter fired the
          hook for each weight through `_apply_fused_wgrad` under wgrad fusion, and in the
          `else` returned the stripped wgrads of the same `zip(weights, sharded)` without
          firing it.
        * Megatron-LM #4967: GTP's deferred finalize (`_wait_reduce_scatter(finalize_grad=
          True)`) added the reduce-scattered wgrads into main_grad and set
          `grad_added_to_main_grad` but fired nothing, while the class's other finalize paths
          add and then call `_handle_megatron_grad_accum`, which fires the hook.
        * Megatron-LM #4637: after a CUDA-graph replay the hook was fired only `if hook is not
          None and param.grad_added_to_main_grad`. The flag tells the hook whether `.grad`
          still has to be added, not whether the gradient is ready; another finalize may
          have consumed it, and the hook is then never fired for a weight this graph
          completed.

        Seen (lint/analysis/skipped_hooks.py): only in a file with a function that fires a
        hook stored on a parameter (`p.<hook>()`, `h()` with `h = getattr(p, "<hook>")`, a
        hook of a container of them fired for `p`: GMLP017's firings); a sibling fires
        through such a call or a function of the file that makes one (three calls deep); a
        path counts as silent only if it calls nothing that says hook (nor a function of the
        file, an imported helper of the run, or a local bound to a hook or to a lambda that
        calls one, firing one), calls nothing named for a readiness notice
        (`register_grad_ready(p)`, `reduce_ready_partitions...`), and completes gradients
        (returns a value or binds or fills a local the function returns, gives `.grad` a
        value other than None, touches main_grad or the flag: an arm that asserts, queues
        its wgrads for `backward_dw` or drops them is left alone). Branch: the ways through
        an `if`/`elif`/`else` chain (an `if` without `else` whose body ends in `return`,
        `raise` or `continue` has the statements after it as its other way), a `for` loop or
        comprehension firing in one, and a loop or comprehension over the same code in
        another; reported at that statement when from it a way out of the function passes no
        firing (a later `if` on one of the arm's own tests, unchanged since, taken the way
        the arm decided it: `if not fused:` firing after the `if` covers the `else` of `if
        fused:`; a test that calls something is not taken as decided). Method: a class's
        method with an in-place write into a main_grad (`add_`, `copy_`,
        `torch._foreach_add_` over a list of them, a GEMM's `out=`, also through a local
        bound to it or a function of the file that writes one) and
        `X.grad_added_to_main_grad = True` (or its `setattr`), from which a way out passes
        no firing, in a class another method of which writes main_grad and fires a stored
        hook (not `forward` / `backward`, which autograd calls and whose dummy goes to an
        AccumulateGrad that still holds the hook); when the file calls the method (by
        `name(...)` or `obj.name(...)`, whatever the object: a chain of sharded weights
        calls its neighbour's finalize), only if some call of it has a way out of its caller
        passing no firing. Flag: every operand of the `and` chain of an `if` around the
        firing, `X.grad_added_to_main_grad`, `getattr(X, "grad_added_to_main_grad", ...)`,
        either compared `is True` / `== True`, unless the `else` fires the same weight's
        hook (itself or through a local bound to it).

        Not seen: siblings in another file, or a class whose methods complete gradients
        and fire in different classes; a branch that completes a single weight (no loop)
        or walks the weights under another spelling (`weights` against `zip(weights,
        grads)`); a firing gated on the flag through a local, or skipped by an early
        `continue` / `return` on it; a firing through a lambda that calls a helper of the
        file (`lambda w: self._fire(w)`), or after the `if` under a test that only means
        the arm's (`if not fused` against `if unfused`). False alarms it can raise: a quiet
        path whose gradients autograd accumulates (handed back to an AccumulateGrad the
        hook is still registered on: nothing in the file says which weights it took the
        hook from, and TE #2960's true finding is such a hand-back); a method no call of
        which the file shows (another file or a callback calls it and fires after it: its
        shape is the one of a deferred finalize that skips the hook); a flag test in an
        `elif` whose earlier arm fires.
    """,
    fix="""
        Fire the parameter's stored hook on every path that completes its gradient (after
        the write into main_grad and the flag, or after handing the wgrad back), and fire it
        whatever `grad_added_to_main_grad` says: the hook reads the flag itself. No
        automatic fix.
    """,
    fix_summary="none (fire the stored hook on that path too)",
    valid=(
        Example(
            """
            class ShardedParam(torch.nn.Parameter):
                @staticmethod
                def _finish(param, wgrad, fuse):
                    if fuse:
                        param.main_grad.add_(wgrad)
                        param.grad_added_to_main_grad = True
                        wgrad = make_dummy_wgrad(param)
                    if param._grad_accum_hook is not None:
                        param.grad = wgrad
                        param._grad_accum_hook(param)
                    return wgrad

                def wgrad_reduce_scatter(self, wgrads, fuse):
                    sharded = self._reduce_scatter(wgrads)
                    return [self._finish(p, g, fuse) for p, g in zip(self._weights, sharded)]
            """
        ),
        Example(
            """
            def replay_backward(runner):
                runner.bwd_graph.replay()
                for param in runner.finalized_params:
                    param.grad = None
                    hook = getattr(param, "_grad_accum_hook", None)
                    if hook is not None:
                        hook()
            """
        ),
        Example(
            """
            class ShardedParam(torch.nn.Parameter):
                def _announce(self, w):
                    w.grad_added_to_main_grad = True
                    if w._grad_accum_hook is not None:
                        w._grad_accum_hook()

                def finish(self, wgrads):
                    for w, g in zip(self._weights, wgrads):
                        w.main_grad.add_(g)
                        self._announce(w)

                def _drain(self):
                    for w, g in zip(self._weights, self.pending):
                        w.main_grad.add_(g)
                        w.grad_added_to_main_grad = True

                def wait(self):
                    self._drain()
                    for w in self._weights:
                        self._announce(w)
            """
        ),
    ),
    invalid=(
        Example(
            """
            class ShardedParam(torch.nn.Parameter):
                @staticmethod
                def _apply_fused(param, wgrad):
                    param.main_grad.add_(wgrad)
                    param.grad_added_to_main_grad = True
                    param._grad_accum_hook(param)

                def wgrad_reduce_scatter(self, wgrads, fuse):
                    sharded = self._reduce_scatter(wgrads)
                    if fuse:
                        [self._apply_fused(p, g) for p, g in zip(self._weights, sharded)]
                        return [None] * len(sharded)
                    else:
                        result = [p.strip(g) for p, g in zip(self._weights, sharded)]
                    return result
            """,
            line=14,
        ),
        Example(
            """
            class ShardedParam(torch.nn.Parameter):
                def _announce(self, w):
                    w.grad_added_to_main_grad = True
                    if w._grad_accum_hook is not None:
                        w._grad_accum_hook()

                def finish(self, wgrads):
                    for w, g in zip(self._weights, wgrads):
                        w.main_grad.add_(g)
                        self._announce(w)

                def finalize_pending(self):
                    for w, g in zip(self._weights, self.pending):
                        w.main_grad.add_(g)
                        w.grad_added_to_main_grad = True
            """,
            line=14,
        ),
        Example(
            """
            def replay_backward(runner):
                runner.bwd_graph.replay()
                for param in runner.finalized_params:
                    param.grad = None
                    hook = getattr(param, "_grad_accum_hook", None)
                    if hook is not None and param.grad_added_to_main_grad:
                        hook()
            """,
            line=6,
        ),
    ),
)


MESSAGES = {
    "branch": (
        "this branch walks `{subject}` and completes those weights' gradients, but fires no "
        "grad-ready hook, while a sibling branch fires the hook stored on each of them: "
        "DDP's bucket never hears of these weights on this path (fire the hook here too)"
    ),
    "method": (
        "main_grad is added into and `grad_added_to_main_grad` set here, but no grad-ready "
        "hook is fired on the way out (nor after every call of this method), while "
        "`{subject}` of the same class adds into main_grad and fires the stored hook: DDP's "
        "reduce-scatter of this weight starts on a stale main_grad, or never"
    ),
    "flag": (
        "the grad-ready hook of `{subject}` is fired only while "
        "`{subject}.grad_added_to_main_grad` is set: the flag says whether `.grad` still has "
        "to be added, not whether the gradient is ready, and once it is reset or consumed the "
        "hook is skipped for a weight whose gradient is complete"
    ),
}


def check(context: ModuleContext, out: Collector) -> None:
    if "hook" not in context.source:
        return
    for skip in skipped_hooks.skipped_hooks(context):
        out.report(CODE, skip.site, MESSAGES[skip.shape].format(subject=skip.subject))
