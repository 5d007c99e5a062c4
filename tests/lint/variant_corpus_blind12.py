"""The twelfth blind corpus (H-blind12): 16 variants, the first two per class 1..8 of issue #19 (the third
of each class is in variant_corpus_blind12_heldout.py), written by someone who read neither the linter nor
its tests (only CONTRACT.md, the two seed reports and issue #19's class list).

Every variant is grounded in a real function that does main_grad / weight-gradient bookkeeping, read
from a repository snapshot in /work/.mirror; the twin is that code shortened (real names, control flow
and idioms kept), the bug the same code with one regression of the variant's class, marked ``# bug``.
Where the snapshot's HEAD already ships a bug of the class, the twin is the corrected code (said in the
comment above the variant). Sources (snapshot HEAD):

- Ascend/MindSpeed-LLM c77308a: mindspeed_llm/tasks/posttrain/lora/moe/experts.py
  (LoraParallelGroupedMlpWithCompAndCommOverlapAll2AllSEQ.backward), mindspeed_llm/tasks/models/transformer/fast_mlp.py
  (_FusedParallelMLPFunction.backward)
- pggPL/TransformerEngine bf4b2b9: transformer_engine/pytorch/ops/fused/backward_linear_add.py
  (BackwardLinearAdd.fuser_backward), benchmarks/linear/benchmark_graph_safe_grouped_linear.py (run_grouped_mlp_steps)
- Victarry/TransformerEngine 849ad3f: transformer_engine/pytorch/module/grouped_linear.py (_GroupedLinear.backward),
  transformer_engine/pytorch/module/base.py (TransformerEngineBaseModule.backward_dw),
  transformer_engine/pytorch/graph.py (make_graphed_attribute_functions.backward_dw),
  transformer_engine/pytorch/module/layernorm_mlp.py (LayerNormMLP.backward_dw),
  transformer_engine/pytorch/ops/basic/grouped_linear.py (GroupedLinear.need_backward_dw),
  transformer_engine/pytorch/ops/fused/backward_linear_scale.py (BackwardLinearScale.fuser_backward),
  transformer_engine/pytorch/ops/fused/backward_linear_add.py (BackwardLinearAdd.fuser_backward),
  benchmarks/linear/benchmark_graph_safe_grouped_mlp.py (run_grouped_mlp_steps, init_main_grads)
- ROCm/TransformerEngine ac80527: transformer_engine/paddle/layer/linear.py (_Linear.backward, _linear_bwd_non_fp8),
  transformer_engine/pytorch/module/linear.py (_Linear.backward)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # Ascend/MindSpeed-LLM c77308a, mindspeed_llm/tasks/posttrain/lora/moe/experts.py,
    # LoraParallelGroupedMlpWithCompAndCommOverlapAll2AllSEQ.backward (gmm branch of mm2). `weights2_b` is the
    # rearranged ('n h f -> n f h') stand-in restored from ctx; the regression sends the fused grouped wgrad GEMM into
    # the stand-in's main_grad while the bookkeeping (flag, dummy) marks the original Parameter.
    Variant(
        1,
        "blind12-mindspeedllm-lora-gmm-rearranged-weight",
        bug="""
            def backward(ctx, *grad_outs):
                grad_outs = grad_outs[0]
                config = ctx.config
                (mm2_inputs, mm2_a, weights2, weights2_a, weights2_b,
                 original_weight2_a, original_weight2_b, group_list) = ctx.saved_tensors
                if ctx.use_gmm:
                    weights2_a = rearrange(weights2_a, 'n h f -> n f h')
                    weights2_b = rearrange(weights2_b, 'n h f -> n f h')
                    grad_mm2_b_inputs = gmm_op(grad_outs, weights2_b, [], group_list, 0)[0]
                if ctx.use_gmm:
                    if config.gemm_gradient_accumulation_fusion:
                        npu_groupmatmul_add_fp32(
                            mm2_inputs, grad_mm2_b_inputs * ctx.scaling, group_list, original_weight2_a.main_grad
                        )
                        npu_groupmatmul_add_fp32(mm2_a, grad_outs, group_list, weights2_b.main_grad)  # bug
                        if hasattr(original_weight2_a, 'grad_added_to_main_grad'):
                            if getattr(original_weight2_a, 'zero_out_wgrad', False):
                                grad_weights2_a = torch.zeros(weights2_a.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                                grad_weights2_b = torch.zeros(weights2_b.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                grad_weights2_a = torch.empty(weights2_a.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                                grad_weights2_b = torch.empty(weights2_b.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                            original_weight2_a.grad_added_to_main_grad = True
                            original_weight2_b.grad_added_to_main_grad = True
                        else:
                            grad_weights2_a = None
                            grad_weights2_b = None
                    else:
                        grad_weights2_a = gmm_op(mm2_inputs.t(), grad_mm2_b_inputs, [], group_list, 2)[0] * ctx.scaling
                        grad_weights2_b = gmm_op(mm2_a.t(), grad_outs, [], group_list, 2)[0]
                return grad_weights2_a, grad_weights2_b
        """,
        twin="""
            def backward(ctx, *grad_outs):
                grad_outs = grad_outs[0]
                config = ctx.config
                (mm2_inputs, mm2_a, weights2, weights2_a, weights2_b,
                 original_weight2_a, original_weight2_b, group_list) = ctx.saved_tensors
                if ctx.use_gmm:
                    weights2_a = rearrange(weights2_a, 'n h f -> n f h')
                    weights2_b = rearrange(weights2_b, 'n h f -> n f h')
                    grad_mm2_b_inputs = gmm_op(grad_outs, weights2_b, [], group_list, 0)[0]
                if ctx.use_gmm:
                    if config.gemm_gradient_accumulation_fusion:
                        npu_groupmatmul_add_fp32(
                            mm2_inputs, grad_mm2_b_inputs * ctx.scaling, group_list, original_weight2_a.main_grad
                        )
                        npu_groupmatmul_add_fp32(mm2_a, grad_outs, group_list, original_weight2_b.main_grad)
                        if hasattr(original_weight2_a, 'grad_added_to_main_grad'):
                            if getattr(original_weight2_a, 'zero_out_wgrad', False):
                                grad_weights2_a = torch.zeros(weights2_a.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                                grad_weights2_b = torch.zeros(weights2_b.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                grad_weights2_a = torch.empty(weights2_a.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                                grad_weights2_b = torch.empty(weights2_b.transpose(-1, -2).shape, dtype=weights2_a.dtype,
                                                              device=torch.cuda.current_device(), requires_grad=False)
                            original_weight2_a.grad_added_to_main_grad = True
                            original_weight2_b.grad_added_to_main_grad = True
                        else:
                            grad_weights2_a = None
                            grad_weights2_b = None
                    else:
                        grad_weights2_a = gmm_op(mm2_inputs.t(), grad_mm2_b_inputs, [], group_list, 2)[0] * ctx.scaling
                        grad_weights2_b = gmm_op(mm2_a.t(), grad_outs, [], group_list, 2)[0]
                return grad_weights2_a, grad_weights2_b
        """,
    ),
    # pggPL/TransformerEngine bf4b2b9, transformer_engine/pytorch/ops/fused/backward_linear_add.py,
    # BackwardLinearAdd.fuser_backward. `w` is the weight saved in the op ctx (possibly the quantized weight the
    # forward GEMM used); the regression fetches main_grad / the overwrite flag from `w` instead of the Parameter
    # `linear_op.weight`, while the dummy and grad_added_to_main_grad go on the Parameter.
    Variant(
        1,
        "blind12-pggpl-backward-linear-add-saved-w",
        bug="""
            def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
                linear_op = self.basic_ops[1]
                linear_op_ctx = basic_op_ctxs[1]
                (x_local, w) = linear_op_ctx.saved_tensors
                accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                grad_weight = None
                if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                    main_grad = get_main_grad_from_param(w, op_label="BasicLinear")  # bug
                    accumulate_into_main_grad = get_accumulate_flag_in_param(w)  # bug
                    grad_weight = main_grad.detach()
                else:
                    accumulate_into_main_grad = False
                grad_input = basic_op_grad_extra_outputs[0][0]
                grad_input, grad_weight = BasicLinear._functional_backward(
                    grad_output=grad_output,
                    input=x_local,
                    weight=w,
                    input_requires_grad=linear_op_ctx.input_requires_grad,
                    weight_requires_grad=linear_op_ctx.weight_requires_grad,
                    dtype=linear_op_ctx.dtype,
                    grad_weight=grad_weight,
                    accumulate_into_grad_weight=accumulate_into_main_grad,
                    grad_input=grad_input,
                    accumulate_into_grad_input=True,
                )
                clear_tensor_data(x_local)
                if linear_op._accumulate_into_main_grad:
                    grad_weight = get_dummy_wgrads_for_params([linear_op.weight])[0]
                return grad_input, [(), (grad_weight,)], [(), ()]
        """,
        twin="""
            def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
                linear_op = self.basic_ops[1]
                linear_op_ctx = basic_op_ctxs[1]
                (x_local, w) = linear_op_ctx.saved_tensors
                accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                grad_weight = None
                if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                    weight_param = linear_op.weight
                    main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
                    accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                    grad_weight = main_grad.detach()
                else:
                    accumulate_into_main_grad = False
                grad_input = basic_op_grad_extra_outputs[0][0]
                grad_input, grad_weight = BasicLinear._functional_backward(
                    grad_output=grad_output,
                    input=x_local,
                    weight=w,
                    input_requires_grad=linear_op_ctx.input_requires_grad,
                    weight_requires_grad=linear_op_ctx.weight_requires_grad,
                    dtype=linear_op_ctx.dtype,
                    grad_weight=grad_weight,
                    accumulate_into_grad_weight=accumulate_into_main_grad,
                    grad_input=grad_input,
                    accumulate_into_grad_input=True,
                )
                clear_tensor_data(x_local)
                if linear_op._accumulate_into_main_grad:
                    grad_weight = get_dummy_wgrads_for_params([linear_op.weight])[0]
                return grad_input, [(), (grad_weight,)], [(), ()]
        """,
    ),
    # ROCm/TransformerEngine ac80527, transformer_engine/paddle/layer/linear.py, _Linear.backward. With
    # fuse_wgrad_accumulation the wgrad GEMM wrote (out=weight.main_grad) into the main_grad buffer and the twin
    # returns None for the weight; the regression hands weight.main_grad itself back as the weight's gradient, so the
    # framework accumulates the buffer into itself / aliases .grad to main_grad.
    Variant(
        2,
        "blind12-rocmte-paddle-return-main-grad",
        bug="""
            def backward(ctx, grad_output):
                with TransformerEngineBaseLayer.prepare_backward(
                    ctx.fp8_enabled, ctx.fp8_meta, ctx.tp_group, ctx.tp_size, name="_Linear"
                ):
                    (inputmat, inputmat_t, weight, weight_t_fp8, fwd_scale_inverses) = saved_tensor_allow_none(ctx)
                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
                    dgrad, wgrad, bgrad_ = _linear_bwd(
                        inputmat, inputmat_t, weight, weight_t_fp8, grad_output,
                        ctx.requires_dgrad, ctx.requires_wgrad, ctx.activation_dtype,
                        ctx.fuse_wgrad_accumulation, accumulate_wgrad_into_param_main_grad,
                    )
                    dgrad_return = dgrad.reshape(ctx.inp_shape) if ctx.requires_dgrad else None
                if ctx.requires_wgrad and ctx.fuse_wgrad_accumulation:
                    wgrad = weight.main_grad  # bug
                return (
                    wgrad if ctx.requires_wgrad else None,
                    dgrad_return,
                )
        """,
        twin="""
            def backward(ctx, grad_output):
                with TransformerEngineBaseLayer.prepare_backward(
                    ctx.fp8_enabled, ctx.fp8_meta, ctx.tp_group, ctx.tp_size, name="_Linear"
                ):
                    (inputmat, inputmat_t, weight, weight_t_fp8, fwd_scale_inverses) = saved_tensor_allow_none(ctx)
                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
                    dgrad, wgrad, bgrad_ = _linear_bwd(
                        inputmat, inputmat_t, weight, weight_t_fp8, grad_output,
                        ctx.requires_dgrad, ctx.requires_wgrad, ctx.activation_dtype,
                        ctx.fuse_wgrad_accumulation, accumulate_wgrad_into_param_main_grad,
                    )
                    dgrad_return = dgrad.reshape(ctx.inp_shape) if ctx.requires_dgrad else None
                if ctx.requires_wgrad and ctx.fuse_wgrad_accumulation:
                    wgrad = None
                return (
                    wgrad if ctx.requires_wgrad else None,
                    dgrad_return,
                )
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/module/grouped_linear.py, _GroupedLinear.backward
    # (weakref restore + handle_custom_ddp_from_mcore). The regression restores the weights as `.detach()` copies
    # ("don't keep the autograd graph alive"), which are fresh tensors: main_grad is attached to the copy and the
    # hasattr(grad_added_to_main_grad) test on the copy fails, so the Parameter never gets its flag or dummy.
    Variant(
        2,
        "blind12-victarryte-grouped-linear-detached-origin",
        bug="""
            def backward(ctx, grad_output, _grad_workspaces):
                saved_tensors = restore_from_func_ctx(ctx)
                N = ctx.num_gemms
                origin_weights = [None] * N
                main_grads = [None] * N
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref().detach() if ref is not None else None for ref in origin_weight_refs]  # bug
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad
                wgrad_list = grouped_gemm_wgrad(ctx, saved_tensors, grad_output, main_grads)

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
                return (None, None, *wgrad_list)
        """,
        twin="""
            def backward(ctx, grad_output, _grad_workspaces):
                saved_tensors = restore_from_func_ctx(ctx)
                N = ctx.num_gemms
                origin_weights = [None] * N
                main_grads = [None] * N
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref() if ref is not None else None for ref in origin_weight_refs]
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad
                wgrad_list = grouped_gemm_wgrad(ctx, saved_tensors, grad_output, main_grads)

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
                return (None, None, *wgrad_list)
        """,
    ),
    # Ascend/MindSpeed-LLM c77308a, mindspeed_llm/tasks/models/transformer/fast_mlp.py, _FusedParallelMLPFunction.backward
    # (dense_4h_to_h part). The regression hoists `weight_down.grad_added_to_main_grad = True` out of the fused branch,
    # so it is also set on the non-fused path where nothing wrote weight_down.main_grad and a real grad is returned:
    # DDP then skips adding that real grad.
    Variant(
        3,
        "blind12-mindspeedllm-fastmlp-flag-on-unfused-path",
        bug="""
            def backward(ctx, grad_output):
                input_, weight_up, weight_down, swiglu_input, swiglu_output = ctx.saved_tensors
                grad_output_ = grad_output.reshape(-1, grad_output.shape[-1]) if ctx.reshape else grad_output
                grad_output_swiglu, grad_total_output = torch_npu.npu_all_gather_base_mm(
                    grad_output_, weight_down, ctx.hcomm_info, ctx.world_size, bias=None, gather_index=0, gather_output=True
                )
                if ctx.gradient_accumulation_fusion:
                    if weight_down.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                            swiglu_output, grad_total_output, weight_down.main_grad
                        )
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_down, 'grad_added_to_main_grad'):
                        if getattr(weight_down, 'zero_out_wgrad', False):
                            grad_weight_down = torch.zeros(weight_down.main_grad.shape, dtype=input_.dtype,
                                                           device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            grad_weight_down = torch.empty(weight_down.main_grad.shape, dtype=input_.dtype,
                                                           device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight_down = None
                else:
                    grad_weight_down = grad_total_output.t().matmul(swiglu_output)
                if hasattr(weight_down, 'grad_added_to_main_grad'):  # bug
                    weight_down.grad_added_to_main_grad = True  # bug
                grad_bias_down = grad_output.sum(dim=0) if ctx.use_bias_down else None
                return grad_output_swiglu, grad_weight_down, grad_bias_down
        """,
        twin="""
            def backward(ctx, grad_output):
                input_, weight_up, weight_down, swiglu_input, swiglu_output = ctx.saved_tensors
                grad_output_ = grad_output.reshape(-1, grad_output.shape[-1]) if ctx.reshape else grad_output
                grad_output_swiglu, grad_total_output = torch_npu.npu_all_gather_base_mm(
                    grad_output_, weight_down, ctx.hcomm_info, ctx.world_size, bias=None, gather_index=0, gather_output=True
                )
                if ctx.gradient_accumulation_fusion:
                    if weight_down.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                            swiglu_output, grad_total_output, weight_down.main_grad
                        )
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_down, 'grad_added_to_main_grad'):
                        if getattr(weight_down, 'zero_out_wgrad', False):
                            grad_weight_down = torch.zeros(weight_down.main_grad.shape, dtype=input_.dtype,
                                                           device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            grad_weight_down = torch.empty(weight_down.main_grad.shape, dtype=input_.dtype,
                                                           device=torch.cuda.current_device(), requires_grad=False)
                        weight_down.grad_added_to_main_grad = True
                    else:
                        grad_weight_down = None
                else:
                    grad_weight_down = grad_total_output.t().matmul(swiglu_output)
                grad_bias_down = grad_output.sum(dim=0) if ctx.use_bias_down else None
                return grad_output_swiglu, grad_weight_down, grad_bias_down
        """,
    ),
    # ROCm/TransformerEngine ac80527, transformer_engine/pytorch/module/linear.py, _Linear.backward ("Handle custom DDP
    # from mcore"). The regression tests the flag's value instead of its presence: DDP resets grad_added_to_main_grad to
    # False before every step, so the branch never runs; the wgrad GEMM has written main_grad (accumulate into
    # weight.main_grad) but the flag stays False and the wgrad tensor (the main_grad GEMM output) is handed on as .grad.
    Variant(
        3,
        "blind12-rocmte-linear-flag-truthiness",
        bug="""
            def backward(ctx, grad_output):
                inputmat, weight_fp8, weight, bias = ctx.saved_tensors
                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
                if ctx.requires_wgrad:
                    wgrad, grad_bias, _ = gemm(
                        inputmat,
                        grad_output,
                        ctx.activation_dtype,
                        get_workspace(),
                        layout="NT",
                        grad=True,
                        use_bias=ctx.use_bias,
                        accumulate=accumulate_wgrad_into_param_main_grad,
                        out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
                    )
                    if ctx.fuse_wgrad_accumulation and getattr(weight, "grad_added_to_main_grad", False):  # bug
                        weight.grad_added_to_main_grad = True
                        if getattr(weight, "zero_out_wgrad", False):
                            wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype,
                                                device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype,
                                                device=torch.cuda.current_device(), requires_grad=False)
                else:
                    wgrad = None
                return wgrad, None, None
        """,
        twin="""
            def backward(ctx, grad_output):
                inputmat, weight_fp8, weight, bias = ctx.saved_tensors
                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
                if ctx.requires_wgrad:
                    wgrad, grad_bias, _ = gemm(
                        inputmat,
                        grad_output,
                        ctx.activation_dtype,
                        get_workspace(),
                        layout="NT",
                        grad=True,
                        use_bias=ctx.use_bias,
                        accumulate=accumulate_wgrad_into_param_main_grad,
                        out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
                    )
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        if getattr(weight, "zero_out_wgrad", False):
                            wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype,
                                                device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype,
                                                device=torch.cuda.current_device(), requires_grad=False)
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                else:
                    wgrad = None
                return wgrad, None, None
        """,
    ),
    # ROCm/TransformerEngine ac80527, transformer_engine/paddle/layer/linear.py, _linear_bwd_non_fp8. The caller decides
    # accumulate (False only on the first microbatch); the regression hard-codes accumulate=False while still writing
    # out=weight.main_grad, so each microbatch replaces the buffer and only the last one survives.
    Variant(
        4,
        "blind12-rocmte-paddle-wgrad-accumulate-false",
        bug="""
            def _linear_bwd_non_fp8(inputmat, weight, grad_output, requires_bgrad, requires_dgrad, requires_wgrad,
                                    activation_dtype, parallel_mode, tensor_parallel, sequence_parallel, tp_group,
                                    fuse_wgrad_accumulation, accumulate_wgrad_into_param_main_grad):
                dgrad, wgrad, bgrad, handle = None, None, None, None
                if requires_wgrad and parallel_mode == "column" and sequence_parallel:
                    inputmat_total, handle = allgather(inputmat, tp_group, sync_op=not requires_dgrad)
                else:
                    inputmat_total = inputmat
                if requires_dgrad:
                    dgrad, _, _ = gemm(weight, grad_output, activation_dtype, get_workspace(), layout="NN", grad=True)
                if requires_wgrad:
                    wgrad, bgrad, _ = gemm(
                        inputmat_total,
                        grad_output,
                        activation_dtype,
                        get_workspace(),
                        grad=True,
                        accumulate=False,  # bug
                        layout="NT",
                        out=weight.main_grad if fuse_wgrad_accumulation else None,
                        out_dtype="float32" if fuse_wgrad_accumulation else None,
                        use_bias=requires_bgrad,
                    )
                    if fuse_wgrad_accumulation:
                        weight.main_grad = wgrad
                elif requires_bgrad:
                    bgrad = grad_output.sum(axis=0)
                return dgrad, wgrad, bgrad
        """,
        twin="""
            def _linear_bwd_non_fp8(inputmat, weight, grad_output, requires_bgrad, requires_dgrad, requires_wgrad,
                                    activation_dtype, parallel_mode, tensor_parallel, sequence_parallel, tp_group,
                                    fuse_wgrad_accumulation, accumulate_wgrad_into_param_main_grad):
                dgrad, wgrad, bgrad, handle = None, None, None, None
                if requires_wgrad and parallel_mode == "column" and sequence_parallel:
                    inputmat_total, handle = allgather(inputmat, tp_group, sync_op=not requires_dgrad)
                else:
                    inputmat_total = inputmat
                if requires_dgrad:
                    dgrad, _, _ = gemm(weight, grad_output, activation_dtype, get_workspace(), layout="NN", grad=True)
                if requires_wgrad:
                    wgrad, bgrad, _ = gemm(
                        inputmat_total,
                        grad_output,
                        activation_dtype,
                        get_workspace(),
                        grad=True,
                        accumulate=accumulate_wgrad_into_param_main_grad,
                        layout="NT",
                        out=weight.main_grad if fuse_wgrad_accumulation else None,
                        out_dtype="float32" if fuse_wgrad_accumulation else None,
                        use_bias=requires_bgrad,
                    )
                    if fuse_wgrad_accumulation:
                        weight.main_grad = wgrad
                elif requires_bgrad:
                    bgrad = grad_output.sum(axis=0)
                return dgrad, wgrad, bgrad
        """,
    ),
    # Ascend/MindSpeed-LLM c77308a, mindspeed_llm/tasks/models/transformer/fast_mlp.py, _FusedParallelMLPFunction.backward
    # (dense_h_to_4h part). The regression replaces the accumulating fused kernel (wgrad_gemm_accum_fp32) by a matmul
    # with out=weight_up.main_grad, which overwrites the buffer: nothing here reads overwrite_main_grad, so under
    # gradient accumulation only the last microbatch survives.
    Variant(
        4,
        "blind12-mindspeedllm-fastmlp-matmul-out-main-grad",
        bug="""
            def backward(ctx, grad_output):
                input_, weight_up, weight_down, swiglu_input, swiglu_output = ctx.saved_tensors
                grad_output_up = torch_npu.npu_swiglu_backward(ctx.grad_output_swiglu, swiglu_input, -1)
                total_input_up, handle = _gather_along_first_dim_async(input_)
                grad_input_up = grad_output_up.matmul(weight_up)
                handle.wait()
                grad_sub_input_up, handle = _reduce_scatter_along_first_dim_async(grad_input_up)
                if ctx.gradient_accumulation_fusion:
                    if weight_up.main_grad.dtype == torch.float32:
                        torch.matmul(grad_output_up.t(), total_input_up, out=weight_up.main_grad)  # bug
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_up, 'grad_added_to_main_grad'):
                        if getattr(weight_up, 'zero_out_wgrad', False):
                            grad_weight_up = torch.zeros(weight_up.main_grad.shape, dtype=input_.dtype,
                                                         device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            grad_weight_up = torch.empty(weight_up.main_grad.shape, dtype=input_.dtype,
                                                         device=torch.cuda.current_device(), requires_grad=False)
                        weight_up.grad_added_to_main_grad = True
                    else:
                        grad_weight_up = None
                else:
                    grad_weight_up = grad_output_up.t().matmul(total_input_up)
                handle.wait()
                return grad_sub_input_up, grad_weight_up
        """,
        twin="""
            def backward(ctx, grad_output):
                input_, weight_up, weight_down, swiglu_input, swiglu_output = ctx.saved_tensors
                grad_output_up = torch_npu.npu_swiglu_backward(ctx.grad_output_swiglu, swiglu_input, -1)
                total_input_up, handle = _gather_along_first_dim_async(input_)
                grad_input_up = grad_output_up.matmul(weight_up)
                handle.wait()
                grad_sub_input_up, handle = _reduce_scatter_along_first_dim_async(grad_input_up)
                if ctx.gradient_accumulation_fusion:
                    if weight_up.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                            total_input_up, grad_output_up, weight_up.main_grad
                        )
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_up, 'grad_added_to_main_grad'):
                        if getattr(weight_up, 'zero_out_wgrad', False):
                            grad_weight_up = torch.zeros(weight_up.main_grad.shape, dtype=input_.dtype,
                                                         device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            grad_weight_up = torch.empty(weight_up.main_grad.shape, dtype=input_.dtype,
                                                         device=torch.cuda.current_device(), requires_grad=False)
                        weight_up.grad_added_to_main_grad = True
                    else:
                        grad_weight_up = None
                else:
                    grad_weight_up = grad_output_up.t().matmul(total_input_up)
                handle.wait()
                return grad_sub_input_up, grad_weight_up
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/graph.py, make_graphed_attribute_functions
    # (backward_dw attached to a graphed callable). The twin fires the wgrad accumulation/reduce hooks only for modules
    # whose delayed wgrad was captured in the replayed dw graph; the regression fires them for every TE module of the
    # graph, including ones whose wgrad was neither computed here nor marked (no flag, no dummy .grad).
    Variant(
        5,
        "blind12-victarryte-graph-backward-dw-all-modules",
        bug="""
            def make_graphed_attribute_functions(graph_idx):
                te_modules = visited_te_modules.get(graph_idx, set())

                def backward_dw():
                    if need_bwd_dw_graph.get(graph_idx, False):
                        bwd_dw_graphs[graph_idx].replay()
                        for module in te_modules:
                            if isinstance(module, TransformerEngineBaseModule):  # bug
                                module._trigger_wgrad_accumulation_and_reduce_hooks()

                def reset():
                    fwd_graphs[graph_idx].reset()
                    bwd_graphs[graph_idx].reset()
                    bwd_dw_graphs[graph_idx].reset()

                return backward_dw, reset
        """,
        twin="""
            def make_graphed_attribute_functions(graph_idx):
                te_modules = visited_te_modules.get(graph_idx, set())

                def backward_dw():
                    if need_bwd_dw_graph.get(graph_idx, False):
                        bwd_dw_graphs[graph_idx].replay()
                        for module in te_modules:
                            if (
                                isinstance(module, TransformerEngineBaseModule)
                                and module.need_backward_dw()
                            ):
                                module._trigger_wgrad_accumulation_and_reduce_hooks()

                def reset():
                    fwd_graphs[graph_idx].reset()
                    bwd_graphs[graph_idx].reset()
                    bwd_dw_graphs[graph_idx].reset()

                return backward_dw, reset
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/module/base.py,
    # TransformerEngineBaseModule.backward_dw. The regression makes the early-return path (wgrad not delayed) still fire
    # the registered wgrad accumulation/reduce hooks, although on that path this method computed no wgrad, set no
    # .grad and no grad_added_to_main_grad.
    Variant(
        5,
        "blind12-victarryte-base-backward-dw-hooks-on-early-return",
        bug="""
            def backward_dw(self):
                if not self.need_backward_dw():
                    self._trigger_wgrad_accumulation_and_reduce_hooks()  # bug
                    return
                with get_nvtx_range_context(f"_{self.__class__.__name__}_wgrad"):
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        weight_tensor = noop_cat(self._get_weight_tensors())
                        weight_tensor.grad = wgrad.to(weight_tensor.dtype)
                    if self.use_bias:
                        bias_tensor = noop_cat([getattr(self, name) for name in self.bias_names])
                        if bias_tensor.grad is None:
                            bias_tensor.grad = bgrad.to(bias_tensor.dtype)
                    del wgrad
                    del bgrad
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
        twin="""
            def backward_dw(self):
                if not self.need_backward_dw():
                    return
                with get_nvtx_range_context(f"_{self.__class__.__name__}_wgrad"):
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        weight_tensor = noop_cat(self._get_weight_tensors())
                        weight_tensor.grad = wgrad.to(weight_tensor.dtype)
                    if self.use_bias:
                        bias_tensor = noop_cat([getattr(self, name) for name in self.bias_names])
                        if bias_tensor.grad is None:
                            bias_tensor.grad = bgrad.to(bias_tensor.dtype)
                    del wgrad
                    del bgrad
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/module/layernorm_mlp.py, LayerNormMLP.backward_dw
    # (the module's base takes delay_wgrad_compute). The wgrad store holds two deferred GEMMs (fc2 then fc1) and pop()
    # is what runs them; the regression pops only fc2's, so fc1's weight gradient is never computed into main_grad /
    # .grad while the hooks still fire as if it were.
    Variant(
        6,
        "blind12-victarryte-layernorm-mlp-backward-dw-fc1-dropped",
        bug="""
            class LayerNormMLP(TransformerEngineBaseModule):
                def backward_dw(self):
                    if not self.need_backward_dw():
                        return
                    with get_nvtx_range_context("_LayerNormMLP_wgrad"):
                        (fc2_wgrad, fc2_bias_grad_, *_), tensor_list_fc2 = self.wgrad_store.pop()
                        fc1_wgrad, fc1_bias_grad = None, None  # bug
                        if self.use_bias:
                            if self.fc2_bias.grad is None:
                                self.fc2_bias.grad = fc2_bias_grad_.to(self.fc2_bias.dtype)
                        if not self.fuse_wgrad_accumulation:
                            self.fc2_weight.grad = fc2_wgrad.to(self.fc2_weight.dtype)
                        del fc2_bias_grad_
                        del fc2_wgrad
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
        twin="""
            class LayerNormMLP(TransformerEngineBaseModule):
                def backward_dw(self):
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
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/ops/basic/grouped_linear.py, GroupedLinear
    # (need_backward_dw / backward_dw). The op takes delay_wgrad_compute (its wgrad_store); the regression overrides
    # need_backward_dw with a test that is False exactly when wgrad was delayed, so backward_dw returns at once and
    # the delayed weight gradients are never computed.
    Variant(
        6,
        "blind12-victarryte-ops-grouped-linear-need-backward-dw",
        bug="""
            class GroupedLinear(BasicOperation):
                def need_backward_dw(self) -> bool:
                    return self.wgrad_store is not None and not self.wgrad_store.delay_wgrad_compute()  # bug

                def backward_dw(self) -> None:
                    if not self.need_backward_dw():
                        return
                    if self.wgrad_store.context is None or self.wgrad_store.context.empty():
                        return
                    _, tensor_list = self.wgrad_store.pop()
                    activations = tensor_list[0]
                    grad_weights = tensor_list[2]
                    clear_tensor_data(*activations)
                    if self._accumulate_into_main_grad:
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    for group_idx in range(self.num_groups):
                        w = getattr(self, f"weight{group_idx}")
                        w.grad = grad_weights[group_idx].to(w.dtype)
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
        twin="""
            class GroupedLinear(BasicOperation):
                def need_backward_dw(self) -> bool:
                    return self.wgrad_store is not None and self.wgrad_store.delay_wgrad_compute()

                def backward_dw(self) -> None:
                    if not self.need_backward_dw():
                        return
                    if self.wgrad_store.context is None or self.wgrad_store.context.empty():
                        return
                    _, tensor_list = self.wgrad_store.pop()
                    activations = tensor_list[0]
                    grad_weights = tensor_list[2]
                    clear_tensor_data(*activations)
                    if self._accumulate_into_main_grad:
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    for group_idx in range(self.num_groups):
                        w = getattr(self, f"weight{group_idx}")
                        w.grad = grad_weights[group_idx].to(w.dtype)
                    self._trigger_wgrad_accumulation_and_reduce_hooks()
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/ops/fused/backward_linear_scale.py,
    # BackwardLinearScale.fuser_backward. NOTE: HEAD ships this class of bug in if-block form (`if accumulate_into_main_grad:`
    # after get_accumulate_flag_in_param has downgraded the local flag under overwrite_main_grad). Here the bug is the
    # same choice written as a conditional expression; the twin keys the dummy on the op-level flag.
    Variant(
        7,
        "blind12-victarryte-backward-linear-scale-ifexp",
        bug="""
            def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
                linear_op = self.basic_ops[0]
                linear_op_ctx = basic_op_ctxs[0]
                scale_op = self.basic_ops[1]
                (x_local, w) = linear_op_ctx.saved_tensors
                accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                grad_weight = None
                if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                    weight_param = linear_op.weight
                    main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
                    accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                    grad_weight = main_grad.detach()
                else:
                    accumulate_into_main_grad = False
                grad_input, grad_weight = BasicLinear._functional_backward(
                    grad_output=grad_output,
                    input=x_local,
                    weight=w,
                    input_requires_grad=linear_op_ctx.input_requires_grad,
                    grad_input_alpha=scale_op.scale,
                    weight_requires_grad=linear_op_ctx.weight_requires_grad,
                    grad_weight_alpha=scale_op.scale,
                    dtype=linear_op_ctx.dtype,
                    grad_weight=grad_weight,
                    accumulate_into_grad_weight=accumulate_into_main_grad,
                )
                clear_tensor_data(x_local)
                grad_weight = (
                    get_dummy_wgrads_for_params([linear_op.weight])[0]
                    if accumulate_into_main_grad  # bug
                    else grad_weight
                )
                return grad_input, [(grad_weight,), ()], [(), ()]
        """,
        twin="""
            def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
                linear_op = self.basic_ops[0]
                linear_op_ctx = basic_op_ctxs[0]
                scale_op = self.basic_ops[1]
                (x_local, w) = linear_op_ctx.saved_tensors
                accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                grad_weight = None
                if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                    weight_param = linear_op.weight
                    main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
                    accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                    grad_weight = main_grad.detach()
                else:
                    accumulate_into_main_grad = False
                grad_input, grad_weight = BasicLinear._functional_backward(
                    grad_output=grad_output,
                    input=x_local,
                    weight=w,
                    input_requires_grad=linear_op_ctx.input_requires_grad,
                    grad_input_alpha=scale_op.scale,
                    weight_requires_grad=linear_op_ctx.weight_requires_grad,
                    grad_weight_alpha=scale_op.scale,
                    dtype=linear_op_ctx.dtype,
                    grad_weight=grad_weight,
                    accumulate_into_grad_weight=accumulate_into_main_grad,
                )
                clear_tensor_data(x_local)
                grad_weight = (
                    get_dummy_wgrads_for_params([linear_op.weight])[0]
                    if linear_op_ctx.weight_requires_grad and linear_op._accumulate_into_main_grad
                    else grad_weight
                )
                return grad_input, [(grad_weight,), ()], [(), ()]
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, transformer_engine/pytorch/ops/fused/backward_linear_add.py,
    # BackwardLinearAdd.fuser_backward. NOTE: HEAD ships this class of bug in if-block form. Here the dummy-vs-real choice
    # is made in the return statement on the local flag that overwrite_main_grad switched off, so under Megatron-FSDP the
    # real wgrad (an alias of main_grad) is returned and grad_added_to_main_grad is never set.
    Variant(
        7,
        "blind12-victarryte-backward-linear-add-return",
        bug="""
            def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
                linear_op = self.basic_ops[1]
                linear_op_ctx = basic_op_ctxs[1]
                (x_local, w) = linear_op_ctx.saved_tensors
                accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                grad_weight = None
                if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                    weight_param = linear_op.weight
                    main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
                    accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                    grad_weight = main_grad.detach()
                else:
                    accumulate_into_main_grad = False
                grad_input = basic_op_grad_extra_outputs[0][0]
                grad_input, grad_weight = BasicLinear._functional_backward(
                    grad_output=grad_output,
                    input=x_local,
                    weight=w,
                    weight_requires_grad=linear_op_ctx.weight_requires_grad,
                    dtype=linear_op_ctx.dtype,
                    grad_weight=grad_weight,
                    accumulate_into_grad_weight=accumulate_into_main_grad,
                    grad_input=grad_input,
                    accumulate_into_grad_input=True,
                )
                clear_tensor_data(x_local)
                if not accumulate_into_main_grad:  # bug
                    return grad_input, [(), (grad_weight,)], [(), ()]
                return grad_input, [(), (get_dummy_wgrads_for_params([linear_op.weight])[0],)], [(), ()]
        """,
        twin="""
            def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
                linear_op = self.basic_ops[1]
                linear_op_ctx = basic_op_ctxs[1]
                (x_local, w) = linear_op_ctx.saved_tensors
                accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                grad_weight = None
                if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                    weight_param = linear_op.weight
                    main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
                    accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                    grad_weight = main_grad.detach()
                else:
                    accumulate_into_main_grad = False
                grad_input = basic_op_grad_extra_outputs[0][0]
                grad_input, grad_weight = BasicLinear._functional_backward(
                    grad_output=grad_output,
                    input=x_local,
                    weight=w,
                    weight_requires_grad=linear_op_ctx.weight_requires_grad,
                    dtype=linear_op_ctx.dtype,
                    grad_weight=grad_weight,
                    accumulate_into_grad_weight=accumulate_into_main_grad,
                    grad_input=grad_input,
                    accumulate_into_grad_input=True,
                )
                clear_tensor_data(x_local)
                if not (linear_op_ctx.weight_requires_grad and linear_op._accumulate_into_main_grad):
                    return grad_input, [(), (grad_weight,)], [(), ()]
                return grad_input, [(), (get_dummy_wgrads_for_params([linear_op.weight])[0],)], [(), ()]
        """,
    ),
    # Victarry/TransformerEngine 849ad3f, benchmarks/linear/benchmark_graph_safe_grouped_mlp.py, run_grouped_mlp_steps
    # (+ init_main_grads). The grouped MLP is built from te_ops.GroupedLinear with accumulate_into_main_grad; the
    # regression moves the main_grad setup after the training steps, so the fused ops run before any param.main_grad
    # exists.
    Variant(
        8,
        "blind12-victarryte-bench-init-main-grads-after-steps",
        bug="""
            def init_main_grads(module, value=0.0):
                with torch.no_grad():
                    for param in module.parameters():
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = torch.empty(param.size(), device=param.device, dtype=torch.float32)
                        param.main_grad.fill_(value)


            def run_grouped_mlp_steps(module, x, split_sizes, scales, grad_output, *, recipe, fwd_only, num_steps,
                                      accumulate_into_main_grad):
                quantization_context = te.autocast(enabled=True, recipe=recipe)
                if fwd_only:
                    with torch.no_grad(), quantization_context:
                        for _ in range(num_steps):
                            out = module(x, split_sizes, scales, split_sizes)
                    return out
                zero_grads(module, x, scales)
                with quantization_context:
                    for step in range(num_steps):
                        out = module(x, split_sizes, scales, split_sizes)
                        out.backward(grad_output)
                if accumulate_into_main_grad:
                    init_main_grads(module)  # bug
                return out
        """,
        twin="""
            def init_main_grads(module, value=0.0):
                with torch.no_grad():
                    for param in module.parameters():
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = torch.empty(param.size(), device=param.device, dtype=torch.float32)
                        param.main_grad.fill_(value)


            def run_grouped_mlp_steps(module, x, split_sizes, scales, grad_output, *, recipe, fwd_only, num_steps,
                                      accumulate_into_main_grad):
                quantization_context = te.autocast(enabled=True, recipe=recipe)
                if fwd_only:
                    with torch.no_grad(), quantization_context:
                        for _ in range(num_steps):
                            out = module(x, split_sizes, scales, split_sizes)
                    return out
                zero_grads(module, x, scales)
                if accumulate_into_main_grad:
                    init_main_grads(module)
                with quantization_context:
                    for step in range(num_steps):
                        out = module(x, split_sizes, scales, split_sizes)
                        out.backward(grad_output)
                return out
        """,
    ),
    # pggPL/TransformerEngine bf4b2b9, benchmarks/linear/benchmark_graph_safe_grouped_linear.py, build_grouped_mlp +
    # run_grouped_mlp_steps. The regression guards the main_grad setup with the forward-only flag (which returns before
    # it), so on the backward path the GroupedLinear ops built with accumulate_into_main_grad=True run with no
    # param.main_grad.
    Variant(
        8,
        "blind12-pggplte-bench-init-main-grads-fwd-only",
        bug="""
            def build_grouped_mlp(*, num_groups, hidden_dim, ffn_hidden_dim, dtype, single_grouped_weight, accumulate_into_main_grad, glu_interleave_size):
                with te.quantized_model_init(enabled=True, recipe=MXFP8BlockScaling()):
                    fc1 = te_ops.GroupedLinear(num_groups, hidden_dim, 2 * ffn_hidden_dim, bias=False, device="cuda", dtype=dtype,
                                               single_grouped_weight=single_grouped_weight, accumulate_into_main_grad=accumulate_into_main_grad)
                    fc2 = te_ops.GroupedLinear(num_groups, ffn_hidden_dim, hidden_dim, bias=False, device="cuda", dtype=dtype,
                                               single_grouped_weight=single_grouped_weight, accumulate_into_main_grad=accumulate_into_main_grad)
                    return te_ops.Sequential(fc1, te_ops.ScaledSwiGLU(glu_interleave_size=glu_interleave_size), fc2)


            def run_grouped_mlp_steps(module, x, split_sizes, scales, grad_output, *, recipe, fwd_only, num_steps,
                                      accumulate_into_main_grad):
                quantization_context = te.autocast(enabled=True, recipe=recipe)
                if fwd_only:
                    with torch.no_grad(), quantization_context:
                        for _ in range(num_steps):
                            out = module(x, split_sizes, scales, split_sizes)
                    return out
                zero_grads(module, x, scales)
                if accumulate_into_main_grad and fwd_only:  # bug
                    init_main_grads(module)
                with quantization_context:
                    for step in range(num_steps):
                        out = module(x, split_sizes, scales, split_sizes)
                        out.backward(grad_output)
                return out
        """,
        twin="""
            def build_grouped_mlp(*, num_groups, hidden_dim, ffn_hidden_dim, dtype, single_grouped_weight, accumulate_into_main_grad, glu_interleave_size):
                with te.quantized_model_init(enabled=True, recipe=MXFP8BlockScaling()):
                    fc1 = te_ops.GroupedLinear(num_groups, hidden_dim, 2 * ffn_hidden_dim, bias=False, device="cuda", dtype=dtype,
                                               single_grouped_weight=single_grouped_weight, accumulate_into_main_grad=accumulate_into_main_grad)
                    fc2 = te_ops.GroupedLinear(num_groups, ffn_hidden_dim, hidden_dim, bias=False, device="cuda", dtype=dtype,
                                               single_grouped_weight=single_grouped_weight, accumulate_into_main_grad=accumulate_into_main_grad)
                    return te_ops.Sequential(fc1, te_ops.ScaledSwiGLU(glu_interleave_size=glu_interleave_size), fc2)


            def run_grouped_mlp_steps(module, x, split_sizes, scales, grad_output, *, recipe, fwd_only, num_steps,
                                      accumulate_into_main_grad):
                quantization_context = te.autocast(enabled=True, recipe=recipe)
                if fwd_only:
                    with torch.no_grad(), quantization_context:
                        for _ in range(num_steps):
                            out = module(x, split_sizes, scales, split_sizes)
                    return out
                zero_grads(module, x, scales)
                if accumulate_into_main_grad:
                    init_main_grads(module)
                with quantization_context:
                    for step in range(num_steps):
                        out = module(x, split_sizes, scales, split_sizes)
                        out.backward(grad_output)
                return out
        """,
    ),
)
