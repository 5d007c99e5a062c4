"""Class 5's converse (issue #19): delayed weight-gradient work that fires no grad-accumulation
/ reduce hook, in shapes GMLP019 once missed because it went by the name ``backward_dw`` and
by callees that say ``hook``; and correct code in shapes it once reported.

Written for this corpus from how Transformer Engine and Megatron-LM lay the pieces out at
their heads (a module's ``wgrad_store`` popped by its ``backward_dw``, hooks kept in
``wgrad_accumulation_and_reduce_hooks`` and fired one by one, a graphed callable whose
closure replays the weight-gradient graph, Megatron's ``post_wgrad_grad_acc_hook`` and
``_grad_accum_hook`` stored on parameters, expert weights finished in a loop), not taken from
any fix. Same format as variant_corpus.py.

``VARIANTS``: a buggy snippet and its correct twin, as in the other corpus files.
``CLEAN``: correct code only, which must give no finding (the converse: what a rule that
decides by what the function does must still leave alone).
"""

from __future__ import annotations

import textwrap

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------- 5: the work under another function name
    Variant(
        5,
        "wgrad-store-popped-by-a-finalizer-not-named-backward-dw",
        """
        class ExpertLinear(BaseModule):
            def finish_weight_grads(self):
                if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
                    return
                (wgrad, _), _ = self.wgrad_store.pop()  # bug
                if not self.fuse_wgrad_accumulation:
                    self.weight.main_grad.add_(wgrad)
        """,
        """
        class ExpertLinear(BaseModule):
            def finish_weight_grads(self):
                if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
                    return
                (wgrad, _), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    self.weight.main_grad.add_(wgrad)
                for fn in self.wgrad_accumulation_and_reduce_hooks:
                    fn()
        """,
    ),
    # ------------------------------------------- 5: the work done by a helper method
    Variant(
        5,
        "backward-dw-pops-through-a-helper-and-returns-early",
        """
        class GroupedExperts(BaseModule):
            def _take_delayed_wgrads(self):
                _, tensors = self.wgrad_store.pop()
                return tensors

            def backward_dw(self):
                if not self.need_backward_dw():
                    return
                tensors = self._take_delayed_wgrads()  # bug
                if self.fuse_wgrad_accumulation:
                    return
                for i, w in enumerate(self.expert_weights):
                    w.main_grad.add_(tensors[i])
                self._notify_grad_ready()

            def _notify_grad_ready(self):
                for hook in self.wgrad_accumulation_and_reduce_hooks:
                    hook()
        """,
        """
        class GroupedExperts(BaseModule):
            def _take_delayed_wgrads(self):
                _, tensors = self.wgrad_store.pop()
                return tensors

            def backward_dw(self):
                if not self.need_backward_dw():
                    return
                tensors = self._take_delayed_wgrads()
                if not self.fuse_wgrad_accumulation:
                    for i, w in enumerate(self.expert_weights):
                        w.main_grad.add_(tensors[i])
                self._notify_grad_ready()

            def _notify_grad_ready(self):
                for hook in self.wgrad_accumulation_and_reduce_hooks:
                    hook()
        """,
    ),
    # ------------------------------------------- 5: a CUDA-graph replay of the wgrad graph
    Variant(
        5,
        "graphed-wgrad-replay-in-a-closure-named-otherwise",
        """
        def attach_wgrad_step(graphed, bwd_dw_graphs, te_modules, idx):
            def wgrad_step():
                if any(m.need_backward_dw() for m in te_modules):
                    bwd_dw_graphs[idx].replay()  # bug

            graphed.wgrad_step = wgrad_step
        """,
        """
        def attach_wgrad_step(graphed, bwd_dw_graphs, te_modules, idx):
            def wgrad_step():
                if any(m.need_backward_dw() for m in te_modules):
                    bwd_dw_graphs[idx].replay()
                    for m in te_modules:
                        m._trigger_wgrad_accumulation_and_reduce_hooks()

            graphed.wgrad_step = wgrad_step
        """,
    ),
    # ------------------------------------------- 5: expert-parallel wgrads drained in a loop
    Variant(
        5,
        "expert-parallel-deferred-wgrads-drained-into-main-grad",
        """
        class ExpertParallelWgrad:
            def flush(self):
                for x, dy, w in self._deferred_expert_wgrads:  # bug
                    general_gemm(x, dy, out=w.main_grad, accumulate=True)
                    w.grad_added_to_main_grad = True
                self._deferred_expert_wgrads.clear()
        """,
        """
        class ExpertParallelWgrad:
            def flush(self):
                for x, dy, w in self._deferred_expert_wgrads:
                    general_gemm(x, dy, out=w.main_grad, accumulate=True)
                    w.grad_added_to_main_grad = True
                    ready = getattr(w, "post_wgrad_grad_acc_hook", None)
                    if ready is not None:
                        ready()
                self._deferred_expert_wgrads.clear()
        """,
    ),
)


CLEAN = (
    (
        # hooks fired one by one under a local name of their own
        "hooks-fired-through-a-loop-local",
        """
        class Linear(BaseModule):
            def backward_dw(self):
                if not self.need_backward_dw():
                    return
                (wgrad, _), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    self.weight.main_grad.add_(wgrad)
                for fn in self.wgrad_accumulation_and_reduce_hooks:
                    fn()
        """,
    ),
    (
        # the hooks fired by a helper method whose name says nothing of hooks
        "hooks-fired-by-a-helper-method",
        """
        class Linear(BaseModule):
            def backward_dw(self):
                if not self.need_backward_dw():
                    return
                (wgrad, _), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    self.weight.main_grad.add_(wgrad)
                self._announce_weights()

            def _announce_weights(self):
                for p in self.parameters():
                    p.grad_added_to_main_grad = True
                    ready = getattr(p, "_grad_accum_hook", None)
                    if ready is not None:
                        ready()
        """,
    ),
    (
        # a callable the file registers as the hook, then calls after the work
        "registered-callable-called-after-the-work",
        """
        class Linear(BaseModule):
            def __init__(self):
                super().__init__()
                self.register_wgrad_accumulation_and_reduce_hooks(self._start_param_reduce)

            def backward_dw(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                self.weight.main_grad.add_(wgrad)
                self.weight.grad_added_to_main_grad = True
                self._start_param_reduce()
        """,
    ),
    (
        # the hook read off the parameter into a local, Megatron's stored-hook shape
        "stored-hook-bound-to-a-local",
        """
        class ExpertLinear(BaseModule):
            def backward_dw(self):
                _, tensors = self.wgrad_store.pop()
                for p, wgrad in zip(self.expert_params, tensors):
                    p.main_grad.add_(wgrad)
                    p.grad_added_to_main_grad = True
                    done = p.post_wgrad_grad_acc_hook
                    done()
        """,
    ),
    (
        # a helper that pops the store; its caller fires the hooks after it returns
        "helper-pops-caller-fires",
        """
        class Linear(BaseModule):
            def _run_delayed_wgrad(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                self.weight.main_grad.add_(wgrad)

            def backward_dw(self):
                if not self.need_backward_dw():
                    return
                self._run_delayed_wgrad()
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    (
        # a queue of other deferred work, and a forward graph replayed outside backward_dw
        "other-queues-and-graphs",
        """
        class Server:
            def drain(self):
                while self._deferred_kv_handoffs:
                    handoff = self._deferred_kv_handoffs.popleft()
                    handoff.send()

            def replay_forward(self, main_grad_ready):
                self.fwd_graph.replay()
                return main_grad_ready
        """,
    ),
    (
        # a pipeline schedule queueing each chunk's backward_dw callable (the protocol: each
        # one announces its own weights) and running them later; it holds no wgrad itself.
        # The shape of HYGON-AI/Megatron-LM-das's dualpipev schedules, judged at its head.
        "queue-of-backward-dw-callables",
        """
        def cooldown(schedule, helper, main_grad_sync):
            chunk_backward_dw_funcs = []
            for step in schedule:
                _, grad, chunk_backward_dw_func = helper(step, wgrad_later=True)
                chunk_backward_dw_funcs.append((chunk_backward_dw_func, False))
                chunk_backward_dw_func, is_last = chunk_backward_dw_funcs.pop(0)
                if chunk_backward_dw_func is not None:
                    chunk_backward_dw_func()
            main_grad_sync()
        """,
    ),
)


def clean_source(snippet: str) -> str:
    return textwrap.dedent(snippet).lstrip("\n")
