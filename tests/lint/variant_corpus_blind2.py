"""Class variants written from the second blind set's misses of classes 1 and 4
(docs/lint-history-split-fresh2.toml, H-learn2-objects): each class in several spellings
that none of those fixes uses, each with a correct twin. Same format as variant_corpus.py.

Class 1 here is main_grad carried across autograd's saved-tensor boundary (pggPL/TE#2's
three commits); class 4 is a weight gradient computed outside autograd assigned over
`.grad` (TE #3552).
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------- 1: main_grad restored from the saved tensors
    Variant(
        1,
        "saved-main-grad-restored-as-gemm-out",
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight.main_grad)
                return x @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                x, main_grad = ctx.saved_tensors
                general_gemm(x, dy, out=main_grad, accumulate=True)  # bug
                return None, None
        """,
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x)
                ctx.main_grad = weight.main_grad
                return x @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                main_grad = ctx.main_grad
                general_gemm(x, dy, out=main_grad, accumulate=True)
                return None, None
        """,
    ),
    Variant(
        1,
        "buffer-local-through-prepare-for-saving",
        """
        def forward(ctx, x, weight, fuse):
            buf = weight.main_grad if fuse else None
            tensors, ctx.objects = prepare_for_saving(x, weight, buf)
            ctx.save_for_backward(*tensors)
            return x @ weight.t()


        def backward(ctx, dy):
            x, weight, buf = restore_from_saved(ctx.objects, ctx.saved_tensors)
            buf.add_(dy.t() @ x)  # bug
            return None, None, None
        """,
        """
        import weakref


        def forward(ctx, x, weight, fuse):
            tensors, ctx.objects = prepare_for_saving(x, weight)
            ctx.save_for_backward(*tensors)
            ctx.weight_ref = weakref.ref(weight)
            return x @ weight.t()


        def backward(ctx, dy):
            x, weight = restore_from_saved(ctx.objects, ctx.saved_tensors)
            ctx.weight_ref().main_grad.add_(dy.t() @ x)
            return None, None, None
        """,
    ),
    Variant(
        1,
        "saved-tensors-indexed-into-fused-kernel",
        """
        def forward(ctx, inp, w):
            ctx.save_for_backward(inp, w, w.main_grad)
            return inp @ w.t()


        def backward(ctx, dy):
            saved = ctx.saved_tensors
            inp = saved[0]
            wgrad_buf = saved[2]
            fused_wgrad_accum_fp32(inp, dy, wgrad_buf)  # bug
            return None, None
        """,
        """
        def forward(ctx, inp, w):
            ctx.save_for_backward(inp)
            ctx.weight = w
            return inp @ w.t()


        def backward(ctx, dy):
            saved = ctx.saved_tensors
            inp = saved[0]
            fused_wgrad_accum_fp32(inp, dy, ctx.weight.main_grad)
            return None, None
        """,
    ),
    Variant(
        1,
        "offload-only-save-used-on-every-path",
        """
        def forward(ctx, x, weight, cpu_offloading):
            ctx.save_for_backward(x, weight, weight.main_grad if cpu_offloading else None)
            ctx.cpu_offloading = cpu_offloading
            return x @ weight.t()


        def backward(ctx, dy):
            x, weight, fc_main_grad = ctx.saved_tensors
            fc_main_grad.addmm_(dy.t(), x)  # bug
            return None, None, None
        """,
        """
        def forward(ctx, x, weight, cpu_offloading):
            ctx.save_for_backward(x, weight, weight.main_grad if cpu_offloading else None)
            ctx.cpu_offloading = cpu_offloading
            return x @ weight.t()


        def backward(ctx, dy):
            x, weight, fc_main_grad = ctx.saved_tensors
            if ctx.cpu_offloading:
                weight = torch.nn.Parameter(weight, weight.requires_grad)
                weight.main_grad = fc_main_grad
            weight.main_grad.addmm_(dy.t(), x)
            return None, None, None
        """,
    ),
    Variant(
        1,
        "restored-buffer-in-a-wgrad-closure",
        """
        def forward(ctx, x, weight):
            ctx.save_for_backward(x, weight, weight.main_grad)
            return x @ weight.t()


        def backward(ctx, dy):
            x, weight, main_grad = ctx.saved_tensors

            def wgrad_gemm():
                general_gemm(x, dy, out=main_grad, accumulate=True)  # bug

            if ctx.delay_wgrad_compute:
                ctx.wgrad_store.put(wgrad_gemm)
            else:
                wgrad_gemm()
            return dy @ weight, None
        """,
        """
        def forward(ctx, x, weight):
            ctx.save_for_backward(x, weight)
            ctx.main_grad_func = lambda: weight.main_grad
            return x @ weight.t()


        def backward(ctx, dy):
            x, weight = ctx.saved_tensors
            main_grad = ctx.main_grad_func()

            def wgrad_gemm():
                general_gemm(x, dy, out=main_grad, accumulate=True)

            if ctx.delay_wgrad_compute:
                ctx.wgrad_store.put(wgrad_gemm)
            else:
                wgrad_gemm()
            return dy @ weight, None
        """,
    ),
    # ------------------------------------- 4: a delayed weight gradient assigned over .grad
    Variant(
        4,
        "backward-dw-assigns-popped-wgrad",
        """
        class Linear(Module):
            def backward_dw(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    self.weight.grad = wgrad.to(self.weight.dtype)  # bug
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
        """
        class Linear(Module):
            def backward_dw(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    if self.weight.grad is None:
                        self.weight.grad = wgrad.to(self.weight.dtype)
                    else:
                        self.weight.grad.add_(wgrad)
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    Variant(
        4,
        "zipped-delayed-grads-assigned-in-a-loop",
        """
        def apply_delayed_wgrads(params, grads, delay_wgrad_compute):
            for p, g in zip(params, grads):
                if g is not None:
                    p.grad = g  # bug
        """,
        """
        def apply_delayed_wgrads(params, grads, delay_wgrad_compute):
            for p, g in zip(params, grads):
                if g is not None:
                    p.grad = g if p.grad is None else p.grad + g
        """,
    ),
    Variant(
        4,
        "wgrad-closure-assigns-grad",
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors

            def compute_wgrad():
                weight.grad = dy.t() @ x  # bug

            if ctx.delay_wgrad_compute:
                ctx.wgrad_store.put(compute_wgrad)
            else:
                compute_wgrad()
            return dy @ weight, None
        """,
        """
        def backward(ctx, dy):
            x, weight = ctx.saved_tensors

            def compute_wgrad():
                if weight.grad is None:
                    weight.grad = dy.t() @ x
                else:
                    weight.grad += dy.t() @ x

            if ctx.delay_wgrad_compute:
                ctx.wgrad_store.put(compute_wgrad)
            else:
                compute_wgrad()
            return dy @ weight, None
        """,
    ),
    Variant(
        4,
        "per-group-weights-by-getattr",
        """
        class GroupedLinear(Module):
            def backward_dw(self):
                _, tensors = self.wgrad_store.pop()
                grads = tensors[2]
                for i in range(self.num_groups):
                    w = getattr(self, f"weight{i}")
                    w.grad = grads[i].to(w.dtype)  # bug
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
        """
        class GroupedLinear(Module):
            def backward_dw(self):
                _, tensors = self.wgrad_store.pop()
                grads = tensors[2]
                for i in range(self.num_groups):
                    w = getattr(self, f"weight{i}")
                    w.grad = grads[i].to(w.dtype) if w.grad is None else w.grad.add_(grads[i])
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    Variant(
        4,
        "grad-set-by-setattr-in-a-weight-grad-helper",
        """
        def finish_weight_grads(module, wgrads, delay_wgrad_compute):
            for name, wgrad in wgrads.items():
                param = module.get_parameter(name)
                setattr(param, "grad", wgrad)  # bug
        """,
        """
        def finish_weight_grads(module, wgrads, delay_wgrad_compute):
            for name, wgrad in wgrads.items():
                param = module.get_parameter(name)
                if param.grad is None:
                    setattr(param, "grad", wgrad)
                else:
                    param.grad.add_(wgrad)
        """,
    ),
)
