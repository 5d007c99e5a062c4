"""The blind7 class 1, 2 and 7 variants this branch targets, and further spellings of the
facts added for them, written for this file (not copied from the corpus):

* downgrade: ``is_first_microbatch`` downgrades a local accumulate flag as
  ``overwrite_main_grad`` does (the GEMM overwrites main_grad on a step's first microbatch):
  main_grad as the destination, or the bookkeeping, gated on such a flag is GMLP001 / GMLP002;
* weakref: a weakref kept for backward to reach the Parameter, taken of an object that is a
  quantized or gathered copy on at least one path (also a comprehension's variable walking a
  list of such copies): GMLP030;
* beside: a name handed in or restored beside its Parameter twin (``origin_w``, ``w_param``)
  given to a helper that takes main_grad from its parameter: GMLP037;
* alias: a new object over a weight's storage (``w.detach()``, ``w.data``,
  ``Parameter(w.data)``) kept on ctx by a function fusing the wgrad into main_grad, or put in
  another module's parameter slot: GMLP015.
"""

from __future__ import annotations

import textwrap

import pytest

from .support import lint_snippet
from .variant_corpus_blind7 import VARIANTS

BY_NAME = {v.name: v for v in VARIANTS}


def _bug_lines(source: str) -> set[int]:
    lines = source.splitlines()
    return {i for i, line in enumerate(lines, start=1) if "# bug" in line}


BUGGY = {
    # downgrade
    "attr-ifexp-out": """
        def wgrad_out(ctx, weight, x, dy):
            accumulate = ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
            out = weight.main_grad if accumulate else torch.empty_like(weight)  # bug
            gemm(x, dy, out=out, accumulate=accumulate)
            return out
    """,
    "helper-param-bookkeeping": """
        def finish_wgrad(weight, wgrad, fuse, is_first_microbatch):
            acc = fuse if not is_first_microbatch else False
            if acc:  # bug
                weight.grad_added_to_main_grad = True
                return make_dummy_wgrad(weight)
            return wgrad
    """,
    "early-return-experts": """
        def expert_wgrads(self, experts, grads):
            out = []
            for expert, g in zip(experts, grads):
                accumulate = not self.is_first_microbatch
                gemm_into(expert.weight.main_grad, g, accumulate=accumulate)
                if not accumulate:  # bug
                    out.append(g)
                    continue
                expert.weight.grad_added_to_main_grad = True
                shape = list(expert.weight.main_grad.shape)
                out.append(get_dummy_wgrad(shape, expert.weight.dtype, zero=True))
            return out
    """,
    "forward-ctx-carried": """
        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, fuse, is_first_microbatch):
                ctx.accumulate = fuse and not is_first_microbatch
                ctx.fuse = fuse
                ctx.save_for_backward(x, weight)
                return x @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                general_gemm(x, dy, out=weight.main_grad, accumulate=ctx.accumulate)
                wgrad = None
                if ctx.accumulate:  # bug
                    weight.grad_added_to_main_grad = True
                    wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
                return dy @ weight, wgrad, None, None
    """,
    # weakref
    "ifexp-single": """
        import weakref

        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, fp8, fuse):
                weightmat = quantize(weight) if fp8 else weight
                if fuse:
                    ctx.weight_ref = weakref.ref(weightmat)  # bug
                ctx.save_for_backward(x, weightmat)
                return x @ weightmat.t()

            @staticmethod
            def backward(ctx, dy):
                x, weightmat = ctx.saved_tensors
                weight = ctx.weight_ref()
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                return dy @ weightmat, None, None, None
    """,
    "loop-append-index": """
        import weakref

        def keep_refs(ctx, weights, fp8):
            if fp8:
                casts = [quantize_weight(w) for w in weights]
            else:
                casts = list(weights)
            refs = []
            for i in range(len(weights)):
                refs.append(weakref.ref(casts[i]))  # bug
            ctx.param_refs = refs
            ctx.main_grads = [w.main_grad for w in weights]
            return casts
    """,
    "dictcomp-gathered": """
        import weakref

        class ExpertShards:
            def prepare(self, names, shards, recipe):
                tensors = shards
                if recipe is not None:
                    tensors = [s.to(torch.float8_e4m3fn) for s in shards]
                self._refs = {n: weakref.ref(t) for n, t in zip(names, tensors)}  # bug
                return tensors

            def finish(self, name, wgrad):
                param = self._refs[name]()
                param.main_grad.add_(wgrad)
                param.grad_added_to_main_grad = True
    """,
    "genexp-tuple-walrus": """
        import weakref

        def stash(ctx, params, recipe):
            if (q := recipe is not None):
                used = [cast_to_fp8(p, recipe) for p in params]
            else:
                used = params
            ctx.refs = tuple(weakref.ref(u) for u in used)  # bug
            ctx.fuse_main_grad = all(hasattr(p, "main_grad") for p in params)
            return used
    """,
    # beside
    "te-restored-beside-origin": """
        def _accumulate_wgrad(param, x, dy):
            param.main_grad.add_(dy.t() @ x)


        class _Linear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                weight, x = ctx.saved_tensors
                origin_weight = ctx.origin_weight_ref()
                _accumulate_wgrad(weight, x, dy)  # bug
                origin_weight.grad_added_to_main_grad = True
                return dy @ weight, make_dummy_wgrad(origin_weight)
    """,
    "method-keyword-original": """
        class ExpertWgrad:
            def _fused_add(self, x, dy, *, target):
                torch.addmm(target.main_grad, dy.t(), x, out=target.main_grad)

            def wgrad(self, x, dy, weight, original_weight):
                self._fused_add(x, dy, target=weight)  # bug
                original_weight.grad_added_to_main_grad = True
    """,
    "loop-experts-param-suffix": """
        def add_into_main_grad(p, g):
            p.main_grad += g
            p.grad_added_to_main_grad = True


        def expert_wgrads(views, params, grads):
            for w, w_param, g in zip(views, params, grads):
                add_into_main_grad(w, g)  # bug
                assert w_param.requires_grad
    """,
    "ctx-attr-restored-orig": """
        class GMMFunction(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                x = ctx.x
                weight = ctx.weight
                orig_weight = ctx.orig_weight
                GMMFunction.gmm_add(x, dy, weight)  # bug
                return None, None

            @staticmethod
            def gmm_add(x, dy, param):
                npu_groupmatmul_add_fp32(x, dy, param.main_grad)
    """,
    # alias
    "ctx-data-fuse-flag": """
        class LinearFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, fuse_wgrad_accumulation):
                ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                ctx.weight = weight.data  # bug
                ctx.x = x
                return x @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                weight = ctx.weight
                if ctx.fuse_wgrad_accumulation:
                    weight.main_grad.add_(dy.t() @ ctx.x)
                return dy @ weight, None, None
    """,
    "ctx-experts-detach-list": """
        def grouped_forward(ctx, x, m_splits, accumulate_into_main_grad, *weights):
            ctx.accumulate_into_main_grad = accumulate_into_main_grad
            ctx.weights = [w.detach() for w in weights]  # bug
            return grouped_gemm(x, weights, m_splits)
    """,
    "ctx-parameter-wrap": """
        def forward(ctx, inp, weight, gradient_accumulation_fusion):
            ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
            ctx.main_weight = torch.nn.Parameter(weight.data, requires_grad=False)  # bug
            return torch.matmul(inp, weight.t())


        def backward(ctx, dy):
            if ctx.gradient_accumulation_fusion:
                fused_wgrad_into(ctx.main_weight.main_grad, dy)
    """,
    "module-setattr-experts": """
        def share_expert_weights(shell, grouped, fuse_wgrad_accumulation):
            shell.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            for i in range(grouped.num_gemms):
                fresh = nn.Parameter(getattr(grouped, f"weight{i}").detach())
                setattr(shell, f"weight{i}", fresh)  # bug
            assert all(hasattr(p, "main_grad") for p in grouped.parameters())
    """,
    "module-attr-assign-method": """
        class FusedMLP(MegatronModule):
            def _build_fused(self):
                fc1 = self.fc1
                fused = te.ops.Linear(*fc1.weight.shape[::-1], accumulate_into_main_grad=True)
                fused.weight = torch.nn.Parameter(self.fc1.weight.data)  # bug
                return fused
    """,
    "module-register-keyword": """
        def attach(op, linear):
            assert linear.fuse_wgrad_accumulation and hasattr(linear.weight, "main_grad")
            op.register_parameter(name="weight", param=Parameter(linear.weight))  # bug
    """,  # weakref: a list of copies gathered on every path, walked by a comprehension
    "weakref-every-path-gathered": """
        import weakref

        def keep(ctx, weights):
            gathered = [all_gather_weight(w) for w in weights]
            ctx.refs = [weakref.ref(g) for g in gathered]  # bug
            ctx.main_grads = [w.main_grad for w in weights]
            return gathered
    """,
}

CORRECT = {
    # Transformer Engine v2.16's grouped_linear backward: a comprehension walks the
    # Parameters the weakrefs give back (``origin_weights``), though an earlier loop of the
    # function binds ``weight`` to the saved weights: the comprehension's binding is the one
    # at the call (it was reported at TE v2.16 and 52d6e8bb before).
    "beside-comprehension-over-origin-weights": """
        def backward(ctx, grad_output):
            saved = restore_from_func_ctx(ctx)
            weights = saved[: ctx.n]
            for weight in weights:
                dgrad = grad_output @ weight
            origin_weights = [ref() for ref in ctx.origin_weight_refs]
            main_grads = [f() for f in ctx.main_grad_funcs]
            for origin_weight, main_grad in zip(origin_weights, main_grads):
                origin_weight.main_grad = main_grad

            def handle_custom_ddp(weight, main_grad, wgrad):
                if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    zero = getattr(weight, "zero_out_wgrad", False)
                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype, zero=zero)
                return wgrad

            wgrads = [
                handle_custom_ddp(weight, main_grad, wgrad)
                for weight, main_grad, wgrad in zip(origin_weights, main_grads, ctx.wgrads)
            ]
            return dgrad, *wgrads
    """,
    # Transformer Engine's GroupedLinear at its head: the weakrefs are taken of weights
    # gathered on the distributed path, whose backward reads the saved weights back instead
    "weakref-gathered-on-one-path": """
        import weakref

        def forward(ctx, inp, fuse_wgrad_accumulation, *weights):
            origin_weights = weights
            if is_distributed_weight(weights[0]):
                weights = materialize_weight_for_forward(weights)
            if fuse_wgrad_accumulation:
                ctx.origin_weight_refs = [weakref.ref(w) for w in weights]
                ctx.main_grad_funcs = [lambda j=i: origin_weights[j].main_grad for i in range(2)]
            return grouped_gemm(inp, weights)
    """,
    # a plain test on the first-microbatch switch guards weight caches, not the main_grad path
    "first-microbatch-test-guards-cache": """
        def backward(ctx, dy, weight, wgrad, is_first_microbatch):
            cache = None if is_first_microbatch is None else ctx.cache
            if ctx.fuse_wgrad_accumulation:
                weight.grad_added_to_main_grad = True
                return None, make_dummy_wgrad(weight), cache
            return None, wgrad, cache
    """,
    # downgrade
    "attr-ifexp-out": """
        def wgrad_out(ctx, weight, x, dy):
            accumulate = ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
            out = weight.main_grad if ctx.fuse_wgrad_accumulation else torch.empty_like(weight)
            gemm(x, dy, out=out, accumulate=accumulate)
            return out
    """,
    "helper-param-bookkeeping": """
        def finish_wgrad(weight, wgrad, fuse, is_first_microbatch):
            acc = fuse if not is_first_microbatch else False
            if fuse:
                weight.grad_added_to_main_grad = True
                return make_dummy_wgrad(weight)
            return wgrad
    """,
    "early-return-experts": """
        def expert_wgrads(self, experts, grads):
            out = []
            for expert, g in zip(experts, grads):
                accumulate = not self.is_first_microbatch
                gemm_into(expert.weight.main_grad, g, accumulate=accumulate)
                expert.weight.grad_added_to_main_grad = True
                shape = list(expert.weight.main_grad.shape)
                out.append(get_dummy_wgrad(shape, expert.weight.dtype, zero=True))
            return out
    """,
    "forward-ctx-carried": """
        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, fuse, is_first_microbatch):
                ctx.accumulate = fuse and not is_first_microbatch
                ctx.fuse = fuse
                ctx.save_for_backward(x, weight)
                return x @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                x, weight = ctx.saved_tensors
                general_gemm(x, dy, out=weight.main_grad, accumulate=ctx.accumulate)
                wgrad = None
                if ctx.fuse:
                    weight.grad_added_to_main_grad = True
                    wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
                return dy @ weight, wgrad, None, None
    """,
    # weakref
    "ifexp-single": """
        import weakref

        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, fp8, fuse):
                weightmat = quantize(weight) if fp8 else weight
                if fuse:
                    ctx.weight_ref = weakref.ref(weight)
                ctx.save_for_backward(x, weightmat)
                return x @ weightmat.t()

            @staticmethod
            def backward(ctx, dy):
                x, weightmat = ctx.saved_tensors
                weight = ctx.weight_ref()
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                return dy @ weightmat, None, None, None
    """,
    "loop-append-index": """
        import weakref

        def keep_refs(ctx, weights, fp8):
            if fp8:
                casts = [quantize_weight(w) for w in weights]
            else:
                casts = list(weights)
            refs = []
            for i in range(len(weights)):
                refs.append(weakref.ref(weights[i]))
            ctx.param_refs = refs
            ctx.main_grads = [w.main_grad for w in weights]
            return casts
    """,
    "dictcomp-gathered": """
        import weakref

        class ExpertShards:
            def prepare(self, names, shards, recipe):
                tensors = shards
                if recipe is not None:
                    tensors = [s.to(torch.float8_e4m3fn) for s in shards]
                self._refs = {n: weakref.ref(s) for n, s in zip(names, shards)}
                return tensors

            def finish(self, name, wgrad):
                param = self._refs[name]()
                param.main_grad.add_(wgrad)
                param.grad_added_to_main_grad = True
    """,
    "genexp-tuple-walrus": """
        import weakref

        def stash(ctx, params, recipe):
            if (q := recipe is not None):
                used = [cast_to_fp8(p, recipe) for p in params]
            else:
                used = params
            ctx.refs = tuple(weakref.ref(p) for p in params)
            ctx.fuse_main_grad = all(hasattr(p, "main_grad") for p in params)
            return used
    """,
    # beside
    "te-restored-beside-origin": """
        def _accumulate_wgrad(param, x, dy):
            param.main_grad.add_(dy.t() @ x)


        class _Linear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                weight, x = ctx.saved_tensors
                origin_weight = ctx.origin_weight_ref()
                _accumulate_wgrad(origin_weight, x, dy)
                origin_weight.grad_added_to_main_grad = True
                return dy @ weight, make_dummy_wgrad(origin_weight)
    """,
    "method-keyword-original": """
        class ExpertWgrad:
            def _fused_add(self, x, dy, *, target):
                torch.addmm(target.main_grad, dy.t(), x, out=target.main_grad)

            def wgrad(self, x, dy, weight, original_weight):
                self._fused_add(x, dy, target=original_weight)
                original_weight.grad_added_to_main_grad = True
    """,
    "loop-experts-param-suffix": """
        def add_into_main_grad(p, g):
            p.main_grad += g
            p.grad_added_to_main_grad = True


        def expert_wgrads(views, params, grads):
            for w, w_param, g in zip(views, params, grads):
                add_into_main_grad(w_param, g)
                assert w.requires_grad
    """,
    "ctx-attr-restored-orig": """
        class GMMFunction(torch.autograd.Function):
            @staticmethod
            def backward(ctx, dy):
                x = ctx.x
                weight = ctx.weight
                orig_weight = ctx.orig_weight
                GMMFunction.gmm_add(x, dy, orig_weight)
                return None, None

            @staticmethod
            def gmm_add(x, dy, param):
                npu_groupmatmul_add_fp32(x, dy, param.main_grad)
    """,
    # alias
    "ctx-data-fuse-flag": """
        class LinearFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, fuse_wgrad_accumulation):
                ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                ctx.weight = weight
                ctx.x = x
                return x @ weight.t()

            @staticmethod
            def backward(ctx, dy):
                weight = ctx.weight
                if ctx.fuse_wgrad_accumulation:
                    weight.main_grad.add_(dy.t() @ ctx.x)
                return dy @ weight, None, None
    """,
    "ctx-experts-detach-list": """
        def grouped_forward(ctx, x, m_splits, accumulate_into_main_grad, *weights):
            ctx.accumulate_into_main_grad = accumulate_into_main_grad
            ctx.weights = [w for w in weights]
            return grouped_gemm(x, weights, m_splits)
    """,
    "ctx-parameter-wrap": """
        def forward(ctx, inp, weight, gradient_accumulation_fusion):
            ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
            ctx.weight_operand = weight.detach()
            ctx.save_for_backward(inp, weight)
            return torch.matmul(inp, weight.t())


        def backward(ctx, dy):
            inp, weight = ctx.saved_tensors
            if ctx.gradient_accumulation_fusion:
                fused_wgrad_into(weight.main_grad, dy)
    """,
    "module-setattr-experts": """
        def share_expert_weights(shell, grouped, fuse_wgrad_accumulation):
            shell.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            for i in range(grouped.num_gemms):
                setattr(shell, f"weight{i}", getattr(grouped, f"weight{i}"))
            assert all(hasattr(p, "main_grad") for p in grouped.parameters())
    """,
    "module-attr-assign-method": """
        class FusedMLP(MegatronModule):
            def _build_fused(self):
                fc1 = self.fc1
                fused = te.ops.Linear(*fc1.weight.shape[::-1], accumulate_into_main_grad=True)
                fused.weight = self.fc1.weight
                return fused
    """,
    "module-register-keyword": """
        def attach(op, linear):
            assert linear.fuse_wgrad_accumulation and hasattr(linear.weight, "main_grad")
            op.register_parameter(name="weight", param=linear.weight)
    """,
}


@pytest.mark.parametrize("key", sorted(BUGGY))
def test_buggy_spelling_caught(key):
    source = textwrap.dedent(BUGGY[key]).lstrip("\n")
    lines = {f.line for f in lint_snippet(source)}
    assert lines & _bug_lines(source), (key, sorted(lines))


@pytest.mark.parametrize("key", sorted(CORRECT))
def test_correct_spelling_clean(key):
    assert [(f.code, f.line) for f in lint_snippet(CORRECT[key])] == []


def test_first_microbatch_named_for_a_closure_flag():
    # the custom-DDP closure reads the enclosing backward's downgraded flag
    variant = BY_NAME["blind7-te-grouped-custom-ddp-on-local-accum"]
    (finding,) = lint_snippet(variant.bug_source)
    assert "`is_first_microbatch` can switch off" in finding.message


def test_first_microbatch_named_in_the_message():
    source = textwrap.dedent(BUGGY["attr-ifexp-out"]).lstrip("\n")
    (finding,) = lint_snippet(source)
    assert "`is_first_microbatch` can switch off" in finding.message
