"""Class 5 (issue #19), the path that skips the hook: code that fires a parameter's stored
grad-ready hook by hand on one path that completes weights' gradients, and not on another
(GMLP042): a sibling branch over the same weights, a sibling method that adds into main_grad
and sets the flag, a firing gated on `grad_added_to_main_grad`.

Written for this corpus after reading the three held-out fixes of the split that showed the
class (TE #2960, Megatron-LM #4637 and #4967's GTP finalize), in other syntax than theirs:
`for` loops and `elif` chains instead of comprehensions, module functions instead of
methods, `torch._foreach_add_`, a caller that returns early after the finalize it calls, a
container of hooks, `getattr(..., False) is True`. Same format as variant_corpus.py; the
variants marked ``unseen`` are the limits the rule's page states.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------- branch: an elif over the same experts
    Variant(
        5,
        "elif-branch-hands-expert-grads-back-without-the-stored-hook",
        """
        class ExpertShard(torch.nn.Parameter):
            def finish_expert_grads(self, grads, mode):
                if mode == "fused":
                    for w, g in zip(self.expert_weights, grads):
                        w.main_grad.add_(g)
                        w.grad_added_to_main_grad = True
                        w.grad = None
                        w._grad_accum_hook()
                elif mode == "plain":
                    for w, g in zip(self.expert_weights, grads):  # bug
                        w.grad = g
                else:
                    raise ValueError(mode)
        """,
        """
        class ExpertShard(torch.nn.Parameter):
            def finish_expert_grads(self, grads, mode):
                if mode == "fused":
                    for w, g in zip(self.expert_weights, grads):
                        w.main_grad.add_(g)
                        w.grad_added_to_main_grad = True
                        w.grad = None
                        w._grad_accum_hook()
                elif mode == "plain":
                    for w, g in zip(self.expert_weights, grads):
                        w.grad = g
                        w._grad_accum_hook()
                else:
                    raise ValueError(mode)
        """,
    ),
    # ------------------------------------------- branch: module functions, a getattr'd hook
    Variant(
        5,
        "unfused-branch-of-a-module-function-skips-the-helper-that-fires",
        """
        def _finish_one(param, wgrad):
            param.main_grad.add_(wgrad)
            param.grad_added_to_main_grad = True
            hook = getattr(param, "_grad_accum_hook", None)
            if hook is not None:
                hook()


        def finish_sharded_wgrads(weights, shards, fused):
            out = []
            if fused:
                for p, g in zip(weights, shards):
                    _finish_one(p, g)
                    out.append(None)
            else:
                for p, g in zip(weights, shards):  # bug
                    out.append(g[: p.numel()])
            return out
        """,
        """
        def _finish_one(param, wgrad):
            param.main_grad.add_(wgrad)
            param.grad_added_to_main_grad = True
            hook = getattr(param, "_grad_accum_hook", None)
            if hook is not None:
                hook()


        def finish_sharded_wgrads(weights, shards, fused):
            out = []
            if fused:
                for p, g in zip(weights, shards):
                    _finish_one(p, g)
                    out.append(None)
            else:
                for p, g in zip(weights, shards):
                    p.grad = g[: p.numel()]
                    p._grad_accum_hook()
                    out.append(p.grad)
            return out
        """,
    ),
    # ------------------------------------------- branch: the firing two helpers deep
    Variant(
        5,
        "skip-path-hands-member-grads-back-where-the-fused-path-notifies-two-calls-deep",
        """
        class MemberShard(torch.nn.Parameter):
            def _notify(self, w):
                w.grad = None
                w._grad_accum_hook()

            def _accumulate_and_notify(self, w, g):
                w.main_grad.add_(g)
                w.grad_added_to_main_grad = True
                self._notify(w)

            def finish(self, grads, fused):
                if not fused:
                    return tuple(g.contiguous() for w, g in zip(self.members, grads))  # bug
                for w, g in zip(self.members, grads):
                    self._accumulate_and_notify(w, g)
                return (None,) * len(grads)
        """,
        """
        class MemberShard(torch.nn.Parameter):
            def _notify(self, w):
                w.grad = None
                w._grad_accum_hook()

            def _accumulate_and_notify(self, w, g):
                w.main_grad.add_(g)
                w.grad_added_to_main_grad = True
                self._notify(w)

            def finish(self, grads, fused):
                if fused:
                    for w, g in zip(self.members, grads):
                        self._accumulate_and_notify(w, g)
                    return (None,) * len(grads)
                for w, g in zip(self.members, grads):
                    w.grad = g.contiguous()
                    self._notify(w)
                return tuple(w.grad for w in self.members)
        """,
    ),
    # ------------------------------------------- method: a drain with torch._foreach_add_
    Variant(
        5,
        "async-drain-foreach-adds-and-marks-but-fires-nothing",
        """
        class GroupedShard(torch.nn.Parameter):
            def register_grad_accum_hook(self, node, hook):
                self._grad_accum_hook = hook

            def _mark_ready(self, w):
                if hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
                if w._grad_accum_hook is not None:
                    w._grad_accum_hook()

            def reduce_now(self, wgrads):
                torch._foreach_add_([w.main_grad for w in self.members], wgrads)
                for w in self.members:
                    self._mark_ready(w)

            def drain_async(self):
                self._handle.wait()
                torch._foreach_add_([w.main_grad for w in self.members], self._pending)  # bug
                for w in self.members:
                    w.grad_added_to_main_grad = True
                self._handle = None
        """,
        """
        class GroupedShard(torch.nn.Parameter):
            def register_grad_accum_hook(self, node, hook):
                self._grad_accum_hook = hook

            def _mark_ready(self, w):
                if hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
                if w._grad_accum_hook is not None:
                    w._grad_accum_hook()

            def reduce_now(self, wgrads):
                torch._foreach_add_([w.main_grad for w in self.members], wgrads)
                for w in self.members:
                    self._mark_ready(w)

            def drain_async(self):
                self._handle.wait()
                torch._foreach_add_([w.main_grad for w in self.members], self._pending)
                for w in self.members:
                    self._mark_ready(w)
                self._handle = None
        """,
    ),
    # ------------------------------------------- method: its caller returns before firing
    Variant(
        5,
        "deferred-finalize-whose-caller-returns-early-without-firing",
        """
        class ChainShard(torch.nn.Parameter):
            def _fire(self, w):
                if hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
                w._grad_accum_hook()

            def reduce_scatter_wgrad(self, wgrad):
                self.main_grad.add_(self._rs(wgrad))
                self._fire(self)
                if self.next_w is not None:
                    self.next_w._finish_deferred()
                    if self.next_w.already_done:
                        return None
                    self._fire(self.next_w)
                return None

            def _finish_deferred(self):
                self._work.wait()
                self.main_grad.add_(self._rs_out)  # bug
                self.grad_added_to_main_grad = True
                self.already_done = True
        """,
        """
        class ChainShard(torch.nn.Parameter):
            def _fire(self, w):
                if hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
                w._grad_accum_hook()

            def reduce_scatter_wgrad(self, wgrad):
                self.main_grad.add_(self._rs(wgrad))
                self._fire(self)
                if self.next_w is not None:
                    self.next_w._finish_deferred()
                    self._fire(self.next_w)
                return None

            def _finish_deferred(self):
                self._work.wait()
                self.main_grad.add_(self._rs_out)
                self.grad_added_to_main_grad = True
                self.already_done = True
        """,
    ),
    # ------------------------------------------- flag: `is True`, a container of hooks
    Variant(
        5,
        "container-hook-fired-only-when-the-flag-is-true",
        """
        def fire_after_replay(runner):
            for p in runner.params:
                p.grad = None
                if getattr(p, "grad_added_to_main_grad", False) is True:  # bug
                    runner._grad_accum_hooks[p]()
        """,
        """
        def fire_after_replay(runner):
            for p in runner.params:
                p.grad = None
                runner._grad_accum_hooks[p]()
        """,
    ),
    # ------------------------------------------- flag: Megatron-FSDP's hook name, and-chain
    Variant(
        5,
        "post-wgrad-hook-gated-on-the-flag-in-an-and-chain",
        """
        class Replayer:
            def after_backward_replay(self):
                self.graph.replay()
                for w in self.captured_weights:
                    w.grad = None
                    if hasattr(w, "post_wgrad_grad_acc_hook") and w.grad_added_to_main_grad:  # bug
                        w.post_wgrad_grad_acc_hook()
        """,
        """
        class Replayer:
            def after_backward_replay(self):
                self.graph.replay()
                for w in self.captured_weights:
                    w.grad = None
                    if hasattr(w, "post_wgrad_grad_acc_hook"):
                        w.post_wgrad_grad_acc_hook()
        """,
    ),
    # ------------------------------------------- limits stated on GMLP042's page
    Variant(
        5,
        "single-weight-fallthrough-returns-its-wgrad-without-the-hook",
        """
        class Shard(torch.nn.Parameter):
            def finish(self, wgrad, fuse):
                if fuse:
                    self.main_grad.add_(wgrad)
                    self.grad_added_to_main_grad = True
                    self._grad_accum_hook()
                    return None
                return wgrad  # bug
        """,
        """
        class Shard(torch.nn.Parameter):
            def finish(self, wgrad, fuse):
                if fuse:
                    self.main_grad.add_(wgrad)
                    self.grad_added_to_main_grad = True
                    self._grad_accum_hook()
                    return None
                self.grad = wgrad
                self._grad_accum_hook()
                return wgrad
        """,
        unseen="a single weight completed without a loop: no sequence to match the sibling by",
    ),
    Variant(
        5,
        "flag-read-into-a-local-gates-the-hook",
        """
        def fire_ready(weights):
            for w in weights:
                w.grad = None
                ready = w.grad_added_to_main_grad
                if ready:  # bug
                    w._grad_accum_hook()
        """,
        """
        def fire_ready(weights):
            for w in weights:
                w.grad = None
                w._grad_accum_hook()
        """,
        unseen="the flag reaches the test through a local",
    ),
)
