"""Class variants for issue #19's class 1 (which object) across calls of one file: a tensor
standing in for the Parameter (a quantized or gathered copy) handed to an autograd
Function's ``apply`` or to a helper of the file that takes the Parameter's bookkeeping
(main_grad, its flags, a weakref) from what it is given, and helpers of the file whose
result is a stand-in. Written from the class's description, not from any fix: each buggy
version hands or uses the copy where the Parameter is needed; each twin hands or uses the
Parameter (or gives the copy the Parameter's main_grad first). Same format as
variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ---------------------------- positional argument of apply, weakref taken in forward
    Variant(
        1,
        "apply-positional-copy-weakref-in-forward",
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.weight_ref = weakref.ref(weight)
                return x @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                weight = ctx.weight_ref()
                weight.main_grad.add_(dy.t() @ ctx.x)
                return None, None


        class Linear(torch.nn.Module):
            def forward(self, x):
                w = quantize(self.weight, self.quantizer)
                return _Linear.apply(x, w)  # bug
        """,
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight_q, weight):
                ctx.weight_ref = weakref.ref(weight)
                return x @ weight_q.t()

            @staticmethod
            def backward(ctx, dy):
                weight = ctx.weight_ref()
                weight.main_grad.add_(dy.t() @ ctx.x)
                return None, None


        class Linear(torch.nn.Module):
            def forward(self, x):
                w = quantize(self.weight, self.quantizer)
                return _Linear.apply(x, w, self.weight)
        """,
    ),
    # ---------------------------- a starred list of gathered copies into forward(*weights)
    Variant(
        1,
        "apply-starred-gathered-list-main-grad-closures",
        """
        class _Experts(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, splits, *weights):
                ctx.grads = [lambda j=i: weights[j].main_grad for i in range(len(weights))]
                return grouped_mm(x, splits, weights)


        def experts_forward(module, x, splits):
            full = [all_gather_along_first_dim(p, module.group) for p in module.weights]
            return _Experts.apply(x, splits, *full)  # bug
        """,
        """
        class _Experts(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, splits, group, *weights):
                full = [all_gather_along_first_dim(p, group) for p in weights]
                ctx.grads = [lambda j=i: weights[j].main_grad for i in range(len(weights))]
                return grouped_mm(x, splits, full)


        def experts_forward(module, x, splits):
            return _Experts.apply(x, splits, module.group, *module.weights)
        """,
    ),
    # ---------------------------- saved in forward, main_grad written in backward
    Variant(
        1,
        "apply-copy-saved-then-wgrad-into-its-main-grad",
        """
        class _Proj(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inp, weight):
                ctx.save_for_backward(inp, weight)
                return inp @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                inp, weight = ctx.saved_tensors
                weight.main_grad.add_(dy.t() @ inp)
                weight.grad_added_to_main_grad = True
                return dy @ weight, None


        def project(inp, param):
            packed = param.to(torch.float8_e4m3fn)
            return _Proj.apply(inp, packed)  # bug
        """,
        """
        class _Proj(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inp, weight):
                ctx.save_for_backward(inp, weight)
                packed = weight.to(torch.float8_e4m3fn)
                return inp @ packed.t()

            @staticmethod
            def backward(ctx, dy):
                inp, weight = ctx.saved_tensors
                weight.main_grad.add_(dy.t() @ inp)
                weight.grad_added_to_main_grad = True
                return dy @ weight, None


        def project(inp, param):
            return _Proj.apply(inp, param)
        """,
    ),
    # ---------------------------- a ctx attribute holding the argument, read in backward
    Variant(
        1,
        "apply-copy-kept-on-ctx-overwrite-flag-read-in-backward",
        """
        class _Fc(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.w = w
                return x @ w.t()

            @staticmethod
            def backward(ctx, dy, x):
                acc = not getattr(ctx.w, "overwrite_main_grad", False)
                gemm(dy, x, out=ctx.w.main_grad, accumulate=acc)
                return None, None


        class Fc(torch.nn.Module):
            def forward(self, x):
                w = self._for_compute(self.weight)
                return _Fc.apply(x, w)  # bug

            def _for_compute(self, w):
                return gather_along_first_dim(w, self.tp_group)
        """,
        """
        class _Fc(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.w = w
                return x @ w.t()

            @staticmethod
            def backward(ctx, dy, x):
                acc = not getattr(ctx.w, "overwrite_main_grad", False)
                gemm(dy, x, out=ctx.w.main_grad, accumulate=acc)
                return None, None


        class Fc(torch.nn.Module):
            def forward(self, x):
                w = self.weight
                return _Fc.apply(x, w)

            def _for_compute(self, w):
                return gather_along_first_dim(w, self.tp_group)
        """,
    ),
    # ---------------------------- a helper writing main_grad, handed the copy by keyword
    Variant(
        1,
        "helper-writes-main-grad-of-keyword-copy",
        """
        def _accumulate(wgrad, param):
            param.main_grad.add_(wgrad)
            param.grad_added_to_main_grad = True


        def finish(ctx, dy, x):
            weight = ctx.weight_ref()
            local = cast_to_fp8(weight, ctx.meta)
            _accumulate(param=local, wgrad=dy.t() @ x)  # bug
            return dy @ local
        """,
        """
        def _accumulate(wgrad, param):
            param.main_grad.add_(wgrad)
            param.grad_added_to_main_grad = True


        def finish(ctx, dy, x):
            weight = ctx.weight_ref()
            local = cast_to_fp8(weight, ctx.meta)
            _accumulate(param=weight, wgrad=dy.t() @ x)
            return dy @ local
        """,
    ),
    # ---------------------------- a helper returning a cast (.to an FP8 dtype)
    Variant(
        1,
        "flag-set-on-result-of-casting-helper",
        """
        def _cast(t):
            return t.to(dtype=torch.float8_e5m2)


        def backward_wgrad(weight, dy, x):
            w = _cast(weight)
            weight.main_grad.add_(dy.t() @ x)
            w.grad_added_to_main_grad = True  # bug
            return dy @ w
        """,
        """
        def _cast(t):
            return t.to(dtype=torch.float8_e5m2)


        def backward_wgrad(weight, dy, x):
            w = _cast(weight)
            weight.main_grad.add_(dy.t() @ x)
            weight.grad_added_to_main_grad = True
            return dy @ w
        """,
    ),
    # ---------------------------- a helper filling a buffer by all-gather and returning it
    Variant(
        1,
        "weakref-of-buffer-a-gather-helper-returns",
        """
        def _assemble(shard, group):
            buf = torch.empty((shard.shape[0] * group.size(), *shard.shape[1:]), device="cuda")
            torch.distributed.all_gather_into_tensor(buf, shard, group=group)
            return buf


        def forward_prep(ctx, shard):
            whole = _assemble(shard, ctx.group)
            ctx.weight_ref = weakref.ref(whole)  # bug
            ctx.fuse = hasattr(shard, "main_grad")
            return whole
        """,
        """
        def _assemble(shard, group):
            buf = torch.empty((shard.shape[0] * group.size(), *shard.shape[1:]), device="cuda")
            torch.distributed.all_gather_into_tensor(buf, shard, group=group)
            return buf


        def forward_prep(ctx, shard):
            whole = _assemble(shard, ctx.group)
            ctx.weight_ref = weakref.ref(shard)
            ctx.fuse = hasattr(shard, "main_grad")
            return whole
        """,
    ),
    # ---------------------------- a helper calling a helper: the copy is followed through both
    Variant(
        1,
        "main-grad-of-copy-two-helpers-deep",
        """
        class Block(torch.nn.Module):
            def _full(self, w):
                return all_gather_along_first_dim(w, self.tp_group)

            def _weight_for_compute(self):
                return self._full(self.weight)

            def backward_dw(self, dy, x):
                w = self._weight_for_compute()
                w.main_grad.add_(dy.t() @ x)  # bug
        """,
        """
        class Block(torch.nn.Module):
            def _full(self, w):
                return all_gather_along_first_dim(w, self.tp_group)

            def _weight_for_compute(self):
                return self._full(self.weight)

            def backward_dw(self, dy, x):
                w = self.weight
                w.main_grad.add_(dy.t() @ x)
        """,
    ),
    # ---------------------------- the copy given the Parameter's main_grad before apply
    Variant(
        1,
        "apply-copy-without-the-parameters-main-grad",
        """
        class _Mm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.wgrad_into = weight.main_grad
                return x @ weight.t()


        def mm(x, param):
            view = materialize_weight_for_forward(param)
            return _Mm.apply(x, view)  # bug
        """,
        """
        class _Mm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.wgrad_into = weight.main_grad
                return x @ weight.t()


        def mm(x, param):
            view = materialize_weight_for_forward(param)
            view.main_grad = param.main_grad
            return _Mm.apply(x, view)
        """,
    ),
    # ---------------------------- a slice of the starred copies, weakrefs of its items
    Variant(
        1,
        "apply-slice-of-starred-quantized-copies-weakrefs",
        """
        class _Group(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, n, *weights_and_biases):
                weights = weights_and_biases[:n]
                ctx.refs = [weakref.ref(w) for w in weights]
                return grouped_mm(x, weights)

            @staticmethod
            def backward(ctx, dy):
                for r in ctx.refs:
                    r().main_grad.add_(dy)
                return None


        def run(x, module):
            ws = [quantize(p) for p in module.ps]
            return _Group.apply(x, len(ws), *ws, *module.biases)  # bug
        """,
        """
        class _Group(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, n, *weights_and_biases):
                weights = weights_and_biases[:n]
                ctx.refs = [weakref.ref(w) for w in weights]
                return grouped_mm(x, [quantize(w) for w in weights])

            @staticmethod
            def backward(ctx, dy):
                for r in ctx.refs:
                    r().main_grad.add_(dy)
                return None


        def run(x, module):
            return _Group.apply(x, len(module.ps), *module.ps, *module.biases)
        """,
    ),
    # ---------------------------- the weight name rebound to its gather, handed to a helper
    Variant(
        1,
        "helper-handed-weight-name-rebound-to-its-gather",
        """
        def _keep(ctx, w):
            ctx.ref = weakref.ref(w)
            ctx.has_main_grad = hasattr(w, "main_grad")


        def forward(ctx, x, weight):
            weight = all_gather_along_first_dim(weight)
            _keep(ctx, weight)  # bug
            return x @ weight
        """,
        """
        def _keep(ctx, w):
            ctx.ref = weakref.ref(w)
            ctx.has_main_grad = hasattr(w, "main_grad")


        def forward(ctx, x, weight):
            full = all_gather_along_first_dim(weight)
            _keep(ctx, weight)
            return x @ full
        """,
    ),
    # ---------------------------- apply through a local alias, the ctx slot as a leading list
    Variant(
        1,
        "apply-alias-with-ctx-list-hands-gathered-weight",
        """
        class _Mlp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w1, w2):
                ctx.main_grad_of = [lambda: w1.main_grad, lambda: w2.main_grad]
                return gelu(x @ w1.t()) @ w2.t()


        class Mlp(torch.nn.Module):
            def forward(self, x):
                if torch.is_grad_enabled():
                    fn = _Mlp.apply
                    args = []
                else:
                    fn = _Mlp.forward
                    args = [None]
                w1 = all_gather_along_first_dim(self.fc1, self.group)
                return fn(*args, x, w1, self.fc2)  # bug
        """,
        """
        class _Mlp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w1, w2, group):
                ctx.main_grad_of = [lambda: w1.main_grad, lambda: w2.main_grad]
                full = all_gather_along_first_dim(w1, group)
                return gelu(x @ full.t()) @ w2.t()


        class Mlp(torch.nn.Module):
            def forward(self, x):
                if torch.is_grad_enabled():
                    fn = _Mlp.apply
                    args = []
                else:
                    fn = _Mlp.forward
                    args = [None]
                return fn(*args, x, self.fc1, self.fc2, self.group)
        """,
    ),
)
