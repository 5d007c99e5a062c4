"""Class variants on per-expert lists, for issue #19's classes 1 (the bookkeeping on a
quantized copy), 2 (weights rebound; main_grad itself handed on as a gradient), 3 (a write
into main_grad with no flag and the real gradient handed on), 4 (main_grads replaced by a
list kernel without asking) and 5 (hooks fired with no bookkeeping, the books kept in
another loop over the same experts):
a grouped MLP keeps one weight, one main_grad and one gradient per expert, in lists built by
comprehensions and walked with ``zip`` / ``enumerate``, and its ``backward`` returns them
starred. Written from the classes' descriptions and the shape of Transformer Engine's
GroupedLinear (per-expert ``wgrad_list``, ``return (..., *wgrad_list, ...)``), not from any
fix. Same format as variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------ 1: each expert's copy, not its weight
    Variant(
        1,
        "flags-set-on-each-experts-quantized-copy",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            weights_fp8 = [quantize(w) for w in ctx.weights]
            for i, wq in enumerate(weights_fp8):
                general_gemm(x[i], dy[i], out=ctx.weights[i].main_grad, accumulate=True)
                wq.grad_added_to_main_grad = True  # bug
            return (None, *[None for _ in ctx.weights])
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            weights_fp8 = [quantize(w) for w in ctx.weights]
            for i, (w, wq) in enumerate(zip(ctx.weights, weights_fp8)):
                general_gemm(x[i], dy[i], out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
            return (None, *[None for _ in ctx.weights])
        """,
    ),
    # ------------------------------------------------ 2: each expert's weight rebound
    Variant(
        2,
        "every-experts-weight-rebound-to-a-fresh-parameter",
        """
        def backward(ctx, dy, weights):
            x = ctx.saved_tensors[0]
            weights = [torch.nn.Parameter(w.detach()) for w in weights]  # bug
            for i, w in enumerate(weights):
                general_gemm(x[i], dy[i], out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
            return None, None
        """,
        """
        def backward(ctx, dy, weights):
            x = ctx.saved_tensors[0]
            detached = [w.detach() for w in weights]
            for i, w in enumerate(weights):
                general_gemm(x[i], dy[i], out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
            return None, None
        """,
    ),
    # ------------------------------------------------ 2: main_grads returned, starred
    Variant(
        2,
        "main-grads-of-every-expert-returned-starred",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrad_list = [w.main_grad for w in ctx.weights]
            grouped_gemm(x, dy, out=wgrad_list, accumulate=True)
            return (None, *wgrad_list)  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrad_list = [w.main_grad for w in ctx.weights]
            grouped_gemm(x, dy, out=wgrad_list, accumulate=True)
            for w in ctx.weights:
                w.grad_added_to_main_grad = True
            wgrad_list = [
                get_dummy_wgrad(w, zero=getattr(w, "zero_out_wgrad", False)) for w in ctx.weights
            ]
            return (None, *wgrad_list)
        """,
    ),
    Variant(
        2,
        "main-grads-listed-by-hand-returned-whole",
        """
        def backward(ctx, dy):
            x, h = ctx.saved_tensors
            outs = [ctx.fc1.main_grad, ctx.fc2.main_grad]
            fused_wgrads(x, h, dy, out=outs)
            return None, None, *outs  # bug
        """,
        """
        def backward(ctx, dy):
            x, h = ctx.saved_tensors
            outs = [ctx.fc1.main_grad, ctx.fc2.main_grad]
            fused_wgrads(x, h, dy, out=outs)
            ctx.fc1.grad_added_to_main_grad = True
            ctx.fc2.grad_added_to_main_grad = True
            return None, None, None, None
        """,
    ),
    Variant(
        2,
        "main-grads-through-list-of-a-generator",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            dests = list(getattr(w, "main_grad") for w in ctx.weights)
            for i, d in enumerate(dests):
                general_gemm(x[i], dy[i], out=d, accumulate=True)
            return (None, *dests)  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            dests = list(getattr(w, "main_grad") for w in ctx.weights)
            for i, d in enumerate(dests):
                general_gemm(x[i], dy[i], out=d, accumulate=True)
            return (None, *[None for _ in dests])
        """,
    ),
    # ------------------------------------------------ 3: written by element, handed on whole
    Variant(
        3,
        "expert-grads-added-by-index-and-returned-starred",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy[i].t() @ x[i] for i in range(ctx.num_experts)]
            for i in range(ctx.num_experts):
                ctx.weights[i].main_grad.add_(wgrads[i])
            return (None, *wgrads)  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy[i].t() @ x[i] for i in range(ctx.num_experts)]
            for i in range(ctx.num_experts):
                ctx.weights[i].main_grad.add_(wgrads[i])
                ctx.weights[i].grad_added_to_main_grad = True
            return (None, *[None] * ctx.num_experts)
        """,
    ),
    Variant(
        3,
        "expert-grads-added-through-enumerate-of-zip-returned-as-tuple",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy[i].t() @ x[i] for i in range(len(ctx.weights))]
            for i, (w, g) in enumerate(zip(ctx.weights, wgrads)):
                w.main_grad.add_(g)
            return (None, *tuple(wgrads))  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy[i].t() @ x[i] for i in range(len(ctx.weights))]
            for i, (w, g) in enumerate(zip(ctx.weights, wgrads)):
                w.main_grad.add_(g)
            zero = [getattr(w, "zero_out_wgrad", False) for w in ctx.weights]
            wgrads = [get_dummy_wgrad(w, zero=z) for w, z in zip(ctx.weights, zero)]
            return (None, *tuple(wgrads))
        """,
    ),
    # ------------------------------------------------ 5: books in one loop, hooks in another
    Variant(
        5,
        "experts-written-in-a-zip-loop-hooks-fired-in-another-unmarked",
        """
        class GroupedExperts(torch.nn.Module):
            def backward_dw(self):
                if not self.delay_wgrad_compute:
                    return
                (wgrads, _), _ = self.wgrad_store.pop()
                for w, g in zip(self.expert_weights, wgrads):
                    w.main_grad.add_(g)
                for w in self.expert_weights:
                    if w.grad_accum_hook is not None:
                        w.grad_accum_hook()  # bug
        """,
        """
        class GroupedExperts(torch.nn.Module):
            def backward_dw(self):
                if not self.delay_wgrad_compute:
                    return
                (wgrads, _), _ = self.wgrad_store.pop()
                for w, g in zip(self.expert_weights, wgrads):
                    w.main_grad.add_(g)
                    w.grad_added_to_main_grad = True
                for w in self.expert_weights:
                    if w.grad_accum_hook is not None:
                        w.grad_accum_hook()
        """,
    ),
    # ------------------------------------------------ 3 and 4: torch's list kernels
    Variant(
        3,
        "expert-grads-added-by-a-foreach-kernel-and-returned-starred",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy[i].t() @ x[i] for i in range(len(ctx.weights))]
            torch._foreach_add_([w.main_grad for w in ctx.weights], wgrads)
            return (None, *wgrads)  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = [dy[i].t() @ x[i] for i in range(len(ctx.weights))]
            torch._foreach_add_([w.main_grad for w in ctx.weights], wgrads)
            for w in ctx.weights:
                w.grad_added_to_main_grad = True
            return (None, *[None for _ in wgrads])
        """,
    ),
    Variant(
        4,
        "expert-main-grads-replaced-by-a-foreach-copy-without-asking",
        """
        def finish_expert_wgrads(weights, wgrads):
            main_grads = [w.main_grad for w in weights]
            torch._foreach_copy_(main_grads, wgrads)  # bug
            for w in weights:
                w.grad_added_to_main_grad = True
        """,
        """
        def finish_expert_wgrads(weights, wgrads):
            main_grads = [w.main_grad for w in weights]
            if getattr(weights[0], "overwrite_main_grad", False):
                torch._foreach_copy_(main_grads, wgrads)
            else:
                torch._foreach_add_(main_grads, wgrads)
            for w in weights:
                w.grad_added_to_main_grad = True
        """,
    ),
    # ------------------------------------------------ 2 and 3: lists filled by append
    Variant(
        2,
        "main-grads-appended-per-expert-and-returned-starred",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrad_list = []
            for w in ctx.weights:
                wgrad_list.append(w.main_grad)
            grouped_gemm(x, dy, out=wgrad_list, accumulate=True)
            return (None, *wgrad_list)  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrad_list = []
            for w in ctx.weights:
                wgrad_list.append(w.main_grad if ctx.fuse else torch.empty_like(w))
            grouped_gemm(x, dy, out=wgrad_list, accumulate=True)
            for w in ctx.weights:
                w.grad_added_to_main_grad = ctx.fuse
            return (None, *[None if ctx.fuse else g for g in wgrad_list])
        """,
    ),
    Variant(
        3,
        "expert-grad-added-then-appended-and-returned-starred",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = []
            for i, w in enumerate(ctx.weights):
                g = dy[i].t() @ x[i]
                w.main_grad.add_(g)
                wgrads.append(g)
            return (None, *wgrads)  # bug
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            wgrads = []
            for i, w in enumerate(ctx.weights):
                g = dy[i].t() @ x[i]
                if ctx.fuse:
                    w.main_grad.add_(g)
                    w.grad_added_to_main_grad = True
                    wgrads.append(None)
                else:
                    wgrads.append(g)
            return (None, *wgrads)
        """,
    ),
    # ------------------------------------------------ 1 and 2: copies and fresh objects appended
    Variant(
        1,
        "quantized-copies-appended-per-expert-then-marked",
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            weights_fp8 = []
            for w in ctx.weights:
                weights_fp8.append(quantize(w))
            for i, wq in enumerate(weights_fp8):
                general_gemm(x[i], dy[i], out=ctx.weights[i].main_grad, accumulate=True)
                wq.grad_added_to_main_grad = True  # bug
            return (None, *[None for _ in ctx.weights])
        """,
        """
        def backward(ctx, dy):
            x = ctx.saved_tensors[0]
            weights_fp8 = []
            for w in ctx.weights:
                weights_fp8.append(quantize(w))
            for i, w in enumerate(ctx.weights):
                general_gemm(x[i], dy[i], out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
            return (None, *[None for _ in ctx.weights])
        """,
    ),
    Variant(
        2,
        "fresh-parameters-appended-per-expert-then-read",
        """
        def backward(ctx, dy, weights):
            x = ctx.saved_tensors[0]
            fresh = []  # bug
            for w in weights:
                fresh.append(torch.nn.Parameter(w.detach()))
            for i, w in enumerate(fresh):
                general_gemm(x[i], dy[i], out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
            return None, None
        """,
        """
        def backward(ctx, dy, weights):
            x = ctx.saved_tensors[0]
            detached = []
            for w in weights:
                detached.append(w.detach())
            for i, w in enumerate(weights):
                general_gemm(x[i], dy[i], out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
            return None, None
        """,
    ),
)
