"""Blind class variants (H-blind5): written from issue #19's class descriptions, CONTRACT.md,
the two seeds and real Transformer Engine / Megatron-LM code, without reading the linter's
rules, to measure whether gmlp-lint finds the class rather than the instances its rules were
written from. Three variants per class, in spellings the other corpora do not use: dicts of
experts, walrus, functools.partial, operator.methodcaller, decorators, try/except/finally,
class constants and lambda attributes, dict dispatch, starred generators, forward pre-hooks.
Same format as variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------- 1: GEMM writes the main_grad of a dict of FP8 casts
    Variant(
        1,
        "blind5-expert-dict-of-fp8-casts-is-gemm-out",
        """
        class _FusedExpertsFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, m_splits, quantizers, *weights):
                casts = {e: quantizers[e](w) for e, w in enumerate(weights)}
                ctx.save_for_backward(x)
                ctx.m_splits = m_splits
                ctx.casts = casts
                ctx.weights = weights
                xs = torch.split(x, m_splits)
                return torch.cat([xe @ casts[e].dequantize().t() for e, xe in enumerate(xs)])

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                xs, dys = torch.split(x, ctx.m_splits), torch.split(dy, ctx.m_splits)
                dx = torch.cat([d @ ctx.casts[e].dequantize() for e, d in enumerate(dys)])
                for e, qw in ctx.casts.items():
                    param = ctx.weights[e]
                    accumulate = not getattr(param, "overwrite_main_grad", False)
                    general_gemm(xs[e], dys[e], out=qw.main_grad, accumulate=accumulate)  # bug
                    param.grad_added_to_main_grad = True
                dummies = [
                    get_dummy_wgrad(
                        list(w.size()), w.dtype, zero=getattr(w, "zero_out_wgrad", False)
                    )
                    for w in ctx.weights
                ]
                return (dx, None, None, *dummies)
        """,
        """
        class _FusedExpertsFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, m_splits, quantizers, *weights):
                casts = {e: quantizers[e](w) for e, w in enumerate(weights)}
                ctx.save_for_backward(x)
                ctx.m_splits = m_splits
                ctx.casts = casts
                ctx.weights = weights
                xs = torch.split(x, m_splits)
                return torch.cat([xe @ casts[e].dequantize().t() for e, xe in enumerate(xs)])

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                xs, dys = torch.split(x, ctx.m_splits), torch.split(dy, ctx.m_splits)
                dx = torch.cat([d @ ctx.casts[e].dequantize() for e, d in enumerate(dys)])
                for e, qw in ctx.casts.items():
                    param = ctx.weights[e]
                    accumulate = not getattr(param, "overwrite_main_grad", False)
                    general_gemm(xs[e], dys[e], out=param.main_grad, accumulate=accumulate)
                    param.grad_added_to_main_grad = True
                dummies = [
                    get_dummy_wgrad(
                        list(w.size()), w.dtype, zero=getattr(w, "zero_out_wgrad", False)
                    )
                    for w in ctx.weights
                ]
                return (dx, None, None, *dummies)
        """,
    ),
    # ------------------------------- 1: overwrite flag read from the FP8 cast in a walrus
    Variant(
        1,
        "blind5-walrus-overwrite-flag-from-quantized-expert",
        """
        def grouped_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            xs, dys = x.split(ctx.m_splits), dy.split(ctx.m_splits)
            dx = torch.cat([d @ q.dequantize() for d, q in zip(dys, ctx.quantized)])
            for param, wq, xe, de in zip(ctx.params, ctx.quantized, xs, dys):
                if (overwrite := getattr(wq, "overwrite_main_grad", False)):  # bug
                    log_once("expert main_grad is overwritten (ZeRO-2/3)")
                general_gemm(xe, de, out=param.main_grad, accumulate=not overwrite)
                if hasattr(param, "grad_added_to_main_grad"):
                    param.grad_added_to_main_grad = True
            zero = [getattr(p, "zero_out_wgrad", False) for p in ctx.params]
            dummies = [
                get_dummy_wgrad(list(p.size()), p.dtype, zero=z)
                for p, z in zip(ctx.params, zero)
            ]
            return dx, None, *dummies
        """,
        """
        def grouped_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            xs, dys = x.split(ctx.m_splits), dy.split(ctx.m_splits)
            dx = torch.cat([d @ q.dequantize() for d, q in zip(dys, ctx.quantized)])
            for param, wq, xe, de in zip(ctx.params, ctx.quantized, xs, dys):
                if (overwrite := getattr(param, "overwrite_main_grad", False)):
                    log_once("expert main_grad is overwritten (ZeRO-2/3)")
                general_gemm(xe, de, out=param.main_grad, accumulate=not overwrite)
                if hasattr(param, "grad_added_to_main_grad"):
                    param.grad_added_to_main_grad = True
            zero = [getattr(p, "zero_out_wgrad", False) for p in ctx.params]
            dummies = [
                get_dummy_wgrad(list(p.size()), p.dtype, zero=z)
                for p, z in zip(ctx.params, zero)
            ]
            return dx, None, *dummies
        """,
    ),
    # ------------------------------- 2: rebound by .contiguous() inside a walrus test
    Variant(
        2,
        "blind5-walrus-contiguous-copy-replaces-the-parameter",
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            if not (weight := ctx.weight).is_contiguous():
                weight = weight.contiguous()  # bug
            dx = dy @ weight
            if ctx.fuse_wgrad_accumulation:
                accumulate = not getattr(weight, "overwrite_main_grad", False)
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                wgrad = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
            else:
                wgrad = (dy.t() @ x).to(weight.dtype)
            return dx, wgrad
        """,
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            dense = weight if weight.is_contiguous() else weight.contiguous()
            dx = dy @ dense
            if ctx.fuse_wgrad_accumulation:
                accumulate = not getattr(weight, "overwrite_main_grad", False)
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                wgrad = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
            else:
                wgrad = (dy.t() @ x).to(weight.dtype)
            return dx, wgrad
        """,
    ),
    # ------------------------------- 2: the [G, out, in] view of main_grad handed back
    Variant(
        2,
        "blind5-single-grouped-weight-main-grad-view-returned",
        """
        class _SingleGroupedWeightFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                grouped_weight = ctx.grouped_weight
                num_groups, n_out, n_in = grouped_weight.shape
                dx = grouped_dgrad(dy, grouped_weight, ctx.m_splits)
                if not ctx.accumulate_into_main_grad:
                    wgrad = grouped_wgrad(x, dy, ctx.m_splits)
                    return dx, None, wgrad.to(grouped_weight.dtype)
                main_grad_view = grouped_weight.main_grad.view(num_groups, n_out, n_in)
                overwrite = getattr(grouped_weight, "overwrite_main_grad", False)
                grouped_wgrad(x, dy, ctx.m_splits, out=main_grad_view, accumulate=not overwrite)
                grouped_weight.grad_added_to_main_grad = True
                return dx, None, main_grad_view  # bug
        """,
        """
        class _SingleGroupedWeightFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                grouped_weight = ctx.grouped_weight
                num_groups, n_out, n_in = grouped_weight.shape
                dx = grouped_dgrad(dy, grouped_weight, ctx.m_splits)
                if not ctx.accumulate_into_main_grad:
                    wgrad = grouped_wgrad(x, dy, ctx.m_splits)
                    return dx, None, wgrad.to(grouped_weight.dtype)
                main_grad_view = grouped_weight.main_grad.view(num_groups, n_out, n_in)
                overwrite = getattr(grouped_weight, "overwrite_main_grad", False)
                grouped_wgrad(x, dy, ctx.m_splits, out=main_grad_view, accumulate=not overwrite)
                grouped_weight.grad_added_to_main_grad = True
                zero = getattr(grouped_weight, "zero_out_wgrad", False)
                shape = [num_groups, n_out, n_in]
                return dx, None, get_dummy_wgrad(shape, grouped_weight.dtype, zero=zero)
        """,
    ),
    # ------------------------------- 3: flag set in `finally`, also after the fallback path
    Variant(
        3,
        "blind5-flag-in-finally-covers-unfused-fallback",
        """
        def _expert_wgrad(param, x, dy):
            try:
                accumulate = not getattr(param, "overwrite_main_grad", False)
                general_gemm(x, dy, out=param.main_grad, accumulate=accumulate)
            except NotImplementedError:
                # the fused kernel lacks this dtype pair: compute the gradient the plain way
                return (dy.t().float() @ x.float()).to(param.dtype)
            finally:
                param.grad_added_to_main_grad = True  # bug
            zero = getattr(param, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(param.size()), param.dtype, zero=zero)


        def fused_experts_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            xs, dys = x.split(ctx.m_splits), dy.split(ctx.m_splits)
            wgrads = [_expert_wgrad(p, xe, de) for p, xe, de in zip(ctx.params, xs, dys)]
            return ctx.dgrad(dy), None, *wgrads
        """,
        """
        def _expert_wgrad(param, x, dy):
            try:
                accumulate = not getattr(param, "overwrite_main_grad", False)
                general_gemm(x, dy, out=param.main_grad, accumulate=accumulate)
            except NotImplementedError:
                # the fused kernel lacks this dtype pair: compute the gradient the plain way
                return (dy.t().float() @ x.float()).to(param.dtype)
            else:
                param.grad_added_to_main_grad = True
            zero = getattr(param, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(param.size()), param.dtype, zero=zero)


        def fused_experts_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            xs, dys = x.split(ctx.m_splits), dy.split(ctx.m_splits)
            wgrads = [_expert_wgrad(p, xe, de) for p, xe, de in zip(ctx.params, xs, dys)]
            return ctx.dgrad(dy), None, *wgrads
        """,
    ),
    # ------------------------------- 3: main_grad fetched in a walrus, written, no flag
    Variant(
        3,
        "blind5-walrus-main-grad-written-real-grad-returned",
        """
        class LinearWithGradAccumulation(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                weight = ctx.weight
                dx = dy @ weight
                x2d, dy2d = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
                wgrad = dy2d.t().float() @ x2d.float()
                fuse = ctx.gradient_accumulation_fusion
                if fuse and (mg := getattr(weight, "main_grad", None)) is not None:
                    if getattr(weight, "overwrite_main_grad", False):
                        mg.copy_(wgrad)  # bug
                    else:
                        mg.add_(wgrad)  # bug
                return dx, wgrad.to(weight.dtype), None
        """,
        """
        class LinearWithGradAccumulation(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                weight = ctx.weight
                dx = dy @ weight
                x2d, dy2d = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
                wgrad = dy2d.t().float() @ x2d.float()
                fuse = ctx.gradient_accumulation_fusion
                if fuse and (mg := getattr(weight, "main_grad", None)) is not None:
                    if getattr(weight, "overwrite_main_grad", False):
                        mg.copy_(wgrad)
                    else:
                        mg.add_(wgrad)
                    weight.grad_added_to_main_grad = True
                    zero = getattr(weight, "zero_out_wgrad", False)
                    return dx, get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero), None
                return dx, wgrad.to(weight.dtype), None
        """,
    ),
    # ------------------------------- 4: addmm with a hard-coded beta=0 into main_grad
    Variant(
        4,
        "blind5-addmm-beta-zero-into-expert-main-grads",
        """
        def grouped_wgrad_into_main_grad(params, xs, dys):
            for param, x, dy in zip(params, xs, dys):
                mg = param.main_grad
                torch.addmm(mg, dy.t().float(), x.float(), beta=0.0, out=mg)  # bug
                if hasattr(param, "grad_added_to_main_grad"):
                    param.grad_added_to_main_grad = True
            return [
                get_dummy_wgrad(list(p.size()), p.dtype, zero=getattr(p, "zero_out_wgrad", False))
                for p in params
            ]
        """,
        """
        def grouped_wgrad_into_main_grad(params, xs, dys):
            for param, x, dy in zip(params, xs, dys):
                mg = param.main_grad
                beta = 0.0 if getattr(param, "overwrite_main_grad", False) else 1.0
                torch.addmm(mg, dy.t().float(), x.float(), beta=beta, out=mg)
                if hasattr(param, "grad_added_to_main_grad"):
                    param.grad_added_to_main_grad = True
            return [
                get_dummy_wgrad(list(p.size()), p.dtype, zero=getattr(p, "zero_out_wgrad", False))
                for p in params
            ]
        """,
    ),
    # ------------------------------- 4: a module-level partial pins accumulate=False
    Variant(
        4,
        "blind5-module-partial-pins-accumulate-false",
        """
        _wgrad_gemm = functools.partial(general_gemm, layout="NT", accumulate=False)


        class GroupedMLPBackward:
            def fc2_wgrad(self, weights, xs, dys):
                for w, x, dy in zip(weights, xs, dys):
                    _wgrad_gemm(x, dy, out=w.main_grad)  # bug
                    w.grad_added_to_main_grad = True
                zero = [getattr(w, "zero_out_wgrad", False) for w in weights]
                return [
                    get_dummy_wgrad(list(w.size()), w.dtype, zero=z)
                    for w, z in zip(weights, zero)
                ]
        """,
        """
        _wgrad_gemm = functools.partial(general_gemm, layout="NT")


        class GroupedMLPBackward:
            def fc2_wgrad(self, weights, xs, dys):
                for w, x, dy in zip(weights, xs, dys):
                    keep = not getattr(w, "overwrite_main_grad", False)
                    _wgrad_gemm(x, dy, out=w.main_grad, accumulate=keep)
                    w.grad_added_to_main_grad = True
                zero = [getattr(w, "zero_out_wgrad", False) for w in weights]
                return [
                    get_dummy_wgrad(list(w.size()), w.dtype, zero=z)
                    for w, z in zip(weights, zero)
                ]
        """,
    ),
    # ------------------------------- 5: expert-parallel backward_dw, hooks after try/finally
    Variant(
        5,
        "blind5-ep-backward-dw-fires-hooks-after-try-finally",
        """
        class ExpertParallelGroupedMLP(MegatronModule):
            def backward_dw(self):
                pending, written = self._deferred_wgrads, []
                try:
                    for name, (x, dy) in pending.items():
                        w = self.expert_weights[name]
                        accumulate = not getattr(w, "overwrite_main_grad", False)
                        general_gemm(x, dy, out=w.main_grad, accumulate=accumulate)
                        written.append(w)
                finally:
                    pending.clear()
                for w in written:
                    w.post_wgrad_grad_acc_hook()  # bug
        """,
        """
        class ExpertParallelGroupedMLP(MegatronModule):
            def backward_dw(self):
                pending, written = self._deferred_wgrads, []
                try:
                    for name, (x, dy) in pending.items():
                        w = self.expert_weights[name]
                        accumulate = not getattr(w, "overwrite_main_grad", False)
                        general_gemm(x, dy, out=w.main_grad, accumulate=accumulate)
                        w.grad_added_to_main_grad = True
                        written.append(w)
                finally:
                    pending.clear()
                for w in written:
                    w.post_wgrad_grad_acc_hook()
        """,
    ),
    # ------------------------------- 5: hooks fired through operator.methodcaller
    Variant(
        5,
        "blind5-methodcaller-fires-hooks-after-sp-norm-grads",
        """
        _fire_grad_hook = operator.methodcaller("post_wgrad_grad_acc_hook")


        def finish_sequence_parallel_norm_grads(norm_params, dgammas, tp_group):
            for p, dgamma in zip(norm_params, dgammas):
                torch.distributed.all_reduce(dgamma, group=tp_group)
                if getattr(p, "overwrite_main_grad", False):
                    p.main_grad.copy_(dgamma)
                else:
                    p.main_grad.add_(dgamma)
            list(map(_fire_grad_hook, norm_params))  # bug
        """,
        """
        _fire_grad_hook = operator.methodcaller("post_wgrad_grad_acc_hook")


        def finish_sequence_parallel_norm_grads(norm_params, dgammas, tp_group):
            for p, dgamma in zip(norm_params, dgammas):
                torch.distributed.all_reduce(dgamma, group=tp_group)
                if getattr(p, "overwrite_main_grad", False):
                    p.main_grad.copy_(dgamma)
                else:
                    p.main_grad.add_(dgamma)
                p.grad_added_to_main_grad = True
            list(map(_fire_grad_hook, norm_params))
        """,
    ),
    # ------------------------------- 6: need_backward_dw overridden to say no
    Variant(
        6,
        "blind5-subclass-need-backward-dw-always-false",
        """
        class TEGroupedLinear(te.pytorch.GroupedLinear):
            def __init__(self, num_gemms, input_size, output_size, *, config):
                super().__init__(
                    num_gemms,
                    input_size,
                    output_size,
                    fuse_wgrad_accumulation=config.gradient_accumulation_fusion,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )
                self.config = config

            def need_backward_dw(self):  # bug
                return False

            def forward(self, x, m_splits):
                out = super().forward(x, m_splits)
                return out if isinstance(out, tuple) else (out, None)
        """,
        """
        class TEGroupedLinear(te.pytorch.GroupedLinear):
            def __init__(self, num_gemms, input_size, output_size, *, config):
                super().__init__(
                    num_gemms,
                    input_size,
                    output_size,
                    fuse_wgrad_accumulation=config.gradient_accumulation_fusion,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )
                self.config = config

            def need_backward_dw(self):
                return self.config.delay_wgrad_compute and super().need_backward_dw()

            def forward(self, x, m_splits):
                out = super().forward(x, m_splits)
                return out if isinstance(out, tuple) else (out, None)
        """,
    ),
    # ------------------------------- 6: backward_dw replaced by a lambda class attribute
    Variant(
        6,
        "blind5-backward-dw-lambda-attribute-does-nothing",
        """
        class SharedExpertFC1(TELinear):
            def __init__(self, input_size, output_size, config):
                super().__init__(
                    input_size,
                    output_size,
                    config=config,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            backward_dw = lambda self: None  # bug
        """,
        """
        class SharedExpertFC1(TELinear):
            def __init__(self, input_size, output_size, config):
                super().__init__(
                    input_size,
                    output_size,
                    config=config,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            backward_dw = lambda self: super(SharedExpertFC1, self).backward_dw()
        """,
    ),
    # ------------------------------- 7: the dummy chosen by a dict lookup on the local flag
    Variant(
        7,
        "blind5-dict-dispatch-on-downgraded-local",
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            accumulate_into_main_grad = ctx.fuse_wgrad_accumulation
            if getattr(weight, "overwrite_main_grad", False):
                accumulate_into_main_grad = False
            out = weight.main_grad if ctx.fuse_wgrad_accumulation else None
            wgrad, *_ = general_gemm(x, dy, out=out, accumulate=accumulate_into_main_grad)
            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
            zero = getattr(weight, "zero_out_wgrad", False)
            dummy = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
            return dy @ weight, {True: dummy, False: wgrad}[accumulate_into_main_grad]  # bug
        """,
        """
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            accumulate_into_main_grad = ctx.fuse_wgrad_accumulation
            if getattr(weight, "overwrite_main_grad", False):
                accumulate_into_main_grad = False
            out = weight.main_grad if ctx.fuse_wgrad_accumulation else None
            wgrad, *_ = general_gemm(x, dy, out=out, accumulate=accumulate_into_main_grad)
            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
            zero = getattr(weight, "zero_out_wgrad", False)
            dummy = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
            return dy @ weight, {True: dummy, False: wgrad}[bool(ctx.fuse_wgrad_accumulation)]
        """,
    ),
    # ------------------------------- 7: per-expert local flags, starred generator in return
    Variant(
        7,
        "blind5-per-expert-flags-starred-generator-return",
        """
        def _dummy(w):
            zero = getattr(w, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(w.size()), w.dtype, zero=zero)


        def grouped_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            xs, dys = x.split(ctx.m_splits), dy.split(ctx.m_splits)
            weights, fused = ctx.weights, ctx.accumulate_into_main_grad
            acc = [fused and not getattr(w, "overwrite_main_grad", False) for w in weights]
            gs = [
                general_gemm(xe, de, out=w.main_grad if fused else None, accumulate=a)[0]
                for w, xe, de, a in zip(weights, xs, dys, acc)
            ]
            for w in weights:
                if fused and hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
            dx = torch.cat([de @ w for w, de in zip(weights, dys)])
            return (dx, None, *(_dummy(w) if a else g for w, a, g in zip(weights, acc, gs)))  # bug
        """,
        """
        def _dummy(w):
            zero = getattr(w, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(w.size()), w.dtype, zero=zero)


        def grouped_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            xs, dys = x.split(ctx.m_splits), dy.split(ctx.m_splits)
            weights, fused = ctx.weights, ctx.accumulate_into_main_grad
            acc = [fused and not getattr(w, "overwrite_main_grad", False) for w in weights]
            wgrads = [
                general_gemm(xe, de, out=w.main_grad if fused else None, accumulate=a)[0]
                for w, xe, de, a in zip(weights, xs, dys, acc)
            ]
            for w in weights:
                if fused and hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
            dx = torch.cat([de @ w for w, de in zip(weights, dys)])
            return (dx, None, *(_dummy(w) if fused else g for w, g in zip(weights, wgrads)))
        """,
    ),
    # ------------------------------- 8: op-fuser Sequential from a kwargs dict, no fetch
    Variant(
        8,
        "blind5-op-fuser-sequential-from-kwargs-dict-no-fetch",
        """
        import transformer_engine.pytorch.ops as te_ops


        class TEFusedGroupedMLP(MegatronModule):
            def __init__(self, num_local_experts, config):
                super().__init__(config)
                common = dict(
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                    device="cuda",
                    dtype=config.params_dtype,
                )
                h, f = config.hidden_size, config.ffn_hidden_size
                self.fused_mlp = te_ops.Sequential(
                    te_ops.GroupedLinear(num_local_experts, h, 2 * f, **common),  # bug
                    te_ops.SwiGLU(),
                    te_ops.GroupedLinear(num_local_experts, f, h, **common),
                )

            def forward(self, tokens, m_splits):
                return self.fused_mlp(tokens, m_splits)  # bug
        """,
        """
        import transformer_engine.pytorch.ops as te_ops


        class TEFusedGroupedMLP(MegatronModule):
            def __init__(self, num_local_experts, config):
                super().__init__(config)
                common = dict(
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                    device="cuda",
                    dtype=config.params_dtype,
                )
                h, f = config.hidden_size, config.ffn_hidden_size
                self.fused_mlp = te_ops.Sequential(
                    te_ops.GroupedLinear(num_local_experts, h, 2 * f, **common),
                    te_ops.SwiGLU(),
                    te_ops.GroupedLinear(num_local_experts, f, h, **common),
                )

            def forward(self, tokens, m_splits):
                for p in self.fused_mlp.parameters():
                    if getattr(p, "main_grad", None) is None and hasattr(p, "get_main_grad"):
                        p.main_grad = p.get_main_grad()
                return self.fused_mlp(tokens, m_splits)
        """,
        unseen=(
            "class 8 is not a rule on purpose (docs/lint-semantics.md): TE's ops fetch main_grad "
            "themselves (get_main_grad_from_param), and Megatron-LM's head builds ops with "
            "accumulate_into_main_grad and no get_main_grad() relying on it"
        ),
    ),
    # ------------------------------- 8: a partial pre-hook that exposes fc1's buffer only
    Variant(
        8,
        "blind5-partial-pre-hook-exposes-only-fc1",
        """
        import functools

        import transformer_engine.pytorch.ops as te_ops


        def _expose_main_grads(module, args, *, params):
            for p in params:
                if getattr(p, "main_grad", None) is None and hasattr(p, "get_main_grad"):
                    p.main_grad = p.get_main_grad()


        class GroupedMLP(MegatronModule):
            def __init__(self, config, weight1, weight2):
                super().__init__(config)
                self.weight1, self.weight2 = weight1, weight2
                fuse = config.gradient_accumulation_fusion
                fc1 = te_ops.GroupedLinear(config.num_local_experts, accumulate_into_main_grad=fuse)
                fc2 = te_ops.GroupedLinear(config.num_local_experts, accumulate_into_main_grad=fuse)
                fc1.weight, fc2.weight = weight1, weight2
                self.ops = te_ops.Sequential(fc1, te_ops.SwiGLU(), fc2)
                hook = functools.partial(_expose_main_grads, params=[self.weight1])  # bug
                self.register_forward_pre_hook(hook)

            def forward(self, x, m_splits):
                return self.ops(x, m_splits)
        """,
        """
        import functools

        import transformer_engine.pytorch.ops as te_ops


        def _expose_main_grads(module, args, *, params):
            for p in params:
                if getattr(p, "main_grad", None) is None and hasattr(p, "get_main_grad"):
                    p.main_grad = p.get_main_grad()


        class GroupedMLP(MegatronModule):
            def __init__(self, config, weight1, weight2):
                super().__init__(config)
                self.weight1, self.weight2 = weight1, weight2
                fuse = config.gradient_accumulation_fusion
                fc1 = te_ops.GroupedLinear(config.num_local_experts, accumulate_into_main_grad=fuse)
                fc2 = te_ops.GroupedLinear(config.num_local_experts, accumulate_into_main_grad=fuse)
                fc1.weight, fc2.weight = weight1, weight2
                self.ops = te_ops.Sequential(fc1, te_ops.SwiGLU(), fc2)
                hook = functools.partial(_expose_main_grads, params=[self.weight1, self.weight2])
                self.register_forward_pre_hook(hook)

            def forward(self, x, m_splits):
                return self.ops(x, m_splits)
        """,
        unseen=(
            "class 8 is not a rule on purpose (docs/lint-semantics.md): TE's ops fetch main_grad "
            "themselves (get_main_grad_from_param), and Megatron-LM's head builds ops with "
            "accumulate_into_main_grad and no get_main_grad() relying on it"
        ),
    ),
)
