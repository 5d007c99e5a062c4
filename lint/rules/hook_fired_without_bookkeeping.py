"""GMLP017: a parameter's grad-accumulation hook fired by hand with no bookkeeping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
hooks = LazyModule("..analysis.hooks", __package__)
bookkeeping = LazyModule("..analysis.hook_bookkeeping", __package__)
paths = LazyModule("..analysis.paths", __package__)

CODE = "GMLP017"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="hook-fired-without-bookkeeping",
    summary=(
        "A parameter's grad-accumulation hook is fired by hand on a path that neither sets "
        "its `grad_added_to_main_grad` nor gives its `.grad` a value."
    ),
    flags=(
        "`p._grad_accum_hook(...)` / `h()` with `h = getattr(p, '<grad hook>')`, or a hook "
        "of a container of them fired for `p` (`hooks[p]()`, `h()` in "
        "`for p, h in zip(params, hooks)`), or `cb(p)` for each `cb` of a list of grad "
        "hooks or callbacks, or the hook of each element of `params` (`map(operator."
        "methodcaller('<grad hook>'), params)`, `map(lambda p: p.<grad hook>(), params)`, "
        "`for h in [p.<grad hook> for p in params]: h()`), reached on a "
        "path with no `p.grad = ...`, no `p.grad_added_to_main_grad = ...`, no call handed "
        "`p` and no `backward_dw()`"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping). Megatron's DDP hook runs after
        AccumulateGrad has set `param.grad`: it adds `.grad` into main_grad unless
        `grad_added_to_main_grad` says the wgrad is there already, then clears `.grad` and
        marks the parameter ready for the reduce. Code that bypasses autograd (a CUDA-graph
        replay, a tensor-parallel or delayed-wgrad finalizer) keeps that hook on the
        parameter and fires it itself. If the path to that call neither sets the flag nor
        `.grad`, the hook sees whatever `.grad` was left from before (a stale dummy or an
        earlier microbatch's gradient) and adds it into main_grad, or, with `.grad` None,
        reduces a main_grad that does not say whether it holds this microbatch.

        Seen: within one function, the call of a stored hook of a plain name `p`
        (`p._grad_accum_hook()`, `p.post_wgrad_grad_acc_hook()`, or `hook()` where `hook =
        getattr(p, "_grad_accum_hook", None)` reaches the call): an attribute that names a
        hook and a gradient, not plural, not a maker, registrar or trigger of hooks. The
        finding is reported when some path of the function's control-flow graph reaches
        that call without passing a statement that assigns `p.grad` or
        `p.grad_added_to_main_grad` (or `setattr`s them), a test `hasattr(p,
        "grad_added_to_main_grad")` (a parameter without it has no such bookkeeping), a call
        handed `p` itself (a helper may keep the books; a helper of the file whose body,
        read, keeps none of `p`'s, such as one that only adds into `p.main_grad`, does
        not: analysis/hook_bookkeeping.py) or a `backward_dw()` call (the delayed-wgrad
        protocol keeps the books of the weights it computes).

        Seen besides: hooks kept in a container named as their plural
        (`_grad_accum_hooks`), fired for a known parameter: by key (`hooks[p]()`,
        `h = hooks[p]`, `h = hooks.get(p)`), by its position (`hooks[i]()` in `for i, p in
        enumerate(params)`: the hook is `p`'s) or paired with it by `zip(params, hooks)` or
        by a container of pairs that names hooks (`for p, h in self.param_hook_pairs: h()`);
        `getattr(p, "<hook>")()` called at once; firings in a nested function (a closure
        made for one parameter), a `while` loop or a comprehension. Looking a hook up
        (`hooks.get(p)`) is not bookkeeping for `p`; an earlier `for p in X:` loop whose body
        keeps `p`'s books on every pass is, for hooks fired for each `p` of the same `X`
        (either loop may walk `X` through `enumerate(X)` or `zip(..., X)`: `for w, g in
        zip(self.expert_weights, wgrads)` marks each expert weight).
        A hook taken from a list of grad hooks or callbacks (plural, naming grad or
        accumulation: `for cb in self._grad_ready_callbacks`, `for h in
        self._post_accumulate_hooks[p]`) and handed one parameter (`cb(p)`) is fired for
        that parameter (a CUDA-graph replay path calling the callbacks itself). So is any
        hook named for what it does to a gradient (grad, accumulation, reduction, DDP; not
        a module's forward hook) handed one plain name, wherever it is kept: a method of
        the object (`self._expert_reduce_hook(p)`), an element of a container
        (`self.ddp_hooks[name](param)`), a local bound to either, or a parameter of the function
        (`reduce_hook(w)`); another such hook fired for `p` keeps no books for it.
        Hooks fired for every element of a sequence in one expression are fired for each
        element (`analysis/hook_spellings.py`): `map(operator.methodcaller("<hook>"),
        params)` (the caller bound here or at module level), `map(lambda p: p.<hook>(),
        params)`, a loop over the hooks taken from the elements (`for h in
        [p.<hook> for p in params]`, `map(operator.attrgetter("<hook>"), params)`), and
        `functools.partial(p.<hook>)` is `p`'s hook. Their bookkeeping is an earlier loop
        over the same sequence whose body keeps each element's books on every pass, a call
        handed the sequence itself (not `zip`, `enumerate`, `list`, ...), or `backward_dw()`.
        A list bound to `[]`, only appended to and walked, whose every `append(w)` comes
        after `w`'s books were kept on every path to it, holds booked parameters: hooks
        fired for its elements (`for w in written: w.<hook>()`) need nothing more.

        Since the probes of branch h-probes: a container is one of hooks also by what the
        file stores in it, whatever its name (`analysis/hook_containers.py`): `self._hooks[p]
        = p._grad_accum_hook`, `self._fns.append(getattr(p, "_grad_accum_hook"))`, `self._acc
        = {p: p._grad_accum_hook for p in params}`, or a local every binding of which is such
        a hook; it is then read as one named for them (`self._hooks[p]()`, `zip(params,
        self._fns)`). A hook handed to `stack.callback(...)` in `with ExitStack() as stack:`
        (`AsyncExitStack`, `contextlib.` or not; `analysis/exit_callbacks.py`) is fired where
        the block ends, with the arguments of the registration: its books may be kept after
        the registration, before the block ends (the hook is reported at the registration).
        Looking a hook up in a container keyed by the parameter (`store.get(w)`,
        `store.pop(w)`) keeps no books for it.

        A tensor's own list of post-backward hooks called as one (`self._backward_post_hooks(
        grad)`, MS-AMP's `HookManager` on a `ScalingTensor`: a noun phrase of `backward`, `post`,
        `grad`, `accum...` and `hooks` only, with `post` in it; not `run_wgrad_hooks`,
        `has_backward_post_hooks`) fires them for that tensor; it is reported only where
        the function sets that tensor's `.grad` (or `_grad`) after the firing: it must set its own
        `.grad` first (blind corpus 18's `backward_grad_update` with its two lines
        swapped fed the FP8 DDP hook the previous gradient).

        Not seen: bookkeeping done before the function is called (by its caller), hooks
        stored under other names (`p._hook_fn()`: no gradient or accumulation in the name),
        a loop over a container of hooks alone (`for h in
        hooks: h()`: whose hook each is, and so what bookkeeping it needs, is not known;
        Megatron-LM's head collects such lists only from parameters whose `.grad` is set,
        right after `backward_dw()`), a container filled only by another file or handed in
        as an argument, a callback of a stack that is no `with` item (or whose callbacks
        are moved out by `pop_all()`), `weakref.finalize` and `atexit` callbacks (they run
        at no point of the function), a list of parameters that is also extended, copied
        into or handed to another call (what else it holds is not followed), and whether
        the hooked parameter's
        wgrad went to main_grad at all (a path that hands a real `.grad` through
        AccumulateGrad does not fire the hook by hand).
    """,
    fix="""
        Before firing the hook, do what AccumulateGrad and the fused wgrad path do: when the
        wgrad is in main_grad set `p.grad_added_to_main_grad = True` and `p.grad` to a
        dummy (or None, where DDP allows it); otherwise set `p.grad` to the wgrad. No
        automatic fix.
    """,
    fix_summary="none (set the flag or .grad before firing the hook)",
    valid=(
        Example(
            """
            def finish_replay(runner):
                runner.bwd_graph.replay()
                for param in runner.params:
                    param.grad = None
                    if hasattr(param, "grad_added_to_main_grad"):
                        param.grad_added_to_main_grad = True
                    hook = getattr(param, "_grad_accum_hook", None)
                    if hook is not None:
                        hook()
            """
        ),
        Example(
            """
            def delayed_backward(module):
                module.backward_dw()
                for param in module.parameters():
                    if getattr(param, "post_wgrad_grad_acc_hook", None) is not None:
                        param.post_wgrad_grad_acc_hook()
            """
        ),
        Example(
            """
            def finalize(param, wgrad):
                param.main_grad.add_(wgrad)
                if hasattr(param, "grad_added_to_main_grad"):
                    param.grad_added_to_main_grad = True
                if getattr(param, "_grad_accum_hook", None) is not None:
                    param._grad_accum_hook()
            """
        ),
        Example(
            """
            def finalize(param, wgrad):
                accumulate_into_main_grad(param, wgrad)
                param._grad_accum_hook(param)
            """
        ),
        Example(
            """
            def replay(module, params):
                for p in params:
                    p.main_grad.add_(p.wgrad)
                    p.grad_added_to_main_grad = True
                for hook, hook_args in module.cuda_graph_manual_hooks:
                    hook(*hook_args)
                for submodule, hook in module.forward_pre_hooks:
                    hook(submodule, None)
                return [p._grad_accum_hook() for p in params]
            """
        ),
        Example(
            """
            def flush(weights, pending):
                done = []
                for w, (x, dy) in zip(weights, pending):
                    general_gemm(x, dy, out=w.main_grad, accumulate=True)
                    w.grad_added_to_main_grad = True
                    done.append(w)
                for w in done:
                    w.post_wgrad_grad_acc_hook()
            """
        ),
        Example(
            """
            class ScalingTensor:
                def backward_grad_update(self, grad):
                    self.grad = grad
                    self._backward_post_hooks(grad)


            def fp8_param_hook(param):
                param.main_grad.add_(param.grad)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def finish_replay(runner):
                runner.bwd_graph.replay()  # adds each wgrad into its param's main_grad
                for param in runner.params:
                    hook = getattr(param, "_grad_accum_hook", None)
                    if hook is not None:
                        hook()
            """,
            line=6,
        ),
        Example(
            """
            def finalize(param, wgrad, fused):
                if fused:
                    param.main_grad.add_(wgrad)
                    param.grad_added_to_main_grad = True
                param._grad_accum_hook(param)
            """,
            line=5,
        ),
        Example(
            """
            def finish_experts(expert_params, grad_acc_hooks):
                for i, p in enumerate(expert_params):
                    p.main_grad.add_(p.expert_wgrad)
                    grad_acc_hooks[i]()
            """,
            line=4,
        ),
        Example(
            """
            def finish_norm_grads(norm_params, dgammas):
                for p, dgamma in zip(norm_params, dgammas):
                    p.main_grad.add_(dgamma)
                list(map(operator.methodcaller("post_wgrad_grad_acc_hook"), norm_params))
            """,
            line=4,
        ),
        Example(
            """
            class DeferredExpertWgrad:
                def __init__(self, params):
                    self._hooks = {p: p._grad_accum_hook for p in params}

                def backward_dw(self):
                    with contextlib.ExitStack() as stack:
                        for w in self._pending:
                            stack.callback(self._hooks[w])
                            x, dy = self._store.pop(w)
                            w.main_grad.add_(dy.t() @ x)
            """,
            line=8,
        ),
        Example(
            """
            class ScalingTensor:
                def backward_grad_update(self, grad):
                    self._backward_post_hooks(grad)
                    self.grad = grad


            def fp8_param_hook(param):
                param.main_grad.add_(param.grad)
            """,
            line=3,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{name}`'s grad-accumulation hook is fired here on a path that sets neither "
    "`{name}.grad_added_to_main_grad` nor `{name}.grad`: the hook adds whatever `.grad` "
    "holds into main_grad (a stale one, or nothing for a wgrad that is already there)"
)


MESSAGE_EACH = (
    "the grad-accumulation hook of each element of `{name}` is fired here on a path that "
    "sets neither their `grad_added_to_main_grad` nor their `.grad`: the hook adds whatever "
    "`.grad` holds into main_grad (a stale one, or nothing for a wgrad that is already there)"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "hook" not in context.source and "callbacks" not in context.source:
        return
    if "main_grad" not in context.source:
        # A file that never names main_grad (nor grad_added_to_main_grad) has no hook that
        # adds into it: torch's DDP firing its reducer's hook by bucket index is ordinary.
        return
    bound = hooks.hook_locals(context.source)
    for unit in context.units:
        if not hooks.may_fire(unit, bound):
            continue
        for firing in hooks.firings(unit):
            if hooks.is_list_firing(firing) and not bookkeeping.grad_set_after(unit, firing):
                continue  # a tensor's own hooks: judged where it sets the gradient after them
            blocked = bookkeeping.bookkeeping_nodes(unit, firing.subject, firing)
            if hooks.unbooked(unit, firing, blocked):
                message = MESSAGE_EACH if firing.over else MESSAGE
                out.report(CODE, firing.call, message.format(name=firing.subject))
