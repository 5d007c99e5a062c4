"""The class-variant corpus of issue #19: for each bug class, small hand-written buggy
snippets in different syntax, each with a correct twin that must not be flagged.

Written for this corpus (not taken from any repository's history), to measure whether the
rules find a class rather than the instances they were written from. A buggy snippet marks
the line where the bug sits with ``# bug``; it is caught when gmlp-lint reports any finding
on that line. ``cls`` is the class number in issue #19.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    cls: int
    name: str
    bug: str
    twin: str
    # Why no rule sees this variant (empty: it must be caught). Such variants stay in the
    # corpus as expected misses: the recall counts them, and their test fails as soon as a
    # rule starts catching them, so the reason gets revisited.
    unseen: str = ""
    # Findings the twin carries on other lines than the bug's, each judged true where the
    # real code it was taken from is linted at a repository's head (docs/lint-history-split.md):
    # (code, line). A twin taken from real code may keep a real bug the variant is not about.
    twin_findings: tuple[tuple[str, int], ...] = ()

    @property
    def bug_source(self) -> str:
        return textwrap.dedent(self.bug).lstrip("\n")

    @property
    def twin_source(self) -> str:
        return textwrap.dedent(self.twin).lstrip("\n")

    @property
    def bug_lines(self) -> frozenset[int]:
        lines = self.bug_source.splitlines()
        return frozenset(i for i, line in enumerate(lines, start=1) if "# bug" in line)


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        1,
        "gemm-out-on-saved-copy",
        """
        def backward(ctx, dy):
            weight, x = ctx.saved_tensors
            origin_weight = ctx.origin_weight_ref()
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)  # bug
            origin_weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(origin_weight)
        """,
        """
        def backward(ctx, dy):
            weight, x = ctx.saved_tensors
            origin_weight = ctx.origin_weight_ref()
            general_gemm(x, dy, out=origin_weight.main_grad, accumulate=True)
            origin_weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(origin_weight)
        """,
    ),
    Variant(
        1,
        "dummy-sized-from-quantized-main-grad",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            weight_fp8 = quantize(weight)
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            weight.grad_added_to_main_grad = True
            return torch.zeros_like(weight_fp8.main_grad)  # bug
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            weight_fp8 = quantize(weight)
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            weight.grad_added_to_main_grad = True
            return torch.zeros_like(weight.main_grad)
        """,
    ),
    Variant(
        1,
        "overwrite-flag-from-gathered-weight-via-local",
        """
        def backward(ctx, dy, x):
            origin_weight = ctx.origin_weight
            full_weight = all_gather_along_first_dim(origin_weight)
            accumulate = not getattr(full_weight, "overwrite_main_grad", False)  # bug
            general_gemm(x, dy, out=origin_weight.main_grad, accumulate=accumulate)
            return full_weight
        """,
        """
        def backward(ctx, dy, x):
            origin_weight = ctx.origin_weight
            full_weight = all_gather_along_first_dim(origin_weight)
            accumulate = not getattr(origin_weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=origin_weight.main_grad, accumulate=accumulate)
            return full_weight
        """,
    ),
    Variant(
        1,
        "weakref-of-quantized-weight",
        """
        import weakref


        def forward(ctx, x, weight):
            weight_fp8 = quantize(weight)
            ctx.weight_ref = weakref.ref(weight_fp8)  # bug
            return x @ weight_fp8


        def backward(ctx, dy):
            weight = ctx.weight_ref()
            weight.main_grad.add_(dy)
            weight.grad_added_to_main_grad = True
        """,
        """
        import weakref


        def forward(ctx, x, weight):
            weight_fp8 = quantize(weight)
            ctx.weight_ref = weakref.ref(weight)
            return x @ weight_fp8


        def backward(ctx, dy):
            weight = ctx.weight_ref()
            weight.main_grad.add_(dy)
            weight.grad_added_to_main_grad = True
        """,
    ),
    Variant(
        1,
        "flag-set-on-restored-copy",
        """
        def backward(ctx, dy, wgrad):
            (weight,) = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            origin_weight = ctx.origin_weight_ref()
            origin_weight.main_grad.add_(wgrad)
            weight.grad_added_to_main_grad = True  # bug
            return make_dummy_wgrad(weight)
        """,
        """
        def backward(ctx, dy, wgrad):
            (weight,) = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            origin_weight = ctx.origin_weight_ref()
            origin_weight.main_grad.add_(wgrad)
            origin_weight.grad_added_to_main_grad = True
            return make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        1,
        "quantized-copy-on-ctx-attribute",
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                weightmat = cast_to_fp8(weight)
                ctx.weight = weightmat
                ctx.x = x
                return x @ weightmat.t()

            @staticmethod
            def backward(ctx, dy):
                weight = ctx.weight
                general_gemm(ctx.x, dy, out=weight.main_grad, accumulate=True)  # bug
                return None, None
        """,
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                weightmat = cast_to_fp8(weight)
                ctx.weight = weight
                ctx.weightmat = weightmat
                ctx.x = x
                return x @ weightmat.t()

            @staticmethod
            def backward(ctx, dy):
                weight = ctx.weight
                general_gemm(ctx.x, dy, out=weight.main_grad, accumulate=True)
                return None, None
        """,
    ),
    Variant(
        1,
        "quantized-copy-saved-for-backward",
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                weight_q = quantize(weight)
                ctx.save_for_backward(x, weight_q)
                return x @ weight_q.t()

            @staticmethod
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                weight.main_grad.add_(dy.t() @ x)  # bug
                return None, None
        """,
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                weight_q = quantize(weight)
                ctx.save_for_backward(x, weight)
                return x @ weight_q.t()

            @staticmethod
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                weight.main_grad.add_(dy.t() @ x)
                return None, None
        """,
    ),
    Variant(
        1,
        "helper-returns-materialized-weight",
        """
        def _materialize(weight, group):
            return gather_along_first_dim(weight, group)


        def backward(ctx, dy, x):
            w = _materialize(ctx.weight, ctx.group)
            w.main_grad.add_(dy.t() @ x)  # bug
            return None
        """,
        """
        def _materialize(weight, group):
            return gather_along_first_dim(weight, group)


        def backward(ctx, dy, x):
            w = _materialize(ctx.weight, ctx.group)
            ctx.weight.main_grad.add_(dy.t() @ x)
            return w
        """,
    ),
    Variant(
        1,
        "dummy-sized-from-restored-copy-parameter-from-ctx",
        """
        def backward(ctx, dy):
            x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            origin_weight = ctx.weight_object
            origin_weight.main_grad.add_(dy.t() @ x)
            if hasattr(origin_weight, "grad_added_to_main_grad"):
                origin_weight.grad_added_to_main_grad = True
                wgrad = torch.zeros(weight.main_grad.shape, dtype=origin_weight.dtype)  # bug
            return None, wgrad
        """,
        """
        def backward(ctx, dy):
            x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            origin_weight = ctx.weight_object
            origin_weight.main_grad.add_(dy.t() @ x)
            if hasattr(origin_weight, "grad_added_to_main_grad"):
                origin_weight.grad_added_to_main_grad = True
                wgrad = torch.zeros(origin_weight.main_grad.shape, dtype=origin_weight.dtype)
            return None, wgrad
        """,
    ),
    Variant(
        1,
        "dummy-like-getattr-of-saved-copy",
        """
        def backward(ctx, dy, x):
            weight, bias = ctx.saved_tensors
            orig_weight = ctx.param
            torch.addmm(orig_weight.main_grad, dy.t(), x, out=orig_weight.main_grad)
            if ctx.fuse_wgrad_accumulation:
                orig_weight.grad_added_to_main_grad = True
                return None, torch.zeros_like(getattr(weight, "main_grad"))  # bug
            return None, None
        """,
        """
        def backward(ctx, dy, x):
            weight, bias = ctx.saved_tensors
            orig_weight = ctx.param
            torch.addmm(orig_weight.main_grad, dy.t(), x, out=orig_weight.main_grad)
            if ctx.fuse_wgrad_accumulation:
                orig_weight.grad_added_to_main_grad = True
                return None, torch.zeros_like(getattr(orig_weight, "main_grad"))
            return None, None
        """,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    Variant(
        2,
        "fresh-parameter-from-helper",
        """
        def _as_param(t):
            return torch.nn.Parameter(t.detach(), requires_grad=True)


        def backward(ctx, dy, x):
            weight = _as_param(ctx.weight)  # bug
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            return None
        """,
        """
        def _as_param(t):
            return torch.nn.Parameter(t.detach(), requires_grad=True)


        def backward(ctx, dy, x):
            weight = ctx.weight
            general_gemm(x, dy, out=weight.main_grad, accumulate=True)
            return _as_param(dy)
        """,
    ),
    Variant(
        2,
        "rebound-in-tuple-assignment",
        """
        def backward(ctx, dy, x):
            weight, bias = torch.nn.Parameter(ctx.weight), ctx.bias  # bug
            if hasattr(weight, "grad_added_to_main_grad"):
                weight.main_grad.add_(dy.t() @ x)
                weight.grad_added_to_main_grad = True
            return None
        """,
        """
        def backward(ctx, dy, x):
            weight, bias = ctx.weight, ctx.bias
            if hasattr(weight, "grad_added_to_main_grad"):
                weight.main_grad.add_(dy.t() @ x)
                weight.grad_added_to_main_grad = True
            return None
        """,
    ),
    Variant(
        2,
        "rebound-to-data-copy",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            weight = weight.data.clone()  # bug
            torch.addmm(weight.main_grad, dy.t(), x, out=weight.main_grad)
            return None
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            scratch = weight.data.clone()
            torch.addmm(weight.main_grad, dy.t(), x, out=weight.main_grad)
            return scratch
        """,
    ),
    Variant(
        2,
        "main-grad-returned-as-grad-via-alias",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            wgrad = weight.main_grad
            general_gemm(x, dy, out=wgrad, accumulate=True)
            weight.grad_added_to_main_grad = True
            return None, wgrad  # bug
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            wgrad = weight.main_grad
            general_gemm(x, dy, out=wgrad, accumulate=True)
            weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        2,
        "main-grad-set-as-grad",
        """
        def finish_wgrad(weight, wgrad):
            weight.main_grad.add_(wgrad)
            weight.grad_added_to_main_grad = True
            weight.grad = weight.main_grad  # bug
        """,
        """
        def finish_wgrad(weight, wgrad):
            weight.main_grad.add_(wgrad)
            weight.grad_added_to_main_grad = True
            weight.grad = torch.zeros_like(weight)
        """,
    ),
    Variant(
        2,
        "gemm-result-into-main-grad-returned-on-the-fused-path",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            main_grad = weight.main_grad if ctx.fuse_wgrad_accumulation else None
            dw, _ = wgrad_gemm(x, dy, accumulate=True, out=main_grad)
            if hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = ctx.fuse_wgrad_accumulation
            return None, dw if weight.requires_grad else None  # bug
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            main_grad = weight.main_grad if ctx.fuse_wgrad_accumulation else None
            dw, _ = wgrad_gemm(x, dy, accumulate=True, out=main_grad)
            if ctx.fuse_wgrad_accumulation:
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight)
            return None, dw if weight.requires_grad else None
        """,
    ),
    Variant(
        2,
        "in-place-add-result-set-as-grad",
        """
        def accumulate_wgrad(param, dw):
            grad = param.main_grad.add_(dw)
            param.grad_added_to_main_grad = True
            param.grad = grad  # bug
        """,
        """
        def accumulate_wgrad(param, dw):
            param.main_grad.add_(dw)
            param.grad_added_to_main_grad = True
            param.grad = None
        """,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    Variant(
        3,
        "flag-without-write-real-grad-computed",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            wgrad = torch.matmul(dy.t(), x)
            if ctx.fuse_wgrad_accumulation:
                weight.grad_added_to_main_grad = True  # bug
                wgrad = make_dummy_wgrad(weight)
            return None, wgrad
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            wgrad = torch.matmul(dy.t(), x)
            if ctx.fuse_wgrad_accumulation:
                weight.main_grad.add_(wgrad)
                weight.grad_added_to_main_grad = True
                wgrad = make_dummy_wgrad(weight)
            return None, wgrad
        """,
    ),
    Variant(
        3,
        "flag-without-write-on-one-path",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            if ctx.use_grouped:
                grouped_wgrad(x, dy, weight.main_grad)
            weight.grad_added_to_main_grad = True  # bug
            return None, make_dummy_wgrad(weight)
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            if ctx.use_grouped:
                grouped_wgrad(x, dy, weight.main_grad)
            else:
                weight.main_grad.add_(dy.t() @ x)
            weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        3,
        "flag-via-setattr-without-write",
        """
        def finish(params, grads):
            for p, g in zip(params, grads):
                setattr(p, "grad_added_to_main_grad", True)  # bug
            return [None for _ in params]
        """,
        """
        def finish(params, grads):
            for p, g in zip(params, grads):
                p.main_grad.add_(g)
                setattr(p, "grad_added_to_main_grad", True)
            return [None for _ in params]
        """,
        unseen=(
            "the function never touches main_grad and computes no gradient: the write may "
            "have happened in a captured graph or another function (Megatron's CUDA-graph "
            "replay marks exactly so), so no rule reports a mark with no write anywhere"
        ),
    ),
    Variant(
        3,
        "write-without-flag-real-grad-handed-on",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            wgrad = dy.t() @ x
            weight.main_grad.add_(wgrad)
            return None, wgrad  # bug
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            wgrad = dy.t() @ x
            weight.main_grad.add_(wgrad)
            weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        3,
        "write-without-flag-grad-attribute",
        """
        def reduce_expert_grads(params, grads):
            for p, g in zip(params, grads):
                p.main_grad.add_(g)
                p.grad = g  # bug
        """,
        """
        def reduce_expert_grads(params, grads):
            for p, g in zip(params, grads):
                p.main_grad.add_(g)
                p.grad_added_to_main_grad = True
                p.grad = torch.zeros_like(p)
        """,
    ),
    Variant(
        3,
        "main-grad-fetched-into-local-never-given-to-gemm",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            main_grad = weight.main_grad
            wgrad = torch.matmul(dy.t(), x)
            weight.grad_added_to_main_grad = True  # bug
            return None, make_dummy_wgrad(weight)
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            main_grad = weight.main_grad
            main_grad.add_(torch.matmul(dy.t(), x))
            weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        3,
        "fsdp-buffers-put-back-but-gemm-writes-fresh-list",
        """
        def wgrad_step(self, xs, dys):
            grads = [None] * len(self.weights)
            for w in self.weights:
                w.main_grad = w.get_main_grad()
            grouped_gemm(xs, dys, grads, accumulate=True)
            for w in self.weights:
                w.grad_added_to_main_grad = True  # bug
            return [make_dummy_wgrad(w) for w in self.weights]
        """,
        """
        def wgrad_step(self, xs, dys):
            for w in self.weights:
                w.main_grad = w.get_main_grad()
            grads = [w.main_grad for w in self.weights]
            grouped_gemm(xs, dys, grads, accumulate=True)
            for w in self.weights:
                w.grad_added_to_main_grad = True
            return [make_dummy_wgrad(w) for w in self.weights]
        """,
    ),
    # ---------------------------------------------------------------- 4: overwrite unasked
    Variant(
        4,
        "accumulate-false-through-local",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            accumulate = False
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)  # bug
            return None
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            accumulate = not getattr(weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            return None
        """,
    ),
    Variant(
        4,
        "matmul-out-through-alias",
        """
        def backward(ctx, dy, x):
            main_grad = ctx.weight.main_grad
            torch.matmul(dy.t(), x, out=main_grad)  # bug
            return None
        """,
        """
        def backward(ctx, dy, x):
            main_grad = ctx.weight.main_grad
            main_grad.addmm_(dy.t(), x)
            return None
        """,
    ),
    Variant(
        4,
        "kwargs-dict-accumulate-false",
        """
        def backward(ctx, dy, x):
            gemm_kwargs = {"out": ctx.weight.main_grad, "accumulate": False}
            general_gemm(x, dy, **gemm_kwargs)  # bug
            return None
        """,
        """
        def backward(ctx, dy, x):
            gemm_kwargs = {"out": ctx.weight.main_grad, "accumulate": True}
            general_gemm(x, dy, **gemm_kwargs)
            return None
        """,
    ),
    Variant(
        4,
        "copy-into-alias-in-marking-function",
        """
        def finalize_expert_grads(params, grads):
            for p, g in zip(params, grads):
                buf = p.main_grad
                buf.copy_(g)  # bug
                p.grad_added_to_main_grad = True
        """,
        """
        def finalize_expert_grads(params, grads):
            for p, g in zip(params, grads):
                buf = p.main_grad
                buf.add_(g)
                p.grad_added_to_main_grad = True
        """,
    ),
    Variant(
        4,
        "slice-assignment-into-main-grad",
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            weight.main_grad[:] = dy.t() @ x  # bug
            weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(weight)
        """,
        """
        def backward(ctx, dy, x):
            weight = ctx.weight
            weight.main_grad[:] += dy.t() @ x
            weight.grad_added_to_main_grad = True
            return None, make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        4,
        "fsdp-pre-backward-reset-never-asks-overwrite",
        """
        class FSDPUnit:
            def _pre_backward(self, *unused):
                self.unshard()
                for p in self.fsdp_params:
                    p.grad_added_to_main_grad = False  # bug
        """,
        """
        class FSDPUnit:
            def _pre_backward(self, *unused):
                self.unshard()
                for p in self.fsdp_params:
                    p.grad_added_to_main_grad = False
                    p.overwrite_main_grad = self.shards_gradients
        """,
    ),
    Variant(
        4,
        "fsdp-hook-resets-by-setattr-never-asks-overwrite",
        """
        def make_fsdp_grad_hook(module):
            def hook(grads):
                for group in module.param_groups:
                    for p in group.params:
                        setattr(p, "grad_added_to_main_grad", False)  # bug
                module.unshard()

            return hook
        """,
        """
        def make_fsdp_grad_hook(module):
            def hook(grads):
                for group in module.param_groups:
                    for p in group.params:
                        setattr(p, "grad_added_to_main_grad", False)
                        setattr(p, "overwrite_main_grad", group.shards_gradients)
                module.unshard()

            return hook
        """,
    ),
    # ------------------------------------------------- 7: the seed shape in other syntax
    Variant(
        7,
        "dummy-chosen-in-return-ifexp",
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse_wgrad_accumulation
            if getattr(weight, "overwrite_main_grad", False):
                accumulate = False
            wgrad = general_gemm(x, dy, out=weight.main_grad if accumulate else None)
            dummy = make_dummy_wgrad(weight)
            return None, (dummy if accumulate else wgrad)  # bug
        """,
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse_wgrad_accumulation
            if getattr(weight, "overwrite_main_grad", False):
                accumulate = False
            wgrad = general_gemm(
                x, dy, out=weight.main_grad if ctx.fuse_wgrad_accumulation else None
            )
            dummy = make_dummy_wgrad(weight)
            return None, (dummy if ctx.fuse_wgrad_accumulation else wgrad)
        """,
    ),
    Variant(
        7,
        "dummy-chosen-in-helper-argument",
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            return finish(dy, None if accumulate else dy.t() @ x)  # bug
        """,
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            return finish(dy, None if ctx.fuse else dy.t() @ x)
        """,
    ),
    Variant(
        7,
        "grad-added-assigned-the-local-flag",
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            weight.grad_added_to_main_grad = accumulate  # bug
            return None, make_dummy_wgrad(weight)
        """,
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            weight.grad_added_to_main_grad = ctx.fuse
            return None, make_dummy_wgrad(weight)
        """,
    ),
    Variant(
        7,
        "gradients-tuple-chosen-on-flag",
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            wgrad = general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            grads = (None, None) if accumulate else (None, wgrad)  # bug
            return grads
        """,
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            wgrad = general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            grads = (None, None) if ctx.fuse else (None, wgrad)
            return grads
        """,
    ),
    Variant(
        7,
        "and-or-spelling-in-assignment",
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            wgrad = general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            wgrad = accumulate and make_dummy_wgrad(weight) or wgrad  # bug
            return None, wgrad
        """,
        """
        def backward(ctx, dy, x, weight):
            accumulate = ctx.fuse and not getattr(weight, "overwrite_main_grad", False)
            wgrad = general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            wgrad = ctx.fuse and make_dummy_wgrad(weight) or wgrad
            return None, wgrad
        """,
    ),
    # ------------------------------------------------- 8: Megatron-LM #5209's shape
    Variant(
        8,
        "te-op-on-wrapper-params-no-fetch",
        """
        import transformer_engine.pytorch.ops as te_ops


        class FusedExperts(torch.nn.Module):
            def __init__(self, config, weight1, weight2):
                super().__init__()
                self.weight1 = weight1
                self.weight2 = weight2
                self.op = te_ops.GroupedLinear(  # bug
                    config.num_experts,
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                )
                self.op.weight = self.weight1

            def forward(self, x):
                return self.op(x)
        """,
        """
        import transformer_engine.pytorch.ops as te_ops


        class FusedExperts(torch.nn.Module):
            def __init__(self, config, weight1, weight2):
                super().__init__()
                self.weight1 = weight1
                self.weight2 = weight2
                self.op = te_ops.GroupedLinear(
                    config.num_experts,
                    accumulate_into_main_grad=config.gradient_accumulation_fusion,
                )
                self.op.weight = self.weight1

            def forward(self, x):
                for param in (self.weight1, self.weight2):
                    if hasattr(param, "get_main_grad"):
                        param.main_grad = param.get_main_grad()
                return self.op(x)
        """,
        unseen=(
            "whether a TE op fetches an FSDP main_grad itself depends on the TE version "
            "(TE's ops call get_main_grad_from_param at its head); Megatron-LM's head builds "
            "three such ops with no get_main_grad() and relies on that, so a rule on the "
            "integration side alone would raise false alarms there"
        ),
    ),
)
