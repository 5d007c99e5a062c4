"""The held-out part of the ninth blind corpus (variant_corpus_blind9.py): the third variant
of each class in the order the writer delivered them, moved here before anyone who writes rules
had read them. Rules are mended on the sixteen development variants only; these eight are
measured, not read (test_blind9_corpus.py)."""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # pggPL/TransformerEngine bf4b2b9, transformer_engine/pytorch/module/grouped_linear.py, _GroupedLinear.backward. `weights` come back from
    # the saved tensors (FP8 workspaces / materialized copies); the Parameters are `origin_weights`, restored from ctx.origin_weight_refs.
    # Running the Megatron bookkeeping on the saved stand-ins finds no grad_added_to_main_grad, so the Parameter's flag stays False and no
    # dummy is returned although the GEMM already wrote main_grad.
    Variant(
        1,
        "blind9-pggpl-grouped-linear-ddp-on-saved-weights",
        bug="""
            def backward(ctx, grad_output, _grad_workspaces):
                saved_tensors = restore_from_func_ctx(ctx)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                saved_weights = saved_tensors[2 * N : 3 * N]

                origin_weights = [None] * N
                main_grads = [None] * N
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref() if ref is not None else None for ref in origin_weight_refs]
                    assert all(
                        w is not None for w in origin_weights
                    ), "weight was removed while fuse_wgrad_accumulation=True"
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad

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
                        wgrad_packed = torch.empty(
                            ctx.num_gemms, *weights[0].size(), dtype=ctx.activation_dtype, device=ctx.device
                        )
                        wgrad_list = [wgrad_packed[i] for i in range(ctx.num_gemms)]
                    general_grouped_gemm(
                        inputmats,
                        grad_output,
                        wgrad_list,
                        out_dtype=ctx.activation_dtype,
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        accumulate=(
                            accumulate_wgrad_into_param_main_grad
                            if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                            else False
                        ),
                    )

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype, zero=True)
                                else:
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(weight, main_grad, wgrad)
                        for weight, main_grad, wgrad in zip(weights, main_grads, wgrad_list)  # bug
                    ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
                return (None, None, None, None, None, *wgrad_list)
        """,
        twin="""
            def backward(ctx, grad_output, _grad_workspaces):
                saved_tensors = restore_from_func_ctx(ctx)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                saved_weights = saved_tensors[2 * N : 3 * N]

                origin_weights = [None] * N
                main_grads = [None] * N
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref() if ref is not None else None for ref in origin_weight_refs]
                    assert all(
                        w is not None for w in origin_weights
                    ), "weight was removed while fuse_wgrad_accumulation=True"
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad

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
                        wgrad_packed = torch.empty(
                            ctx.num_gemms, *weights[0].size(), dtype=ctx.activation_dtype, device=ctx.device
                        )
                        wgrad_list = [wgrad_packed[i] for i in range(ctx.num_gemms)]
                    general_grouped_gemm(
                        inputmats,
                        grad_output,
                        wgrad_list,
                        out_dtype=ctx.activation_dtype,
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        accumulate=(
                            accumulate_wgrad_into_param_main_grad
                            if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                            else False
                        ),
                    )

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype, zero=True)
                                else:
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(weight, main_grad, wgrad)
                        for weight, main_grad, wgrad in zip(origin_weights, main_grads, wgrad_list)
                    ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
                return (None, None, None, None, None, *wgrad_list)
        """,
    ),
    # ROCm/TransformerEngine ac80527, transformer_engine/pytorch/module/linear.py, _Linear.backward. With CPU offloading +
    # fuse_wgrad_accumulation the saved weight is rebound to a fresh Parameter that only gets main_grad back: grad_added_to_main_grad is lost,
    # so the real Parameter is never flagged and gets no dummy after the GEMM wrote main_grad. NOTE: the bug line is the code at this HEAD
    # (later TE keeps the original object via a weakref); the twin re-attaches main_grad to the saved weight object.
    Variant(
        2,
        "blind9-rocmte-linear-cpu-offload-fresh-parameter",
        bug="""
            def backward(ctx, grad_output):
                with torch.cuda.nvtx.range("_Linear_backward"):
                    (
                        inputmat,
                        inputmat_t,
                        weight,
                        weight_fp8,
                        main_grad,
                        fwd_scale_inverses,
                    ) = ctx.saved_tensors

                    if ctx.cpu_offloading and ctx.fuse_wgrad_accumulation:
                        weight = torch.nn.Parameter(weight.requires_grad)  # bug
                        weight.main_grad = main_grad

                    (grad_output, grad_output_c, grad_output_t, grad_bias) = (
                        TransformerEngineBaseModule.grad_output_preprocess(
                            ctx, grad_output, ctx.parallel_mode == "row"
                        )
                    )
                    inputmat_total = inputmat

                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                    dgrad, _, _ = gemm(weight, grad_output, ctx.activation_dtype, get_workspace(), layout="NN", grad=True)

                    if weight.requires_grad:
                        wgrad, grad_bias, _ = gemm(
                            inputmat_total,
                            grad_output,
                            ctx.activation_dtype,
                            get_workspace(),
                            layout="NT",
                            grad=True,
                            use_bias=ctx.use_bias,
                            accumulate=accumulate_wgrad_into_param_main_grad,
                            out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
                        )
                        clear_tensor_data(inputmat_total)

                    if not ctx.use_bias:
                        grad_bias = None

                if weight.requires_grad:
                    # Handle custom DDP from mcore.
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        if getattr(weight, "zero_out_wgrad", False):
                            wgrad = torch.zeros(
                                weight.main_grad.shape,
                                dtype=weight.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        else:
                            wgrad = torch.empty(
                                weight.main_grad.shape,
                                dtype=weight.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                else:
                    wgrad = None
                return wgrad, None, None, dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, grad_bias
        """,
        twin="""
            def backward(ctx, grad_output):
                with torch.cuda.nvtx.range("_Linear_backward"):
                    (
                        inputmat,
                        inputmat_t,
                        weight,
                        weight_fp8,
                        main_grad,
                        fwd_scale_inverses,
                    ) = ctx.saved_tensors

                    if ctx.cpu_offloading and ctx.fuse_wgrad_accumulation:
                        weight.main_grad = main_grad

                    (grad_output, grad_output_c, grad_output_t, grad_bias) = (
                        TransformerEngineBaseModule.grad_output_preprocess(
                            ctx, grad_output, ctx.parallel_mode == "row"
                        )
                    )
                    inputmat_total = inputmat

                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                    dgrad, _, _ = gemm(weight, grad_output, ctx.activation_dtype, get_workspace(), layout="NN", grad=True)

                    if weight.requires_grad:
                        wgrad, grad_bias, _ = gemm(
                            inputmat_total,
                            grad_output,
                            ctx.activation_dtype,
                            get_workspace(),
                            layout="NT",
                            grad=True,
                            use_bias=ctx.use_bias,
                            accumulate=accumulate_wgrad_into_param_main_grad,
                            out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
                        )
                        clear_tensor_data(inputmat_total)

                    if not ctx.use_bias:
                        grad_bias = None

                if weight.requires_grad:
                    # Handle custom DDP from mcore.
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        if getattr(weight, "zero_out_wgrad", False):
                            wgrad = torch.zeros(
                                weight.main_grad.shape,
                                dtype=weight.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        else:
                            wgrad = torch.empty(
                                weight.main_grad.shape,
                                dtype=weight.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                else:
                    wgrad = None
                return wgrad, None, None, dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, grad_bias
        """,
    ),
    # ROCm/Megatron-LM 2b855ba, megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward. With
    # gradient_accumulation_fusion the GEMM already accumulated into weight.main_grad; for a weight without grad_added_to_main_grad the code
    # must hand back None. Returning the freshly computed wgrad as well means main_grad was written with no flag and a real .grad goes on to
    # the grad-accumulation hook, which adds it a second time.
    Variant(
        3,
        "blind9-rocmmegatron-linear-real-grad-after-fused-accum",
        bug='''
            def backward(ctx, grad_output):
                """Backward."""
                input, weight = ctx.saved_tensors
                use_bias = ctx.use_bias
                grad_output_buffer = ctx.grad_output_buffer
                wgrad_deferral_limit = ctx.wgrad_deferral_limit

                wgrad_compute = True
                if grad_output_buffer is not None:
                    if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                        grad_output_buffer.append(grad_output)
                        wgrad_compute = False

                total_input = input
                grad_input = grad_output.matmul(weight)
                if wgrad_compute:
                    grad_output, total_input = prepare_input_tensors_for_wgrad_compute(
                        grad_output, total_input
                    )

                if ctx.gradient_accumulation_fusion:
                    if wgrad_compute:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                                total_input, grad_output, weight.main_grad
                            )
                        elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(
                                total_input, grad_output, weight.main_grad
                            )
                        else:
                            raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                    if hasattr(weight, 'grad_added_to_main_grad'):
                        if getattr(weight, 'zero_out_wgrad', False):
                            grad_weight = torch.zeros(
                                weight.main_grad.shape,
                                dtype=input.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        else:
                            grad_weight = torch.empty(
                                weight.main_grad.shape,
                                dtype=input.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = grad_output.t().matmul(total_input)  # bug
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                grad_bias = grad_output.sum(dim=0) if use_bias else None

                return grad_input, grad_weight, grad_bias, None, None, None, None, None
        ''',
        twin='''
            def backward(ctx, grad_output):
                """Backward."""
                input, weight = ctx.saved_tensors
                use_bias = ctx.use_bias
                grad_output_buffer = ctx.grad_output_buffer
                wgrad_deferral_limit = ctx.wgrad_deferral_limit

                wgrad_compute = True
                if grad_output_buffer is not None:
                    if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                        grad_output_buffer.append(grad_output)
                        wgrad_compute = False

                total_input = input
                grad_input = grad_output.matmul(weight)
                if wgrad_compute:
                    grad_output, total_input = prepare_input_tensors_for_wgrad_compute(
                        grad_output, total_input
                    )

                if ctx.gradient_accumulation_fusion:
                    if wgrad_compute:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                                total_input, grad_output, weight.main_grad
                            )
                        elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(
                                total_input, grad_output, weight.main_grad
                            )
                        else:
                            raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                    if hasattr(weight, 'grad_added_to_main_grad'):
                        if getattr(weight, 'zero_out_wgrad', False):
                            grad_weight = torch.zeros(
                                weight.main_grad.shape,
                                dtype=input.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        else:
                            grad_weight = torch.empty(
                                weight.main_grad.shape,
                                dtype=input.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                grad_bias = grad_output.sum(dim=0) if use_bias else None

                return grad_input, grad_weight, grad_bias, None, None, None, None, None
        ''',
    ),
    # ServiceNow/Fast-LLM 7d61a1b, fast_llm/functional/linear.py, update_linear_gradients. Fast-LLM's grad_buffer plays main_grad's role and
    # param_grad_is_zero is its "overwrite on first microbatch" switch. A plain mm(out=grad_buffer) overwrites on every microbatch without
    # reading the switch (earlier microbatches lost), and since the switch is never unset, reduce_gradients later zero-fills the buffer as if
    # no gradient had arrived.
    Variant(
        4,
        "blind9-fastllm-linear-wgrad-mm-out",
        bug='''
            def update_linear_gradients(
                input_: torch.Tensor,
                weight: torch.Tensor,
                bias: torch.Tensor | None,
                grad_output: torch.Tensor,
                transposed_weight: bool,
                sparse_map: SparseMap | None,
            ) -> None:
                """
                Calculate the weight and bias gradients for a linear layer.
                """

                grad_output = grad_output.flatten(0, -2)
                input_ = input_.flatten(0, -2)
                lhs, rhs = (input_.t(), grad_output) if transposed_weight else (grad_output.t(), input_)

                if not weight.requires_grad:
                    pass
                elif TritonConfig.TRITON_LINEAR or sparse_map is not None:
                    # This assumes the transposed_weight is True for input_sparse, False for output_sparse.
                    input_row_sparse_matmul(
                        lhs,
                        rhs,
                        sparse_map,
                        out=weight.grad_buffer,  # noqa
                        accumulate=not param_get_and_unset_is_zero(weight),
                    )
                elif weight.grad_buffer.dtype == grad_output.dtype:  # noqa
                    torch.mm(lhs, rhs, out=weight.grad_buffer)  # bug
                else:
                    accumulate_gradient(weight, torch.mm(lhs, rhs))
                if bias is not None and bias.requires_grad:
                    accumulate_gradient(bias, grad_output.sum(dim=0))
        ''',
        twin='''
            def update_linear_gradients(
                input_: torch.Tensor,
                weight: torch.Tensor,
                bias: torch.Tensor | None,
                grad_output: torch.Tensor,
                transposed_weight: bool,
                sparse_map: SparseMap | None,
            ) -> None:
                """
                Calculate the weight and bias gradients for a linear layer.
                """

                grad_output = grad_output.flatten(0, -2)
                input_ = input_.flatten(0, -2)
                lhs, rhs = (input_.t(), grad_output) if transposed_weight else (grad_output.t(), input_)

                if not weight.requires_grad:
                    pass
                elif TritonConfig.TRITON_LINEAR or sparse_map is not None:
                    # This assumes the transposed_weight is True for input_sparse, False for output_sparse.
                    input_row_sparse_matmul(
                        lhs,
                        rhs,
                        sparse_map,
                        out=weight.grad_buffer,  # noqa
                        accumulate=not param_get_and_unset_is_zero(weight),
                    )
                elif weight.grad_buffer.dtype == grad_output.dtype:  # noqa
                    beta = 1 - param_get_and_unset_is_zero(weight)
                    torch.addmm(
                        weight.grad_buffer,  # noqa
                        lhs,
                        rhs,
                        beta=beta,
                        alpha=1,
                        out=weight.grad_buffer,  # noqa
                    )
                else:
                    accumulate_gradient(weight, torch.mm(lhs, rhs))
                if bias is not None and bias.requires_grad:
                    accumulate_gradient(bias, grad_output.sum(dim=0))
        ''',
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/module/layernorm_mlp.py, LayerNormMLP.backward_dw. Without
    # fuse_wgrad_accumulation the delayed wgrads must be handed over as .grad before _trigger_wgrad_accumulation_and_reduce_hooks runs.
    # Setting only fc2's .grad means the hooks fire for fc1_weight with no .grad and no grad_added_to_main_grad: its gradient never reaches
    # main_grad (or DDP's overlap hook asserts on the None grad).
    Variant(
        5,
        "blind9-victarry-layernorm-mlp-backward-dw-fc1-grad",
        bug='''
            def backward_dw(self):
                """
                Execute the delayed weight gradient computation.
                This method is called after the main backward pass to compute weight gradients.
                """
                if not self.need_backward_dw():
                    return
                with get_nvtx_range_context("_LayerNormMLP_wgrad"):
                    (fc2_wgrad, fc2_bias_grad_, *_), tensor_list_fc2 = self.wgrad_store.pop()
                    if self.use_bias and self.fc1_bias.grad is None:
                        (fc1_wgrad, fc1_bias_grad, *_), _ = self.wgrad_store.pop()
                    else:
                        (fc1_wgrad, *_), _ = self.wgrad_store.pop()
                        fc1_bias_grad = None
                    if self.use_bias:
                        if self.fc2_bias.grad is None:
                            if (
                                self.fp8
                                and FP8GlobalStateManager.get_fp8_recipe().float8_block_scaling()
                                and self.apply_bias
                                and not self.gemm_bias_unfused_add
                            ):
                                act_out = tensor_list_fc2[0]
                                # BGRAD not fused with GEMM for float8 blockwise gemm.
                                fc2_bias_grad_ = act_out.view(-1, act_out.shape[-1]).sum(dim=0)
                            self.fc2_bias.grad = fc2_bias_grad_.to(self.fc2_bias.dtype)
                        if self.fc1_bias.grad is None:
                            self.fc1_bias.grad = fc1_bias_grad.to(self.fc1_bias.dtype)
                    if not self.fuse_wgrad_accumulation:
                        self.fc2_weight.grad = fc2_wgrad.to(self.fc2_weight.dtype)  # bug
                    del fc2_bias_grad_
                    del fc2_wgrad
                    del fc1_wgrad
                    del fc1_bias_grad
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
        ''',
        twin='''
            def backward_dw(self):
                """
                Execute the delayed weight gradient computation.
                This method is called after the main backward pass to compute weight gradients.
                """
                if not self.need_backward_dw():
                    return
                with get_nvtx_range_context("_LayerNormMLP_wgrad"):
                    (fc2_wgrad, fc2_bias_grad_, *_), tensor_list_fc2 = self.wgrad_store.pop()
                    if self.use_bias and self.fc1_bias.grad is None:
                        (fc1_wgrad, fc1_bias_grad, *_), _ = self.wgrad_store.pop()
                    else:
                        (fc1_wgrad, *_), _ = self.wgrad_store.pop()
                        fc1_bias_grad = None
                    if self.use_bias:
                        if self.fc2_bias.grad is None:
                            if (
                                self.fp8
                                and FP8GlobalStateManager.get_fp8_recipe().float8_block_scaling()
                                and self.apply_bias
                                and not self.gemm_bias_unfused_add
                            ):
                                act_out = tensor_list_fc2[0]
                                # BGRAD not fused with GEMM for float8 blockwise gemm.
                                fc2_bias_grad_ = act_out.view(-1, act_out.shape[-1]).sum(dim=0)
                            self.fc2_bias.grad = fc2_bias_grad_.to(self.fc2_bias.dtype)
                        if self.fc1_bias.grad is None:
                            self.fc1_bias.grad = fc1_bias_grad.to(self.fc1_bias.dtype)
                    if not self.fuse_wgrad_accumulation:
                        self.fc2_weight.grad = fc2_wgrad.to(self.fc2_weight.dtype)
                        self.fc1_weight.grad = fc1_wgrad.to(self.fc1_weight.dtype)
                    del fc2_bias_grad_
                    del fc2_wgrad
                    del fc1_wgrad
                    del fc1_bias_grad
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
        ''',
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/transformer/moe/experts.py, TEGroupedMLP.backward_dw. The fused ops use the wrapper's combined
    # delay mode (linear_fc1.delay_wgrad_compute); gating on config.delay_wgrad_compute alone falls through to linear_fc{1,2}.backward_dw(),
    # whose forward never ran in the fused path: the fused ops' delayed wgrads are never computed.
    Variant(
        6,
        "blind9-megatron-te-grouped-mlp-backward-dw-config-flag",
        bug='''
            class TEGroupedMLP(MegatronModule):
                def _make_fused_ops(self) -> torch.nn.Module:
                    ops = te.pytorch.ops.Sequential()
                    # Mirror the wrapper's combined delay-wgrad mode (config.delay_wgrad_compute OR
                    # config.overlap_dispatch_backward_with_experts_wgrad) — see TEGroupedLinear.__init__.
                    fc1_delay_wgrad_compute = self.linear_fc1.delay_wgrad_compute
                    fc2_delay_wgrad_compute = self.linear_fc2.delay_wgrad_compute
                    op = te.pytorch.ops.GroupedLinear(
                        self.linear_fc1.num_gemms,
                        self.linear_fc1.in_features,
                        self.linear_fc1.out_features,
                        bias=self.linear_fc1.use_bias,
                        device="meta",
                        accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                        delay_wgrad_compute=fc1_delay_wgrad_compute,
                    )
                    ops.append(op)
                    ops.append(te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size))
                    op = te.pytorch.ops.GroupedLinear(
                        self.linear_fc2.num_gemms,
                        self.linear_fc2.in_features,
                        self.linear_fc2.out_features,
                        bias=self.linear_fc2.use_bias,
                        device="meta",
                        accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                        delay_wgrad_compute=fc2_delay_wgrad_compute,
                    )
                    ops.append(op)
                    return ops

                def backward_dw(self):
                    """Performs backward pass for weight gradients in TEGroupedMLP."""
                    if self._with_fused_impl and self.config.delay_wgrad_compute:  # bug
                        if self._fused_ops is not None:
                            (seq,) = self._fused_ops
                            fused_children = list(seq.children())
                            assert len(fused_children) >= 3, "expected FC1, activation, FC2 in fused TE ops"
                            fused_children[2].backward_dw()
                            fused_children[0].backward_dw()
                            # DDP registers wgrad hooks on the original linear_fc1/fc2 module objects,
                            # but backward_dw() is called on the NEW GroupedLinear instances.
                            self.linear_fc2._trigger_wgrad_accumulation_and_reduce_hooks()
                            self.linear_fc1._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    self.linear_fc2.backward_dw()
                    self.linear_fc1.backward_dw()
        ''',
        twin='''
            class TEGroupedMLP(MegatronModule):
                def _make_fused_ops(self) -> torch.nn.Module:
                    ops = te.pytorch.ops.Sequential()
                    # Mirror the wrapper's combined delay-wgrad mode (config.delay_wgrad_compute OR
                    # config.overlap_dispatch_backward_with_experts_wgrad) — see TEGroupedLinear.__init__.
                    fc1_delay_wgrad_compute = self.linear_fc1.delay_wgrad_compute
                    fc2_delay_wgrad_compute = self.linear_fc2.delay_wgrad_compute
                    op = te.pytorch.ops.GroupedLinear(
                        self.linear_fc1.num_gemms,
                        self.linear_fc1.in_features,
                        self.linear_fc1.out_features,
                        bias=self.linear_fc1.use_bias,
                        device="meta",
                        accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                        delay_wgrad_compute=fc1_delay_wgrad_compute,
                    )
                    ops.append(op)
                    ops.append(te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size))
                    op = te.pytorch.ops.GroupedLinear(
                        self.linear_fc2.num_gemms,
                        self.linear_fc2.in_features,
                        self.linear_fc2.out_features,
                        bias=self.linear_fc2.use_bias,
                        device="meta",
                        accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                        delay_wgrad_compute=fc2_delay_wgrad_compute,
                    )
                    ops.append(op)
                    return ops

                def backward_dw(self):
                    """Performs backward pass for weight gradients in TEGroupedMLP."""
                    if self._with_fused_impl and self.linear_fc1.delay_wgrad_compute:
                        if self._fused_ops is not None:
                            (seq,) = self._fused_ops
                            fused_children = list(seq.children())
                            assert len(fused_children) >= 3, "expected FC1, activation, FC2 in fused TE ops"
                            fused_children[2].backward_dw()
                            fused_children[0].backward_dw()
                            # DDP registers wgrad hooks on the original linear_fc1/fc2 module objects,
                            # but backward_dw() is called on the NEW GroupedLinear instances.
                            self.linear_fc2._trigger_wgrad_accumulation_and_reduce_hooks()
                            self.linear_fc1._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    self.linear_fc2.backward_dw()
                    self.linear_fc1.backward_dw()
        ''',
    ),
    # AMD-AGI/Primus fd1eeab, primus/backends/megatron/core/extensions/primus_turbo.py, _bridge_weight_grad / _WeightGradBridge.backward. On
    # both paths main_grad receives the wgrad (by the GEMM epilogue or by the bridge's add_) and the flag is set, so the dummy must be
    # returned always. Choosing on the local fuse_wgrad_accum flag in a conditional expression hands the real quantized wgrad back as .grad on
    # the unfused path; with zero_out_wgrad the DDP hook adds it on top of main_grad.
    Variant(
        7,
        "blind9-primus-bridge-dummy-ternary-fuse-flag",
        bug='''
            def _bridge_weight_grad(
                x: torch.Tensor,
                weight: torch.nn.Parameter,
                weight_buffer: PrimusTurboQuantizedTensorPair,
                fuse_wgrad_accum: bool = False,
            ):
                """Bridge quantized weight gradient to the original weight's ``main_grad``."""

                class _WeightGradBridge(torch.autograd.Function):

                    @staticmethod
                    def forward(ctx, x, weight, quantized_weight, quantized_weight_trans):
                        ctx.save_for_backward(weight)
                        return x, quantized_weight, quantized_weight_trans

                    @staticmethod
                    def backward(ctx, grad_x, grad_quantized_weight, grad_quantized_weight_trans):
                        (weight,) = ctx.saved_tensors
                        assert hasattr(weight, "main_grad"), "weight.main_grad should be set before backward pass."
                        assert hasattr(
                            weight, "grad_added_to_main_grad"
                        ), "weight.grad_added_to_main_grad don't have grad_added_to_main_grad attribute."

                        if fuse_wgrad_accum:
                            # The gemm accumulated into main_grad already; grad_quantized_weight is
                            # the dummy it returns in that case and must not be added on top.
                            weight.grad_added_to_main_grad = True
                        elif not weight.grad_added_to_main_grad:
                            if _is_gfx1250():
                                inplace_add_triton_(weight.main_grad, grad_quantized_weight)
                            else:
                                weight.main_grad.add_(grad_quantized_weight)
                            weight.grad_added_to_main_grad = True

                        return (
                            grad_x,
                            _get_dummy_wgrad(list(weight.shape), weight.dtype) if fuse_wgrad_accum else grad_quantized_weight,  # bug
                            None,
                            None,
                        )

                x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                    x, weight, weight_buffer.data, weight_buffer.data_t
                )
                if fuse_wgrad_accum:
                    quantized_weight.main_grad = weight.main_grad
                    quantized_weight.grad_added_to_main_grad = weight.grad_added_to_main_grad
                return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        ''',
        twin='''
            def _bridge_weight_grad(
                x: torch.Tensor,
                weight: torch.nn.Parameter,
                weight_buffer: PrimusTurboQuantizedTensorPair,
                fuse_wgrad_accum: bool = False,
            ):
                """Bridge quantized weight gradient to the original weight's ``main_grad``."""

                class _WeightGradBridge(torch.autograd.Function):

                    @staticmethod
                    def forward(ctx, x, weight, quantized_weight, quantized_weight_trans):
                        ctx.save_for_backward(weight)
                        return x, quantized_weight, quantized_weight_trans

                    @staticmethod
                    def backward(ctx, grad_x, grad_quantized_weight, grad_quantized_weight_trans):
                        (weight,) = ctx.saved_tensors
                        assert hasattr(weight, "main_grad"), "weight.main_grad should be set before backward pass."
                        assert hasattr(
                            weight, "grad_added_to_main_grad"
                        ), "weight.grad_added_to_main_grad don't have grad_added_to_main_grad attribute."

                        if fuse_wgrad_accum:
                            # The gemm accumulated into main_grad already; grad_quantized_weight is
                            # the dummy it returns in that case and must not be added on top.
                            weight.grad_added_to_main_grad = True
                        elif not weight.grad_added_to_main_grad:
                            if _is_gfx1250():
                                inplace_add_triton_(weight.main_grad, grad_quantized_weight)
                            else:
                                weight.main_grad.add_(grad_quantized_weight)
                            weight.grad_added_to_main_grad = True

                        return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype), None, None

                x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                    x, weight, weight_buffer.data, weight_buffer.data_t
                )
                if fuse_wgrad_accum:
                    quantized_weight.main_grad = weight.main_grad
                    quantized_weight.grad_added_to_main_grad = weight.grad_added_to_main_grad
                return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        ''',
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/transformer/moe/experts.py, TEGroupedMLP._make_fused_impl_pre_forward_hook /
    # _ensure_main_grad_for_fused_impl. The TE op-fuser GroupedLinear ops are built with accumulate_into_main_grad on the wrapper's
    # parameters; under Megatron-FSDP main_grad must be exposed via get_main_grad() before they run. Exposing only FC1 leaves FC2's main_grad
    # None when the fused backward writes it (#5209 shape).
    Variant(
        8,
        "blind9-megatron-experts-fused-pre-forward-fc2-main-grad",
        bug='''
            class TEGroupedMLP(MegatronModule):
                def _make_fused_impl_pre_forward_hook(self) -> Callable:
                    """Make function that calls submodule pre-forward callback hooks."""

                    def forward_pre_hook(module, *_) -> None:
                        for submodule in chain(self.linear_fc1.modules(), self.linear_fc2.modules()):
                            for hook in submodule._forward_pre_hooks.values():
                                # Assume that hook does not interact with input
                                ret = hook(submodule, None)
                                if ret is not None:
                                    raise RuntimeError(
                                        f"Applying a fused implementation for {self.__class__.__name__}, "
                                        f"but a {submodule.__class__.__name__} submodule "
                                        "has a pre-forward hook that modifies the input tensor."
                                    )
                        self._ensure_main_grad_for_fused_impl()

                    return forward_pre_hook

                @staticmethod
                def _ensure_main_grad(linear_module: torch.nn.Module) -> None:
                    """Expose FSDP main_grad buffers required by TE fused wgrad accumulation."""
                    if not getattr(linear_module, "fuse_wgrad_accumulation", False):
                        return
                    for param in linear_module.parameters(recurse=False):
                        get_main_grad = getattr(param, "get_main_grad", None)
                        if get_main_grad is not None and getattr(param, "main_grad", None) is None:
                            param.main_grad = get_main_grad()
                        if hasattr(param, "overwrite_main_grad"):
                            param.overwrite_main_grad = True

                def _ensure_main_grad_for_fused_impl(self) -> None:
                    """Expose wrapper parameter main_grad buffers before TE fused ops run."""
                    self._ensure_main_grad(self.linear_fc1)  # bug
        ''',
        twin='''
            class TEGroupedMLP(MegatronModule):
                def _make_fused_impl_pre_forward_hook(self) -> Callable:
                    """Make function that calls submodule pre-forward callback hooks."""

                    def forward_pre_hook(module, *_) -> None:
                        for submodule in chain(self.linear_fc1.modules(), self.linear_fc2.modules()):
                            for hook in submodule._forward_pre_hooks.values():
                                # Assume that hook does not interact with input
                                ret = hook(submodule, None)
                                if ret is not None:
                                    raise RuntimeError(
                                        f"Applying a fused implementation for {self.__class__.__name__}, "
                                        f"but a {submodule.__class__.__name__} submodule "
                                        "has a pre-forward hook that modifies the input tensor."
                                    )
                        self._ensure_main_grad_for_fused_impl()

                    return forward_pre_hook

                @staticmethod
                def _ensure_main_grad(linear_module: torch.nn.Module) -> None:
                    """Expose FSDP main_grad buffers required by TE fused wgrad accumulation."""
                    if not getattr(linear_module, "fuse_wgrad_accumulation", False):
                        return
                    for param in linear_module.parameters(recurse=False):
                        get_main_grad = getattr(param, "get_main_grad", None)
                        if get_main_grad is not None and getattr(param, "main_grad", None) is None:
                            param.main_grad = get_main_grad()
                        if hasattr(param, "overwrite_main_grad"):
                            param.overwrite_main_grad = True

                def _ensure_main_grad_for_fused_impl(self) -> None:
                    """Expose wrapper parameter main_grad buffers before TE fused ops run."""
                    self._ensure_main_grad(self.linear_fc1)
                    self._ensure_main_grad(self.linear_fc2)
        ''',
    ),
)
