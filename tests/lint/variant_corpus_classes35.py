"""Class variants for issue #19's classes 3 (flags without writes, and writes without a flag
with a real ``.grad`` handed on) and 5 (hooks fired without bookkeeping), written from the
classes' descriptions, not from any fix: the flag set through ``setattr`` or a helper, a loop
that marks every parameter after writing only some, writes done by kernels that take the
buffer as an argument (``kernel(..., out=p.main_grad)``, ``fused_op(p.main_grad, ...)``), the
real gradient handed on through a tuple built earlier or a comprehension, and hooks fired
under other names (a callback list, ``param._hook_fn()``, post-accumulate hooks after a
CUDA-graph replay). Same format as variant_corpus.py. The hook variants skip parameters
without a main_grad, as a DDP path does: a file that never names main_grad (or another
trigger) is not analysed at all (``triggers.TRIGGERS``).
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------ 3: the flag set through setattr
    Variant(
        3,
        "flag-set-by-setattr-on-the-unfused-path",
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            if ctx.fuse_wgrad_accumulation:
                wgrad_gemm(x, dy, out=weight.main_grad, accumulate=True)
                wgrad = None
            else:
                wgrad = dy.t() @ x
            setattr(weight, "grad_added_to_main_grad", True)  # bug
            return dx, wgrad
        """,
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            if ctx.fuse_wgrad_accumulation:
                wgrad_gemm(x, dy, out=weight.main_grad, accumulate=True)
                setattr(weight, "grad_added_to_main_grad", True)
                wgrad = None
            else:
                wgrad = dy.t() @ x
            return dx, wgrad
        """,
    ),
    # ------------------------------------------------ 3: the flag set by a helper
    Variant(
        3,
        "flag-set-by-a-helper-without-a-write",
        """
        def _mark(p):
            p.grad_added_to_main_grad = True


        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            wgrad = dy.t() @ x
            if ctx.accumulate_into_buffer:
                _mark(weight)  # bug
            return dx, wgrad
        """,
        """
        def _mark(p):
            p.grad_added_to_main_grad = True


        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            wgrad = dy.t() @ x
            if ctx.accumulate_into_buffer:
                weight.main_grad.add_(wgrad)
                _mark(weight)
                wgrad = None
            return dx, wgrad
        """,
    ),
    # ------------------------------------------------ 3: a loop marks all, writes some
    Variant(
        3,
        "loop-marks-every-param-after-writing-some",
        """
        def accumulate_wgrads(params, wgrads, fused, unfused):
            for p, g in zip(params, wgrads):
                if p in fused:
                    p.main_grad.add_(g)
                else:
                    unfused.append((p, g))
                p.grad_added_to_main_grad = True  # bug
        """,
        """
        def accumulate_wgrads(params, wgrads, fused, unfused):
            for p, g in zip(params, wgrads):
                if p in fused:
                    p.main_grad.add_(g)
                    p.grad_added_to_main_grad = True
                else:
                    unfused.append((p, g))
        """,
    ),
    # ------------------------------------------------ 3 converse: kernel given out=, real grad
    Variant(
        3,
        "kernel-out-main-grad-and-real-grad-returned",
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            wgrad = dy.t() @ x
            fused_wgrad_kernel(x, dy, out=weight.main_grad)
            return dx, wgrad  # bug
        """,
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            fused_wgrad_kernel(x, dy, out=weight.main_grad)
            weight.grad_added_to_main_grad = True
            return dx, None
        """,
    ),
    # ------------------------------------------------ 3 converse: buffer as first argument
    Variant(
        3,
        "fused-op-given-the-buffer-grad-in-a-prebuilt-tuple",
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            wgrad = dy.t() @ x
            fused_accumulate(weight.main_grad, wgrad)
            grads = (dx, wgrad, None)
            return grads  # bug
        """,
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            dx = dy @ weight
            wgrad = dy.t() @ x
            fused_accumulate(weight.main_grad, wgrad)
            weight.grad_added_to_main_grad = True
            grads = (dx, None, None)
            return grads
        """,
    ),
    # ----------------------------------------------- 3 converse: handed on by a comprehension
    Variant(
        3,
        "grads-added-and-handed-on-by-a-comprehension",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy.t() @ x for _ in ctx.weights]
            for w, g in zip(ctx.weights, wgrads):
                w.main_grad.add_(g)
            return (None, *[g for g in wgrads])  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy.t() @ x for _ in ctx.weights]
            for w, g in zip(ctx.weights, wgrads):
                w.main_grad.add_(g)
                w.grad_added_to_main_grad = True
            return (None, *[None for _ in wgrads])
        """,
    ),
    # ------------------------------------------------ 5: a callback list after graph replay
    Variant(
        5,
        "graph-replay-fires-a-callback-list-unmarked",
        """
        def replay_backward(self):
            self.bwd_graph.replay()
            for p in self.params:
                if getattr(p, "main_grad", None) is None:
                    continue
                for cb in self._grad_ready_callbacks:
                    cb(p)  # bug
        """,
        """
        def replay_backward(self):
            self.bwd_graph.replay()
            for p in self.params:
                if getattr(p, "main_grad", None) is None:
                    continue
                p.grad_added_to_main_grad = True
                for cb in self._grad_ready_callbacks:
                    cb(p)
        """,
    ),
    # ------------------------------------------------ 5: a hook under another name
    Variant(
        5,
        "expert-param-hook-fn-called-unmarked",
        """
        def finish_expert_wgrads(self):
            for p in self.expert_params:
                if getattr(p, "main_grad", None) is None:
                    continue
                if p.requires_grad:
                    p._hook_fn()  # bug
        """,
        """
        def finish_expert_wgrads(self):
            for p in self.expert_params:
                if getattr(p, "main_grad", None) is None:
                    continue
                if p.requires_grad:
                    p.grad_added_to_main_grad = True
                    p._hook_fn()
        """,
        unseen=(
            "`_hook_fn` names neither a gradient nor accumulation: a method called on a parameter"
            " is not taken as its grad hook without one (widening it risks any `p.<x>_hook()`)"
        ),
    ),
    # ------------------------------------------------ 5: post-accumulate hooks fired by hand
    Variant(
        5,
        "post-accumulate-hooks-fired-after-replay-unmarked",
        """
        def replay(self):
            self.graph.replay()
            for p in self.weights:
                if getattr(p, "main_grad", None) is None:
                    continue
                for hook in self._post_accumulate_hooks[p]:
                    hook(p)  # bug
        """,
        """
        def replay(self):
            self.graph.replay()
            for p in self.weights:
                if getattr(p, "main_grad", None) is None:
                    continue
                p.grad = self.dummy_grads[p]
                for hook in self._post_accumulate_hooks[p]:
                    hook(p)
        """,
    ),
)
