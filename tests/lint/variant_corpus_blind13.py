"""The thirteenth blind corpus (H-blind13): 16 variants, the first two per class 1..8 of issue #19 (the third
of each class is in variant_corpus_blind13_heldout.py), written by someone who read neither the linter nor
its tests (only CONTRACT.md, the two seed reports and issue #19's class list).

Every variant is grounded in a real function that does main_grad / weight-gradient bookkeeping, read
from a repository snapshot in /work/.mirror that no earlier corpus used; the twin is that code shortened
(real names, control flow and idioms kept), the bug the same code with one regression of the variant's
class, marked ``# bug``. Where the snapshot's HEAD already ships a bug of the class, the twin is the
corrected code (said in the comment above the variant). Sources (snapshot HEAD):

- jiamingwang-mt/TransformerEngine-FL 3fe8079: transformer_engine/musa/pytorch/module/grouped_linear.py
  (_GroupedLinear_backward, GroupedLinear.backward_custom)
- openpsi-project/ReaLHF be75fce: realhf/impl/model/parallelism/model_parallel/modules.py
  (MergedLinearWithGradAccumulationAndAsyncCommunication.backward,
  LinearWithGradAccumulationAndAsyncCommunication.forward / .backward)
- epfLLM/Megatron-LLM 806a833: megatron/core/tensor_parallel/layers.py
  (LinearWithGradAccumulationAndAsyncCommunication.backward), megatron/model/distributed.py
  (DistributedDataParallel.__init__, _make_param_hook)
- krafton-ai/Megatron-Dion 2d0d251: megatron/core/distributed/distributed_data_parallel.py
  (DistributedDataParallel.zero_grad_buffer, the DION-traced _make_backward_post_hook),
  megatron/core/extensions/transformer_engine.py (TEFusedMLP._make_fused_impl / forward)
- flagos-ai/Megatron-LM-FL 175ae90: megatron/plugin/dualpipev/fb_overlap/modules/utils.py
  (turn_experts_delay_wgrad_compute, call_experts_backward_dw),
  megatron/plugin/dualpipev/fb_overlap/overlap_funcs/bwd.py (transformer_layer_backward_moe),
  megatron/core/extensions/transformer_engine.py (TEFusedMLP._make_fused_impl / forward)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------------------------ 1: which object
    # jiamingwang-mt/TransformerEngine-FL 3fe8079, transformer_engine/musa/pytorch/module/grouped_linear.py,
    # _GroupedLinear_backward (replaces _GroupedLinear.backward when ENABLE_CAST_BATCH_INIT=1). NOTE: the bug is
    # the code at this HEAD: the forward saves only the FP8 / cast workspaces (weights_fp8), and the backward runs
    # handle_custom_ddp_from_mcore (flag, dummy sized from main_grad) on those restored stand-ins, so the
    # Parameter's grad_added_to_main_grad is never set. The twin also saves the original weights (as upstream TE's
    # origin_weights) and does the bookkeeping on them.
    Variant(
        1,
        "blind13-tefl-musa-grouped-bwd-ddp-bookkeeping-on-saved-fp8-weights",
        bug="""
        @staticmethod
        def _GroupedLinear_backward(ctx, grad_output):
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                main_grads = ctx.main_grads
                grad_output = grad_output.contiguous()
                grad_output = torch.split(grad_output.view(-1, grad_output.shape[-1]), ctx.m_splits)

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_list = [
                            torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device)
                            for w in weights
                        ]
                    ceg.general_grouped_gemm(
                        inputmats,
                        grad_output,
                        wgrad_list,
                        ctx.activation_dtype,
                        get_multi_stream_cublas_workspace(),
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        use_split_accumulator=_2X_ACC_WGRAD,
                        accumulate=accumulate_wgrad_into_param_main_grad,
                    )

                    def handle_custom_ddp_from_mcore(w, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                                w.grad_added_to_main_grad = True
                                if getattr(w, "zero_out_wgrad", False):
                                    wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                                else:
                                    wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(w, wgrad) for w, wgrad in zip(weights, wgrad_list)  # bug
                    ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
            return (None, *wgrad_list)
        """,
        twin="""
        @staticmethod
        def _GroupedLinear_backward(ctx, grad_output):
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                origin_weights = saved_tensors[2 * N : 3 * N]
                main_grads = ctx.main_grads
                grad_output = grad_output.contiguous()
                grad_output = torch.split(grad_output.view(-1, grad_output.shape[-1]), ctx.m_splits)

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_list = [
                            torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device)
                            for w in weights
                        ]
                    ceg.general_grouped_gemm(
                        inputmats,
                        grad_output,
                        wgrad_list,
                        ctx.activation_dtype,
                        get_multi_stream_cublas_workspace(),
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        use_split_accumulator=_2X_ACC_WGRAD,
                        accumulate=accumulate_wgrad_into_param_main_grad,
                    )

                    def handle_custom_ddp_from_mcore(w, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                                w.grad_added_to_main_grad = True
                                if getattr(w, "zero_out_wgrad", False):
                                    wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                                else:
                                    wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(w, wgrad) for w, wgrad in zip(origin_weights, wgrad_list)
                    ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
            return (None, *wgrad_list)
        """,
    ),
    # openpsi-project/ReaLHF be75fce, realhf/impl/model/parallelism/model_parallel/modules.py,
    # MergedLinearWithGradAccumulationAndAsyncCommunication.backward (sequence-parallel / async all-reduce parts
    # dropped). The regression casts the restored weights to the gradient dtype "for the dgrad matmul" and keeps
    # using that list: the fused wgrad kernel, the dummy's shape and grad_added_to_main_grad all go to the casts.
    Variant(
        1,
        "blind13-realhf-merged-linear-bwd-weights-cast-before-wgrad",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, *grads):
            grads = list(grads)
            input, *weights = ctx.saved_tensors
            assert len(weights) == len(grads)
            weights = [w.to(grads[0].dtype) for w in weights]  # bug
            use_bias = ctx.use_bias
            is_w_parallel = ctx.is_w_parallel
            total_input = input
            grad_input = 0
            for w, is_parallel, grad in zip(weights, is_w_parallel, grads):
                if is_parallel or constants.model_parallel_rank() == 0:
                    grad_input = grad_input + grad.matmul(w)
            for i in range(len(grads)):
                grads[i] = grads[i].contiguous().view(-1, grads[i].shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

            if ctx.gradient_accumulation_fusion:
                gws = []
                for weight, grad_output in zip(weights, grads):
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
                    gws.append(grad_weight)
            else:
                gws = []
                for w, g in zip(weights, grads):
                    gws.append(g.t().matmul(total_input))
            gbs = [g.sum(dim=0) if use_bias[i] else None for i, g in enumerate(grads)]
            return (grad_input, None, None, None, None, *list(itertools.chain.from_iterable(zip(gws, gbs))))
        """,
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, *grads):
            grads = list(grads)
            input, *weights = ctx.saved_tensors
            assert len(weights) == len(grads)
            use_bias = ctx.use_bias
            is_w_parallel = ctx.is_w_parallel
            total_input = input
            grad_input = 0
            for w, is_parallel, grad in zip(weights, is_w_parallel, grads):
                if is_parallel or constants.model_parallel_rank() == 0:
                    grad_input = grad_input + grad.matmul(w)
            for i in range(len(grads)):
                grads[i] = grads[i].contiguous().view(-1, grads[i].shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

            if ctx.gradient_accumulation_fusion:
                gws = []
                for weight, grad_output in zip(weights, grads):
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
                    gws.append(grad_weight)
            else:
                gws = []
                for w, g in zip(weights, grads):
                    gws.append(g.t().matmul(total_input))
            gbs = [g.sum(dim=0) if use_bias[i] else None for i, g in enumerate(grads)]
            return (grad_input, None, None, None, None, *list(itertools.chain.from_iterable(zip(gws, gbs))))
        """,
    ),
    # ------------------------------------------------------------------ 2: parameter rebound
    # jiamingwang-mt/TransformerEngine-FL 3fe8079, transformer_engine/musa/pytorch/module/grouped_linear.py,
    # GroupedLinear.backward_custom (the recompute path that runs the grouped backward by hand). NOTE: this HEAD
    # ships the rebinding under cpu offload (written there as `for i in self.num_gemms:`): each weight is
    # replaced by a fresh torch.nn.Parameter carrying only main_grad, so hasattr(w, "grad_added_to_main_grad")
    # fails, no flag is set on the real Parameter and no dummy is made. The twin keeps the module's Parameters
    # (the dgrad GEMM uses the FP8 / cast workspaces). The bug is the twin plus only that rebinding.
    Variant(
        2,
        "blind13-tefl-musa-grouped-backward-custom-offload-rebinds-fresh-parameter",
        bug="""
        def backward_custom(self, inp, m_splits, grad_output, is_first_microbatch=None):
            with self.prepare_forward(inp, num_gemms=self.num_gemms) as inp:
                weight_tensors = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
                weights_fp8 = [cast_if_needed(weight, self.activation_dtype) for weight in weight_tensors]
                main_grads = [w.main_grad for w in weight_tensors]
                weights_requires_grad = weight_tensors[0].requires_grad
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                weights = list(weight_tensors)
                if is_cpu_offload_enabled() and self.fuse_wgrad_accumulation:
                    for i in range(self.num_gemms):
                        w = torch.nn.Parameter(weights[i], weights[i].requires_grad)  # bug
                        w.main_grad = main_grads[i]  # bug
                        weights[i] = w  # bug
                grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), m_splits)
                if is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation and not is_first_microbatch
                else:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation
                if weights_requires_grad:
                    if self.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_list = [torch.empty(w.size(), dtype=self.activation_dtype, device=device) for w in weights]
                    ceg.general_grouped_gemm(
                        inputmats, grad_output, wgrad_list, self.activation_dtype,
                        get_multi_stream_cublas_workspace(), layout="NT", grad=True, m_splits=m_splits,
                        use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate_wgrad_into_param_main_grad,
                    )

                    def handle_custom_ddp_from_mcore(w, wgrad):
                        if weights_requires_grad:
                            if self.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                                w.grad_added_to_main_grad = True
                                if getattr(w, "zero_out_wgrad", False):
                                    wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                                else:
                                    wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            elif self.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [handle_custom_ddp_from_mcore(w, wgrad) for w, wgrad in zip(weights, wgrad_list)]
            return wgrad_list
        """,
        twin="""
        def backward_custom(self, inp, m_splits, grad_output, is_first_microbatch=None):
            with self.prepare_forward(inp, num_gemms=self.num_gemms) as inp:
                weight_tensors = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
                weights_fp8 = [cast_if_needed(weight, self.activation_dtype) for weight in weight_tensors]
                main_grads = [w.main_grad for w in weight_tensors]
                weights_requires_grad = weight_tensors[0].requires_grad
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                weights = list(weight_tensors)
                grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), m_splits)
                if is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation and not is_first_microbatch
                else:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation
                if weights_requires_grad:
                    if self.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_list = [torch.empty(w.size(), dtype=self.activation_dtype, device=device) for w in weights]
                    ceg.general_grouped_gemm(
                        inputmats, grad_output, wgrad_list, self.activation_dtype,
                        get_multi_stream_cublas_workspace(), layout="NT", grad=True, m_splits=m_splits,
                        use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate_wgrad_into_param_main_grad,
                    )

                    def handle_custom_ddp_from_mcore(w, wgrad):
                        if weights_requires_grad:
                            if self.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                                w.grad_added_to_main_grad = True
                                if getattr(w, "zero_out_wgrad", False):
                                    wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                                else:
                                    wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            elif self.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [handle_custom_ddp_from_mcore(w, wgrad) for w, wgrad in zip(weights, wgrad_list)]
            return wgrad_list
        """,
    ),
    # openpsi-project/ReaLHF be75fce, realhf/impl/model/parallelism/model_parallel/modules.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward (sequence-parallel / async parts dropped). The
    # regression flattens the saved weight to 2D "for execution compatibility", like grad_output and total_input
    # next to it: the view is a new tensor object without main_grad or grad_added_to_main_grad, so the fused
    # kernel and the bookkeeping below run on it (AttributeError, or a flag nobody reads).
    Variant(
        2,
        "blind13-realhf-linear-bwd-weight-view-rebinds-before-wgrad",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)

            grad_output = grad_output.contiguous()
            # Convert the tensor shapes to 2D for execution compatibility
            grad_output = grad_output.view(-1, grad_output.shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])
            weight = weight.view(-1, weight.shape[-1])  # bug

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
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)

            grad_output = grad_output.contiguous()
            # Convert the tensor shapes to 2D for execution compatibility
            grad_output = grad_output.view(-1, grad_output.shape[-1])
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
    # ------------------------------------------------------------------ 3: flags without writes (and converse)
    # epfLLM/Megatron-LLM 806a833, megatron/core/tensor_parallel/layers.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward (old-style Megatron: no grad_added_to_main_grad; the
    # DDP hook adds any non-None .grad into main_grad). The converse of class 3: the regression computes the real
    # weight gradient up front for both paths, so the fused path writes main_grad and still hands on a real .grad,
    # which the DDP hook adds a second time.
    Variant(
        3,
        "blind13-megatronllm-linear-bwd-fused-write-and-real-grad-returned",
        bug="""
        @staticmethod
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)

            # Convert the tensor shapes to 2D for execution compatibility
            grad_output = grad_output.view(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])
            total_input = total_input.view(total_input.shape[0] * total_input.shape[1], total_input.shape[2])

            if ctx.async_grad_allreduce:
                handle = torch.distributed.all_reduce(grad_input, group=get_tensor_model_parallel_group(), async_op=True)

            grad_weight = grad_output.t().matmul(total_input)  # bug
            if ctx.gradient_accumulation_fusion:
                if weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                elif weight.main_grad.dtype == torch.float16:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                else:
                    raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
            grad_bias = grad_output.sum(dim=0) if use_bias else None

            if ctx.async_grad_allreduce:
                handle.wait()
            return grad_input, grad_weight, grad_bias, None, None, None
        """,
        twin="""
        @staticmethod
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)

            # Convert the tensor shapes to 2D for execution compatibility
            grad_output = grad_output.view(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])
            total_input = total_input.view(total_input.shape[0] * total_input.shape[1], total_input.shape[2])

            if ctx.async_grad_allreduce:
                handle = torch.distributed.all_reduce(grad_input, group=get_tensor_model_parallel_group(), async_op=True)

            if ctx.gradient_accumulation_fusion:
                if weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                elif weight.main_grad.dtype == torch.float16:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                else:
                    raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None

            if ctx.async_grad_allreduce:
                handle.wait()
            return grad_input, grad_weight, grad_bias, None, None, None
        """,
    ),
    # openpsi-project/ReaLHF be75fce, realhf/impl/model/parallelism/model_parallel/modules.py,
    # MergedLinearWithGradAccumulationAndAsyncCommunication.backward. The regression "sets the DDP flag once for
    # all weights" in a loop after both branches: on the non-fused path nothing wrote main_grad, yet
    # grad_added_to_main_grad becomes True, so Megatron's hook drops the real gradients returned in gws.
    Variant(
        3,
        "blind13-realhf-merged-linear-bwd-flag-loop-after-both-branches",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, *grads):
            grads = list(grads)
            input, *weights = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = 0
            for w, is_parallel, grad in zip(weights, ctx.is_w_parallel, grads):
                if is_parallel or constants.model_parallel_rank() == 0:
                    grad_input = grad_input + grad.matmul(w)
            for i in range(len(grads)):
                grads[i] = grads[i].contiguous().view(-1, grads[i].shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

            if ctx.gradient_accumulation_fusion:
                gws = []
                for weight, grad_output in zip(weights, grads):
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
                    else:
                        grad_weight = None
                    gws.append(grad_weight)
            else:
                gws = []
                for w, g in zip(weights, grads):
                    gws.append(g.t().matmul(total_input))
            for w in weights:  # bug
                if hasattr(w, "grad_added_to_main_grad"):  # bug
                    w.grad_added_to_main_grad = True  # bug
            gbs = [g.sum(dim=0) if use_bias[i] else None for i, g in enumerate(grads)]
            return (grad_input, None, None, None, None, *list(itertools.chain.from_iterable(zip(gws, gbs))))
        """,
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, *grads):
            grads = list(grads)
            input, *weights = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = 0
            for w, is_parallel, grad in zip(weights, ctx.is_w_parallel, grads):
                if is_parallel or constants.model_parallel_rank() == 0:
                    grad_input = grad_input + grad.matmul(w)
            for i in range(len(grads)):
                grads[i] = grads[i].contiguous().view(-1, grads[i].shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

            if ctx.gradient_accumulation_fusion:
                gws = []
                for weight, grad_output in zip(weights, grads):
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
                    gws.append(grad_weight)
            else:
                gws = []
                for w, g in zip(weights, grads):
                    gws.append(g.t().matmul(total_input))
            gbs = [g.sum(dim=0) if use_bias[i] else None for i, g in enumerate(grads)]
            return (grad_input, None, None, None, None, *list(itertools.chain.from_iterable(zip(gws, gbs))))
        """,
    ),
    # ------------------------------------------------------------------ 4: overwrite without asking
    # epfLLM/Megatron-LLM 806a833, megatron/model/distributed.py, DistributedDataParallel.__init__ (contiguous
    # buffers, shortened) and _make_param_hook. The regression copies each backward's
    # .grad into the buffer instead of adding it: every microbatch but the last is lost, and nothing here reads
    # an overwrite switch.
    Variant(
        4,
        "blind13-megatronllm-ddp-param-hook-copies-grad-into-main-grad",
        bug="""
        class DistributedDataParallel(DistributedDataParallelBase):
            def __init__(self, module, accumulate_allreduce_grads_in_fp32, use_contiguous_buffers):
                super(DistributedDataParallel, self).__init__(module)
                self.accumulate_allreduce_grads_in_fp32 = accumulate_allreduce_grads_in_fp32
                self._grad_buffers = {}
                type_num_elements = {}
                for param in self.module.parameters():
                    if param.requires_grad:
                        dtype = _get_buffer_type(param)
                        type_num_elements[dtype] = type_num_elements.get(dtype, 0) + param.data.nelement()
                for dtype, num_elements in type_num_elements.items():
                    self._grad_buffers[dtype] = MemoryBuffer(num_elements, num_elements, dtype)
                for param in self.module.parameters():
                    if param.requires_grad:
                        dtype = _get_buffer_type(param)
                        type_num_elements[dtype] -= param.data.nelement()
                        param.main_grad = self._grad_buffers[dtype].get(param.data.shape, type_num_elements[dtype])
                self.grad_accs = []
                for param in self.module.parameters():
                    if param.requires_grad:
                        param_tmp = param.expand_as(param)
                        grad_acc = param_tmp.grad_fn.next_functions[0][0]
                        grad_acc.register_hook(self._make_param_hook(param))
                        self.grad_accs.append(grad_acc)

            def _make_param_hook(self, param):
                # Hook used for back-prop.
                def param_hook(*unused):
                    # Add the gradient to the buffer.
                    if param.grad is not None:
                        # The gradient function of linear layers is fused with GEMMs
                        param.main_grad.copy_(param.grad.data)  # bug
                        # Now we can deallocate grad memory.
                        param.grad = None
                return param_hook
        """,
        twin="""
        class DistributedDataParallel(DistributedDataParallelBase):
            def __init__(self, module, accumulate_allreduce_grads_in_fp32, use_contiguous_buffers):
                super(DistributedDataParallel, self).__init__(module)
                self.accumulate_allreduce_grads_in_fp32 = accumulate_allreduce_grads_in_fp32
                self._grad_buffers = {}
                type_num_elements = {}
                for param in self.module.parameters():
                    if param.requires_grad:
                        dtype = _get_buffer_type(param)
                        type_num_elements[dtype] = type_num_elements.get(dtype, 0) + param.data.nelement()
                for dtype, num_elements in type_num_elements.items():
                    self._grad_buffers[dtype] = MemoryBuffer(num_elements, num_elements, dtype)
                for param in self.module.parameters():
                    if param.requires_grad:
                        dtype = _get_buffer_type(param)
                        type_num_elements[dtype] -= param.data.nelement()
                        param.main_grad = self._grad_buffers[dtype].get(param.data.shape, type_num_elements[dtype])
                self.grad_accs = []
                for param in self.module.parameters():
                    if param.requires_grad:
                        param_tmp = param.expand_as(param)
                        grad_acc = param_tmp.grad_fn.next_functions[0][0]
                        grad_acc.register_hook(self._make_param_hook(param))
                        self.grad_accs.append(grad_acc)

            def _make_param_hook(self, param):
                # Hook used for back-prop.
                def param_hook(*unused):
                    # Add the gradient to the buffer.
                    if param.grad is not None:
                        # The gradient function of linear layers is fused with GEMMs
                        param.main_grad.add_(param.grad.data)
                        # Now we can deallocate grad memory.
                        param.grad = None
                return param_hook
        """,
    ),
    # openpsi-project/ReaLHF be75fce, realhf/impl/model/parallelism/model_parallel/modules.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward. The regression replaces the fp32 fused
    # accumulate kernel by a plain matmul into main_grad (out=), which overwrites the buffer every microbatch;
    # no overwrite_main_grad or sharding switch is read.
    Variant(
        4,
        "blind13-realhf-linear-bwd-matmul-out-overwrites-fp32-main-grad",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)
            grad_output = grad_output.contiguous()
            grad_output = grad_output.view(-1, grad_output.shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

            if ctx.gradient_accumulation_fusion:
                if weight.main_grad.dtype == torch.float32:
                    torch.matmul(grad_output.t(), total_input, out=weight.main_grad)  # bug
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
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)
            grad_output = grad_output.contiguous()
            grad_output = grad_output.view(-1, grad_output.shape[-1])
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
    # ------------------------------------------------------------------ 5: hooks without bookkeeping
    # krafton-ai/Megatron-Dion 2d0d251, megatron/core/distributed/distributed_data_parallel.py,
    # DistributedDataParallel.zero_grad_buffer. With Transformer Engine CUDA graphs the replayed fused backward
    # never sets grad_added_to_main_grad again; the real code therefore keeps the flags when cuda_graph_impl is
    # "transformer_engine". The regression resets them on every path, so on graph replay the DDP hook finds the
    # flag False and adds the dummy .grad on top of the main_grad the graph already wrote.
    Variant(
        5,
        "blind13-dion-zero-grad-buffer-resets-flags-under-te-cuda-graphs",
        bug="""
        def zero_grad_buffer(self):
            '''
            Zeros out all grad buffers. Needs to be called at the beginning of each
            training iteration.
            '''
            for param in self.params_with_grad:  # bug
                param.grad_added_to_main_grad = False  # bug
            for buffer in self.buffers + self.expert_parallel_buffers:
                buffer.reset()
            for bucket_group in self.bucket_groups + self.expert_parallel_bucket_groups:
                bucket_group.reset()
        """,
        twin="""
        def zero_grad_buffer(self):
            '''
            Zeros out all grad buffers. Needs to be called at the beginning of each
            training iteration.
            '''
            if getattr(self.config, 'cuda_graph_impl', 'none') != 'transformer_engine':
                # Don't reset grad_added_to_main_grad when CUDA Graph is used.
                # Because in CUDA Graph it no longer has the opportunity to set it back
                # to True, and there will be a double-GA.
                for param in self.params_with_grad:
                    param.grad_added_to_main_grad = False
            for buffer in self.buffers + self.expert_parallel_buffers:
                buffer.reset()
            for bucket_group in self.bucket_groups + self.expert_parallel_bucket_groups:
                bucket_group.reset()
        """,
    ),
    # krafton-ai/Megatron-Dion 2d0d251, megatron/core/distributed/distributed_data_parallel.py,
    # DistributedDataParallel._make_backward_post_hook (the Dion fork's version with DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD
    # tracing; the logging call shortened). The regression drops the early return under graph capture: the hook
    # then fires while a CUDA graph is being captured, where no producer has set grad_added_to_main_grad or
    # handed a real .grad, and adds / registers whatever .grad is there.
    Variant(
        5,
        "blind13-dion-traced-ddp-hook-fires-during-graph-capture",
        bug="""
        def _make_backward_post_hook(self, param: torch.nn.Parameter):
            def hook(*unused):
                if param in self.param_to_bucket_group:  # bug
                    assert param.requires_grad
                    if self.ddp_config.overlap_grad_reduce:
                        assert (
                            param.grad is not None
                        ), 'param.grad being None is not safe when overlap_grad_reduce is True'
                    trace_main_grad_add = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD", "0") == "1"
                    param_name = getattr(param, "_param_name", "") or ""
                    target_name = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD_PARAM", "").strip()
                    trace_this_param = trace_main_grad_add and _ddp_debug_name_matches(param_name, target_name)
                    grad_added_before = bool(getattr(param, "grad_added_to_main_grad", False))
                    will_add = param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    )
                    if param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    ):
                        param.main_grad.add_(param.grad.data)
                    if trace_this_param:
                        logger.warning(
                            "[DION_DDP_MAIN_GRAD_ADD] param=%s grad_added_before=%s will_add=%s",
                            param_name or f"id_{id(param)}", grad_added_before, will_add,
                        )
                    param.grad = None

                    if self.ddp_config.overlap_grad_reduce:
                        self.param_to_bucket_group[param].register_grad_ready(
                            param, self.force_all_reduce
                        )

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
                        assert (
                            param.grad is not None
                        ), 'param.grad being None is not safe when overlap_grad_reduce is True'
                    trace_main_grad_add = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD", "0") == "1"
                    param_name = getattr(param, "_param_name", "") or ""
                    target_name = os.getenv("DION_DEBUG_TRACE_DDP_MAIN_GRAD_ADD_PARAM", "").strip()
                    trace_this_param = trace_main_grad_add and _ddp_debug_name_matches(param_name, target_name)
                    grad_added_before = bool(getattr(param, "grad_added_to_main_grad", False))
                    will_add = param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    )
                    if param.grad is not None and (
                        not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                    ):
                        param.main_grad.add_(param.grad.data)
                    if trace_this_param:
                        logger.warning(
                            "[DION_DDP_MAIN_GRAD_ADD] param=%s grad_added_before=%s will_add=%s",
                            param_name or f"id_{id(param)}", grad_added_before, will_add,
                        )
                    param.grad = None

                    if self.ddp_config.overlap_grad_reduce:
                        self.param_to_bucket_group[param].register_grad_ready(
                            param, self.force_all_reduce
                        )

            return hook
        """,
    ),
    # ------------------------------------------------------------------ 6: delayed wgrad dropped
    # flagos-ai/Megatron-LM-FL 175ae90, megatron/plugin/dualpipev/fb_overlap/modules/utils.py,
    # turn_experts_delay_wgrad_compute / call_experts_backward_dw (the DualPipeV fb-overlap driver of TE's
    # wgrad_store; no class overrides backward_dw in this repository, so this is the nearest shape: delay is switched
    # on for both expert GEMMs, but the regression's backward_dw call covers only fc2, so fc1's weight gradient is
    # never computed and its main_grad never written).
    Variant(
        6,
        "blind13-megatronfl-dualpipev-experts-backward-dw-skips-fc1",
        bug="""
        def turn_experts_delay_wgrad_compute(bwd_layer_graph, enable=False):
            experts_layer = bwd_layer_graph.layer.mlp.experts
            if enable:
                experts_layer.linear_fc2.wgrad_store.enable_delay_wgrad_compute()
                experts_layer.linear_fc1.wgrad_store.enable_delay_wgrad_compute()
            else:
                experts_layer.linear_fc2.wgrad_store.disable_delay_wgrad_compute()
                experts_layer.linear_fc1.wgrad_store.disable_delay_wgrad_compute()


        def call_experts_backward_dw(bwd_layer_graph):
            experts_layer = bwd_layer_graph.layer.mlp.experts
            experts_layer.linear_fc2.backward_dw()  # bug
        """,
        twin="""
        def turn_experts_delay_wgrad_compute(bwd_layer_graph, enable=False):
            experts_layer = bwd_layer_graph.layer.mlp.experts
            if enable:
                experts_layer.linear_fc2.wgrad_store.enable_delay_wgrad_compute()
                experts_layer.linear_fc1.wgrad_store.enable_delay_wgrad_compute()
            else:
                experts_layer.linear_fc2.wgrad_store.disable_delay_wgrad_compute()
                experts_layer.linear_fc1.wgrad_store.disable_delay_wgrad_compute()


        def call_experts_backward_dw(bwd_layer_graph):
            experts_layer = bwd_layer_graph.layer.mlp.experts
            experts_layer.linear_fc2.backward_dw()
            experts_layer.linear_fc1.backward_dw()
        """,
    ),
    # flagos-ai/Megatron-LM-FL 175ae90, megatron/plugin/dualpipev/fb_overlap/overlap_funcs/bwd.py,
    # transformer_layer_backward_moe (shortened: the routed-expert all-to-alls kept, the permutation graphs
    # dropped). The regression calls the shared experts' backward_dw before the graph backward that fills their
    # wgrad_store: the store is empty then, and once delay is switched off again nothing computes those weights.
    Variant(
        6,
        "blind13-megatronfl-dualpipev-shared-experts-dw-before-graph-backward",
        bug="""
        def transformer_layer_backward_moe(layer_output_grad, layer_graph):
            self = layer_graph
            ep_group = parallel_state.get_expert_model_parallel_group()
            backward_shared = (
                layer_output_grad if layer_output_grad is not None else self.unperm2_graph[1].grad
            )
            run_graph_backward(self.unperm2_graph, layer_output_grad, keep_grad=True)
            _, unperm1_out_grad, bwd_unperm_a2a_handle = async_all_to_all(
                self.unperm_a2a_graph[1].grad, self.output_splits, self.input_splits, ep_group
            )
            # overlap alltoall by shared experts backward
            if self.shared_experts_graph[0] is not None:
                turn_shared_experts_delay_wgrad_compute(self, enable=True)
                call_shared_experts_backward_dw(self)  # bug
                run_graph_backward(self.shared_experts_graph, backward_shared, keep_grad=True)
                turn_shared_experts_delay_wgrad_compute(self, enable=False)
            bwd_unperm_a2a_handle.wait()
            bwd_unperm_a2a_handle = None
            run_graph_backward(self.unperm1_graph, unperm1_out_grad)

            turn_experts_delay_wgrad_compute(self, enable=True)
            run_graph_backward(self.grouped_mlp_graph, keep_grad=True)  # keep for dw commputation
            call_experts_backward_dw(self)
            turn_experts_delay_wgrad_compute(self, enable=False)

            turn_attention_delay_wgrad_compute(self, enable=True)
            run_graph_backward(self.attn_graph, keep_grad=True)
            call_attention_backward_dw(self)
            turn_attention_delay_wgrad_compute(self, enable=False)
            return self.layer_input.grad
        """,
        twin="""
        def transformer_layer_backward_moe(layer_output_grad, layer_graph):
            self = layer_graph
            ep_group = parallel_state.get_expert_model_parallel_group()
            backward_shared = (
                layer_output_grad if layer_output_grad is not None else self.unperm2_graph[1].grad
            )
            run_graph_backward(self.unperm2_graph, layer_output_grad, keep_grad=True)
            _, unperm1_out_grad, bwd_unperm_a2a_handle = async_all_to_all(
                self.unperm_a2a_graph[1].grad, self.output_splits, self.input_splits, ep_group
            )
            # overlap alltoall by shared experts backward
            if self.shared_experts_graph[0] is not None:
                turn_shared_experts_delay_wgrad_compute(self, enable=True)
                run_graph_backward(self.shared_experts_graph, backward_shared, keep_grad=True)
                call_shared_experts_backward_dw(self)
                turn_shared_experts_delay_wgrad_compute(self, enable=False)
            bwd_unperm_a2a_handle.wait()
            bwd_unperm_a2a_handle = None
            run_graph_backward(self.unperm1_graph, unperm1_out_grad)

            turn_experts_delay_wgrad_compute(self, enable=True)
            run_graph_backward(self.grouped_mlp_graph, keep_grad=True)  # keep for dw commputation
            call_experts_backward_dw(self)
            turn_experts_delay_wgrad_compute(self, enable=False)

            turn_attention_delay_wgrad_compute(self, enable=True)
            run_graph_backward(self.attn_graph, keep_grad=True)
            call_attention_backward_dw(self)
            turn_attention_delay_wgrad_compute(self, enable=False)
            return self.layer_input.grad
        """,
    ),
    # ------------------------------------------------------------------ 7: seed shape, other syntax
    # jiamingwang-mt/TransformerEngine-FL 3fe8079, transformer_engine/musa/pytorch/module/grouped_linear.py,
    # _GroupedLinear_backward (twin as corrected in the first class-1 variant: bookkeeping on origin_weights).
    # accumulate_wgrad_into_param_main_grad is the local GEMM flag, False on the first microbatch although the
    # wgrad GEMM still writes main_grad (wgrad_list is main_grads). The regression picks dummy-versus-real per weight
    # on that local flag in a conditional expression: on the first microbatch main_grad itself goes back as .grad,
    # no flag is set, and the DDP hook adds main_grad into itself.
    Variant(
        7,
        "blind13-tefl-musa-grouped-bwd-ddp-handling-conditional-on-local-accumulate",
        bug="""
        @staticmethod
        def _GroupedLinear_backward(ctx, grad_output):
            saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            N = ctx.num_gemms
            inputmats = saved_tensors[:N]
            origin_weights = saved_tensors[2 * N : 3 * N]
            grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.m_splits)
            if ctx.is_first_microbatch is not None:
                accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
            else:
                accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
            if ctx.weights_requires_grad:
                if ctx.fuse_wgrad_accumulation:
                    wgrad_list = ctx.main_grads
                else:
                    wgrad_list = [torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device) for w in origin_weights]
                ceg.general_grouped_gemm(
                    inputmats, grad_output, wgrad_list, ctx.activation_dtype,
                    get_multi_stream_cublas_workspace(), layout="NT", grad=True, m_splits=ctx.m_splits,
                    use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate_wgrad_into_param_main_grad,
                )

                def handle_custom_ddp_from_mcore(w, wgrad):
                    if ctx.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                        w.grad_added_to_main_grad = True
                        if getattr(w, "zero_out_wgrad", False):
                            wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                    return wgrad

                wgrad_list = [
                    handle_custom_ddp_from_mcore(w, wgrad) if accumulate_wgrad_into_param_main_grad else wgrad  # bug
                    for w, wgrad in zip(origin_weights, wgrad_list)
                ]
            else:
                wgrad_list = [None] * ctx.num_gemms
            return (None, *wgrad_list)
        """,
        twin="""
        @staticmethod
        def _GroupedLinear_backward(ctx, grad_output):
            saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            N = ctx.num_gemms
            inputmats = saved_tensors[:N]
            origin_weights = saved_tensors[2 * N : 3 * N]
            grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.m_splits)
            if ctx.is_first_microbatch is not None:
                accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
            else:
                accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
            if ctx.weights_requires_grad:
                if ctx.fuse_wgrad_accumulation:
                    wgrad_list = ctx.main_grads
                else:
                    wgrad_list = [torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device) for w in origin_weights]
                ceg.general_grouped_gemm(
                    inputmats, grad_output, wgrad_list, ctx.activation_dtype,
                    get_multi_stream_cublas_workspace(), layout="NT", grad=True, m_splits=ctx.m_splits,
                    use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate_wgrad_into_param_main_grad,
                )

                def handle_custom_ddp_from_mcore(w, wgrad):
                    if ctx.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                        w.grad_added_to_main_grad = True
                        if getattr(w, "zero_out_wgrad", False):
                            wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                    return wgrad

                wgrad_list = [
                    handle_custom_ddp_from_mcore(w, wgrad)
                    for w, wgrad in zip(origin_weights, wgrad_list)
                ]
            else:
                wgrad_list = [None] * ctx.num_gemms
            return (None, *wgrad_list)
        """,
    ),
    # jiamingwang-mt/TransformerEngine-FL 3fe8079, transformer_engine/musa/pytorch/module/grouped_linear.py,
    # GroupedLinear.backward_custom, the nested handle_custom_ddp_from_mcore (the wgrad list feeds the manual
    # post-backward hook at the end of the function). The regression adds an early return on the local accumulate
    # flag: on the first microbatch the GEMM wrote main_grad, but the helper returns main_grad itself as the
    # "gradient" with no grad_added_to_main_grad and no dummy.
    Variant(
        7,
        "blind13-tefl-musa-grouped-backward-custom-early-return-on-local-accumulate",
        bug="""
        def backward_custom(self, inp, m_splits, grad_output, is_first_microbatch=None):
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                weights = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
                main_grads = [w.main_grad for w in weights]
                grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), m_splits)
                if is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation and not is_first_microbatch
                else:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation
                wgrad_list = main_grads if self.fuse_wgrad_accumulation else [
                    torch.empty(w.size(), dtype=self.activation_dtype, device=device) for w in weights
                ]
                ceg.general_grouped_gemm(
                    inputmats, grad_output, wgrad_list, self.activation_dtype,
                    get_multi_stream_cublas_workspace(), layout="NT", grad=True, m_splits=m_splits,
                    use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate_wgrad_into_param_main_grad,
                )

                def handle_custom_ddp_from_mcore(w, wgrad):
                    if not accumulate_wgrad_into_param_main_grad:  # bug
                        return wgrad  # bug
                    if self.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                        w.grad_added_to_main_grad = True
                        if getattr(w, "zero_out_wgrad", False):
                            wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    elif self.fuse_wgrad_accumulation:
                        wgrad = None
                    return wgrad

                wgrad_list = [handle_custom_ddp_from_mcore(w, wgrad) for w, wgrad in zip(weights, wgrad_list)]

            for weight, wgrad in zip(weights, wgrad_list):
                if weight.requires_grad and not self.fuse_wgrad_accumulation:
                    weight.grad = wgrad
                    if weight.grad is not None and (
                        not weight.grad_added_to_main_grad or getattr(weight, 'zero_out_wgrad', False)
                    ):
                        weight.main_grad.add_(weight.grad.data)
                    weight.grad = None
            return wgrad_list
        """,
        twin="""
        def backward_custom(self, inp, m_splits, grad_output, is_first_microbatch=None):
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                weights = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
                main_grads = [w.main_grad for w in weights]
                grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), m_splits)
                if is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation and not is_first_microbatch
                else:
                    accumulate_wgrad_into_param_main_grad = self.fuse_wgrad_accumulation
                wgrad_list = main_grads if self.fuse_wgrad_accumulation else [
                    torch.empty(w.size(), dtype=self.activation_dtype, device=device) for w in weights
                ]
                ceg.general_grouped_gemm(
                    inputmats, grad_output, wgrad_list, self.activation_dtype,
                    get_multi_stream_cublas_workspace(), layout="NT", grad=True, m_splits=m_splits,
                    use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate_wgrad_into_param_main_grad,
                )

                def handle_custom_ddp_from_mcore(w, wgrad):
                    if self.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                        w.grad_added_to_main_grad = True
                        if getattr(w, "zero_out_wgrad", False):
                            wgrad = torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    elif self.fuse_wgrad_accumulation:
                        wgrad = None
                    return wgrad

                wgrad_list = [handle_custom_ddp_from_mcore(w, wgrad) for w, wgrad in zip(weights, wgrad_list)]

            for weight, wgrad in zip(weights, wgrad_list):
                if weight.requires_grad and not self.fuse_wgrad_accumulation:
                    weight.grad = wgrad
                    if weight.grad is not None and (
                        not weight.grad_added_to_main_grad or getattr(weight, 'zero_out_wgrad', False)
                    ):
                        weight.main_grad.add_(weight.grad.data)
                    weight.grad = None
            return wgrad_list
        """,
    ),
    # ------------------------------------------------------------------ 8: integration, main_grad never fetched
    # krafton-ai/Megatron-Dion 2d0d251, megatron/core/extensions/transformer_engine.py, TEFusedMLP
    # (_make_fused_impl shortened to the two BasicLinear ops, and forward). NOTE: the bug is the code at this HEAD:
    # the TE ops are built with accumulate_into_main_grad on the wrapper's Parameters, but under Megatron-FSDP
    # main_grad is None until fetched and nothing calls get_main_grad() before the fused impl runs. The twin
    # fetches it in forward, the way the Megatron-LM fix of the grouped-MLP fused path does.
    Variant(
        8,
        "blind13-dion-te-fused-mlp-forward-never-fetches-fsdp-main-grad",
        bug="""
        class TEFusedMLP(MLP):
            def _make_fused_impl(self) -> te.pytorch.ops.Sequential:
                fused_impl = te.pytorch.ops.Sequential()
                tp_world_size = get_tensor_model_parallel_world_size()
                weight = self.linear_fc1.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1), weight.size(0) * tp_world_size, device="meta", dtype=weight.dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)
                fused_impl.append(self._make_activation_op(self.activation_func, self.config.gated_linear_unit, False))
                weight = self.linear_fc2.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1), weight.size(0), device="meta", dtype=weight.dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)
                self._register_hooks_on_fused_impl(fused_impl)
                return fused_impl

            def forward(self, hidden_states: torch.Tensor, **kwargs):
                if self._fused_impl is None:
                    self._fused_impl = (self._make_fused_impl(),)
                out = self._fused_impl[0](hidden_states)  # bug
                bias = None
                if self.linear_fc2.te_return_bias:
                    bias = self.linear_fc2.bias
                    if isinstance(bias, torch.Tensor) and bias.numel() == 0:
                        bias = None
                return out, bias
        """,
        twin="""
        class TEFusedMLP(MLP):
            def _make_fused_impl(self) -> te.pytorch.ops.Sequential:
                fused_impl = te.pytorch.ops.Sequential()
                tp_world_size = get_tensor_model_parallel_world_size()
                weight = self.linear_fc1.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1), weight.size(0) * tp_world_size, device="meta", dtype=weight.dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)
                fused_impl.append(self._make_activation_op(self.activation_func, self.config.gated_linear_unit, False))
                weight = self.linear_fc2.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1), weight.size(0), device="meta", dtype=weight.dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)
                self._register_hooks_on_fused_impl(fused_impl)
                return fused_impl

            def forward(self, hidden_states: torch.Tensor, **kwargs):
                if self._fused_impl is None:
                    self._fused_impl = (self._make_fused_impl(),)
                # Megatron-FSDP allocates main_grad lazily: expose it before the fused ops write it.
                for param in (self.linear_fc1.weight, self.linear_fc2.weight):
                    if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
                        param.main_grad = param.get_main_grad()
                out = self._fused_impl[0](hidden_states)
                bias = None
                if self.linear_fc2.te_return_bias:
                    bias = self.linear_fc2.bias
                    if isinstance(bias, torch.Tensor) and bias.numel() == 0:
                        bias = None
                return out, bias
        """,
    ),
    # flagos-ai/Megatron-LM-FL 175ae90, megatron/core/extensions/transformer_engine.py, TEFusedMLP (the same
    # construction as above at this HEAD, which also never fetches main_grad; the twin adds a _prepare_main_grads
    # helper called from forward). The regression guards the fetch on hasattr(param, "main_grad"): under
    # Megatron-FSDP the attribute exists but is None, so get_main_grad() is never called and the fused ops find
    # no buffer.
    Variant(
        8,
        "blind13-megatronfl-te-fused-mlp-main-grad-fetch-guarded-on-hasattr",
        bug="""
        class TEFusedMLP(MLP):
            def _make_fused_impl(self) -> te.pytorch.ops.Sequential:
                fused_impl = te.pytorch.ops.Sequential()
                for linear, out_mult in ((self.linear_fc1, get_tensor_model_parallel_world_size()), (self.linear_fc2, 1)):
                    weight = linear.weight
                    op = te.pytorch.ops.BasicLinear(
                        weight.size(1), weight.size(0) * out_mult, device="meta", dtype=weight.dtype,
                        accumulate_into_main_grad=linear.fuse_wgrad_accumulation,
                    )
                    op.weight = weight
                    fused_impl.append(op)
                return fused_impl

            def _prepare_main_grads(self):
                for linear in (self.linear_fc1, self.linear_fc2):
                    param = linear.weight
                    if not linear.fuse_wgrad_accumulation:
                        continue
                    if not hasattr(param, "main_grad") and hasattr(param, "get_main_grad"):  # bug
                        param.main_grad = param.get_main_grad()

            def forward(self, hidden_states: torch.Tensor, **kwargs):
                if self._fused_impl is None:
                    self._fused_impl = (self._make_fused_impl(),)
                self._prepare_main_grads()
                out = self._fused_impl[0](hidden_states)
                return out, None
        """,
        twin="""
        class TEFusedMLP(MLP):
            def _make_fused_impl(self) -> te.pytorch.ops.Sequential:
                fused_impl = te.pytorch.ops.Sequential()
                for linear, out_mult in ((self.linear_fc1, get_tensor_model_parallel_world_size()), (self.linear_fc2, 1)):
                    weight = linear.weight
                    op = te.pytorch.ops.BasicLinear(
                        weight.size(1), weight.size(0) * out_mult, device="meta", dtype=weight.dtype,
                        accumulate_into_main_grad=linear.fuse_wgrad_accumulation,
                    )
                    op.weight = weight
                    fused_impl.append(op)
                return fused_impl

            def _prepare_main_grads(self):
                for linear in (self.linear_fc1, self.linear_fc2):
                    param = linear.weight
                    if not linear.fuse_wgrad_accumulation:
                        continue
                    if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
                        param.main_grad = param.get_main_grad()

            def forward(self, hidden_states: torch.Tensor, **kwargs):
                if self._fused_impl is None:
                    self._fused_impl = (self._make_fused_impl(),)
                self._prepare_main_grads()
                out = self._fused_impl[0](hidden_states)
                return out, None
        """,
    ),
)
