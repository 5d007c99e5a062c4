"""Correct code a review of the eleventh session's checks (GMLP050, GMLP051, GMLP052,
GMLP021's ops, GMLP037's comprehension site) first reported, and inputs that crashed or
stalled the linter: each clean case failed on the first version (the rule named in its key
reported it); the crashes exited 2 ("internal error") on a hexadecimal index, and the two
long backwards (17 and 20 independent tests) took 28 s and over 2 minutes (and 6 GB) in the
path search before it kept only the tests another ``if`` asks again. The buggy shapes each
check was written for are its examples (``test_rule_examples.py``) and the ninth blind
corpus's variants."""

# ruff: noqa: E501

from __future__ import annotations

import pytest

from .support import lint_snippet

CLEAN = {
    "GMLP021_1": (
        "GMLP021",
        """
        # CORRECT: each op is asked for its own delay mode before backward_dw(): exactly the
        # layer's own `delay_wgrad_compute` (always right per the rule's own doc for self.x).
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self):
                fc1_delay = self.linear_fc1.delay_wgrad_compute
                fc2_delay = self.linear_fc2.delay_wgrad_compute
                return Sequential(
                    GroupedLinear(self.num_experts, delay_wgrad_compute=fc1_delay),
                    SwiGLU(),
                    GroupedLinear(self.num_experts, delay_wgrad_compute=fc2_delay),
                )

            def backward_dw(self):
                for op in self._fused_ops:
                    if op.delay_wgrad_compute:
                        op.backward_dw()
        """,
    ),
    "GMLP021_2": (
        "GMLP021",
        """
        # CORRECT: same, with getattr default (ops without the attribute never delay).
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self):
                fc1_delay = self.linear_fc1.delay_wgrad_compute
                return Sequential(GroupedLinear(self.num_experts, delay_wgrad_compute=fc1_delay))

            def backward_dw(self):
                ops = self._fused_ops
                if ops[0].delay_wgrad_compute:
                    ops[0].backward_dw()
        """,
    ),
    "GMLP021_3": (
        "GMLP021",
        """
        # CORRECT: the ops are built in a helper method from the config through a local alias
        # `cfg = self.config`; backward_dw tests the same config flag.
        class SequentialMLP(MegatronModule):
            def _build_experts(self):
                cfg = self.config
                self.local_experts = ModuleList(
                    [TELinear(cfg.hidden, cfg.ffn, delay_wgrad_compute=cfg.delay_wgrad_compute)
                     for _ in range(self.num_local_experts)]
                )

            def backward_dw(self):
                if self.config.delay_wgrad_compute:
                    for expert in self.local_experts:
                        expert.backward_dw()
        """,
    ),
    "GMLP021_4": (
        "GMLP021",
        """
        # CORRECT: the fused ops get the OR of the two wrappers' modes; backward_dw calls the ops
        # when either wrapper delays, through an any() over the wrappers.
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self):
                delay = self.linear_fc1.delay_wgrad_compute or self.linear_fc2.delay_wgrad_compute
                return Sequential(GroupedLinear(self.n, delay_wgrad_compute=delay))

            def backward_dw(self):
                if any(m.delay_wgrad_compute for m in (self.linear_fc1, self.linear_fc2)):
                    self._fused_ops[0].backward_dw()
        """,
    ),
    "GMLP021_7": (
        "GMLP021",
        """
        # CORRECT: the class also runs its shared experts' (built in __init__ from the config's
        # mode) backward_dw in a loop under the config's mode; the fused ops (wrappers' modes)
        # are called unguarded. The loop call is taken as an op call with the wrong mode.
        class MoEBlock(MegatronModule):
            def __init__(self, config):
                super().__init__(config)
                self.shared = ModuleList(
                    [TELinear(config.hidden, config.ffn, delay_wgrad_compute=config.delay_wgrad_compute)]
                )

            def _make_fused_ops(self):
                fc1_delay = self.linear_fc1.delay_wgrad_compute
                return Sequential(GroupedLinear(self.n, delay_wgrad_compute=fc1_delay))

            def backward_dw(self):
                for op in self._fused_ops:
                    op.backward_dw()
                if self.config.delay_wgrad_compute:
                    for layer in self.shared:
                        layer.backward_dw()
        """,
    ),
    "GMLP050_11": (
        "GMLP050",
        """
        # CORRECT: fc1 is fetched directly before the fused ops run; fc2's fetch is registered as
        # a forward pre-hook on fc2 via functools.partial(expose, self.linear_fc2). Both fetched.
        import functools


        def expose(module, *_):
            for param in module.parameters():
                if getattr(param, "main_grad", None) is None:
                    param.main_grad = param.get_main_grad()


        class GroupedMLP(Module):
            def _make_ops(self):
                return (
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation),
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation),
                )

            def _register(self):
                self.linear_fc2.register_forward_pre_hook(functools.partial(expose, self.linear_fc2))

            def _pre_forward(self, *_):
                expose(self.linear_fc1)
        """,
    ),
    "GMLP050_2": (
        "GMLP050",
        """
        # CORRECT: fc2 is fetched through the same helper called via functools.partial / map.
        def expose(module):
            for param in module.parameters():
                param.main_grad = param.get_main_grad()


        class GroupedMLP(Module):
            def _make_ops(self):
                return (
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation),
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation),
                )

            def _pre_forward(self, *_):
                expose(self.linear_fc1)
                list(map(expose, [self.linear_fc2]))
        """,
    ),
    "GMLP050_3": (
        "GMLP050",
        """
        # CORRECT: the base class's hook (same file) fetches fc2; the subclass adds fc1.
        def expose(module):
            for param in module.parameters():
                param.main_grad = param.get_main_grad()


        class _Base(Module):
            def _pre_forward_fc2(self, *_):
                expose(self.linear_fc2)


        class GroupedMLP(_Base):
            def _make_ops(self):
                return (
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation),
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation),
                )

            def _pre_forward_fc1(self, *_):
                expose(self.linear_fc1)
        """,
    ),
    "GMLP050_4": (
        "GMLP050",
        """
        # CORRECT: fc2 is fetched with an inline loop (fetch written out), fc1 through the helper.
        def expose(module):
            for param in module.parameters():
                param.main_grad = param.get_main_grad()


        class GroupedMLP(Module):
            def _make_ops(self):
                return (
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation),
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation),
                )

            def _pre_forward(self, *_):
                expose(self.linear_fc1)
                for p in self.linear_fc2.parameters():
                    p.main_grad = p.get_main_grad()
        """,
    ),
    "GMLP050_5": (
        "GMLP050",
        """
        # CORRECT: fc2 is fetched by a second helper (fetch for a single param) applied to each
        # of fc2's params; fc1 through the module helper.
        def expose(module):
            for param in module.parameters():
                param.main_grad = param.get_main_grad()


        def expose_param(param):
            param.main_grad = param.get_main_grad()


        class GroupedMLP(Module):
            def _make_ops(self):
                return (
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation),
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation),
                )

            def _pre_forward(self, *_):
                expose(self.linear_fc1)
                for p in self.linear_fc2.parameters():
                    expose_param(p)
        """,
    ),
    "GMLP050_8": (
        "GMLP050",
        """
        # CORRECT: both fused modules (fc1, fc2) are fetched; the activation module has no
        # parameters and no fused op writes it, but it is listed with fc1/fc2 in a Sequential.
        def expose(module):
            for param in module.parameters():
                if getattr(param, "main_grad", None) is None:
                    param.main_grad = param.get_main_grad()


        class GroupedMLP(Module):
            def __init__(self, config):
                super().__init__()
                self.linear_fc1 = TEGroupedLinear(config, fuse_wgrad_accumulation=config.gradient_accumulation_fusion)
                self.activation = SwiGLU()
                self.linear_fc2 = TEGroupedLinear(config, fuse_wgrad_accumulation=config.gradient_accumulation_fusion)
                self.unfused = Sequential(self.linear_fc1, self.activation, self.linear_fc2)

            def _make_ops(self):
                return (
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation),
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation),
                )

            def _pre_forward(self, *_):
                for m in (self.linear_fc1, self.linear_fc2):
                    expose(m)
        """,
    ),
    "GMLP050_9": (
        "GMLP050",
        """
        # CORRECT: fc1 & fc2 fetched; the router (plain nn.Linear, not a fused op) is listed in a
        # tuple with fc1 for an unrelated purpose (param groups for weight decay).
        def expose(module):
            for param in module.parameters():
                param.main_grad = param.get_main_grad()


        class MoELayer(Module):
            def _make_ops(self):
                return (
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation),
                    GroupedLinear(accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation),
                )

            def no_decay_modules(self):
                return [self.router, self.linear_fc1]

            def _pre_forward(self, *_):
                expose(self.linear_fc1)
                expose(self.linear_fc2)
        """,
    ),
    "GMLP051_1": (
        "GMLP051",
        """
        # CORRECT: w1 (expert weight) is fused into main_grad (Megatron-style: dummy + flag when
        # the param carries the attribute, None otherwise); the router weight (another parameter,
        # not fused) gets its own product. Both products start from `ctx`/`grad_output` only
        # because the inputs live on ctx. No gradient reaches any main_grad twice.
        import torch

        class RouterAndExpert(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                grad_input = grad_output.matmul(ctx.weight1)
                fused_wgrad_gemm(ctx.input1, grad_output, ctx.weight1.main_grad)
                if hasattr(ctx.weight1, "grad_added_to_main_grad"):
                    ctx.weight1.grad_added_to_main_grad = True
                    grad_w1 = torch.zeros_like(ctx.weight1)
                else:
                    grad_w1 = None
                grad_router = grad_output.t() @ ctx.input2
                return grad_input, grad_w1, grad_router
        """,
    ),
    "GMLP051_10": (
        "GMLP051",
        """
        # CORRECT: `is False` spelling of the negated test; exclusive with `if ctx.fuse:`.
        import torch

        class LinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_weight = None
                if ctx.fuse:
                    wgrad_gemm_accum_fp32(x, grad_output, weight.main_grad)
                if ctx.fuse is False:
                    grad_weight = grad_output.t() @ x
                return grad_output @ weight, grad_weight
        """,
    ),
    "GMLP051_11": (
        "GMLP051",
        """
        # CORRECT: walrus binds the flag in the GEMM's test; the product is taken under `not fuse`.
        import torch

        class LinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_weight = None
                if fuse := ctx.gradient_accumulation_fusion:
                    wgrad_gemm_accum_fp32(x, grad_output, weight.main_grad)
                if not fuse:
                    grad_weight = grad_output.t() @ x
                return grad_output @ weight, grad_weight
        """,
    ),
    "GMLP051_3": (
        "GMLP051",
        """
        # CORRECT: the fused flag is aliased to a local; the product is only taken when the
        # same flag (read through ctx) is off. Same run never does both.
        import torch

        class LinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                total_input, weight = ctx.saved_tensors
                fuse = ctx.gradient_accumulation_fusion
                grad_input = grad_output.matmul(weight)
                if fuse:
                    wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                grad_weight = None
                if not ctx.gradient_accumulation_fusion:
                    grad_weight = grad_output.t().matmul(total_input)
                return grad_input, grad_weight
        """,
    ),
    "GMLP051_5": (
        "GMLP051",
        """
        # CORRECT: two weights fed from one saved tuple of inputs and one tuple of grads
        # (backward(ctx, *grad_outputs)): fc1 fused into main_grad (Megatron-style flag/dummy),
        # fc2 (separate parameter, not fused) gets its own product from other tuple elements.
        import torch

        class TwoLinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grad_outputs):
                inputs = ctx.saved_inputs
                w1, w2 = ctx.weights
                fused_wgrad_gemm(inputs[0], grad_outputs[0], w1.main_grad)
                if hasattr(w1, "grad_added_to_main_grad"):
                    w1.grad_added_to_main_grad = True
                    grad_w1 = torch.zeros_like(w1)
                else:
                    grad_w1 = None
                grad_w2 = grad_outputs[1].t() @ inputs[1]
                return None, grad_w1, grad_w2
        """,
    ),
    "GMLP051_6": (
        "GMLP051",
        """
        # CORRECT: the fused kernel may be missing (older apex): the fallback product is taken
        # only when the fused GEMM raised before writing anything.
        import torch

        class LinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                total_input, weight = ctx.saved_tensors
                grad_input = grad_output.matmul(weight)
                try:
                    wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    grad_weight = None
                except (ImportError, NotImplementedError):
                    grad_weight = grad_output.t().matmul(total_input)
                return grad_input, grad_weight
        """,
    ),
    "GMLP051_8": (
        "GMLP051",
        """
        # CORRECT: the flag is negated in a variable; fused path writes main_grad, product only
        # under `if need_wgrad:` where need_wgrad = not fuse. Exclusive.
        import torch

        class LinearFn(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_input = grad_output @ weight
                need_wgrad = not ctx.fuse_wgrad_accumulation
                grad_weight = None
                if ctx.fuse_wgrad_accumulation:
                    tex.general_gemm(x, grad_output, out=weight.main_grad, accumulate=True)
                if need_wgrad:
                    grad_weight = grad_output.t() @ x
                return grad_input, grad_weight
        """,
    ),
    "GMLP051_9": (
        "GMLP051",
        """
        # CORRECT (Megatron-style): the GEMM writes main_grad only when wgrad_compute and fusion
        # both hold; the product is taken only when wgrad_compute holds and fusion does not.
        # Exclusive on every run (the compound test is decided by its operands).
        import torch

        class LinearWithGradAccumulation(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                total_input, weight = ctx.saved_tensors
                grad_input = grad_output.matmul(weight)
                grad_weight = None
                if ctx.wgrad_compute:
                    if ctx.gradient_accumulation_fusion:
                        wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                if ctx.wgrad_compute and not ctx.gradient_accumulation_fusion:
                    grad_weight = grad_output.t().matmul(total_input)
                return grad_input, grad_weight
        """,
    ),
    "GMLP052_1": (
        "GMLP052",
        """
        # CORRECT (TE LayerNormMLP shape): fc1's bias gradient is computed in the main backward
        # (fused with dgelu), so the bias-grad slot of fc1's wgrad GEMM is unused (None); fc2's
        # bias grad comes from its GEMM and is handed on. All weight grads are handed on.
        def backward_dw(self):
            (fc2_wgrad, fc2_bias_grad, *_), _ = self.wgrad_store.pop()
            (fc1_wgrad, fc1_bias_grad, *_), _ = self.wgrad_store.pop()
            if not self.fuse_wgrad_accumulation:
                self.fc2_weight.grad = fc2_wgrad.to(self.fc2_weight.dtype)
                self.fc1_weight.grad = fc1_wgrad.to(self.fc1_weight.dtype)
            if self.use_bias:
                self.fc2_bias.grad = fc2_bias_grad.to(self.fc2_bias.dtype)
            del fc2_wgrad, fc1_wgrad, fc2_bias_grad
            del fc1_bias_grad
            self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    "GMLP052_2": (
        "GMLP052",
        """
        # CORRECT: the GEMM returns the wgrad and its amax (an fp8 statistic); the amax is not a
        # gradient of any weight and is dropped on purpose. wgrad is handed on.
        def backward_dw(self):
            wgrad, wgrad_amax = general_gemm_with_amax(self.saved_x, self.saved_dy)
            self.weight.grad = wgrad.to(self.weight.dtype)
            del wgrad_amax
            self._trigger_hooks()
        """,
    ),
    "GMLP052_3": (
        "GMLP052",
        """
        # CORRECT: fc1's weight is always fused into main_grad by its GEMM in this module
        # (the popped tensor IS fc1.main_grad); only fc2 (not fused) needs .grad. Deleting the
        # popped alias of main_grad is fine.
        def backward_dw(self):
            (fc2_wgrad, *_), _ = self.wgrad_store.pop()
            (fc1_wgrad, *_), _ = self.wgrad_store.pop()
            self.fc2_weight.grad = fc2_wgrad.to(self.fc2_weight.dtype)
            # fc1 wrote into fc1_weight.main_grad directly (fuse_wgrad_accumulation forced on)
            self.fc1_weight.grad_added_to_main_grad = True
            del fc1_wgrad
            self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    "GMLP052_5": (
        "GMLP052",
        """
        # CORRECT: wgrad handed as .grad; `wgrad_workspace` is a scratch buffer the GEMM also
        # returns, freed with del.
        def backward_dw(self):
            (wgrad, wgrad_workspace), _ = self.wgrad_store.pop()
            if not self.fuse_wgrad_accumulation:
                self.weight.grad = wgrad.to(self.weight.dtype)
            del wgrad_workspace
            self._trigger_hooks()
        """,
    ),
}


# Transformer Engine's _GroupedLinear.backward shape the GMLP037 cases share: the per-expert
# bookkeeping helper called in a comprehension over {walked}, with {bound} a line binding it.
GROUPED_BACKWARD = """
        import torch

        class _GroupedLinear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                saved = ctx.saved_tensors
                N = ctx.num_gemms
                weights = saved[N:2 * N]
                origin_weights = [ref() for ref in ctx.origin_weight_refs]
                main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                for origin_weight, main_grad in zip(origin_weights, main_grads):
                    if main_grad is not None:
                        origin_weight.main_grad = main_grad
{bound}                wgrad_list = general_grouped_gemm(weights, grad_output, main_grads)

                def handle(weight, main_grad, wgrad):
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype)
                    return wgrad

                wgrad_list = [
                    handle(weight, main_grad, wgrad)
                    for weight, main_grad, wgrad in zip({walked}, main_grads, wgrad_list)
                ]
                return (None, *wgrad_list)
        """
# why each is correct (the Parameters are walked), what is walked, the binding line
GROUPED_CASES = {
    "GMLP037_1": (
        "the comprehension walks the Parameters (origin_weights restored from weakrefs), wrapped in tuple()",
        "tuple(origin_weights)",
        "",
    ),
    "GMLP037_2": (
        "the comprehension walks list(origin_weights), the Parameters",
        "list(origin_weights)",
        "",
    ),
    "GMLP037_3": (
        "the Parameters in reverse order; reversed() makes no copies (real code reverses the other lists too)",
        "reversed(origin_weights)",
        "",
    ),
    "GMLP037_4": (
        "params are the Parameters dereferenced from ctx.origin_weight_refs, not spelled origin_*",
        "params",
        "                params = [ref() for ref in ctx.origin_weight_refs]\n",
    ),
    "GMLP037_6": (
        "weight_params are the module's Parameters (TE GroupedLinear's getattr(self, f\"weight{i}\") idiom)",
        "weight_params",
        '                weight_params = [getattr(ctx.module, f"weight{i}") for i in range(N)]\n',
    ),
    "GMLP037_7": (
        "the comprehension walks the module's own parameters()",
        "ctx.module.parameters()",
        "",
    ),
}
CLEAN.update(
    (name, ("GMLP037", GROUPED_BACKWARD.replace("{bound}", bound).replace("{walked}", walked)))
    for name, (_, walked, bound) in GROUPED_CASES.items()
)

STALLED_OR_CRASHED = {
    # a hexadecimal index into what ctx.saved_tensors gave back (exited 2: int() of "0x1")
    "crash_5": """
        import torch


        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                weight_fp8 = quantize(weight)
                ctx.save_for_backward(x, weight_fp8)
                ctx.weight = weight
                return x @ weight_fp8.t()

            @staticmethod
            def backward(ctx, dy):
                saved = ctx.saved_tensors
                w = saved[0x1]
                general_gemm(saved[0x0], dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                return None, get_dummy_wgrad(list(w.shape), w.dtype, zero=True)
        """,
    "crash_1": """
        # HANG (performance): a CORRECT Megatron-style backward (fused GEMM into main_grad in the
        # `if` arm, real product in the `else` arm) with 16 distinct ctx flags tested along the
        # way. GMLP051's consistent_paths.passes_in_order explores every combination of known
        # test outcomes: time grows ~2x per extra distinct test (12 tests ~1 s, 16 ~17 s here).
        import torch


        class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                total_input, weight = ctx.saved_tensors
                handle = None
                if ctx.sequence_parallel:
                    total_input = gather(total_input)
                if ctx.allgather_overlap:
                    handle = start_allgather(total_input)
                if ctx.use_cpu_initialization:
                    grad_output = grad_output.cuda()
                if ctx.async_grad_allreduce:
                    grad_output = grad_output.contiguous()
                if ctx.fp8_enabled:
                    grad_output = cast(grad_output)
                if ctx.recompute_input:
                    total_input = recompute(total_input)
                grad_input = grad_output.matmul(weight)
                if ctx.allreduce_dgrad:
                    handle = allreduce(grad_input)
                if ctx.reduce_scatter_dgrad:
                    grad_input = reduce_scatter(grad_input)
                if handle is not None:
                    handle.wait()
                if ctx.wgrad_deferral_limit:
                    total_input = total_input.contiguous()
                if ctx.tp_comm_overlap:
                    grad_output = grad_output.contiguous()
                if ctx.gradient_accumulation_fusion:
                    if weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                if ctx.use_bias:
                    grad_bias = grad_output.sum(dim=0)
                else:
                    grad_bias = None
                if ctx.debug_dump:
                    dump(grad_input)
                if ctx.check_nan:
                    assert not torch.isnan(grad_input).any()
                if ctx.profile:
                    record()
                if ctx.empty_cache:
                    torch.cuda.empty_cache()
                return grad_input, grad_weight, grad_bias, None, None, None
        """,
    "crash_3": """
        # CRASH probe: GMLP052's _indexed() does int() on an integer literal's text; a hex/binary
        # literal index (`saved[0x0]`) is valid Python. The code itself is CORRECT (both handed on).
        def backward_dw(self):
            saved = self.wgrad_store.pop()
            fc2_wgrad = saved[0x0][0]
            fc1_wgrad = saved[0b1][0]
            self.fc2_weight.grad = fc2_wgrad
            self.fc1_weight.grad = fc1_wgrad
        """,
    "crash_4": """
        # CRASH probe: GMLP037's call_provenance._saved_item does int() on an integer literal's
        # text: `saved[1]` (valid Python) in backward. (Code is BUGGY by GMLP037's own terms: a
        # quantized copy handed to apply, whose backward uses the saved copy's main_grad.)
        import torch


        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return x @ w.t()

            @staticmethod
            def backward(ctx, dy):
                saved = ctx.saved_tensors
                x = saved[0]
                w = saved[0x1]
                w.main_grad.add_(dy.t() @ x)
                return dy @ w, None


        def run(x, weight):
            w_fp8 = quantize(weight)
            return _Fn.apply(x, w_fp8)
        """,
}

# crash_1 with four more independent tests (20): killed unfinished after 134 s at 6.2 GB
STALLED_OR_CRASHED["crash_2"] = STALLED_OR_CRASHED["crash_1"].replace(
    "                grad_input = grad_output.matmul(weight)\n",
    "".join(
        f"                if ctx.extra_flag_{n}:\n                    grad_output = grad_output.contiguous()\n"
        for n in range(4)
    )
    + "                grad_input = grad_output.matmul(weight)\n",
    1,
)


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_correct_shape_is_not_reported(name):
    rule, source = CLEAN[name]
    assert [f.line for f in lint_snippet(source) if f.code == rule] == []


@pytest.mark.parametrize("name", sorted(STALLED_OR_CRASHED))
def test_input_is_linted_without_an_internal_error(name):
    # An internal error surfaces as an exception here; a stalled search never returns.
    findings = lint_snippet(STALLED_OR_CRASHED[name])
    assert all(f.code.startswith("GMLP") for f in findings)
