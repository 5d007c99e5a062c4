"""The held-out half of the thirteenth blind corpus (H-blind13): 8 variants, the third written for each
class 1..8 of issue #19 (chosen before any measurement: simply the third one written per class). Same
rules as variant_corpus_blind13.py, written by someone who read neither the linter nor its tests (only
CONTRACT.md, the two seed reports and issue #19's class list): each is grounded in a real function read
from a repository snapshot in /work/.mirror, the twin is that code shortened, the bug one regression of
the class marked ``# bug`` (or, where said, the shipped code with the twin as its correction). Sources
(snapshot HEAD):

- epfLLM/Megatron-LLM 806a833: megatron/model/distributed.py (DistributedDataParallel.__init__, _make_param_hook)
- openpsi-project/ReaLHF be75fce: realhf/impl/model/parallelism/model_parallel/modules.py
  (MergedLinearWithGradAccumulationAndAsyncCommunication.forward / .backward,
  LinearWithGradAccumulationAndAsyncCommunication.backward)
- krafton-ai/Megatron-Dion 2d0d251: megatron/core/distributed/distributed_data_parallel.py
  (the DION-traced DistributedDataParallel._make_backward_post_hook)
- flagos-ai/Megatron-LM-FL 175ae90: megatron/plugin/dualpipev/fb_overlap/modules/utils.py
  (turn_attention_delay_wgrad_compute, call_attention_backward_dw), megatron/core/extensions/transformer_engine.py
  (TEFusedMLP._register_hooks_on_fused_impl)
- jiamingwang-mt/TransformerEngine-FL 3fe8079: transformer_engine/musa/pytorch/module/linear.py (Linear.backward_custom)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------------------------ 1: which object
    # epfLLM/Megatron-LLM 806a833, megatron/model/distributed.py, DistributedDataParallel.__init__ (hook
    # registration) and _make_param_hook. The regression builds the hook for the expanded view used only to reach
    # the AccumulateGrad node: the hook then reads .grad and main_grad of that non-leaf stand-in (no .grad, no
    # main_grad) instead of the Parameter, so nothing is ever added into the Parameter's buffer.
    Variant(
        1,
        "blind13-megatronllm-ddp-hook-bound-to-expanded-view",
        bug="""
        class DistributedDataParallel(DistributedDataParallelBase):
            def __init__(self, module, accumulate_allreduce_grads_in_fp32, use_contiguous_buffers):
                super(DistributedDataParallel, self).__init__(module)
                self.use_contiguous_buffers = use_contiguous_buffers
                if self.use_contiguous_buffers:
                    for param in self.module.parameters():
                        if param.requires_grad:
                            dtype = _get_buffer_type(param)
                            type_num_elements[dtype] -= param.data.nelement()
                            param.main_grad = self._grad_buffers[dtype].get(param.data.shape, type_num_elements[dtype])
                    # Backward hook.
                    self.grad_accs = []
                    for param in self.module.parameters():
                        if param.requires_grad:
                            # Expand so we get access to grad_fn.
                            param_tmp = param.expand_as(param)
                            # Get the gradient accumulator functtion.
                            grad_acc = param_tmp.grad_fn.next_functions[0][0]
                            grad_acc.register_hook(self._make_param_hook(param_tmp))  # bug
                            self.grad_accs.append(grad_acc)

            def _make_param_hook(self, param):
                def param_hook(*unused):
                    if param.grad is not None:
                        param.main_grad.add_(param.grad.data)
                        param.grad = None
                return param_hook
        """,
        twin="""
        class DistributedDataParallel(DistributedDataParallelBase):
            def __init__(self, module, accumulate_allreduce_grads_in_fp32, use_contiguous_buffers):
                super(DistributedDataParallel, self).__init__(module)
                self.use_contiguous_buffers = use_contiguous_buffers
                if self.use_contiguous_buffers:
                    for param in self.module.parameters():
                        if param.requires_grad:
                            dtype = _get_buffer_type(param)
                            type_num_elements[dtype] -= param.data.nelement()
                            param.main_grad = self._grad_buffers[dtype].get(param.data.shape, type_num_elements[dtype])
                    # Backward hook.
                    self.grad_accs = []
                    for param in self.module.parameters():
                        if param.requires_grad:
                            # Expand so we get access to grad_fn.
                            param_tmp = param.expand_as(param)
                            # Get the gradient accumulator functtion.
                            grad_acc = param_tmp.grad_fn.next_functions[0][0]
                            grad_acc.register_hook(self._make_param_hook(param))
                            self.grad_accs.append(grad_acc)

            def _make_param_hook(self, param):
                def param_hook(*unused):
                    if param.grad is not None:
                        param.main_grad.add_(param.grad.data)
                        param.grad = None
                return param_hook
        """,
    ),
    # ------------------------------------------------------------------ 2: parameter rebound
    # openpsi-project/ReaLHF be75fce, realhf/impl/model/parallelism/model_parallel/modules.py,
    # MergedLinearWithGradAccumulationAndAsyncCommunication.forward and the fused part of .backward. The
    # regression detaches the weights in forward ("only tensors are needed for the matmuls") and saves the detached
    # copies: in backward they carry neither main_grad nor grad_added_to_main_grad, so the fused path fails on
    # weight.main_grad or, for a weight whose attribute check is all that runs, hands back None with no flag.
    Variant(
        2,
        "blind13-realhf-merged-linear-fwd-saves-detached-weights",
        bug="""
        class MergedLinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
            @staticmethod
            @custom_fwd
            def forward(ctx, input, gradient_accumulation_fusion, async_grad_allreduce, sequence_parallel, is_w_parallel, *wbs):
                assert len(wbs) % 2 == 0
                weights = [w.detach() for w in wbs[::2]]  # bug
                biases = wbs[1::2]
                assert len(is_w_parallel) == len(weights)
                ctx.save_for_backward(input, *weights)
                ctx.use_bias = tuple(b is not None for b in biases)
                ctx.is_w_parallel = is_w_parallel
                ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
                xs = []
                for w, b in zip(weights, biases):
                    x = torch.matmul(input, w.t())
                    if b is not None:
                        x = x + b
                    xs.append(x)
                return tuple(xs)

            @staticmethod
            @custom_bwd
            def backward(ctx, *grads):
                input, *weights = ctx.saved_tensors
                total_input = input.view(-1, input.shape[-1])
                grads = [g.contiguous().view(-1, g.shape[-1]) for g in grads]
                gws = []
                for weight, grad_output in zip(weights, grads):
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = None
                    gws.append(grad_weight)
                return (None, None, None, None, None, *list(itertools.chain.from_iterable(zip(gws, [None] * len(gws)))))
        """,
        twin="""
        class MergedLinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
            @staticmethod
            @custom_fwd
            def forward(ctx, input, gradient_accumulation_fusion, async_grad_allreduce, sequence_parallel, is_w_parallel, *wbs):
                assert len(wbs) % 2 == 0
                weights = wbs[::2]
                biases = wbs[1::2]
                assert len(is_w_parallel) == len(weights)
                ctx.save_for_backward(input, *weights)
                ctx.use_bias = tuple(b is not None for b in biases)
                ctx.is_w_parallel = is_w_parallel
                ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
                xs = []
                for w, b in zip(weights, biases):
                    x = torch.matmul(input, w.t())
                    if b is not None:
                        x = x + b
                    xs.append(x)
                return tuple(xs)

            @staticmethod
            @custom_bwd
            def backward(ctx, *grads):
                input, *weights = ctx.saved_tensors
                total_input = input.view(-1, input.shape[-1])
                grads = [g.contiguous().view(-1, g.shape[-1]) for g in grads]
                gws = []
                for weight, grad_output in zip(weights, grads):
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    if hasattr(weight, "grad_added_to_main_grad"):
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = None
                    gws.append(grad_weight)
                return (None, None, None, None, None, *list(itertools.chain.from_iterable(zip(gws, [None] * len(gws)))))
        """,
    ),
    # ------------------------------------------------------------------ 3: flags without writes
    # openpsi-project/ReaLHF be75fce, realhf/impl/model/parallelism/model_parallel/modules.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward. The regression turns the "unsupported main_grad
    # dtype" error into a warning: for such a weight no kernel writes main_grad, yet the code goes on to set
    # grad_added_to_main_grad and return a dummy, so the weight gradient is silently dropped.
    Variant(
        3,
        "blind13-realhf-linear-bwd-unsupported-dtype-warns-then-flags",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)
            grad_output = grad_output.contiguous().view(-1, grad_output.shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

            if ctx.gradient_accumulation_fusion:
                if weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                else:
                    warnings.warn("Unsupported gradient type for gradient accumulation fusion")  # bug

                if hasattr(weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None
        """,
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)
            grad_output = grad_output.contiguous().view(-1, grad_output.shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

            if ctx.gradient_accumulation_fusion:
                if weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                else:
                    raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                if hasattr(weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None
        """,
    ),
    # ------------------------------------------------------------------ 4: overwrite without asking
    # krafton-ai/Megatron-Dion 2d0d251, megatron/core/distributed/distributed_data_parallel.py, the DION-traced
    # DistributedDataParallel._make_backward_post_hook (logging shortened). The regression writes the incoming
    # .grad over the bucket view with a slice assignment instead of adding it, so earlier microbatches' gradients
    # in main_grad are replaced; no overwrite switch or sharding strategy is consulted.
    Variant(
        4,
        "blind13-dion-traced-ddp-hook-slice-assigns-grad-over-main-grad",
        bug="""
        def _make_backward_post_hook(self, param: torch.nn.Parameter):
            def hook(*unused):
                if is_graph_capturing():
                    return
                if param in self.param_to_bucket_group:
                    assert param.requires_grad
                    trace_main_grad_add = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD", "0") == "1"
                    param_name = getattr(param, "_param_name", "") or ""
                    grad_added_before = bool(getattr(param, "grad_added_to_main_grad", False))
                    will_add = param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    )
                    if will_add:
                        param.main_grad[...] = param.grad.data  # bug
                    if trace_main_grad_add:
                        logger.warning("[DION_DDP_MAIN_GRAD_ADD] param=%s grad_added_before=%s will_add=%s", param_name, grad_added_before, will_add)
                    param.grad = None
                    if self.ddp_config.overlap_grad_reduce:
                        self.param_to_bucket_group[param].register_grad_ready(param, self.force_all_reduce)

            return hook
        """,
        twin="""
        def _make_backward_post_hook(self, param: torch.nn.Parameter):
            def hook(*unused):
                if is_graph_capturing():
                    return
                if param in self.param_to_bucket_group:
                    assert param.requires_grad
                    trace_main_grad_add = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD", "0") == "1"
                    param_name = getattr(param, "_param_name", "") or ""
                    grad_added_before = bool(getattr(param, "grad_added_to_main_grad", False))
                    will_add = param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    )
                    if will_add:
                        param.main_grad.add_(param.grad.data)
                    if trace_main_grad_add:
                        logger.warning("[DION_DDP_MAIN_GRAD_ADD] param=%s grad_added_before=%s will_add=%s", param_name, grad_added_before, will_add)
                    param.grad = None
                    if self.ddp_config.overlap_grad_reduce:
                        self.param_to_bucket_group[param].register_grad_ready(param, self.force_all_reduce)

            return hook
        """,
    ),
    # ------------------------------------------------------------------ 5: hooks without bookkeeping
    # krafton-ai/Megatron-Dion 2d0d251, the same traced DistributedDataParallel._make_backward_post_hook. The
    # regression moves the grad-ready registration (which may launch the bucket's reduce) ahead of the
    # bookkeeping: the reduce can fire before this parameter's .grad is added into main_grad and before .grad is
    # cleared, i.e. on a path where neither the flag check nor the add has happened yet.
    Variant(
        5,
        "blind13-dion-traced-ddp-hook-registers-grad-ready-before-add",
        bug="""
        def _make_backward_post_hook(self, param: torch.nn.Parameter):
            def hook(*unused):
                if is_graph_capturing():
                    return
                if param in self.param_to_bucket_group:
                    assert param.requires_grad
                    if self.ddp_config.overlap_grad_reduce:
                        assert param.grad is not None, 'param.grad being None is not safe when overlap_grad_reduce is True'
                        self.param_to_bucket_group[param].register_grad_ready(param, self.force_all_reduce)  # bug
                    trace_main_grad_add = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD", "0") == "1"
                    grad_added_before = bool(getattr(param, "grad_added_to_main_grad", False))
                    if param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    ):
                        param.main_grad.add_(param.grad.data)
                    if trace_main_grad_add:
                        logger.warning("[DION_DDP_MAIN_GRAD_ADD] grad_added_before=%s", grad_added_before)
                    param.grad = None

            return hook
        """,
        twin="""
        def _make_backward_post_hook(self, param: torch.nn.Parameter):
            def hook(*unused):
                if is_graph_capturing():
                    return
                if param in self.param_to_bucket_group:
                    assert param.requires_grad
                    if self.ddp_config.overlap_grad_reduce:
                        assert param.grad is not None, 'param.grad being None is not safe when overlap_grad_reduce is True'
                    trace_main_grad_add = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD", "0") == "1"
                    grad_added_before = bool(getattr(param, "grad_added_to_main_grad", False))
                    if param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    ):
                        param.main_grad.add_(param.grad.data)
                    if trace_main_grad_add:
                        logger.warning("[DION_DDP_MAIN_GRAD_ADD] grad_added_before=%s", grad_added_before)
                    param.grad = None

                    if self.ddp_config.overlap_grad_reduce:
                        self.param_to_bucket_group[param].register_grad_ready(param, self.force_all_reduce)

            return hook
        """,
    ),
    # ------------------------------------------------------------------ 6: delayed wgrad dropped
    # flagos-ai/Megatron-LM-FL 175ae90, megatron/plugin/dualpipev/fb_overlap/modules/utils.py,
    # turn_attention_delay_wgrad_compute / call_attention_backward_dw (nearest shape in this repository: no class
    # overrides backward_dw; the driver turns delay on per projection and must call backward_dw for each). The
    # regression keeps the multi-latent-attention projections delayed but calls backward_dw only for the
    # self-attention layout, so linear_q_proj / linear_kv_down_proj / linear_kv_up_proj never get weight gradients.
    Variant(
        6,
        "blind13-megatronfl-dualpipev-attention-dw-skips-mla-projections",
        bug="""
        def turn_attention_delay_wgrad_compute(bwd_layer_graph, enable=False):
            attention_layer = bwd_layer_graph.layer.self_attention
            has_linear_qkv = any("linear_qkv" in name for name, _ in attention_layer.named_modules())
            if enable:
                attention_layer.linear_proj.wgrad_store.enable_delay_wgrad_compute()
                if has_linear_qkv:  # for self_attention
                    attention_layer.linear_qkv.wgrad_store.enable_delay_wgrad_compute()
                else:  # for multi_latent_attention
                    attention_layer.linear_kv_up_proj.wgrad_store.enable_delay_wgrad_compute()
                    attention_layer.linear_kv_down_proj.wgrad_store.enable_delay_wgrad_compute()
                    attention_layer.linear_q_proj.wgrad_store.enable_delay_wgrad_compute()
            else:
                attention_layer.linear_proj.wgrad_store.disable_delay_wgrad_compute()
                if has_linear_qkv:
                    attention_layer.linear_qkv.wgrad_store.disable_delay_wgrad_compute()
                else:
                    attention_layer.linear_kv_up_proj.wgrad_store.disable_delay_wgrad_compute()
                    attention_layer.linear_kv_down_proj.wgrad_store.disable_delay_wgrad_compute()
                    attention_layer.linear_q_proj.wgrad_store.disable_delay_wgrad_compute()


        def call_attention_backward_dw(bwd_layer_graph):
            attention_layer = bwd_layer_graph.layer.self_attention
            has_linear_qkv = any("linear_qkv" in name for name, _ in attention_layer.named_modules())

            attention_layer.linear_proj.backward_dw()
            if has_linear_qkv:  # bug
                attention_layer.linear_qkv.backward_dw()
        """,
        twin="""
        def turn_attention_delay_wgrad_compute(bwd_layer_graph, enable=False):
            attention_layer = bwd_layer_graph.layer.self_attention
            has_linear_qkv = any("linear_qkv" in name for name, _ in attention_layer.named_modules())
            if enable:
                attention_layer.linear_proj.wgrad_store.enable_delay_wgrad_compute()
                if has_linear_qkv:  # for self_attention
                    attention_layer.linear_qkv.wgrad_store.enable_delay_wgrad_compute()
                else:  # for multi_latent_attention
                    attention_layer.linear_kv_up_proj.wgrad_store.enable_delay_wgrad_compute()
                    attention_layer.linear_kv_down_proj.wgrad_store.enable_delay_wgrad_compute()
                    attention_layer.linear_q_proj.wgrad_store.enable_delay_wgrad_compute()
            else:
                attention_layer.linear_proj.wgrad_store.disable_delay_wgrad_compute()
                if has_linear_qkv:
                    attention_layer.linear_qkv.wgrad_store.disable_delay_wgrad_compute()
                else:
                    attention_layer.linear_kv_up_proj.wgrad_store.disable_delay_wgrad_compute()
                    attention_layer.linear_kv_down_proj.wgrad_store.disable_delay_wgrad_compute()
                    attention_layer.linear_q_proj.wgrad_store.disable_delay_wgrad_compute()


        def call_attention_backward_dw(bwd_layer_graph):
            attention_layer = bwd_layer_graph.layer.self_attention
            has_linear_qkv = any("linear_qkv" in name for name, _ in attention_layer.named_modules())

            attention_layer.linear_proj.backward_dw()
            if has_linear_qkv:
                attention_layer.linear_qkv.backward_dw()
            else:
                attention_layer.linear_kv_up_proj.backward_dw()
                attention_layer.linear_kv_down_proj.backward_dw()
                attention_layer.linear_q_proj.backward_dw()
        """,
    ),
    # ------------------------------------------------------------------ 7: seed shape, other syntax
    # jiamingwang-mt/TransformerEngine-FL 3fe8079, transformer_engine/musa/pytorch/module/linear.py,
    # Linear.backward_custom ("Handle custom DDP from mcore" block after the wgrad GEMM, which writes out=main_grad
    # whenever fuse_wgrad_accumulation is on; the cpu-offload rebinding this HEAD also ships is left out of both).
    # The regression chooses the dummy-versus-real wgrad in a conditional expression on the local
    # accumulate_wgrad_into_param_main_grad (False on the first microbatch): the Parameter is flagged, but the GEMM
    # output, i.e. main_grad itself, is handed on as the weight gradient.
    Variant(
        7,
        "blind13-tefl-musa-linear-backward-custom-dummy-chosen-on-local-accumulate",
        bug="""
        def backward_custom(self, inp, grad_output, is_first_microbatch=None, fp8_output=False, fp8_grad=False):
            weight = self.weight
            fuse_wgrad_accumulation = self.fuse_wgrad_accumulation
            main_grad = weight.main_grad if fuse_wgrad_accumulation and weight.requires_grad else None
            requires_wgrad = weight.requires_grad
            if is_first_microbatch is not None:
                accumulate_wgrad_into_param_main_grad = fuse_wgrad_accumulation and not is_first_microbatch
            else:
                accumulate_wgrad_into_param_main_grad = fuse_wgrad_accumulation
            wgrad = None
            if requires_wgrad:
                wgrad, grad_bias_, _, rs_out = ceg.general_gemm(
                    inputmat_total, grad_output, get_workspace(), layout="NT", grad=True,
                    out_dtype=(main_grad.dtype if fuse_wgrad_accumulation else activation_dtype),
                    out=main_grad if fuse_wgrad_accumulation else None,
                    use_split_accumulator=_2X_ACC_WGRAD,
                    accumulate=accumulate_wgrad_into_param_main_grad,
                )
            if requires_wgrad:
                # Handle custom DDP from mcore.
                if fuse_wgrad_accumulation and weight is not None and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    wgrad = (
                        torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        if getattr(weight, "zero_out_wgrad", False)
                        else (None if accumulate_wgrad_into_param_main_grad else wgrad)  # bug
                    )
                elif fuse_wgrad_accumulation:
                    wgrad = None
            else:
                wgrad = None
            if weight.requires_grad and not self.fuse_wgrad_accumulation:
                weight.grad = wgrad
                if weight.grad is not None and (
                    not weight.grad_added_to_main_grad or getattr(weight, 'zero_out_wgrad', False)
                ):
                    weight.main_grad.add_(weight.grad.data)
                weight.grad = None
            return wgrad
        """,
        twin="""
        def backward_custom(self, inp, grad_output, is_first_microbatch=None, fp8_output=False, fp8_grad=False):
            weight = self.weight
            fuse_wgrad_accumulation = self.fuse_wgrad_accumulation
            main_grad = weight.main_grad if fuse_wgrad_accumulation and weight.requires_grad else None
            requires_wgrad = weight.requires_grad
            if is_first_microbatch is not None:
                accumulate_wgrad_into_param_main_grad = fuse_wgrad_accumulation and not is_first_microbatch
            else:
                accumulate_wgrad_into_param_main_grad = fuse_wgrad_accumulation
            wgrad = None
            if requires_wgrad:
                wgrad, grad_bias_, _, rs_out = ceg.general_gemm(
                    inputmat_total, grad_output, get_workspace(), layout="NT", grad=True,
                    out_dtype=(main_grad.dtype if fuse_wgrad_accumulation else activation_dtype),
                    out=main_grad if fuse_wgrad_accumulation else None,
                    use_split_accumulator=_2X_ACC_WGRAD,
                    accumulate=accumulate_wgrad_into_param_main_grad,
                )
            if requires_wgrad:
                # Handle custom DDP from mcore.
                if fuse_wgrad_accumulation and weight is not None and hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    wgrad = (
                        torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        if getattr(weight, "zero_out_wgrad", False)
                        else None
                    )
                elif fuse_wgrad_accumulation:
                    wgrad = None
            else:
                wgrad = None
            if weight.requires_grad and not self.fuse_wgrad_accumulation:
                weight.grad = wgrad
                if weight.grad is not None and (
                    not weight.grad_added_to_main_grad or getattr(weight, 'zero_out_wgrad', False)
                ):
                    weight.main_grad.add_(weight.grad.data)
                weight.grad = None
            return wgrad
        """,
    ),
    # ------------------------------------------------------------------ 8: integration, main_grad never fetched
    # flagos-ai/Megatron-LM-FL 175ae90, megatron/core/extensions/transformer_engine.py,
    # TEFusedMLP._register_hooks_on_fused_impl (HEAD never fetches main_grad for the fused ops; the twin registers an
    # unconditional pre-forward hook on the fused impl that calls get_main_grad() for the BasicLinear weights, next to
    # the real emulation of the submodules' DDP pre-forward hooks). The regression folds the fetch into the emulated
    # hook, which is registered only when some submodule has a pre-forward hook (i.e. only with
    # overlap_param_gather): in every other configuration the ops built with accumulate_into_main_grad run with
    # main_grad still None.
    Variant(
        8,
        "blind13-megatronfl-te-fused-mlp-main-grad-fetch-only-with-ddp-pre-hooks",
        bug="""
        def _register_hooks_on_fused_impl(self, fused_impl: torch.nn.Module) -> None:
            forward_pre_hooks = []
            for submodule in self.modules():
                for hook in submodule._forward_pre_hooks.values():
                    forward_pre_hooks.append((submodule, hook))
            fused_params = [op.weight for op in fused_impl if isinstance(op, te.pytorch.ops.BasicLinear)]

            if forward_pre_hooks:

                def forward_pre_hook(module, *_) -> None:
                    for param in fused_params:  # bug
                        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):  # bug
                            param.main_grad = param.get_main_grad()  # bug
                    for submodule, hook in forward_pre_hooks:
                        # Assume that hook does not interact with input
                        ret = hook(submodule, None)
                        if ret is not None:
                            raise RuntimeError(
                                "TEFusedMLP module does not expose intermediate tensors, but "
                                "submodule has pre-forward hook that modifies input tensor."
                            )

                fused_impl.register_forward_pre_hook(forward_pre_hook)
        """,
        twin="""
        def _register_hooks_on_fused_impl(self, fused_impl: torch.nn.Module) -> None:
            forward_pre_hooks = []
            for submodule in self.modules():
                for hook in submodule._forward_pre_hooks.values():
                    forward_pre_hooks.append((submodule, hook))
            fused_params = [op.weight for op in fused_impl if isinstance(op, te.pytorch.ops.BasicLinear)]

            def fetch_main_grads(module, *_) -> None:
                for param in fused_params:
                    if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
                        param.main_grad = param.get_main_grad()

            fused_impl.register_forward_pre_hook(fetch_main_grads)

            if forward_pre_hooks:

                def forward_pre_hook(module, *_) -> None:
                    for submodule, hook in forward_pre_hooks:
                        # Assume that hook does not interact with input
                        ret = hook(submodule, None)
                        if ret is not None:
                            raise RuntimeError(
                                "TEFusedMLP module does not expose intermediate tensors, but "
                                "submodule has pre-forward hook that modifies input tensor."
                            )

                fused_impl.register_forward_pre_hook(forward_pre_hook)
        """,
    ),
)
