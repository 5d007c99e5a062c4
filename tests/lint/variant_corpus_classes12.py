"""Class variants for issue #19's class 1 (which object): the weight gradient put on `.grad`
of a tensor standing in for the Parameter (an FP8-quantized copy, an all-gathered weight,
the copy a `ctx` attribute or a saved-tensor position holds, the list a module helper
builds from quantized members), written from the class's description and from how
Transformer Engine's delayed `backward_dw` hands `.grad` over, not from any fix. Each
buggy version adds into `.grad` correctly (so only the object is wrong); each twin makes
the same write on the Parameter.

Class 2 (a parameter rebound): the weight name rebound through a method chain one link of
which makes a new object, a copy or a view (``w.t().contiguous().t()`` to make an operand
SoC-friendly, ``w.view(...)`` to flatten experts, ``w.transpose(0, 1).reshape(...)``), and
main_grad or a flag then taken from the new object; each twin keeps the Parameter under its
own name. Same format as variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------ 1: a module helper returns quantized members
    Variant(
        1,
        "grad-accumulated-on-helper-quantized-members",
        """
        class Experts(torch.nn.Module):
            def _weights(self):
                return [quantize(w) for w in self.expert_weights]

            def backward_dw(self):
                wgrads = self.store.pop()
                if self.fuse_wgrad_accumulation:
                    for w, g in zip(self.expert_weights, wgrads):
                        w.main_grad.add_(g)
                    return
                members = self._weights()
                for i, g in enumerate(wgrads):
                    if members[i].grad is None:
                        members[i].grad = g  # bug
                    else:
                        members[i].grad.add_(g)
        """,
        """
        class Experts(torch.nn.Module):
            def _weights(self):
                return [quantize(w) for w in self.expert_weights]

            def backward_dw(self):
                wgrads = self.store.pop()
                if self.fuse_wgrad_accumulation:
                    for w, g in zip(self.expert_weights, wgrads):
                        w.main_grad.add_(g)
                    return
                params = self.expert_weights
                for i, g in enumerate(wgrads):
                    if params[i].grad is None:
                        params[i].grad = g
                    else:
                        params[i].grad.add_(g)
        """,
    ),
    # ------------------------------------ 1: the all-gathered weight given the gradient
    Variant(
        1,
        "grad-set-on-gathered-weight",
        """
        def finish_wgrad(weight, inp, dy, tp_group):
            full_weight = gather_along_first_dim(weight, tp_group)
            wgrad = dy.t() @ inp
            if hasattr(weight, "main_grad"):
                weight.main_grad.add_(wgrad)
            elif full_weight.grad is None:
                full_weight.grad = wgrad  # bug
            else:
                full_weight.grad.add_(wgrad)
        """,
        """
        def finish_wgrad(weight, inp, dy, tp_group):
            full_weight = gather_along_first_dim(weight, tp_group)
            wgrad = dy.t() @ inp
            if hasattr(weight, "main_grad"):
                weight.main_grad.add_(wgrad)
            elif weight.grad is None:
                weight.grad = wgrad
            else:
                weight.grad.add_(wgrad)
        """,
    ),
    # ------------------------------------ 1: the quantized copy forward kept on ctx
    Variant(
        1,
        "grad-set-on-ctx-quantized-copy",
        """
        class _Fp8Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.weight = cast_to_fp8(weight)
                ctx.fuse = hasattr(weight, "main_grad")
                ctx.save_for_backward(x)
                return x @ ctx.weight.t()

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                w = ctx.weight
                wgrad = dy.t() @ x
                w.grad = wgrad if w.grad is None else w.grad + wgrad  # bug
                return dy @ w, None
        """,
        """
        class _Fp8Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.weight_fp8 = cast_to_fp8(weight)
                ctx.fuse = hasattr(weight, "main_grad")
                ctx.save_for_backward(x)
                return x @ ctx.weight_fp8.t()

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                w = ctx.weight_fp8
                wgrad = dy.t() @ x
                return dy @ w, wgrad
        """,
    ),
    # ------------------------------------ 1: the saved-tensor position of a copy
    Variant(
        1,
        "grad-added-on-saved-quantized-position",
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, quantize(weight))
                ctx.fuse = hasattr(weight, "main_grad")
                return x

            @staticmethod
            def backward(ctx, dy):
                x, wq = ctx.saved_tensors
                wgrad = dy.t() @ x
                if wq.grad is None:
                    wq.grad = wgrad  # bug
                else:
                    wq.grad += wgrad
                return dy, None
        """,
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, quantize(weight))
                ctx.fuse = hasattr(weight, "main_grad")
                return x

            @staticmethod
            def backward(ctx, dy):
                x, wq = ctx.saved_tensors
                wgrad = dy.t() @ x
                return dy, wgrad
        """,
    ),
    # ------------------------------------ 2: rebound through a transpose round trip
    Variant(
        2,
        "weight-rebound-by-transpose-round-trip",
        """
        def aligned_matmul_add(x, weight, dy, mn_aligned):
            if not mn_aligned:
                weight = weight.t().contiguous().t()  # bug
            out = x @ weight
            weight.main_grad.add_(dy.t() @ x)
            return out
        """,
        """
        def aligned_matmul_add(x, weight, dy, mn_aligned):
            operand = weight
            if not mn_aligned:
                operand = weight.t().contiguous().t()
            out = x @ operand
            weight.main_grad.add_(dy.t() @ x)
            return out
        """,
    ),
    # ------------------------------------ 2: rebound to a flattened view
    Variant(
        2,
        "expert-weight-rebound-to-view-then-flag",
        """
        def expert_wgrad(expert_weight, x, dy, num_experts):
            expert_weight = expert_weight.view(num_experts, -1)  # bug
            expert_weight.main_grad.add_(dy.t() @ x)
            expert_weight.grad_added_to_main_grad = True
        """,
        """
        def expert_wgrad(expert_weight, x, dy, num_experts):
            flat = expert_weight.view(num_experts, -1)
            expert_weight.main_grad.add_(dy.t() @ x)
            expert_weight.grad_added_to_main_grad = True
            return flat
        """,
    ),
    # ------------------------------------ 2: rebound by transpose then reshape, flag asked
    Variant(
        2,
        "weight-rebound-transpose-reshape-then-getattr-flag",
        """
        def finish(w, wgrad, rows):
            w = w.transpose(0, 1).reshape(rows, -1)  # bug
            if getattr(w, "grad_added_to_main_grad", False):
                return None
            return wgrad
        """,
        """
        def finish(w, wgrad, rows):
            w_t = w.transpose(0, 1).reshape(rows, -1)
            if getattr(w, "grad_added_to_main_grad", False):
                return None
            return wgrad if w_t is not None else None
        """,
    ),
)
