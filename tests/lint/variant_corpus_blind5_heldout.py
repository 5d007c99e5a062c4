"""The held-out part of the fifth blind corpus (variant_corpus_blind5.py): the last variant
of each class in the order they were written, kept from the people who change the rules
after the blind measurement, so that the rules' recall can be measured again on variants
nobody tuned against. Blind class variants (H-blind5): written from issue #19's class
descriptions, CONTRACT.md,
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
    # ------------------------------- 1: a partial bound to the FP8 cast does the wgrad
    Variant(
        1,
        "blind5-partial-bound-to-fp8-cast-writes-wgrad",
        """
        def _wgrad_to_main_grad(target, x, dy):
            accumulate = not getattr(target, "overwrite_main_grad", False)
            general_gemm(x, dy, out=target.main_grad, accumulate=accumulate, layout="NT")


        class _FP8LinearFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, quantizer):
                weight_fp8 = quantizer(weight)
                ctx.save_for_backward(x, weight_fp8)
                ctx.weight = weight
                ctx.wgrad_fn = functools.partial(_wgrad_to_main_grad, weight_fp8)  # bug
                return general_gemm(weight_fp8, x)[0]

            @staticmethod
            def backward(ctx, dy):
                x, weight_fp8 = ctx.saved_tensors
                dx = general_gemm(weight_fp8, dy, layout="NN")[0]
                ctx.wgrad_fn(x, dy)
                w = ctx.weight
                w.grad_added_to_main_grad = True
                zero = getattr(w, "zero_out_wgrad", False)
                return dx, get_dummy_wgrad(list(w.size()), w.dtype, zero=zero), None
        """,
        """
        def _wgrad_to_main_grad(target, x, dy):
            accumulate = not getattr(target, "overwrite_main_grad", False)
            general_gemm(x, dy, out=target.main_grad, accumulate=accumulate, layout="NT")


        class _FP8LinearFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, quantizer):
                weight_fp8 = quantizer(weight)
                ctx.save_for_backward(x, weight_fp8)
                ctx.weight = weight
                ctx.wgrad_fn = functools.partial(_wgrad_to_main_grad, weight)
                return general_gemm(weight_fp8, x)[0]

            @staticmethod
            def backward(ctx, dy):
                x, weight_fp8 = ctx.saved_tensors
                dx = general_gemm(weight_fp8, dy, layout="NN")[0]
                ctx.wgrad_fn(x, dy)
                w = ctx.weight
                w.grad_added_to_main_grad = True
                zero = getattr(w, "zero_out_wgrad", False)
                return dx, get_dummy_wgrad(list(w.size()), w.dtype, zero=zero), None
        """,
    ),
    # ------------------------------- 2: experts onloaded by setattr of fresh Parameters
    Variant(
        2,
        "blind5-onload-setattr-fresh-parameter-per-expert",
        """
        class _GroupedLinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                xs, dys = ctx.xs, dy.split(ctx.m_splits)
                for w, xe, de in zip(ctx.weights, xs, dys):
                    accumulate = not getattr(w, "overwrite_main_grad", False)
                    general_gemm(xe, de, out=w.main_grad, accumulate=accumulate)
                    w.grad_added_to_main_grad = True
                dummies = (
                    get_dummy_wgrad(
                        list(w.size()), w.dtype, zero=getattr(w, "zero_out_wgrad", False)
                    )
                    for w in ctx.weights
                )
                return ctx.dx(dy), None, *dummies


        class OffloadedGroupedExperts(torch.nn.Module):
            def _onload(self):
                for i in range(self.num_local_experts):
                    name = f"weight{i}"
                    host = self._host_copies[name]
                    setattr(self, name, torch.nn.Parameter(host.to("cuda")))  # bug

            def forward(self, x, m_splits):
                self._onload()
                weights = [getattr(self, f"weight{i}") for i in range(self.num_local_experts)]
                return _GroupedLinearFn.apply(x, m_splits, *weights)
        """,
        """
        class _GroupedLinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                xs, dys = ctx.xs, dy.split(ctx.m_splits)
                for w, xe, de in zip(ctx.weights, xs, dys):
                    accumulate = not getattr(w, "overwrite_main_grad", False)
                    general_gemm(xe, de, out=w.main_grad, accumulate=accumulate)
                    w.grad_added_to_main_grad = True
                dummies = (
                    get_dummy_wgrad(
                        list(w.size()), w.dtype, zero=getattr(w, "zero_out_wgrad", False)
                    )
                    for w in ctx.weights
                )
                return ctx.dx(dy), None, *dummies


        class OffloadedGroupedExperts(torch.nn.Module):
            def _onload(self):
                for i in range(self.num_local_experts):
                    name = f"weight{i}"
                    host = self._host_copies[name]
                    getattr(self, name).data = host.to("cuda", non_blocking=True)

            def forward(self, x, m_splits):
                self._onload()
                weights = [getattr(self, f"weight{i}") for i in range(self.num_local_experts)]
                return _GroupedLinearFn.apply(x, m_splits, *weights)
        """,
    ),
    # ------------------------------- 3: a marking decorator put on the unfused wgrad too
    Variant(
        3,
        "blind5-marking-decorator-on-the-plain-wgrad",
        """
        def marks_main_grad(fn):
            @functools.wraps(fn)
            def wrapper(weight, x, dy):
                result = fn(weight, x, dy)
                if hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                return result

            return wrapper


        @marks_main_grad
        def _wgrad_fused(weight, x, dy):
            accumulate = not getattr(weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            zero = getattr(weight, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)


        @marks_main_grad  # bug
        def _wgrad_plain(weight, x, dy):
            return (dy.t() @ x).to(weight.dtype)


        def linear_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            wgrad_fn = _wgrad_fused if ctx.fuse_wgrad_accumulation else _wgrad_plain
            return dy @ weight, wgrad_fn(weight, x, dy)
        """,
        """
        def marks_main_grad(fn):
            @functools.wraps(fn)
            def wrapper(weight, x, dy):
                result = fn(weight, x, dy)
                if hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                return result

            return wrapper


        @marks_main_grad
        def _wgrad_fused(weight, x, dy):
            accumulate = not getattr(weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            zero = getattr(weight, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)


        def _wgrad_plain(weight, x, dy):
            return (dy.t() @ x).to(weight.dtype)


        def linear_backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            wgrad_fn = _wgrad_fused if ctx.fuse_wgrad_accumulation else _wgrad_plain
            return dy @ weight, wgrad_fn(weight, x, dy)
        """,
    ),
    # ------------------------------- 4: a mixin's class constant decides accumulate
    Variant(
        4,
        "blind5-mixin-class-constant-as-gemm-accumulate",
        """
        class _MainGradWgradMixin:
            wgrad_accumulate = False

            def _wgrad(self, weight, x, dy):
                general_gemm(x, dy, out=weight.main_grad, accumulate=self.wgrad_accumulate)  # bug
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)


        class ExpertFC1(_MainGradWgradMixin, torch.nn.Module):
            def backward_dw(self):
                if not self.delay_wgrad_compute:
                    return
                for weight, (x, dy) in zip(self.weights, self._stash):
                    self._wgrad(weight, x, dy)
                self._stash.clear()
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
        """
        class _MainGradWgradMixin:
            def _wgrad(self, weight, x, dy):
                accumulate = not getattr(weight, "overwrite_main_grad", False)
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)


        class ExpertFC1(_MainGradWgradMixin, torch.nn.Module):
            def backward_dw(self):
                if not self.delay_wgrad_compute:
                    return
                for weight, (x, dy) in zip(self.weights, self._stash):
                    self._wgrad(weight, x, dy)
                self._stash.clear()
                self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    # ------------------------------- 5: the flag skipped on the expert variant, hook not
    Variant(
        5,
        "blind5-flag-skipped-for-experts-hook-fired-for-all",
        """
        class GroupedLinearWgrad:
            def finish(self, weights, wgrads):
                for w, g in zip(weights, wgrads):
                    if getattr(w, "overwrite_main_grad", False):
                        w.main_grad.copy_(g)
                    else:
                        w.main_grad.add_(g)
                for w in weights:
                    # (helper fe) the mark moved from the gate to the flag it skips: GMLP006
                    # reports the gated statement and names the gate, as for Megatron-LM #6373
                    if not self.is_expert:
                        w.grad_added_to_main_grad = True  # bug
                    if (hook := getattr(w, "post_wgrad_grad_acc_hook", None)) is not None:
                        hook()
        """,
        """
        class GroupedLinearWgrad:
            def finish(self, weights, wgrads):
                for w, g in zip(weights, wgrads):
                    if getattr(w, "overwrite_main_grad", False):
                        w.main_grad.copy_(g)
                    else:
                        w.main_grad.add_(g)
                for w in weights:
                    w.grad_added_to_main_grad = True
                    if (hook := getattr(w, "post_wgrad_grad_acc_hook", None)) is not None:
                        hook()
        """,
    ),
    # ------------------------------- 6: the override runs the base only when fusing
    Variant(
        6,
        "blind5-backward-dw-override-gated-on-fuse-flag",
        """
        class TEColumnParallelGroupedLinear(te.pytorch.GroupedLinear):
            def __init__(self, num_gemms, in_features, out_features, config):
                super().__init__(
                    num_gemms,
                    in_features,
                    out_features,
                    fuse_wgrad_accumulation=config.gradient_accumulation_fusion,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )
                self.config = config

            def backward_dw(self):
                if self.fuse_wgrad_accumulation:  # bug
                    super().backward_dw()
        """,
        """
        class TEColumnParallelGroupedLinear(te.pytorch.GroupedLinear):
            def __init__(self, num_gemms, in_features, out_features, config):
                super().__init__(
                    num_gemms,
                    in_features,
                    out_features,
                    fuse_wgrad_accumulation=config.gradient_accumulation_fusion,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )
                self.config = config

            def backward_dw(self):
                if self.config.delay_wgrad_compute:
                    super().backward_dw()
        """,
    ),
    # ------------------------------- 7: a helper's early return decided by the local flag
    Variant(
        7,
        "blind5-helper-early-return-handed-downgraded-local",
        """
        def _grad_for_autograd(weight, wgrad, into_main_grad):
            if not into_main_grad:
                return wgrad
            if hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
            zero = getattr(weight, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)


        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            fused = ctx.fuse_wgrad_accumulation
            accumulate = fused and not getattr(weight, "overwrite_main_grad", False)
            out = weight.main_grad if fused else None
            wgrad, *_ = general_gemm(x, dy, out=out, accumulate=accumulate)
            return dy @ weight, _grad_for_autograd(weight, wgrad, accumulate)  # bug
        """,
        """
        def _grad_for_autograd(weight, wgrad, into_main_grad):
            if not into_main_grad:
                return wgrad
            if hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
            zero = getattr(weight, "zero_out_wgrad", False)
            return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)


        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            weight = ctx.weight
            fused = ctx.fuse_wgrad_accumulation
            accumulate = fused and not getattr(weight, "overwrite_main_grad", False)
            out = weight.main_grad if fused else None
            wgrad, *_ = general_gemm(x, dy, out=out, accumulate=accumulate)
            return dy @ weight, _grad_for_autograd(weight, wgrad, fused)
        """,
    ),
    # ------------------------------- 8: the fetch guarded the wrong way round
    Variant(
        8,
        "blind5-fetch-guard-inverted-never-fetches-none",
        """
        import transformer_engine.pytorch.ops as te_ops


        class FusedExperts(torch.nn.Module):
            def __init__(self, config, fc1_weight, fc2_weight):
                super().__init__()
                self.fc1_weight, self.fc2_weight = fc1_weight, fc2_weight
                self.fc1 = te_ops.GroupedLinear(
                    config.num_experts,
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                )
                self.fc1.weight = fc1_weight
                self.fc2 = te_ops.GroupedLinear(
                    config.num_experts,
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                )
                self.fc2.weight = fc2_weight

            def forward(self, x, m_splits):
                for p in (self.fc1_weight, self.fc2_weight):
                    fetch = hasattr(p, "get_main_grad")
                    if getattr(p, "main_grad", None) is not None and fetch:  # bug
                        p.main_grad = p.get_main_grad()
                return self.fc2(swiglu(self.fc1(x, m_splits)), m_splits)
        """,
        """
        import transformer_engine.pytorch.ops as te_ops


        class FusedExperts(torch.nn.Module):
            def __init__(self, config, fc1_weight, fc2_weight):
                super().__init__()
                self.fc1_weight, self.fc2_weight = fc1_weight, fc2_weight
                self.fc1 = te_ops.GroupedLinear(
                    config.num_experts,
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                )
                self.fc1.weight = fc1_weight
                self.fc2 = te_ops.GroupedLinear(
                    config.num_experts,
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                )
                self.fc2.weight = fc2_weight

            def forward(self, x, m_splits):
                for p in (self.fc1_weight, self.fc2_weight):
                    if getattr(p, "main_grad", None) is None and hasattr(p, "get_main_grad"):
                        p.main_grad = p.get_main_grad()
                return self.fc2(swiglu(self.fc1(x, m_splits)), m_splits)
        """,
        unseen=(
            "class 8 is not a rule on purpose (docs/lint-semantics.md): TE's ops fetch main_grad "
            "themselves (get_main_grad_from_param) and raise on a main_grad still None"
        ),
    ),
)
