"""Issue #19, class 5 (delayed wgrad work and the hooks that announce it) across files: each
case is a small tree of files linted together as one run, a buggy version (``# expect:
CODE`` marks each line that must be reported) and its correct twin (no finding at all).

Written from how Transformer Engine and Megatron-LM split the work, not copied: TE's
``backward_dw`` pops ``wgrad_store`` and fires ``_trigger_wgrad_accumulation_and_reduce_hooks``;
Megatron-LM's graph runner replays ``bwd_dw_graphs`` and fires ``_grad_accum_hook`` /
``wgrad_accumulation_and_reduce_hooks``. Here the work or the firing sits in a top-level
helper of another module of the run (GMLP019 follows it by the name it is imported under):

* (e) a helper of another file runs the delayed work (pops the store, replays the wgrad
  graph, drains deferred wgrads into main_grad) and its caller must fire the hooks;
* (f) a helper of another file fires the hooks after work done by its caller (GMLP019, and
  GMLP011 for a class whose weights skip the backward post-hook).

Each comes imported as ``from m import f``, ``from m import f as g``, ``import m`` /
``import a.m as m`` (``m.f()``) or ``from pkg import m`` (``m.f()``).
"""

from __future__ import annotations

from .variant_corpus_class6_xfile import XCase

# (e) helpers that run the work and fire nothing: their callers must.
POP_HELPER = """
    def flush_expert_wgrads(module):
        (wgrad, _), _ = module.wgrad_store.pop()
        module.weight.main_grad.add_(wgrad)
"""

DRAIN_HELPER = """
    def drain_deferred_wgrads(layer):
        for x, dy, w in layer._deferred_wgrads:
            general_gemm(x, dy, out=w.main_grad, accumulate=True)
        layer._deferred_wgrads.clear()
"""

REPLAY_HELPER = """
    def replay_wgrad_graph(runner, step):
        runner.bwd_dw_graphs[step].replay()
"""

# (f) helpers that fire the hooks, and look-alikes that do not.
HOOK_HELPERS = """
    def notify_wgrad_ready(module):
        for hook in module.wgrad_accumulation_and_reduce_hooks:
            hook()


    def note_wgrad_done(module):
        module.wgrad_done = True
"""

CALLBACK_HELPERS = """
    def fire_grad_ready(params, grad_ready_callbacks):
        for param in params:
            for cb in grad_ready_callbacks:
                cb(param)


    def count_wgrads(params, stats):
        stats.wgrads += len(params)
"""

CASES = (
    # ------------------------------------------------------- (e) from m import f
    XCase(
        "pop-helper-imported-by-name",
        "e",
        {
            "te/wgrad_utils.py": POP_HELPER,
            "te/experts.py": """
                from te.wgrad_utils import flush_expert_wgrads


                class GroupedExperts(BaseModule):
                    def backward_dw(self):
                        if not self.need_backward_dw():
                            return
                        flush_expert_wgrads(self)  # expect: GMLP019
            """,
        },
        {
            "te/wgrad_utils.py": POP_HELPER,
            "te/experts.py": """
                from te.wgrad_utils import flush_expert_wgrads


                class GroupedExperts(BaseModule):
                    def backward_dw(self):
                        if not self.need_backward_dw():
                            return
                        flush_expert_wgrads(self)
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
            """,
        },
    ),
    # ------------------------------------------------------- (e) from m import f as g
    XCase(
        "drain-helper-imported-under-alias",
        "e",
        {
            "mlm/wgrad_utils.py": DRAIN_HELPER,
            "mlm/finalize.py": """
                from mlm.wgrad_utils import drain_deferred_wgrads as _drain


                def finish_microbatch(layers):
                    for layer in layers:
                        _drain(layer)  # expect: GMLP019
                        layer.weight.grad_added_to_main_grad = True
            """,
        },
        {
            "mlm/wgrad_utils.py": DRAIN_HELPER,
            "mlm/finalize.py": """
                from mlm.wgrad_utils import drain_deferred_wgrads as _drain


                def finish_microbatch(layers):
                    for layer in layers:
                        _drain(layer)
                        layer.weight.grad_added_to_main_grad = True
                        for fn in layer.wgrad_accumulation_and_reduce_hooks:
                            fn()
            """,
        },
    ),
    # ------------------------------------------------------- (e) from pkg import m; m.f()
    XCase(
        "replay-helper-through-imported-module",
        "e",
        {
            "runner/wgrad_graphs.py": REPLAY_HELPER,
            "runner/graphed.py": """
                from runner import wgrad_graphs


                class GraphedLayer(MegatronModule):
                    def backward_dw(self):
                        wgrad_graphs.replay_wgrad_graph(self, self.step)  # expect: GMLP019
                        self.step += 1
            """,
        },
        {
            "runner/wgrad_graphs.py": REPLAY_HELPER,
            "runner/graphed.py": """
                from runner import wgrad_graphs


                class GraphedLayer(MegatronModule):
                    def backward_dw(self):
                        wgrad_graphs.replay_wgrad_graph(self, self.step)
                        self.step += 1
                        for param in self.parameters():
                            param.grad_added_to_main_grad = True
                            param._grad_accum_hook()
            """,
        },
    ),
    # ------------------------------------------------------- (e) import a.m as m; m.f()
    XCase(
        "pop-helper-through-module-alias-one-branch",
        "e",
        {
            "te/ops/wgrad_utils.py": POP_HELPER,
            "te/linear.py": """
                import te.ops.wgrad_utils as wu


                class Linear(BaseModule):
                    def backward_dw(self):
                        wu.flush_expert_wgrads(self)  # expect: GMLP019
                        if self.fuse_wgrad_accumulation:
                            return
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
            """,
        },
        {
            "te/ops/wgrad_utils.py": POP_HELPER,
            "te/linear.py": """
                import te.ops.wgrad_utils as wu


                class Linear(BaseModule):
                    def backward_dw(self):
                        wu.flush_expert_wgrads(self)
                        if not self.fuse_wgrad_accumulation:
                            self.weight.grad = None
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
            """,
        },
    ),
    # ------------------------------------------------------- (e) import m (whole), m.f()
    XCase(
        "drain-helper-through-plain-import",
        "e",
        {
            "wgrad_utils.py": DRAIN_HELPER,
            "experts.py": """
                import wgrad_utils


                class ExpertGroup(MegatronModule):
                    def finish_expert_wgrads(self):
                        for expert in self.experts:
                            wgrad_utils.drain_deferred_wgrads(expert)  # expect: GMLP019
                            expert.weight.grad_added_to_main_grad = True
            """,
        },
        {
            "wgrad_utils.py": DRAIN_HELPER,
            "experts.py": """
                import wgrad_utils


                class ExpertGroup(MegatronModule):
                    def finish_expert_wgrads(self):
                        for expert in self.experts:
                            wgrad_utils.drain_deferred_wgrads(expert)
                            expert.weight.grad_added_to_main_grad = True
                            expert.weight._grad_accum_hook()
            """,
        },
    ),
    # ------------------------------------------------------- (f) from m import f
    XCase(
        "hook-helper-imported-by-name",
        "f",
        {
            "te/hook_utils.py": HOOK_HELPERS,
            "te/grouped.py": """
                from te.hook_utils import note_wgrad_done, notify_wgrad_ready


                class GroupedLinear(BaseModule):
                    def backward_dw(self):
                        (wgrads, _), _ = self.wgrad_store.pop()  # expect: GMLP019
                        for weight, wgrad in zip(self.weights, wgrads):
                            weight.main_grad.add_(wgrad)
                        note_wgrad_done(self)
            """,
        },
        {
            "te/hook_utils.py": HOOK_HELPERS,
            "te/grouped.py": """
                from te.hook_utils import note_wgrad_done, notify_wgrad_ready


                class GroupedLinear(BaseModule):
                    def backward_dw(self):
                        (wgrads, _), _ = self.wgrad_store.pop()
                        for weight, wgrad in zip(self.weights, wgrads):
                            weight.main_grad.add_(wgrad)
                        notify_wgrad_ready(self)
            """,
        },
    ),
    # ------------------------------------------------------- (f) from m import f as g
    XCase(
        "callback-helper-under-alias-after-replay",
        "f",
        {
            "mlm/callbacks.py": CALLBACK_HELPERS,
            "mlm/graph_runner.py": """
                from mlm.callbacks import count_wgrads as _after
                from mlm.callbacks import fire_grad_ready as _notify


                def run_wgrad_graphs(runner, params, step):
                    params = [p for p in params if hasattr(p, "main_grad")]
                    runner.bwd_dw_graphs[step].replay()  # expect: GMLP019
                    _after(params, runner.stats)
            """,
        },
        {
            "mlm/callbacks.py": CALLBACK_HELPERS,
            "mlm/graph_runner.py": """
                from mlm.callbacks import count_wgrads as _after
                from mlm.callbacks import fire_grad_ready as _notify


                def run_wgrad_graphs(runner, params, step):
                    params = [p for p in params if hasattr(p, "main_grad")]
                    runner.bwd_dw_graphs[step].replay()
                    _notify(params, runner._grad_ready_callbacks)
            """,
        },
    ),
    # ------------------------------------------------------- (f) import m; m.f() on one path
    XCase(
        "hook-helper-through-module-on-one-path",
        "f",
        {
            "te/hook_utils.py": HOOK_HELPERS,
            "te/layernorm_mlp.py": """
                from te import hook_utils


                class LayerNormMLP(BaseModule):
                    def backward_dw(self):
                        (fc1_wgrad, fc2_wgrad), _ = self.wgrad_store.pop()  # expect: GMLP019
                        if self.fuse_wgrad_accumulation:
                            hook_utils.notify_wgrad_ready(self)
                            return
                        self.fc1_weight.main_grad.add_(fc1_wgrad)
                        self.fc2_weight.main_grad.add_(fc2_wgrad)
            """,
        },
        {
            "te/hook_utils.py": HOOK_HELPERS,
            "te/layernorm_mlp.py": """
                from te import hook_utils


                class LayerNormMLP(BaseModule):
                    def backward_dw(self):
                        (fc1_wgrad, fc2_wgrad), _ = self.wgrad_store.pop()
                        if not self.fuse_wgrad_accumulation:
                            self.fc1_weight.main_grad.add_(fc1_wgrad)
                            self.fc2_weight.main_grad.add_(fc2_wgrad)
                        hook_utils.notify_wgrad_ready(self)
            """,
        },
    ),
    # ------------------------------------------------------- (f) GMLP011: skipped post-hooks
    XCase(
        "skip-post-hook-class-fires-through-helper",
        "f",
        {
            "te/hook_utils.py": HOOK_HELPERS,
            "te/grouped_op.py": """
                from te.hook_utils import note_wgrad_done
                from te.hook_utils import notify_wgrad_ready as _notify


                class GroupedLinearOp(BasicOperation):
                    def __init__(self, weights):
                        super().__init__()
                        for w in weights:
                            w.skip_backward_post_hook = True

                    def backward_dw(self):
                        (wgrads, _), _ = self.wgrad_store.pop()
                        for w, g in zip(self.weights, wgrads):
                            w.main_grad.add_(g)
                        note_wgrad_done(self)  # expect: GMLP011
            """,
        },
        {
            "te/hook_utils.py": HOOK_HELPERS,
            "te/grouped_op.py": """
                from te.hook_utils import note_wgrad_done
                from te.hook_utils import notify_wgrad_ready as _notify


                class GroupedLinearOp(BasicOperation):
                    def __init__(self, weights):
                        super().__init__()
                        for w in weights:
                            w.skip_backward_post_hook = True

                    def backward_dw(self):
                        (wgrads, _), _ = self.wgrad_store.pop()
                        for w, g in zip(self.weights, wgrads):
                            w.main_grad.add_(g)
                        _notify(self)
            """,
        },
    ),
)
