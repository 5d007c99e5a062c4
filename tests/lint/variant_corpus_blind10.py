"""The tenth blind corpus (H-blind10): 16 variants, the first two per class 1..8 of issue #19 (the third
of each class is in variant_corpus_blind10_heldout.py), written by someone who read neither the linter nor
its tests (only CONTRACT.md, the two seed reports and issue #19's class list).

Every variant is grounded in a real function that does main_grad / weight-gradient bookkeeping, read
from a repository snapshot in /work/.mirror; the twin is that code shortened (real names, control flow
and idioms kept), the bug the same code with one regression of the variant's class, marked ``# bug``.
Where the snapshot's HEAD already ships a bug of the class, the twin is the corrected code and the bug
is the shipped code (said in the comment above the variant). Sources (snapshot HEAD):

- HYGON-AI/Megatron-LM-das 0685d1f: hcu_megatron/core/memory/common.py,
  hcu_megatron/core/extensions/primus_turbo.py (_bridge_weight_grad), hcu_megatron/core/tensor_parallel/layers.py
- Autumn1998/Megatron-LM 51f6a39: megatron/core/tensor_parallel/layers.py, megatron/core/models/common/utils.py
  (TransformerLayerNode.backward_dw, _BackwardDWWrapper), megatron/core/extensions/transformer_engine.py
  (_register_hooks_on_fused_impl)
- lhb8125/Megatron-LM 5653514: megatron/core/tensor_parallel/layers.py,
  megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py (_grad_acc),
  megatron/core/transformer/cuda_graphs.py, megatron/core/transformer/{attention,multi_latent_attention}.py
- Ascend/MindSpeed 028de58: mindspeed/core/tensor_parallel/coc_feature/{matmul_soc_friendly,
  coc_parallel_linears_sequence_parallel}.py
- NVIDIA-NeMo/Megatron-Bridge 067f987: src/megatron/bridge/peft/lora_layers.py (TEFusedLoRALinear)
- NVIDIA/TransformerEngine d0067d0: transformer_engine/pytorch/ops/basic/basic_linear.py,
  transformer_engine/pytorch/module/layernorm_linear.py
- AMD-AGI/Primus fd1eeab: primus/backends/megatron/core/extensions/primus_turbo.py (_bridge_weight_grad)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/memory/common.py, linear_forward_main_grad_wrapper / linear_backward_main_grad_wrapper (swap-attention
    # feature). The forward keeps the Parameter on ctx because the weight restored from saved_tensors is a swapped-in copy that carries no main_grad /
    # grad_added_to_main_grad; handing the wrapped backward the restored copy makes its wgrad GEMM, dummy and flag act on the stand-in instead of the Parameter.
    Variant(
        1,
        "blind10-hygon-swap-wrapper-saved-weight",
        bug="""
            def linear_forward_main_grad_wrapper(forward_func):
                @wraps(forward_func)
                def linear_forward_main_grad(ctx,
                                             inputs,
                                             weight,
                                             bias,
                                             gradient_accumulation_fusion,
                                             allreduce_dgrad,
                                             sequence_parallel,
                                             grad_output_buffer,
                                             wgrad_deferral_limit,
                                             tp_group,
                                             ):
                    output = forward_func(ctx,
                                          inputs,
                                          weight,
                                          bias,
                                          gradient_accumulation_fusion,
                                          allreduce_dgrad,
                                          sequence_parallel,
                                          grad_output_buffer,
                                          wgrad_deferral_limit,
                                          tp_group,
                                          )
                    ctx.weight = weight
                    return output

                return linear_forward_main_grad


            def linear_backward_main_grad_wrapper(backward_func):
                @wraps(backward_func)
                def linear_backward_main_grad(ctx, grad_output):
                    class NewCtx:
                        pass
                    new_ctx = NewCtx()
                    inputs, _ = ctx.saved_tensors
                    for key in dir(ctx):
                        if key == 'saved_tensors':
                            setattr(new_ctx, 'saved_tensors', ctx.saved_tensors)  # bug
                        elif key.startswith('__') or key == 'saved_variables':
                            continue
                        else:
                            try:
                                getattr(ctx, key)
                            except AttributeError:
                                continue
                            setattr(new_ctx, key, getattr(ctx, key))
                    return backward_func(new_ctx, grad_output)

                return linear_backward_main_grad
        """,
        twin="""
            def linear_forward_main_grad_wrapper(forward_func):
                @wraps(forward_func)
                def linear_forward_main_grad(ctx,
                                             inputs,
                                             weight,
                                             bias,
                                             gradient_accumulation_fusion,
                                             allreduce_dgrad,
                                             sequence_parallel,
                                             grad_output_buffer,
                                             wgrad_deferral_limit,
                                             tp_group,
                                             ):
                    output = forward_func(ctx,
                                          inputs,
                                          weight,
                                          bias,
                                          gradient_accumulation_fusion,
                                          allreduce_dgrad,
                                          sequence_parallel,
                                          grad_output_buffer,
                                          wgrad_deferral_limit,
                                          tp_group,
                                          )
                    ctx.weight = weight
                    return output

                return linear_forward_main_grad


            def linear_backward_main_grad_wrapper(backward_func):
                @wraps(backward_func)
                def linear_backward_main_grad(ctx, grad_output):
                    class NewCtx:
                        pass
                    new_ctx = NewCtx()
                    inputs, _ = ctx.saved_tensors
                    for key in dir(ctx):
                        if key == 'saved_tensors':
                            setattr(new_ctx, 'saved_tensors', (inputs, ctx.weight))
                        elif key.startswith('__') or key == 'saved_variables':
                            continue
                        else:
                            try:
                                getattr(ctx, key)
                            except AttributeError:
                                continue
                            setattr(new_ctx, key, getattr(ctx, key))
                    return backward_func(new_ctx, grad_output)

                return linear_backward_main_grad
        """,
    ),
    # Autumn1998/Megatron-LM 51f6a39, megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.forward/backward (GTP
    # remat). The Parameter must be saved before `all_gather_and_prefetch` replaces `weight` with the gathered copy; saving after it makes backward
    # attach main_grad to, write the wgrad through, and set grad_added_to_main_grad on the gathered stand-in while the Parameter is never marked.
    Variant(
        1,
        "blind10-autumn-gtp-save-gathered-weight",
        bug="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_fwd
                def forward(ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad,
                            sequence_parallel, grad_output_buffer, wgrad_deferral_limit, tp_group,
                            gtp_remat_size, output_dtype):
                    if gradient_accumulation_fusion and hasattr(weight, "main_grad"):
                        main_grad = weight.main_grad
                    else:
                        main_grad = None
                    if gtp_remat_size > 1:
                        weight = weight.all_gather_and_prefetch(fwd=True)
                    ctx.save_for_backward(input, weight)  # bug

                    ctx.main_grad = main_grad
                    ctx.use_bias = bias is not None
                    ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
                    ctx.gtp_remat_size = gtp_remat_size
                    ctx.input_dtype = input.dtype
                    return _linear_forward(input, weight, bias, output_dtype)

                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    main_grad = ctx.main_grad
                    grad_output = grad_output.to(ctx.input_dtype)


                    if ctx.gradient_accumulation_fusion:
                        weight.main_grad = main_grad  # bug

                    grad_input = grad_output.matmul(weight)
                    total_input = input

                    if ctx.gradient_accumulation_fusion:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                                total_input, grad_output, weight.main_grad
                            )
                        else:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(
                                total_input, grad_output, weight.main_grad
                            )
                        if hasattr(weight, "grad_added_to_main_grad"):
                            if getattr(weight, "zero_out_wgrad", False):
                                grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype, zero=True)
                            else:
                                grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
                            weight.grad_added_to_main_grad = True
                        else:
                            grad_weight = None
                    else:
                        grad_weight = grad_output.t().matmul(total_input)
                    grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
                    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None, None
        """,
        twin="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_fwd
                def forward(ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad,
                            sequence_parallel, grad_output_buffer, wgrad_deferral_limit, tp_group,
                            gtp_remat_size, output_dtype):
                    if gradient_accumulation_fusion and hasattr(weight, "main_grad"):
                        main_grad = weight.main_grad
                    else:
                        main_grad = None
                    ctx.save_for_backward(input, weight)

                    if gtp_remat_size > 1:
                        weight = weight.all_gather_and_prefetch(fwd=True)

                    ctx.main_grad = main_grad
                    ctx.use_bias = bias is not None
                    ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
                    ctx.gtp_remat_size = gtp_remat_size
                    ctx.input_dtype = input.dtype
                    return _linear_forward(input, weight, bias, output_dtype)

                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    main_grad = ctx.main_grad
                    grad_output = grad_output.to(ctx.input_dtype)

                    if ctx.gtp_remat_size > 1:
                        sharded_weight = weight
                        weight = sharded_weight.all_gather_and_prefetch_bwd()
                        ctx.gradient_accumulation_fusion = False

                    if ctx.gradient_accumulation_fusion:
                        weight.main_grad = main_grad

                    grad_input = grad_output.matmul(weight)
                    total_input = input

                    if ctx.gradient_accumulation_fusion:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                                total_input, grad_output, weight.main_grad
                            )
                        else:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(
                                total_input, grad_output, weight.main_grad
                            )
                        if hasattr(weight, "grad_added_to_main_grad"):
                            if getattr(weight, "zero_out_wgrad", False):
                                grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype, zero=True)
                            else:
                                grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
                            weight.grad_added_to_main_grad = True
                        else:
                            grad_weight = None
                    else:
                        grad_weight = grad_output.t().matmul(total_input)
                    grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
                    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None, None
        """,
    ),
    # Ascend/MindSpeed 028de58, mindspeed/core/tensor_parallel/coc_feature/{matmul_soc_friendly.py process_with_k_aligned, coc_parallel_linears_sequence_parallel.py
    # RowSeqParallel backward}. NOTE: the bug is the code at this HEAD: `weight` is rebound to `right.t().contiguous().t()`, a copy that gets main_grad back but not
    # grad_added_to_main_grad, so the fused path returns None and never flags the Parameter; the twin keeps the copy separate.
    Variant(
        2,
        "blind10-mindspeed-coc-aligned-weight-rebind",
        bug="""
            def process_with_k_aligned(left, right, mn_aligned, is_left_transposed, is_right_transposed):
                if is_left_transposed:
                    left = left.contiguous()
                if not mn_aligned and not is_right_transposed:
                    main_grad = right.main_grad
                    right = right.t().contiguous().t()
                    right.main_grad = main_grad
                return left, right


            class CoCRowSeqParallelFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    total_input = ctx.saved_tensors[0]
                    weight = ctx.weight

                    parallel_num = get_parallel_num(
                        m=reduce(lambda x, y: x * y, grad_output.shape[:-1]) * min_comm_config.tp_world_size,
                        k=weight.shape[0],
                        n=weight.shape[1]
                    )
                    if parallel_num == 1:
                        return RewriteRowSeqParallelFunction.backward(ctx, grad_output)

                    grad_input_orig_shape = get_output_shape(grad_output, weight, min_comm_config.tp_world_size, is_gather=True)
                    grad_output = reshape_to_2D(grad_output)

                    if min_comm_config.matmul_soc_friendly_enabled:
                        grad_output, weight = get_aligned_mm_inputs(grad_output, weight, sp_coef=min_comm_config.tp_world_size,  # bug
                                                                    parallel_num=parallel_num)

                    def compute_fcn(input_tensor, output_tensor):
                        torch.matmul(input_tensor, weight, out=output_tensor)
                        return output_tensor

                    is_grad_weight_needed, is_grad_bias_needed = is_grad_needed(ctx.needs_input_grad)

                    coc_all_gather = COCParallel(grad_output, CommunicationType.ALL_GATHER, compute_fcn, compute_first=False,
                                                 weight_shape_list=list(weight.shape), parallel_num=parallel_num)
                    grad_input = coc_all_gather.run()
                    grad_input = shuffle_as_coc_reduce_scatter(grad_input, ctx.world_size, parallel_num)
                    grad_input = grad_input.reshape(grad_input_orig_shape)

                    grad_weight, grad_bias = None, None
                    if is_grad_weight_needed:
                        grad_output = coc_all_gather.comm_output
                        grad_output = shuffle_as_coc_reduce_scatter(grad_output, ctx.world_size, parallel_num)
                        total_input = reshape_to_2D(total_input)
                        if get_args().gradient_accumulation_fusion:
                            if weight.main_grad.dtype == torch.float32:
                                npu_matmul_add_fp32(total_input, grad_output, weight.main_grad)
                            elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                                npu_matmul_add_fp16(total_input, grad_output, weight.main_grad)
                            else:
                                raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                            if hasattr(weight, 'grad_added_to_main_grad'):
                                if getattr(weight, 'zero_out_wgrad', False):
                                    grad_weight = torch.zeros(
                                        weight.main_grad.shape,
                                        dtype=total_input.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                                else:
                                    grad_weight = torch.empty(
                                        weight.main_grad.shape,
                                        dtype=total_input.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                                weight.grad_added_to_main_grad = True
                            else:
                                grad_weight = None
                        else:
                            grad_weight = grad_output.t().matmul(total_input)
                        if is_grad_bias_needed and ctx.use_bias:
                            grad_bias = grad_output.sum(dim=0)
                    return grad_input, grad_weight, grad_bias
        """,
        twin="""
            def process_with_k_aligned(left, right, mn_aligned, is_left_transposed, is_right_transposed):
                if is_left_transposed:
                    left = left.contiguous()
                if not mn_aligned and not is_right_transposed:
                    main_grad = right.main_grad
                    right = right.t().contiguous().t()
                    right.main_grad = main_grad
                return left, right


            class CoCRowSeqParallelFunction(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad_output):
                    total_input = ctx.saved_tensors[0]
                    weight = ctx.weight

                    parallel_num = get_parallel_num(
                        m=reduce(lambda x, y: x * y, grad_output.shape[:-1]) * min_comm_config.tp_world_size,
                        k=weight.shape[0],
                        n=weight.shape[1]
                    )
                    if parallel_num == 1:
                        return RewriteRowSeqParallelFunction.backward(ctx, grad_output)

                    grad_input_orig_shape = get_output_shape(grad_output, weight, min_comm_config.tp_world_size, is_gather=True)
                    grad_output = reshape_to_2D(grad_output)

                    mm_weight = weight
                    if min_comm_config.matmul_soc_friendly_enabled:
                        grad_output, mm_weight = get_aligned_mm_inputs(grad_output, weight, sp_coef=min_comm_config.tp_world_size,
                                                                       parallel_num=parallel_num)

                    def compute_fcn(input_tensor, output_tensor):
                        torch.matmul(input_tensor, mm_weight, out=output_tensor)
                        return output_tensor

                    is_grad_weight_needed, is_grad_bias_needed = is_grad_needed(ctx.needs_input_grad)

                    coc_all_gather = COCParallel(grad_output, CommunicationType.ALL_GATHER, compute_fcn, compute_first=False,
                                                 weight_shape_list=list(mm_weight.shape), parallel_num=parallel_num)
                    grad_input = coc_all_gather.run()
                    grad_input = shuffle_as_coc_reduce_scatter(grad_input, ctx.world_size, parallel_num)
                    grad_input = grad_input.reshape(grad_input_orig_shape)

                    grad_weight, grad_bias = None, None
                    if is_grad_weight_needed:
                        grad_output = coc_all_gather.comm_output
                        grad_output = shuffle_as_coc_reduce_scatter(grad_output, ctx.world_size, parallel_num)
                        total_input = reshape_to_2D(total_input)
                        if get_args().gradient_accumulation_fusion:
                            if weight.main_grad.dtype == torch.float32:
                                npu_matmul_add_fp32(total_input, grad_output, weight.main_grad)
                            elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                                npu_matmul_add_fp16(total_input, grad_output, weight.main_grad)
                            else:
                                raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                            if hasattr(weight, 'grad_added_to_main_grad'):
                                if getattr(weight, 'zero_out_wgrad', False):
                                    grad_weight = torch.zeros(
                                        weight.main_grad.shape,
                                        dtype=total_input.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                                else:
                                    grad_weight = torch.empty(
                                        weight.main_grad.shape,
                                        dtype=total_input.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                                weight.grad_added_to_main_grad = True
                            else:
                                grad_weight = None
                        else:
                            grad_weight = grad_output.t().matmul(total_input)
                        if is_grad_bias_needed and ctx.use_bias:
                            grad_bias = grad_output.sum(dim=0)
                    return grad_input, grad_weight, grad_bias
        """,
    ),
    # lhb8125/Megatron-LM 5653514, megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward. After
    # the fused GEMM wrote main_grad, a weight without grad_added_to_main_grad must get no wgrad back; returning `weight.main_grad` itself as
    # the weight gradient hands the hook main_grad as `.grad`, so the hook adds main_grad into itself (doubling it).
    Variant(
        2,
        "blind10-lhb-linear-return-main-grad-as-grad",
        bug="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    main_grad = ctx.main_grad
                    use_bias = ctx.use_bias
                    grad_output_buffer = ctx.grad_output_buffer
                    wgrad_deferral_limit = ctx.wgrad_deferral_limit
                    tp_group = ctx.tp_group

                    if ctx.gradient_accumulation_fusion:
                        weight.main_grad = main_grad

                    wgrad_compute = True
                    if grad_output_buffer is not None:
                        if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                            grad_output_buffer.append(grad_output)
                            wgrad_compute = False

                    total_input = input
                    grad_input = grad_output.matmul(weight)
                    if wgrad_compute:
                        grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

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

                        if hasattr(weight, "grad_added_to_main_grad"):
                            if getattr(weight, "zero_out_wgrad", False):
                                if HAVE_TE:
                                    grad_weight = get_dummy_wgrad(
                                        list(weight.main_grad.shape), input.dtype, zero=True
                                    )
                                else:
                                    grad_weight = torch.zeros(
                                        weight.main_grad.shape,
                                        dtype=input.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                            else:
                                if HAVE_TE:
                                    grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
                                else:
                                    grad_weight = torch.empty(
                                        weight.main_grad.shape,
                                        dtype=input.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                            weight.grad_added_to_main_grad = True
                        else:
                            grad_weight = weight.main_grad  # bug
                    else:
                        grad_weight = grad_output.t().matmul(total_input)
                    grad_bias = grad_output.sum(dim=0) if use_bias else None

                    if ctx.allreduce_dgrad:
                        grad_input = _reduce(grad_input, tp_group)
                    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
        """,
        twin="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    main_grad = ctx.main_grad
                    use_bias = ctx.use_bias
                    grad_output_buffer = ctx.grad_output_buffer
                    wgrad_deferral_limit = ctx.wgrad_deferral_limit
                    tp_group = ctx.tp_group

                    if ctx.gradient_accumulation_fusion:
                        weight.main_grad = main_grad

                    wgrad_compute = True
                    if grad_output_buffer is not None:
                        if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                            grad_output_buffer.append(grad_output)
                            wgrad_compute = False

                    total_input = input
                    grad_input = grad_output.matmul(weight)
                    if wgrad_compute:
                        grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

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

                        if hasattr(weight, "grad_added_to_main_grad"):
                            if getattr(weight, "zero_out_wgrad", False):
                                if HAVE_TE:
                                    grad_weight = get_dummy_wgrad(
                                        list(weight.main_grad.shape), input.dtype, zero=True
                                    )
                                else:
                                    grad_weight = torch.zeros(
                                        weight.main_grad.shape,
                                        dtype=input.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                            else:
                                if HAVE_TE:
                                    grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
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

                    if ctx.allreduce_dgrad:
                        grad_input = _reduce(grad_input, tp_group)
                    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
        """,
    ),
    # HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/extensions/primus_turbo.py, _bridge_weight_grad._WeightGradBridge. The bridge must
    # add the quantized-weight gradient into the existing main_grad buffer in place; rebinding `weight.main_grad` to an out-of-place sum
    # leaves the DDP buffer untouched while grad_added_to_main_grad is still set and a dummy is returned, so the wgrad is silently lost.
    Variant(
        3,
        "blind10-hygon-bridge-out-of-place-main-grad",
        bug="""
            def _bridge_weight_grad(
                x: torch.Tensor, weight: torch.nn.Parameter, weight_buffer: PrimusTurboQuantizedTensorPair
            ):
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

                        if grad_quantized_weight is None:
                            # OPT-1 fused path: the grouped GEMM backward already accumulated the
                            # expert wgrad straight into main_grad, so there is nothing to add here.
                            weight.grad_added_to_main_grad = True
                        else:
                            try:
                                from primus_turbo.pytorch.core.utils import is_gfx1250

                                _use_triton_inplace_add = is_gfx1250()
                            except ImportError:
                                _use_triton_inplace_add = False

                            if _use_triton_inplace_add:
                                _triton_inplace_add_(weight.main_grad, grad_quantized_weight)
                            else:
                                weight.main_grad = weight.main_grad + grad_quantized_weight  # bug

                            weight.grad_added_to_main_grad = True

                        return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype), None, None

                assert isinstance(
                    weight_buffer, PrimusTurboQuantizedTensorPair
                ), "weight_buffer must be a PrimusTurboQuantizedTensorPair"
                assert weight_buffer.data is not None, "weight_buffer.data must not be None"

                x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                    x, weight, weight_buffer.data, weight_buffer.data_t
                )
                return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        """,
        twin="""
            def _bridge_weight_grad(
                x: torch.Tensor, weight: torch.nn.Parameter, weight_buffer: PrimusTurboQuantizedTensorPair
            ):
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

                        if grad_quantized_weight is None:
                            # OPT-1 fused path: the grouped GEMM backward already accumulated the
                            # expert wgrad straight into main_grad, so there is nothing to add here.
                            weight.grad_added_to_main_grad = True
                        else:
                            try:
                                from primus_turbo.pytorch.core.utils import is_gfx1250

                                _use_triton_inplace_add = is_gfx1250()
                            except ImportError:
                                _use_triton_inplace_add = False

                            if _use_triton_inplace_add:
                                _triton_inplace_add_(weight.main_grad, grad_quantized_weight)
                            else:
                                weight.main_grad.add_(grad_quantized_weight)

                            weight.grad_added_to_main_grad = True

                        return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype), None, None

                assert isinstance(
                    weight_buffer, PrimusTurboQuantizedTensorPair
                ), "weight_buffer must be a PrimusTurboQuantizedTensorPair"
                assert weight_buffer.data is not None, "weight_buffer.data must not be None"

                x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                    x, weight, weight_buffer.data, weight_buffer.data_t
                )
                return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        """,
    ),
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/ops/basic/basic_linear.py, BasicLinear.op_backward. NOTE: the bug is the code
    # at this HEAD: with overwrite_main_grad the local flag is False, so after the GEMM overwrote main_grad no grad_added_to_main_grad is set and
    # `main_grad.detach()` itself is handed on as `.grad`; the twin decides the dummy on the op-level `_accumulate_into_main_grad`.
    Variant(
        3,
        "blind10-te-basic-linear-overwrite-real-grad",
        bug="""
            class BasicLinear(BasicOperation):
                def op_backward(
                    self,
                    ctx: OperationContext,
                    grad_output: torch.Tensor,
                ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:

                    # Saved tensors from forward pass
                    (x_local, w) = ctx.saved_tensors

                    # Megatron-LM wgrad fusion
                    # Note: Get grad tensor from param so we can accumulate
                    # directly into it.
                    accumulate_into_main_grad = self._accumulate_into_main_grad
                    grad_weight = None
                    if ctx.weight_requires_grad and accumulate_into_main_grad:
                        weight_param = self.weight
                        main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                        grad_weight = main_grad.detach()
                    else:
                        accumulate_into_main_grad = False

                    # Linear backward pass
                    grad_input, grad_weight = BasicLinear._functional_backward(
                        grad_output=grad_output,
                        input=x_local,
                        weight=w,
                        input_requires_grad=ctx.input_requires_grad,
                        weight_requires_grad=ctx.weight_requires_grad,
                        dtype=ctx.dtype,
                        grad_weight=grad_weight,
                        accumulate_into_grad_weight=accumulate_into_main_grad,
                        tensor_parallel_mode=self.tensor_parallel_mode,
                        tensor_parallel_group=self.tensor_parallel_group,
                        sequence_parallel=self.sequence_parallel,
                        with_quantized_compute=ctx.with_quantized_compute,
                        input_quantizer=ctx.input_quantizer,
                        weight_quantizer=ctx.weight_quantizer,
                        grad_output_quantizer=ctx.grad_output_quantizer,
                        grad_input_quantizer=ctx.grad_input_quantizer,
                    )

                    # Clear input tensor if possible
                    clear_tensor_data(x_local)

                    # Megatron-LM wgrad fusion
                    # Note: Return dummy tensor for grad weight if needed.
                    if accumulate_into_main_grad:  # bug
                        grad_weight = get_dummy_wgrads_for_params([self.weight])[0]

                    return grad_input, [grad_weight]
        """,
        twin="""
            class BasicLinear(BasicOperation):
                def op_backward(
                    self,
                    ctx: OperationContext,
                    grad_output: torch.Tensor,
                ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:

                    # Saved tensors from forward pass
                    (x_local, w) = ctx.saved_tensors

                    # Megatron-LM wgrad fusion
                    # Note: Get grad tensor from param so we can accumulate
                    # directly into it.
                    accumulate_into_main_grad = self._accumulate_into_main_grad
                    grad_weight = None
                    if ctx.weight_requires_grad and accumulate_into_main_grad:
                        weight_param = self.weight
                        main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                        grad_weight = main_grad.detach()
                    else:
                        accumulate_into_main_grad = False

                    # Linear backward pass
                    grad_input, grad_weight = BasicLinear._functional_backward(
                        grad_output=grad_output,
                        input=x_local,
                        weight=w,
                        input_requires_grad=ctx.input_requires_grad,
                        weight_requires_grad=ctx.weight_requires_grad,
                        dtype=ctx.dtype,
                        grad_weight=grad_weight,
                        accumulate_into_grad_weight=accumulate_into_main_grad,
                        tensor_parallel_mode=self.tensor_parallel_mode,
                        tensor_parallel_group=self.tensor_parallel_group,
                        sequence_parallel=self.sequence_parallel,
                        with_quantized_compute=ctx.with_quantized_compute,
                        input_quantizer=ctx.input_quantizer,
                        weight_quantizer=ctx.weight_quantizer,
                        grad_output_quantizer=ctx.grad_output_quantizer,
                        grad_input_quantizer=ctx.grad_input_quantizer,
                    )

                    # Clear input tensor if possible
                    clear_tensor_data(x_local)

                    # Megatron-LM wgrad fusion
                    # Note: Return dummy tensor for grad weight if needed.
                    if ctx.weight_requires_grad and self._accumulate_into_main_grad:
                        grad_weight = get_dummy_wgrads_for_params([self.weight])[0]

                    return grad_input, [grad_weight]
        """,
    ),
    # lhb8125/Megatron-LM 5653514, megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py, _grad_acc in
    # _register_fsdp_hooks. Only the sharded (is_data_distributed) buffer may be overwritten per backward; in the unsharded
    # branch main_grad must accumulate across microbatches, so `copy_` there drops every microbatch but the last.
    Variant(
        4,
        "blind10-lhb-fsdp-grad-acc-unsharded-copy",
        bug='''
            def _register_fsdp_hooks(self, root_module):
                def _grad_acc(param):
                    """
                    Accumulate the gradient in the main_grad buffer.

                    Utilizes the patched main_grad property of the parameter to allocate
                    or fetch the main gradient bucket for the parameter.
                    """
                    group_id = self.param_and_grad_buffer.param_to_param_group[param]
                    group = self.param_and_grad_buffer.parameter_groups[group_id]
                    if not group.requires_grad:
                        return

                    # Sharded Gradient Buffer
                    gbuf = group.hsdp_gbuf if group.hsdp_gbuf else group.main_grad_buffer
                    if gbuf.is_data_distributed:
                        if not param.grad_added_to_main_grad:
                            # Get `main_grad` will allocate bucket, check that the currently
                            # used main_grad buffer does not exceed the scope of two FSDP Unit
                            # Modules, i.e., the buffer limit imposed by double-buffer allocator.
                            if self.ddp_config.fsdp_double_buffer:
                                self.grad_reduce_pipeline._enforce_double_buffer_limit([group_id])

                            param.main_grad = param.get_main_grad()
                            if param.grad is not None:
                                # Copy the gradient into the allocated main gradient bucket.
                                param.main_grad.copy_(to_local_if_dtensor(param.grad))
                                del param.grad
                            else:
                                param.main_grad.zero_()
                    # Unsharded Gradient Buffer
                    else:
                        if not param.grad_added_to_main_grad:
                            if param.grad is not None:
                                # Add the gradient into the allocated main gradient bucket.
                                param.main_grad = param.get_main_grad()
                                param.main_grad.copy_(to_local_if_dtensor(param.grad))  # bug
                                del param.grad

                    if param.grad_added_to_main_grad and param.grad is not None:
                        del param.grad

                    # Reset the grad accumulate flag.
                    param.grad_added_to_main_grad = False

                self._params_require_handle_grad = set()
                return _grad_acc
        ''',
        twin='''
            def _register_fsdp_hooks(self, root_module):
                def _grad_acc(param):
                    """
                    Accumulate the gradient in the main_grad buffer.

                    Utilizes the patched main_grad property of the parameter to allocate
                    or fetch the main gradient bucket for the parameter.
                    """
                    group_id = self.param_and_grad_buffer.param_to_param_group[param]
                    group = self.param_and_grad_buffer.parameter_groups[group_id]
                    if not group.requires_grad:
                        return

                    # Sharded Gradient Buffer
                    gbuf = group.hsdp_gbuf if group.hsdp_gbuf else group.main_grad_buffer
                    if gbuf.is_data_distributed:
                        if not param.grad_added_to_main_grad:
                            # Get `main_grad` will allocate bucket, check that the currently
                            # used main_grad buffer does not exceed the scope of two FSDP Unit
                            # Modules, i.e., the buffer limit imposed by double-buffer allocator.
                            if self.ddp_config.fsdp_double_buffer:
                                self.grad_reduce_pipeline._enforce_double_buffer_limit([group_id])

                            param.main_grad = param.get_main_grad()
                            if param.grad is not None:
                                # Copy the gradient into the allocated main gradient bucket.
                                param.main_grad.copy_(to_local_if_dtensor(param.grad))
                                del param.grad
                            else:
                                param.main_grad.zero_()
                    # Unsharded Gradient Buffer
                    else:
                        if not param.grad_added_to_main_grad:
                            if param.grad is not None:
                                # Add the gradient into the allocated main gradient bucket.
                                param.main_grad = param.get_main_grad()
                                param.main_grad.add_(to_local_if_dtensor(param.grad))
                                del param.grad

                    if param.grad_added_to_main_grad and param.grad is not None:
                        del param.grad

                    # Reset the grad accumulate flag.
                    param.grad_added_to_main_grad = False

                self._params_require_handle_grad = set()
                return _grad_acc
        ''',
    ),
    # HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward. The
    # `torch.matmul(..., out=weight.main_grad)` overwrite is only legal under the Megatron-FSDP branch (`__fsdp_param__`, where overwrite_main_grad is
    # set); using it for the fp16/bf16 DDP main_grad replaces the accumulated gradient of earlier microbatches instead of adding to it.
    Variant(
        4,
        "blind10-hygon-linear-fp16-matmul-out",
        bug="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    use_bias = ctx.use_bias
                    wgrad_compute = True
                    total_input = input
                    grad_input = grad_output.matmul(weight)

                    if wgrad_compute:
                        grad_output, total_input = prepare_input_tensors_for_wgrad_compute(
                            grad_output, total_input
                        )

                    if ctx.gradient_accumulation_fusion:
                        if wgrad_compute:
                            # In case of Megatron-FSDP, need to create main grad buffers in-place
                            if hasattr(weight, "__fsdp_param__"):
                                weight.main_grad = weight.get_main_grad()
                                from megatron.core.extensions.transformer_engine import te_general_gemm

                                if te_general_gemm is not None:
                                    te_general_gemm(
                                        total_input,
                                        grad_output,
                                        out_dtype=weight.main_grad.dtype,
                                        layout="NT",
                                        out=weight.main_grad,
                                        grad=True,
                                    )
                                else:
                                    torch.matmul(grad_output.t(), total_input, out=weight.main_grad)
                            else:
                                if weight.main_grad.dtype == torch.float32:
                                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                                        total_input, grad_output, weight.main_grad
                                    )
                                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                                    torch.matmul(grad_output.t(), total_input, out=weight.main_grad)  # bug
                                else:
                                    raise RuntimeError(
                                        "Unsupported gradient type for gradient accumulation fusion"
                                    )

                        if hasattr(weight, 'grad_added_to_main_grad'):
                            if getattr(weight, 'zero_out_wgrad', False):
                                grad_weight = get_dummy_wgrad(
                                    list(weight.main_grad.shape), input.dtype, zero=True
                                )
                            else:
                                grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
                            weight.grad_added_to_main_grad = True
                        else:
                            grad_weight = None
                    else:
                        grad_weight = grad_output.t().matmul(total_input)
                    grad_bias = grad_output.sum(dim=0) if use_bias else None
                    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None
        """,
        twin="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    use_bias = ctx.use_bias
                    wgrad_compute = True
                    total_input = input
                    grad_input = grad_output.matmul(weight)

                    if wgrad_compute:
                        grad_output, total_input = prepare_input_tensors_for_wgrad_compute(
                            grad_output, total_input
                        )

                    if ctx.gradient_accumulation_fusion:
                        if wgrad_compute:
                            # In case of Megatron-FSDP, need to create main grad buffers in-place
                            if hasattr(weight, "__fsdp_param__"):
                                weight.main_grad = weight.get_main_grad()
                                from megatron.core.extensions.transformer_engine import te_general_gemm

                                if te_general_gemm is not None:
                                    te_general_gemm(
                                        total_input,
                                        grad_output,
                                        out_dtype=weight.main_grad.dtype,
                                        layout="NT",
                                        out=weight.main_grad,
                                        grad=True,
                                    )
                                else:
                                    torch.matmul(grad_output.t(), total_input, out=weight.main_grad)
                            else:
                                if weight.main_grad.dtype == torch.float32:
                                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                                        total_input, grad_output, weight.main_grad
                                    )
                                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(
                                        total_input, grad_output, weight.main_grad
                                    )
                                else:
                                    raise RuntimeError(
                                        "Unsupported gradient type for gradient accumulation fusion"
                                    )

                        if hasattr(weight, 'grad_added_to_main_grad'):
                            if getattr(weight, 'zero_out_wgrad', False):
                                grad_weight = get_dummy_wgrad(
                                    list(weight.main_grad.shape), input.dtype, zero=True
                                )
                            else:
                                grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
                            weight.grad_added_to_main_grad = True
                        else:
                            grad_weight = None
                    else:
                        grad_weight = grad_output.t().matmul(total_input)
                    grad_bias = grad_output.sum(dim=0) if use_bias else None
                    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None
        """,
    ),
    # lhb8125/Megatron-LM 5653514, megatron/core/transformer/cuda_graphs.py, _CudagraphReplayNode.backward / get_input_grads_with_dummy_flags. Graph replay does
    # not run the fused linears' Python bookkeeping, so the recorded grad_added_to_main_grad values must be restored on every replay before the wgrads (which
    # fire the DDP hooks) are handed back; restoring them only inside the FP8 scale-update branch leaves non-FP8 replays firing hooks with no flag set.
    Variant(
        5,
        "blind10-lhb-cudagraph-replay-flags-fp8-only",
        bug='''
            class _CudagraphReplayNode(torch.autograd.Function):
                @staticmethod
                def backward(ctx, *grads):
                    """Replay the backward graph of the passed runner."""

                    runner = ctx.runner
                    assert (
                        runner.bwd_graph is not None
                    ), "Tried replaying bwd cudagraph before calling 'create_bwd_cudagraph'!"
                    assert (
                        runner.status == _GraphStatus.BWD_READY
                    ), "Tried calling the bwd cudagraph when the fwd cudagraph was expected to be called next!"

                    # Copy new data into bwd graph input buffer
                    for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                        if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                            cudagraph_output_grad.copy_(user_output_grad)

                    runner.bwd_graph.replay()
                    runner.status = _GraphStatus.FWD_READY

                    # Update FP8/FP4 scale factors if needed
                    if (runner.fp8_enabled or runner.fp4_enabled) and ctx.is_first_fp8_module:
                        FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)

                        # If using gradient_accumulation_fusion, whenever `main_grad` is calculated
                        # the `grad_added_to_main_grad` attribute is expected to set. However when using
                        # cudagraphs this doesn't occur so we emulate this behavior here.
                        for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():  # bug
                            param.grad_added_to_main_grad = grad_added  # bug

                    grads, is_dummy_grad = runner.get_input_grads_with_dummy_flags()
                    if runner.is_first_layer:
                        output_grads = tuple(
                            b.clone().detach() if not (b is None or dummy) else b
                            for dummy, b in zip(is_dummy_grad, grads)
                        )
                    else:
                        output_grads = grads
                    return None, None, *output_grads


            class _CudaGraphRunner(torch.nn.Module):
                def get_input_grads_with_dummy_flags(self):
                    is_dummy_grad = [False] * len(self.static_grad_inputs)
                    if not self.fuse_wgrad_accumulation:
                        return self.static_grad_inputs, is_dummy_grad
                    else:
                        num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
                        dgrads = self.static_grad_inputs[:num_dgrads]
                        wgrads = self.static_grad_inputs[num_dgrads:]

                        wgrads_with_placeholders = []
                        is_dummy_grad = [False] * len(dgrads)
                        for idx, param in enumerate(self.base_module.parameters()):
                            wgrad_is_dummy = getattr(param, "grad_added_to_main_grad", False)
                            if wgrad_is_dummy:
                                if getattr(param, "zero_out_wgrad", False):
                                    wgrad = torch.zeros(
                                        param.main_grad.shape,
                                        dtype=param.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                                else:
                                    wgrad = torch.empty(
                                        param.main_grad.shape,
                                        dtype=param.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                            else:
                                wgrad = wgrads[idx]
                            wgrads_with_placeholders.append(wgrad)
                            is_dummy_grad.append(wgrad_is_dummy)
                        return tuple(dgrads + wgrads_with_placeholders), is_dummy_grad
        ''',
        twin='''
            class _CudagraphReplayNode(torch.autograd.Function):
                @staticmethod
                def backward(ctx, *grads):
                    """Replay the backward graph of the passed runner."""

                    runner = ctx.runner
                    assert (
                        runner.bwd_graph is not None
                    ), "Tried replaying bwd cudagraph before calling 'create_bwd_cudagraph'!"
                    assert (
                        runner.status == _GraphStatus.BWD_READY
                    ), "Tried calling the bwd cudagraph when the fwd cudagraph was expected to be called next!"

                    # Copy new data into bwd graph input buffer
                    for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                        if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                            cudagraph_output_grad.copy_(user_output_grad)

                    runner.bwd_graph.replay()
                    runner.status = _GraphStatus.FWD_READY

                    # Update FP8/FP4 scale factors if needed
                    if (runner.fp8_enabled or runner.fp4_enabled) and ctx.is_first_fp8_module:
                        FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)

                    # If using gradient_accumulation_fusion, whenever `main_grad` is calculated
                    # the `grad_added_to_main_grad` attribute is expected to set. However when using
                    # cudagraphs this doesn't occur so we emulate this behavior here.
                    for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():
                        param.grad_added_to_main_grad = grad_added

                    grads, is_dummy_grad = runner.get_input_grads_with_dummy_flags()
                    if runner.is_first_layer:
                        output_grads = tuple(
                            b.clone().detach() if not (b is None or dummy) else b
                            for dummy, b in zip(is_dummy_grad, grads)
                        )
                    else:
                        output_grads = grads
                    return None, None, *output_grads


            class _CudaGraphRunner(torch.nn.Module):
                def get_input_grads_with_dummy_flags(self):
                    is_dummy_grad = [False] * len(self.static_grad_inputs)
                    if not self.fuse_wgrad_accumulation:
                        return self.static_grad_inputs, is_dummy_grad
                    else:
                        num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
                        dgrads = self.static_grad_inputs[:num_dgrads]
                        wgrads = self.static_grad_inputs[num_dgrads:]

                        wgrads_with_placeholders = []
                        is_dummy_grad = [False] * len(dgrads)
                        for idx, param in enumerate(self.base_module.parameters()):
                            wgrad_is_dummy = getattr(param, "grad_added_to_main_grad", False)
                            if wgrad_is_dummy:
                                if getattr(param, "zero_out_wgrad", False):
                                    wgrad = torch.zeros(
                                        param.main_grad.shape,
                                        dtype=param.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                                else:
                                    wgrad = torch.empty(
                                        param.main_grad.shape,
                                        dtype=param.dtype,
                                        device=torch.cuda.current_device(),
                                        requires_grad=False,
                                    )
                            else:
                                wgrad = wgrads[idx]
                            wgrads_with_placeholders.append(wgrad)
                            is_dummy_grad.append(wgrad_is_dummy)
                        return tuple(dgrads + wgrads_with_placeholders), is_dummy_grad
        ''',
    ),
    # Autumn1998/Megatron-LM 51f6a39, megatron/core/models/common/utils.py, TransformerLayerSchedulePlan slot backward_dw. The post-wgrad
    # grad-accumulation hooks may only be collected for params whose delayed wgrad produced a (dummy) `.grad`; dropping the `param.grad is
    # not None` guard fires the DDP grad-ready hook for params that got neither a dummy grad nor grad_added_to_main_grad on this path.
    Variant(
        5,
        "blind10-autumn-post-wgrad-hooks-without-grad",
        bug='''
            class TransformerLayerNode(ScheduleNode):
                def backward(self, *output_grad):
                    grads = super().backward(*output_grad)
                    if not self.delay_wgrad_compute and self.is_layer_first_node:
                        self._post_backward_hook()
                    return grads

                def backward_dw(self):
                    """Run the slot's delayed weight-gradient callables on the slot's stream."""
                    if not self.delay_wgrad_compute:
                        return
                    if isinstance(self.stream, Callable):
                        self.stream = self.stream()
                    with torch.cuda.stream(self.stream):
                        nvtx_msg = f"{self.name} wgrad"
                        nvtx_range_push(nvtx_msg)
                        for module in self.bwd_dw_callables:
                            module.backward_dw()
                        nvtx_range_pop(nvtx_msg)

                    # Collect ``post_wgrad_grad_acc_hook`` from params whose grads were
                    # produced by *this* slot's wgrad callables. The hook must run on the
                    # same stream right after the wgrad it depends on; collecting on the
                    # first invocation makes the per-iteration hook order deterministic.
                    if self.post_wgrad_grad_acc_hooks is None:
                        self.post_wgrad_grad_acc_hooks = []
                        for module in self.bwd_dw_callables:
                            for param in module.parameters():
                                if getattr(param, "post_wgrad_grad_acc_hook", False) and param.requires_grad:  # bug
                                    self.post_wgrad_grad_acc_hooks.append(param.post_wgrad_grad_acc_hook)

                    if self.post_wgrad_grad_acc_hooks:
                        with torch.cuda.stream(self.stream):
                            for hook in self.post_wgrad_grad_acc_hooks:
                                hook()

                    if self.is_layer_first_node:
                        self._post_backward_hook()
                    self.bwd_dw_callables = None
        ''',
        twin='''
            class TransformerLayerNode(ScheduleNode):
                def backward(self, *output_grad):
                    grads = super().backward(*output_grad)
                    if not self.delay_wgrad_compute and self.is_layer_first_node:
                        self._post_backward_hook()
                    return grads

                def backward_dw(self):
                    """Run the slot's delayed weight-gradient callables on the slot's stream."""
                    if not self.delay_wgrad_compute:
                        return
                    if isinstance(self.stream, Callable):
                        self.stream = self.stream()
                    with torch.cuda.stream(self.stream):
                        nvtx_msg = f"{self.name} wgrad"
                        nvtx_range_push(nvtx_msg)
                        for module in self.bwd_dw_callables:
                            module.backward_dw()
                        nvtx_range_pop(nvtx_msg)

                    # Collect ``post_wgrad_grad_acc_hook`` from params whose grads were
                    # produced by *this* slot's wgrad callables. The hook must run on the
                    # same stream right after the wgrad it depends on; collecting on the
                    # first invocation makes the per-iteration hook order deterministic.
                    if self.post_wgrad_grad_acc_hooks is None:
                        self.post_wgrad_grad_acc_hooks = []
                        for module in self.bwd_dw_callables:
                            for param in module.parameters():
                                if (
                                    getattr(param, "post_wgrad_grad_acc_hook", False)
                                    and param.requires_grad
                                    and param.grad is not None
                                ):
                                    self.post_wgrad_grad_acc_hooks.append(param.post_wgrad_grad_acc_hook)

                    if self.post_wgrad_grad_acc_hooks:
                        with torch.cuda.stream(self.stream):
                            for hook in self.post_wgrad_grad_acc_hooks:
                                hook()

                    if self.is_layer_first_node:
                        self._post_backward_hook()
                    self.bwd_dw_callables = None
        ''',
    ),
    # lhb8125/Megatron-LM 5653514, megatron/core/transformer/{attention.py Attention.backward_dw, multi_latent_attention.py
    # MultiLatentAttention.backward_dw/_backward_q_proj}. MLA overrides the base's wgrad pieces; with q_lora_rank set both linear_q_down_proj and linear_q_up_proj are
    # built with the delayed-wgrad config, so an override that only calls linear_q_up_proj.backward_dw() leaves q_down_proj's weight gradient never computed.
    Variant(
        6,
        "blind10-lhb-mla-backward-q-proj-partial",
        bug='''
            class Attention(MegatronModule, ABC):
                def backward_dw(self) -> NoReturn:
                    """Execute weight update operations"""
                    self._backward_qkv_proj()
                    self._backward_output_proj()

                def _backward_qkv_proj(self):
                    """Update weights for QKV projection layer"""
                    self.linear_qkv.backward_dw()

                def _backward_output_proj(self):
                    """Update weights for output projection layer"""
                    self.linear_proj.backward_dw()


            class MultiLatentAttention(Attention):
                def backward_dw(self) -> NoReturn:
                    """Execute weight gradient computation"""
                    self._backward_kv_proj()
                    self._backward_q_proj()
                    self._backward_output_proj()

                def _backward_kv_proj(self):
                    """Computes weight gradients of KV projection layers"""
                    self.linear_kv_up_proj.backward_dw()
                    self.linear_kv_down_proj.backward_dw()

                def _backward_q_proj(self):
                    """Computes weight gradients of Q projection layers"""
                    if self.config.q_lora_rank is None:
                        self.linear_q_proj.backward_dw()
                    else:
                        self.linear_q_up_proj.backward_dw()  # bug

                def _backward_output_proj(self):
                    """Computes weight gradients of output projection layer"""
                    self.linear_proj.backward_dw()


            class MLASelfAttention(MultiLatentAttention):
                def __init__(self, config, submodules, layer_number, attn_mask_type=AttnMaskType.padding,
                             cp_comm_type=None, pg_collection=None):
                    super().__init__(config=config, submodules=submodules, layer_number=layer_number,
                                     attn_mask_type=attn_mask_type, attention_type="self",
                                     cp_comm_type=cp_comm_type, pg_collection=pg_collection)
                    if self.config.q_lora_rank is None:
                        self.linear_q_proj = build_module(
                            submodules.linear_q_proj,
                            self.config.hidden_size,
                            self.config.num_attention_heads * self.q_head_dim,
                            config=self.config,
                            init_method=self.config.init_method,
                            gather_output=False,
                            bias=False,
                            skip_bias_add=False,
                            is_expert=False,
                            tp_comm_buffer_name='q_proj',
                        )
                    else:
                        self.linear_q_down_proj = build_module(
                            submodules.linear_q_down_proj,
                            self.config.hidden_size,
                            self.config.q_lora_rank,
                            config=self.config,
                            init_method=self.config.init_method,
                            bias=False,
                            skip_bias_add=False,
                            is_expert=False,
                            tp_comm_buffer_name='q_down_proj',
                            skip_weight_param_allocation=False,
                        )
                        self.linear_q_up_proj = build_module(
                            submodules.linear_q_up_proj,
                            self.config.q_lora_rank,
                            self.config.num_attention_heads * self.q_head_dim,
                            config=self.config,
                            init_method=self.config.init_method,
                            gather_output=False,
                            bias=False,
                            skip_bias_add=False,
                            is_expert=False,
                            tp_comm_buffer_name='q_up_proj',
                        )
        ''',
        twin='''
            class Attention(MegatronModule, ABC):
                def backward_dw(self) -> NoReturn:
                    """Execute weight update operations"""
                    self._backward_qkv_proj()
                    self._backward_output_proj()

                def _backward_qkv_proj(self):
                    """Update weights for QKV projection layer"""
                    self.linear_qkv.backward_dw()

                def _backward_output_proj(self):
                    """Update weights for output projection layer"""
                    self.linear_proj.backward_dw()


            class MultiLatentAttention(Attention):
                def backward_dw(self) -> NoReturn:
                    """Execute weight gradient computation"""
                    self._backward_kv_proj()
                    self._backward_q_proj()
                    self._backward_output_proj()

                def _backward_kv_proj(self):
                    """Computes weight gradients of KV projection layers"""
                    self.linear_kv_up_proj.backward_dw()
                    self.linear_kv_down_proj.backward_dw()

                def _backward_q_proj(self):
                    """Computes weight gradients of Q projection layers"""
                    if self.config.q_lora_rank is None:
                        self.linear_q_proj.backward_dw()
                    else:
                        self.linear_q_down_proj.backward_dw()
                        self.linear_q_up_proj.backward_dw()

                def _backward_output_proj(self):
                    """Computes weight gradients of output projection layer"""
                    self.linear_proj.backward_dw()


            class MLASelfAttention(MultiLatentAttention):
                def __init__(self, config, submodules, layer_number, attn_mask_type=AttnMaskType.padding,
                             cp_comm_type=None, pg_collection=None):
                    super().__init__(config=config, submodules=submodules, layer_number=layer_number,
                                     attn_mask_type=attn_mask_type, attention_type="self",
                                     cp_comm_type=cp_comm_type, pg_collection=pg_collection)
                    if self.config.q_lora_rank is None:
                        self.linear_q_proj = build_module(
                            submodules.linear_q_proj,
                            self.config.hidden_size,
                            self.config.num_attention_heads * self.q_head_dim,
                            config=self.config,
                            init_method=self.config.init_method,
                            gather_output=False,
                            bias=False,
                            skip_bias_add=False,
                            is_expert=False,
                            tp_comm_buffer_name='q_proj',
                        )
                    else:
                        self.linear_q_down_proj = build_module(
                            submodules.linear_q_down_proj,
                            self.config.hidden_size,
                            self.config.q_lora_rank,
                            config=self.config,
                            init_method=self.config.init_method,
                            bias=False,
                            skip_bias_add=False,
                            is_expert=False,
                            tp_comm_buffer_name='q_down_proj',
                            skip_weight_param_allocation=False,
                        )
                        self.linear_q_up_proj = build_module(
                            submodules.linear_q_up_proj,
                            self.config.q_lora_rank,
                            self.config.num_attention_heads * self.q_head_dim,
                            config=self.config,
                            init_method=self.config.init_method,
                            gather_output=False,
                            bias=False,
                            skip_bias_add=False,
                            is_expert=False,
                            tp_comm_buffer_name='q_up_proj',
                        )
        ''',
    ),
    # Autumn1998/Megatron-LM 51f6a39, megatron/core/models/common/utils.py, _BackwardDWWrapper.backward_dw. The graphed wgrad
    # callable only covers the scopes listed in cuda_graph_modules; skipping the eager attention backward_dw on every replay
    # (instead of only when `attn` is graphed) means attention weights with delay_wgrad_compute never get their wgrad.
    Variant(
        6,
        "blind10-autumn-backward-dw-wrapper-skips-attn",
        bug='''
            class _BackwardDWWrapper:
                def __init__(self, layer):
                    assert isinstance(
                        layer, GraphableMegatronModule
                    ), "cuda graphed ep overlap only supports GraphableMegatronModule."
                    assert isinstance(
                        layer, TransformerLayer
                    ), "cuda graphed ep overlap only supports TransformerLayer for now."
                    self.layer = layer
                    self.graphed_backward_dw_callable = None
                    self.attn_dw_callable = layer.self_attention.backward_dw
                    self.submodules = [layer.self_attention]
                    if layer.is_moe_layer:
                        self.shared_expert_dw_callable = partial(
                            layer.mlp.backward_dw, routed_experts=False, shared_experts=True
                        )
                        if layer.mlp.use_shared_expert:
                            self.submodules.append(layer.mlp.shared_experts)
                    else:
                        self.shared_expert_dw_callable = None
                    self.cuda_graph_modules = layer.config.cuda_graph_modules

                def backward_dw(self):
                    """Run eager or graphed backward wgrad callables for the wrapped layer."""
                    is_replay = hasattr(self.layer, 'cuda_graphs') and self.layer.cuda_graphs
                    if self.shared_expert_dw_callable is not None and (
                        not is_replay or CudaGraphModule.moe_router not in self.cuda_graph_modules
                    ):
                        self.shared_expert_dw_callable()
                    if not is_replay:  # bug
                        self.attn_dw_callable()
                    if is_replay and self.graphed_backward_dw_callable is not None:
                        self.graphed_backward_dw_callable()
                    self.layer = None

                def set_graphed_backward_dw_callable(self, graphed_backward_dw_callable):
                    """Plug the cuda-graph backward wgrad replay callable."""
                    self.graphed_backward_dw_callable = graphed_backward_dw_callable

                def parameters(self):
                    for module in self.submodules:
                        yield from module.parameters()
        ''',
        twin='''
            class _BackwardDWWrapper:
                def __init__(self, layer):
                    assert isinstance(
                        layer, GraphableMegatronModule
                    ), "cuda graphed ep overlap only supports GraphableMegatronModule."
                    assert isinstance(
                        layer, TransformerLayer
                    ), "cuda graphed ep overlap only supports TransformerLayer for now."
                    self.layer = layer
                    self.graphed_backward_dw_callable = None
                    self.attn_dw_callable = layer.self_attention.backward_dw
                    self.submodules = [layer.self_attention]
                    if layer.is_moe_layer:
                        self.shared_expert_dw_callable = partial(
                            layer.mlp.backward_dw, routed_experts=False, shared_experts=True
                        )
                        if layer.mlp.use_shared_expert:
                            self.submodules.append(layer.mlp.shared_experts)
                    else:
                        self.shared_expert_dw_callable = None
                    self.cuda_graph_modules = layer.config.cuda_graph_modules

                def backward_dw(self):
                    """Run eager or graphed backward wgrad callables for the wrapped layer."""
                    is_replay = hasattr(self.layer, 'cuda_graphs') and self.layer.cuda_graphs
                    if self.shared_expert_dw_callable is not None and (
                        not is_replay or CudaGraphModule.moe_router not in self.cuda_graph_modules
                    ):
                        self.shared_expert_dw_callable()
                    if not is_replay or CudaGraphModule.attn not in self.cuda_graph_modules:
                        self.attn_dw_callable()
                    if is_replay and self.graphed_backward_dw_callable is not None:
                        self.graphed_backward_dw_callable()
                    self.layer = None

                def set_graphed_backward_dw_callable(self, graphed_backward_dw_callable):
                    """Plug the cuda-graph backward wgrad replay callable."""
                    self.graphed_backward_dw_callable = graphed_backward_dw_callable

                def parameters(self):
                    for module in self.submodules:
                        yield from module.parameters()
        ''',
    ),
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/module/layernorm_linear.py, _LayerNormLinear.backward (wgrad part). The GEMM's `out`
    # must alias main_grad whenever fuse_wgrad_accumulation is on; choosing it in the kwargs dict on the local `accumulate_wgrad_into_param_main_grad`
    # (False on the first microbatch) sends that wgrad to scratch while grad_added_to_main_grad is still set and a dummy returned.
    Variant(
        7,
        "blind10-te-layernorm-linear-out-on-local-flag",
        bug="""
            class _LayerNormLinear(torch.autograd.Function):
                @staticmethod
                def backward(ctx, *grad_outputs):
                    (inputmat, weight, saved_weight, bias, ln_weight, ln_out, mu, rsigma) = restore_from_func_ctx(ctx)
                    is_dist_weight = is_distributed_weight(saved_weight)
                    origin_weight = None
                    origin_weight_overwrites_main_grad = getattr(
                        ctx, "origin_weight_overwrites_main_grad", False
                    )
                    main_grad = None
                    if ctx.fuse_wgrad_accumulation and ctx.requires_wgrad:
                        origin_weight_ref = ctx.origin_weight_ref
                        ctx.origin_weight_ref = None
                        origin_weight = origin_weight_ref() if origin_weight_ref is not None else None
                        assert (
                            origin_weight is not None
                        ), "weight was removed while fuse_wgrad_accumulation=True"
                        # Since main_grad can be modified inplace, it should not be a part of saved_tensors
                        main_grad = ctx.main_grad_func() if weight is not None else None
                        if main_grad is not None and not is_dist_weight:
                            origin_weight.main_grad = main_grad

                    wgrad = None
                    grad_output = grad_outputs[0]
                    if ctx.requires_wgrad:
                        # Figure out whether to output wgrad GEMM directly into main grad
                        if is_dist_weight:
                            accumulate_wgrad_into_param_main_grad = False
                        elif ctx.is_first_microbatch is not None:
                            accumulate_wgrad_into_param_main_grad = (
                                ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                            )
                        else:
                            accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                        wgrad_gemm_kwargs = {
                            "out_dtype": (
                                main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype
                            ),
                            "quantization_params": ctx.grad_weight_quantizer,
                            "accumulate": (
                                accumulate_wgrad_into_param_main_grad
                                if not origin_weight_overwrites_main_grad
                                else False
                            ),
                            "layout": "NT",
                            "out": main_grad if accumulate_wgrad_into_param_main_grad else None,  # bug
                            "use_split_accumulator": _2X_ACC_WGRAD,
                            "grad": True,
                        }

                        def wgrad_gemm(x, dy):
                            dw, db, *_ = general_gemm(x, dy, **wgrad_gemm_kwargs)
                            return dw, db

                        if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                            ctx.wgrad_store.put([ln_out, grad_output], wgrad_gemm)
                        else:
                            wgrad, _ = wgrad_gemm(ln_out, grad_output)

                    if ctx.requires_wgrad:
                        # Handle custom DDP from mcore.
                        if ctx.fuse_wgrad_accumulation and hasattr(origin_weight, "grad_added_to_main_grad"):
                            origin_weight.grad_added_to_main_grad = True
                            if getattr(origin_weight, "zero_out_wgrad", False):
                                wgrad = get_dummy_wgrad(
                                    list(main_grad.shape),
                                    origin_weight.dtype,
                                    zero=True,
                                )
                            else:
                                wgrad = get_dummy_wgrad(
                                    list(main_grad.shape),
                                    origin_weight.dtype,
                                )
                        elif ctx.fuse_wgrad_accumulation:
                            wgrad = None
                    else:
                        wgrad = None
                    return wgrad
        """,
        twin="""
            class _LayerNormLinear(torch.autograd.Function):
                @staticmethod
                def backward(ctx, *grad_outputs):
                    (inputmat, weight, saved_weight, bias, ln_weight, ln_out, mu, rsigma) = restore_from_func_ctx(ctx)
                    is_dist_weight = is_distributed_weight(saved_weight)
                    origin_weight = None
                    origin_weight_overwrites_main_grad = getattr(
                        ctx, "origin_weight_overwrites_main_grad", False
                    )
                    main_grad = None
                    if ctx.fuse_wgrad_accumulation and ctx.requires_wgrad:
                        origin_weight_ref = ctx.origin_weight_ref
                        ctx.origin_weight_ref = None
                        origin_weight = origin_weight_ref() if origin_weight_ref is not None else None
                        assert (
                            origin_weight is not None
                        ), "weight was removed while fuse_wgrad_accumulation=True"
                        # Since main_grad can be modified inplace, it should not be a part of saved_tensors
                        main_grad = ctx.main_grad_func() if weight is not None else None
                        if main_grad is not None and not is_dist_weight:
                            origin_weight.main_grad = main_grad

                    wgrad = None
                    grad_output = grad_outputs[0]
                    if ctx.requires_wgrad:
                        # Figure out whether to output wgrad GEMM directly into main grad
                        if is_dist_weight:
                            accumulate_wgrad_into_param_main_grad = False
                        elif ctx.is_first_microbatch is not None:
                            accumulate_wgrad_into_param_main_grad = (
                                ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                            )
                        else:
                            accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                        wgrad_gemm_kwargs = {
                            "out_dtype": (
                                main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype
                            ),
                            "quantization_params": ctx.grad_weight_quantizer,
                            "accumulate": (
                                accumulate_wgrad_into_param_main_grad
                                if not origin_weight_overwrites_main_grad
                                else False
                            ),
                            "layout": "NT",
                            "out": main_grad if ctx.fuse_wgrad_accumulation else None,
                            "use_split_accumulator": _2X_ACC_WGRAD,
                            "grad": True,
                        }

                        def wgrad_gemm(x, dy):
                            dw, db, *_ = general_gemm(x, dy, **wgrad_gemm_kwargs)
                            return dw, db

                        if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                            ctx.wgrad_store.put([ln_out, grad_output], wgrad_gemm)
                        else:
                            wgrad, _ = wgrad_gemm(ln_out, grad_output)

                    if ctx.requires_wgrad:
                        # Handle custom DDP from mcore.
                        if ctx.fuse_wgrad_accumulation and hasattr(origin_weight, "grad_added_to_main_grad"):
                            origin_weight.grad_added_to_main_grad = True
                            if getattr(origin_weight, "zero_out_wgrad", False):
                                wgrad = get_dummy_wgrad(
                                    list(main_grad.shape),
                                    origin_weight.dtype,
                                    zero=True,
                                )
                            else:
                                wgrad = get_dummy_wgrad(
                                    list(main_grad.shape),
                                    origin_weight.dtype,
                                )
                        elif ctx.fuse_wgrad_accumulation:
                            wgrad = None
                    else:
                        wgrad = None
                    return wgrad
        """,
    ),
    # AMD-AGI/Primus fd1eeab, primus/backends/megatron/core/extensions/primus_turbo.py, _bridge_weight_grad._WeightGradBridge. backward. `fuse_wgrad_accum` is
    # the local flag `_fuse_wgrad_accum_pattern` turns off for FP8 block/MXFP8 and FP4 even with gradient_accumulation_fusion on; choosing dummy vs real gradient
    # on it in the return hands the real wgrad on as `.grad` after it was already added into main_grad and flagged (added again when zero_out_wgrad is set).
    Variant(
        7,
        "blind10-primus-bridge-return-real-grad-on-fuse-flag",
        bug="""
            def _bridge_weight_grad(
                x: torch.Tensor,
                weight: torch.nn.Parameter,
                weight_buffer: PrimusTurboQuantizedTensorPair,
                fuse_wgrad_accum: bool = False,
            ):
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

                        return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype) if fuse_wgrad_accum else grad_quantized_weight, None, None  # bug

                assert isinstance(
                    weight_buffer, PrimusTurboQuantizedTensorPair
                ), "weight_buffer must be a PrimusTurboQuantizedTensorPair"
                assert weight_buffer.data is not None, "weight_buffer.data must not be None"

                x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                    x, weight, weight_buffer.data, weight_buffer.data_t
                )

                if fuse_wgrad_accum:
                    quantized_weight.main_grad = weight.main_grad
                    quantized_weight.grad_added_to_main_grad = weight.grad_added_to_main_grad

                return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        """,
        twin="""
            def _bridge_weight_grad(
                x: torch.Tensor,
                weight: torch.nn.Parameter,
                weight_buffer: PrimusTurboQuantizedTensorPair,
                fuse_wgrad_accum: bool = False,
            ):
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

                assert isinstance(
                    weight_buffer, PrimusTurboQuantizedTensorPair
                ), "weight_buffer must be a PrimusTurboQuantizedTensorPair"
                assert weight_buffer.data is not None, "weight_buffer.data must not be None"

                x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                    x, weight, weight_buffer.data, weight_buffer.data_t
                )

                if fuse_wgrad_accum:
                    quantized_weight.main_grad = weight.main_grad
                    quantized_weight.grad_added_to_main_grad = weight.grad_added_to_main_grad

                return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        """,
    ),
    # NVIDIA-NeMo/Megatron-Bridge 067f987, src/megatron/bridge/peft/lora_layers.py, TEFusedLoRALinear._make_fused_branches. The fused te.ops branches bypass the submodules' own forward,
    # so the DDP / Megatron-FSDP pre-forward hooks of every submodule (the adapter too) must be replayed; they are what unshards the adapter params and exposes their main_grad
    # (`__fsdp_param__` / get_main_grad). Collecting hooks only from `to_wrap` runs the accumulate_into_main_grad ops on adapter params whose main_grad was never made available.
    Variant(
        8,
        "blind10-bridge-fused-lora-hooks-from-base-only",
        bug='''
            class TEFusedLoRALinear(LoRALinear):
                def __init__(self, to_wrap: nn.Module, adapter: nn.Module):
                    super().__init__(to_wrap, adapter)
                    self._fused_branches: Optional[tuple[te.ops.Sequential, te.ops.Sequential]] = None

                def _make_fused_branches(self) -> tuple[te.ops.Sequential, te.ops.Sequential]:
                    """Construct fused modules for main and LoRA branches"""

                    kwargs = {
                        "in_features": self.to_wrap.weight.size(1),
                        "out_features": self.to_wrap.weight.size(0),
                        "tensor_parallel_mode": None,
                        "tensor_parallel_group": None,
                        "sequence_parallel": False,
                    }

                    # wgrad accumulation fusion
                    accumulate_into_main_grad = False
                    if isinstance(self.to_wrap, (te.Linear, te.LayerNormLinear)):
                        accumulate_into_main_grad = self.to_wrap.fuse_wgrad_accumulation
                    kwargs["accumulate_into_main_grad"] = accumulate_into_main_grad

                    # Construct fused branches
                    main_branch = self._make_main_branch(**kwargs)
                    lora_branch = self._make_lora_branch(**kwargs)

                    # Get submodule forward hooks
                    forward_pre_hooks = []
                    forward_post_hooks = []
                    for submodule in self.to_wrap.modules():  # bug
                        for hook in submodule._forward_pre_hooks.values():
                            forward_pre_hooks.append((submodule, hook))
                        for hook in submodule._forward_hooks.values():
                            forward_post_hooks.append((submodule, hook))

                    # Attempt to emulate submodule forward hooks if needed
                    # Note: Assume hooks do not interact with submodule inputs
                    # or outputs since they are internal to the op fuser.
                    if forward_pre_hooks:

                        def forward_pre_hook(module, *_) -> None:
                            for submodule, hook in forward_pre_hooks:
                                hook(submodule, None)

                        main_branch.register_forward_pre_hook(forward_pre_hook)
                    if forward_post_hooks:

                        def forward_post_hook(module, *_) -> None:
                            for submodule, hook in forward_post_hooks:
                                hook(submodule, None, None)

                        lora_branch.register_forward_hook(forward_post_hook)

                    return main_branch, lora_branch

                def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
                    if not self._adapter_enabled:
                        return super().forward(x)
                    if self._fused_branches is None:
                        self._fused_branches = self._make_fused_branches()
                    main_branch, lora_branch = self._fused_branches
                    linear_output, linear_input = main_branch(x)
                    with te.fp8_autocast(enabled=False):
                        out = lora_branch(linear_input, linear_output)
                    return out, None
        ''',
        twin='''
            class TEFusedLoRALinear(LoRALinear):
                def __init__(self, to_wrap: nn.Module, adapter: nn.Module):
                    super().__init__(to_wrap, adapter)
                    self._fused_branches: Optional[tuple[te.ops.Sequential, te.ops.Sequential]] = None

                def _make_fused_branches(self) -> tuple[te.ops.Sequential, te.ops.Sequential]:
                    """Construct fused modules for main and LoRA branches"""

                    kwargs = {
                        "in_features": self.to_wrap.weight.size(1),
                        "out_features": self.to_wrap.weight.size(0),
                        "tensor_parallel_mode": None,
                        "tensor_parallel_group": None,
                        "sequence_parallel": False,
                    }

                    # wgrad accumulation fusion
                    accumulate_into_main_grad = False
                    if isinstance(self.to_wrap, (te.Linear, te.LayerNormLinear)):
                        accumulate_into_main_grad = self.to_wrap.fuse_wgrad_accumulation
                    kwargs["accumulate_into_main_grad"] = accumulate_into_main_grad

                    # Construct fused branches
                    main_branch = self._make_main_branch(**kwargs)
                    lora_branch = self._make_lora_branch(**kwargs)

                    # Get submodule forward hooks
                    forward_pre_hooks = []
                    forward_post_hooks = []
                    for submodule in self.modules():
                        for hook in submodule._forward_pre_hooks.values():
                            forward_pre_hooks.append((submodule, hook))
                        for hook in submodule._forward_hooks.values():
                            forward_post_hooks.append((submodule, hook))

                    # Attempt to emulate submodule forward hooks if needed
                    # Note: Assume hooks do not interact with submodule inputs
                    # or outputs since they are internal to the op fuser.
                    if forward_pre_hooks:

                        def forward_pre_hook(module, *_) -> None:
                            for submodule, hook in forward_pre_hooks:
                                hook(submodule, None)

                        main_branch.register_forward_pre_hook(forward_pre_hook)
                    if forward_post_hooks:

                        def forward_post_hook(module, *_) -> None:
                            for submodule, hook in forward_post_hooks:
                                hook(submodule, None, None)

                        lora_branch.register_forward_hook(forward_post_hook)

                    return main_branch, lora_branch

                def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
                    if not self._adapter_enabled:
                        return super().forward(x)
                    if self._fused_branches is None:
                        self._fused_branches = self._make_fused_branches()
                    main_branch, lora_branch = self._fused_branches
                    linear_output, linear_input = main_branch(x)
                    with te.fp8_autocast(enabled=False):
                        out = lora_branch(linear_input, linear_output)
                    return out, None
        ''',
    ),
    # Autumn1998/Megatron-LM 51f6a39, megatron/core/extensions/transformer_engine.py, _register_hooks_on_fused_impl with _make_te_ops_basic_linear_from_mcore_te_linear
    # (BasicLinear built with accumulate_into_main_grad=fuse_wgrad_accumulation). Pre-forward hooks that do not come from the DDP module (Megatron-FSDP's unshard hook,
    # which sets `__fsdp_param__` and exposes main_grad) must still be replayed before the fused impl runs; dropping them leaves the op without main_grad.
    Variant(
        8,
        "blind10-autumn-te-ops-drop-non-ddp-pre-hooks",
        bug="""
            def _make_te_ops_basic_linear_from_mcore_te_linear(module, *, module_name, output_features=None,
                                                               tensor_parallel_mode=None, tensor_parallel_group=None,
                                                               sequence_parallel=None, rng_state_tracker_function=None):
                weight = module.weight
                if output_features is None:
                    output_features = weight.size(0)
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1),
                    output_features,
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode=tensor_parallel_mode,
                    tensor_parallel_group=tensor_parallel_group,
                    sequence_parallel=bool(sequence_parallel),
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=module.fuse_wgrad_accumulation,
                )
                op.weight = weight
                return op


            class TEFusedOpsMixin:
                def _register_hooks_on_fused_impl(self, fused_impl: torch.nn.Module) -> None:
                    forward_pre_hooks = []
                    forward_post_hooks = []
                    for submodule in self.modules():
                        for hook_id, hook in submodule._forward_pre_hooks.items():
                            with_kwargs = hook_id in submodule._forward_pre_hooks_with_kwargs
                            forward_pre_hooks.append((submodule, hook, with_kwargs))
                        for hook_id, hook in submodule._forward_hooks.items():
                            with_kwargs = hook_id in submodule._forward_hooks_with_kwargs
                            forward_post_hooks.append((submodule, hook, with_kwargs))

                    module_name = self.__class__.__name__

                    # Pre-forward hooks
                    # Note: DDP pre-forward hooks are safe since they do not
                    # interact with input tensor.
                    if forward_pre_hooks:
                        from megatron.core.distributed import distributed_data_parallel

                        forward_pre_hooks = [
                            (submodule, hook, with_kwargs)
                            for submodule, hook, with_kwargs in forward_pre_hooks
                            if inspect.getmodule(hook) == distributed_data_parallel  # bug
                        ]

                        def forward_pre_hook(module, *_) -> None:
                            for submodule, hook, with_kwargs in forward_pre_hooks:
                                if with_kwargs:
                                    ret = hook(submodule, (), {})
                                else:
                                    ret = hook(submodule, ())
                                if ret is not None:
                                    raise RuntimeError(
                                        f"{module_name} module does not expose intermediate tensors, "
                                        "but submodule has pre-forward hook that modifies input tensor."
                                    )

                        fused_impl.register_forward_pre_hook(forward_pre_hook)
        """,
        twin="""
            def _make_te_ops_basic_linear_from_mcore_te_linear(module, *, module_name, output_features=None,
                                                               tensor_parallel_mode=None, tensor_parallel_group=None,
                                                               sequence_parallel=None, rng_state_tracker_function=None):
                weight = module.weight
                if output_features is None:
                    output_features = weight.size(0)
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1),
                    output_features,
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode=tensor_parallel_mode,
                    tensor_parallel_group=tensor_parallel_group,
                    sequence_parallel=bool(sequence_parallel),
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=module.fuse_wgrad_accumulation,
                )
                op.weight = weight
                return op


            class TEFusedOpsMixin:
                def _register_hooks_on_fused_impl(self, fused_impl: torch.nn.Module) -> None:
                    forward_pre_hooks = []
                    forward_post_hooks = []
                    for submodule in self.modules():
                        for hook_id, hook in submodule._forward_pre_hooks.items():
                            with_kwargs = hook_id in submodule._forward_pre_hooks_with_kwargs
                            forward_pre_hooks.append((submodule, hook, with_kwargs))
                        for hook_id, hook in submodule._forward_hooks.items():
                            with_kwargs = hook_id in submodule._forward_hooks_with_kwargs
                            forward_post_hooks.append((submodule, hook, with_kwargs))

                    module_name = self.__class__.__name__

                    # Pre-forward hooks
                    # Note: DDP pre-forward hooks are safe since they do not
                    # interact with input tensor.
                    if forward_pre_hooks:
                        from megatron.core.distributed import distributed_data_parallel

                        if any(
                            inspect.getmodule(hook) != distributed_data_parallel
                            for _, hook, _ in forward_pre_hooks
                        ):
                            warnings.warn(
                                f"{module_name} module has a submodule with a pre-forward hook. "
                                f"{module_name} module does not expose intermediate tensors, "
                                "so the hook may have incorrect behavior if it attempts to "
                                "access the input tensor."
                            )

                        def forward_pre_hook(module, *_) -> None:
                            for submodule, hook, with_kwargs in forward_pre_hooks:
                                if with_kwargs:
                                    ret = hook(submodule, (), {})
                                else:
                                    ret = hook(submodule, ())
                                if ret is not None:
                                    raise RuntimeError(
                                        f"{module_name} module does not expose intermediate tensors, "
                                        "but submodule has pre-forward hook that modifies input tensor."
                                    )

                        fused_impl.register_forward_pre_hook(forward_pre_hook)
        """,
    ),
)
