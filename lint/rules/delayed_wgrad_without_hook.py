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
delayed_work = LazyModule("..analysis.delayed_work", __package__)
paths = LazyModule("..analysis.paths", __package__)

CODE = "GMLP019"
BACKWARD_DW = "backward_dw"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="delayed-wgrad-without-hook",
    summary=(
        "A function that runs delayed weight-gradient work (pops the wgrad store, replays "
        "the wgrad graph, drains deferred wgrads into main_grad), under any name, reaches "
        "its end on a path that fires no grad-accumulation / reduce hook."
    ),
    flags=(
        "`<wgrad store>.pop()`, `<wgrad graph>.replay()` (any `<graph>.replay()` in a "
        "`backward_dw`), a loop over deferred wgrads reaching main_grad, or a call of a "
        "helper of the file, or of a top-level helper of another file of the run, doing "
        "one of these, from which a return is reached without firing a hook (by a hook's "
        "name, a local or callable bound to one, or a helper of the file or of another "
        "file that fires one)"
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
        misses the hooks on some way out; this rule leaves such classes' `backward_dw` to
        it and reports the rest.

        Classes caught: 5 (the converse: delayed work that notifies nobody).

        Seen (by what the function does, lint/analysis/delayed_work.py; its name does not
        matter): a `.pop()` / `.popleft()` on a store whose name says deferred weight
        gradients (`wgrad`, a `dw` part, or `deferred`/`delayed`/`pending`/`queued` beside
        `grad`); a `.replay()` with no arguments of a graph so named (`bwd_dw_graphs[i]`),
        or of any graph inside a `backward_dw`; a `for` loop over such a store whose body
        names a main_grad (a GEMM's `out=`, an in-place method, a local or kwargs dict
        holding it, `getattr`) or calls a function of the file that does; a call of a
        function of the same file that does any of these (three calls deep); a call of a
        top-level function of another file of the run that does one of them itself, by
        the name it is imported under (`from m import f as g`: `g(...)`; `import m` or
        `from p import m`: `m.f(...)`; lint/delayed_helpers.py). A function called by
        name elsewhere in the file, or a top-level one another file of the run imports
        and that does the work, is left to its callers, which are judged with its work.
        Over the function's control-flow graph, a normal exit reachable from
        the work without passing a statement that fires a hook or the head of a loop whose
        body fires one. Firing: a call of a name that says hook or grad-ready callback and
        not register, remove, make, set up or create (`_grad_accum_hook`,
        `post_wgrad_grad_acc_hook`, `_trigger_wgrad_accumulation_and_reduce_hooks`); a
        local bound to one (`for fn in self.wgrad_accumulation_and_reduce_hooks: fn()`,
        `fn = getattr(p, "_grad_accum_hook", None)`); a callable the file hands to a
        `register_*hook*` call (`register_grad_accum_hook(node, finish)`); a function of
        the file that fires one; a top-level function of another file of the run, called
        by its imported name, that fires one itself (its hook's name must also say grad,
        accum or reduce: `checkpoint` or `make_graphed_callables` call hooks of other
        kinds). Since the probes of branch h-probes: an element of a container the file
        fills with hooks, whatever its name (`self._pending[i]()`, `for fire in
        self._pending.values(): fire()`, where the protocol's registration (`def
        register_wgrad_accumulation_and_reduce_hooks(self, hook)`) stores `hook` there, or
        the file stores a parameter's stored hook;
        `analysis/hook_containers.py`); and a firing callable handed to `stack.callback(...)`
        in `with ExitStack() as stack:`, which fires where the block ends (on the normal
        way out and at a `return` in it), on the ways out that passed the registration or a
        loop of the block that registers (`analysis/exit_callbacks.py`).

        Classes caught across files: 5, where the work or the firing sits in a helper
        module (tests/lint/variant_corpus_class5_xfile.py).

        Not seen: work done by a stored closure called directly (`store.pop()()`: the
        layer's own `backward_dw`, which announces itself), nor by callables taken from a
        store named for the protocol (`chunk_backward_dw_funcs.pop(0)`: a pipeline
        schedule's queue of each chunk's `backward_dw`, run later); a helper of another file
        that is a method (a method's name is shared by unrelated classes), is imported by no
        file naming main_grad or `backward_dw`, or does the work or fires the hook only
        through a helper of its own, or a callable its file registers as a hook; a caller
        whose file names none of the contract's words (the linter never reads it); a
        `from m import m2 as x` then `x.f()`; hooks fired by a caller in another file
        after a function that is imported by no other file of the run returns (such code
        is reported; suppress it with a reason); hooks kept under names that say neither hook
        nor a grad-ready callback, in a container the file never stores one in; a callback
        of a stack that is no `with` item or whose callbacks `pop_all()` moves out; stores
        and graphs whose names do not say weight gradients; which of the popped gradients
        actually went to main_grad; a hook fired for some weights and not others (any
        firing counts for all).

        A loop over a local the function binds only to a list or tuple written out element by
        element (`wgrad_args = [(dy, h, w2), (h, x, w1)]`; none unpacked, none naming a store)
        runs work made in this call, not work deferred from an earlier one: it is no store,
        whatever its name (blind corpus 26, the undelayed branch of a backward).
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
            class ExpertLinear(BaseModule):
                def finish_expert_wgrads(self):
                    (wgrad, _), _ = self.wgrad_store.pop()
                    self.weight.main_grad.add_(wgrad)
                    for fn in self.wgrad_accumulation_and_reduce_hooks:
                        fn()
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
        Example(
            """
            def backward(ctx, dy):
                x, h = ctx.saved_tensors
                w1, w2 = ctx.weights
                wgrad_args = [(dy, h, w2), (h, x, w1)]
                if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                    for args in wgrad_args:
                        ctx.wgrad_store.put(args, expert_wgrad)
                    return None, None, None
                for args in wgrad_args:
                    expert_wgrad(*args)
                for w in (w1, w2):
                    w.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(w1), make_dummy_wgrad(w2)


            def expert_wgrad(dy, x, weight):
                over = getattr(weight, "overwrite_main_grad", False)
                gemm(dy.T, x, out=weight.main_grad, accumulate=not over)
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
        Example(
            """
            class ExpertParallelWgrad:
                def flush(self):
                    for x, dy, w in self._deferred_expert_wgrads:
                        general_gemm(x, dy, out=w.main_grad, accumulate=True)
                        w.grad_added_to_main_grad = True
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
    # A work helper of another file of the run may be called here under its own name (or
    # an alias, which its ``from`` import spells beside the name).
    announced = _announced_by_backward_dw(context)
    for unit, facts, work in delayed_work.working_functions(context):
        if id(unit.owner) in announced:
            continue
        notified = delayed_work.notifying_nodes(unit, facts)
        for call, node in work:
            if paths.exits_avoiding(unit.graph, node, notified):
                out.report(CODE, call, MESSAGE.format(name=unit.name))
                break  # one finding per function: the first work left unannounced


def _announced_by_backward_dw(context: ModuleContext) -> set[int]:
    """The ``backward_dw`` methods of classes that mark their weights
    ``skip_backward_post_hook``: autograd fires nothing for them, and GMLP011 holds their
    ``backward_dw`` to firing the hooks on every way out."""
    found: set[int] = set()
    if hooks.SKIP_POST_HOOK not in context.source:
        return found
    for unit in context.units:
        if not isinstance(unit.owner, cst.ClassDef):
            continue
        methods = [s for s in unit.body if isinstance(s, cst.FunctionDef)]
        if hooks.skips_backward_post_hook(methods):
            found.update(id(m) for m in methods if m.name.value == BACKWARD_DW)
    return found
