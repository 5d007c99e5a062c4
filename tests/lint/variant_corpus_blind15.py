"""The fifteenth blind corpus (H-blind15): sixteen class variants of issue #19, two per class,
written without reading the linter or its tests, from repositories no earlier corpus used.

Sources (repository, commit, path, function):

- HYGON-AI/Megatron-LM-das 0685d1f
  - hcu_megatron/core/extensions/primus_turbo.py: ``_bridge_weight_grad`` / ``_WeightGradBridge.backward``
  - hcu_megatron/core/memory/common.py: ``linear_forward_main_grad_wrapper``, ``linear_backward_main_grad_wrapper``
  - hcu_megatron/core/models/common/language_module/language_module.py: ``set_shared_embedding_from_dual_chunk``
  - hcu_megatron/core/tensor_parallel/vocab_output.py: ``_ForwardImpl.backward``
  - hcu_megatron/core/tensor_parallel/layers.py: ``AGLinear.backward``, ``LinearRS.backward``
  - hcu_megatron/core/transformer/hyper_connection.py: ``_tilelang_forward``
  - hcu_megatron/core/transformer/multi_token_prediction.py: ``MultiTokenPredictionLayer.backward_dw``,
    ``MultiTokenPredictionBlock.forward`` / ``backward_dw``
  - hcu_megatron/core/transformer/transformer_layer.py: ``TransformerLayer.backward_dw``
    (with transformer_block.py ``TransformerBlock.backward_dw``, models/gpt/gpt_model.py ``GPTModel.backward_dw``)
- MooreThreads/MT-MegatronLM e53585c
  - musa_patch/linear_with_grad_accumulation_and_async_allreduce.py:
    ``LinearWithGradAccumulationAndAsyncCommunication.backward``
  - musa_patch/multi_token_prediction/finalize_model_grads.py: ``_allreduce_mtp_word_embedding_grads``
- swiss-ai/Megatron-LM 81d44dbe
  - megatron/core/transformer/cuda_graphs.py: ``_CudagraphReplayNode.backward``, ``_CudaGraphRunner.get_input_grads``
- alibaba/ROLL 8eb27cc2
  - roll/third_party/megatron/offload_states_patch.py: ``move_grad_data_to_device``
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # Class 1. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/extensions/primus_turbo.py,
    # _bridge_weight_grad / _WeightGradBridge.backward. Dropped: the gfx1250 Triton add, the
    # PrimusTurboQuantizedTensorPair wrapping. The bridge sits between the Parameter and its FP8
    # (quantized) stand-in; the grouped GEMM's wgrad arrives for the stand-in. The regression
    # marks the quantized stand-in (also saved, for the OPT-1 shims) instead of the Parameter on
    # the fused path: the Parameter's grad_added_to_main_grad stays False, so the DDP hook adds
    # the uninitialised dummy into main_grad on top of the wgrad the GEMM accumulated there.
    Variant(
        1,
        "blind15-hygon-turbo-bridge-flag-on-quantized",
        bug="""
        def _bridge_weight_grad(x, weight, weight_buffer):
            class _WeightGradBridge(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, quantized_weight, quantized_weight_trans):
                    ctx.save_for_backward(weight, quantized_weight)
                    return x, quantized_weight, quantized_weight_trans

                @staticmethod
                def backward(ctx, grad_x, grad_quantized_weight, grad_quantized_weight_trans):
                    weight, quantized_weight = ctx.saved_tensors
                    assert hasattr(weight, "main_grad"), "weight.main_grad should be set before backward pass."
                    assert hasattr(weight, "grad_added_to_main_grad")
                    if grad_quantized_weight is None:
                        # OPT-1: the grouped GEMM backward already accumulated into main_grad.
                        quantized_weight.grad_added_to_main_grad = True  # bug
                    else:
                        weight.main_grad.add_(grad_quantized_weight)
                        weight.grad_added_to_main_grad = True
                    return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype), None, None

            x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                x, weight, weight_buffer.data, weight_buffer.data_t
            )
            return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        """,
        twin="""
        def _bridge_weight_grad(x, weight, weight_buffer):
            class _WeightGradBridge(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight, quantized_weight, quantized_weight_trans):
                    ctx.save_for_backward(weight, quantized_weight)
                    return x, quantized_weight, quantized_weight_trans

                @staticmethod
                def backward(ctx, grad_x, grad_quantized_weight, grad_quantized_weight_trans):
                    weight, quantized_weight = ctx.saved_tensors
                    assert hasattr(weight, "main_grad"), "weight.main_grad should be set before backward pass."
                    assert hasattr(weight, "grad_added_to_main_grad")
                    if grad_quantized_weight is None:
                        # OPT-1: the grouped GEMM backward already accumulated into main_grad.
                        weight.grad_added_to_main_grad = True
                    else:
                        weight.main_grad.add_(grad_quantized_weight)
                        weight.grad_added_to_main_grad = True
                    return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype), None, None

            x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                x, weight, weight_buffer.data, weight_buffer.data_t
            )
            return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)
        """,
    ),
    # Class 1. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/memory/common.py,
    # linear_forward_main_grad_wrapper / linear_backward_main_grad_wrapper (swap-attention
    # feature). Dropped: the long argument list (folded into *args). Under swap-attention the
    # saved tensors are swapped to host and back, so the weight unpacked from ctx.saved_tensors
    # is a stand-in without main_grad; the wrapper keeps the Parameter on ctx.weight and hands
    # the wrapped backward a ctx whose saved_tensors carry the Parameter. The regression copies
    # the swapped saved tensors through unchanged, so the wgrad GEMM of the wrapped backward
    # writes (or tries to write) ``weight.main_grad`` of the restored copy, not the Parameter's.
    Variant(
        1,
        "blind15-hygon-swap-ctx-saved-weight",
        bug="""
        def linear_forward_main_grad_wrapper(forward_func):
            @wraps(forward_func)
            def linear_forward_main_grad(ctx, inputs, weight, bias, *args):
                output = forward_func(ctx, inputs, weight, bias, *args)
                ctx.weight = weight
                return output

            return linear_forward_main_grad


        def linear_backward_main_grad_wrapper(backward_func):
            @wraps(backward_func)
            def linear_backward_main_grad(ctx, grad_output):
                class NewCtx:
                    pass
                new_ctx = NewCtx()
                inputs, weight = ctx.saved_tensors
                for key in dir(ctx):
                    if key == 'saved_tensors':
                        setattr(new_ctx, 'saved_tensors', (inputs, weight))  # bug
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
            def linear_forward_main_grad(ctx, inputs, weight, bias, *args):
                output = forward_func(ctx, inputs, weight, bias, *args)
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
    # Class 2. HYGON-AI/Megatron-LM-das 0685d1f,
    # hcu_megatron/core/models/common/language_module/language_module.py,
    # set_shared_embedding_from_dual_chunk (+ get_shared_embedding_from_dual_chunk, used by
    # MultiTokenPredictionBlock.forward to re-bind embedding.word_embeddings.weight under the
    # dualpipev schedule). Dropped: unwrap_model details. The regression wraps the shared
    # embedding's storage in a fresh Parameter: the MTP chunk's embedding then runs on a
    # Parameter with no main_grad, no grad_added_to_main_grad, no shared/zero_out_wgrad marks and
    # no DDP hook, so the MTP embedding wgrad never reaches the shared weight's main_grad.
    Variant(
        2,
        "blind15-hygon-dualpipe-shared-embedding-rewrapped",
        bug="""
        _SHARED_EMBEDDING = None


        def get_shared_embedding_from_dual_chunk():
            assert _SHARED_EMBEDDING is not None
            return _SHARED_EMBEDDING


        def set_shared_embedding_from_dual_chunk(model1, model2, enable_vocab_parallel=False):
            global _SHARED_EMBEDDING
            if _SHARED_EMBEDDING is not None:
                return

            model1 = unwrap_model(model1)
            model2 = unwrap_model(model2)

            if enable_vocab_parallel:
                owner = model1 if model1.split_vocab_embedding else model2 if model2.split_vocab_embedding else None
            else:
                owner = model1 if model1.pre_process else model2 if model2.pre_process else None
            if owner is not None:
                _SHARED_EMBEDDING = torch.nn.Parameter(owner.embedding.word_embeddings.weight.data)  # bug
        """,
        twin="""
        _SHARED_EMBEDDING = None


        def get_shared_embedding_from_dual_chunk():
            assert _SHARED_EMBEDDING is not None
            return _SHARED_EMBEDDING


        def set_shared_embedding_from_dual_chunk(model1, model2, enable_vocab_parallel=False):
            global _SHARED_EMBEDDING
            if _SHARED_EMBEDDING is not None:
                return

            model1 = unwrap_model(model1)
            model2 = unwrap_model(model2)

            if enable_vocab_parallel:
                owner = model1 if model1.split_vocab_embedding else model2 if model2.split_vocab_embedding else None
            else:
                owner = model1 if model1.pre_process else model2 if model2.pre_process else None
            if owner is not None:
                _SHARED_EMBEDDING = owner.embedding.word_embeddings.weight
        """,
    ),
    # Class 2. MooreThreads/MT-MegatronLM e53585c,
    # musa_patch/multi_token_prediction/finalize_model_grads.py,
    # _allreduce_mtp_word_embedding_grads. Dropped: the stage selection for interleaved models.
    # The function all-reduces the tied embedding's main_grad in place and re-binds the
    # attribute to the (resharded) same storage. The regression reduces a contiguous copy and
    # re-binds ``main_grad`` to it: main_grad stops being a view into the DDP grad buffer that
    # the (distributed) optimizer reads, so the cross-stage sum never reaches the optimizer and
    # later microbatch writes land in an orphaned tensor.
    Variant(
        2,
        "blind15-mtmusa-mtp-embedding-grad-rebound-copy",
        bug="""
        def _allreduce_mtp_word_embedding_grads(model, config):
            if (
                parallel_state.is_rank_in_mtp_embedding_group(ignore_virtual=True)
                and torch.distributed.get_world_size(parallel_state.get_mtp_embedding_group()) > 1
            ):
                if parallel_state.is_pipeline_first_stage(ignore_virtual=True):
                    model_module = model[0]
                elif parallel_state.is_pipeline_last_stage(ignore_virtual=True):
                    model_module = model[-1]
                else:
                    model_module = model[0]

                model_module = get_attr_wrapped_model(model_module, 'pre_process', return_model_obj=True)
                if model_module.share_embeddings_and_output_weights:
                    weight = model_module.embedding.word_embeddings.weight
                    grad_attr = "main_grad" if hasattr(weight, "main_grad") else "grad"
                    orig_grad = getattr(weight, grad_attr)
                    grad = _unshard_if_dtensor(orig_grad).contiguous().clone()  # bug
                    torch.distributed.all_reduce(grad, group=parallel_state.get_embedding_group())
                    setattr(weight, grad_attr, _reshard_if_dtensor(grad, orig_grad))
        """,
        twin="""
        def _allreduce_mtp_word_embedding_grads(model, config):
            if (
                parallel_state.is_rank_in_mtp_embedding_group(ignore_virtual=True)
                and torch.distributed.get_world_size(parallel_state.get_mtp_embedding_group()) > 1
            ):
                if parallel_state.is_pipeline_first_stage(ignore_virtual=True):
                    model_module = model[0]
                elif parallel_state.is_pipeline_last_stage(ignore_virtual=True):
                    model_module = model[-1]
                else:
                    model_module = model[0]

                model_module = get_attr_wrapped_model(model_module, 'pre_process', return_model_obj=True)
                if model_module.share_embeddings_and_output_weights:
                    weight = model_module.embedding.word_embeddings.weight
                    grad_attr = "main_grad" if hasattr(weight, "main_grad") else "grad"
                    orig_grad = getattr(weight, grad_attr)
                    grad = _unshard_if_dtensor(orig_grad)
                    torch.distributed.all_reduce(grad, group=parallel_state.get_embedding_group())
                    setattr(weight, grad_attr, _reshard_if_dtensor(grad, orig_grad))
        """,
    ),
    # Class 3. MooreThreads/MT-MegatronLM e53585c,
    # musa_patch/linear_with_grad_accumulation_and_async_allreduce.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward. Dropped: the all-gather /
    # reduce-scatter set-up, the fp16 kernel branch. The regression hoists the
    # ``grad_added_to_main_grad`` mark out of the fused branch into a trailing getattr check,
    # so it also fires when gradient_accumulation_fusion is off: nothing wrote main_grad, the
    # real grad_weight is returned, and the DDP hook (seeing the flag) drops it.
    Variant(
        3,
        "blind15-mtmusa-linear-flag-hoisted-past-fusion",
        bug="""
        def backward(ctx, grad_output):
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
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                if hasattr(weight, 'grad_added_to_main_grad'):
                    if getattr(weight, 'zero_out_wgrad', False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            if getattr(weight, 'grad_added_to_main_grad', None) is not None:
                weight.grad_added_to_main_grad = True  # bug
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None
        """,
        twin="""
        def backward(ctx, grad_output):
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
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                if hasattr(weight, 'grad_added_to_main_grad'):
                    if getattr(weight, 'zero_out_wgrad', False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None
        """,
    ),
    # Class 3 (converse). HYGON-AI/Megatron-LM-das 0685d1f,
    # hcu_megatron/core/tensor_parallel/vocab_output.py, _ForwardImpl.backward (vocab-parallel
    # output layer fused with cross entropy). Dropped: the softmax/grad-input computation and
    # the all-reduce plumbing. The fused kernel accumulates the output weight's wgrad into
    # main_grad; for a weight that does not carry grad_added_to_main_grad, the regression hands
    # a real wgrad on "so the hooks fire" instead of None: main_grad was written, no flag says
    # so, and the DDP hook adds the same wgrad again (double count).
    Variant(
        3,
        "blind15-hygon-vocab-output-real-wgrad-after-fused",
        bug="""
        def backward(ctx, grad_output, *_):
            input, weight, softmax, target_mask, masked_target_1d, sum_exp_logits, logits_max = ctx.saved_tensors
            grad_output = _vocab_output_grad(ctx, softmax, target_mask, masked_target_1d, sum_exp_logits, grad_output)
            grad_input = grad_output.matmul(weight)
            total_input = input
            wgrad_compute = True
            if wgrad_compute:
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                if hasattr(weight, 'grad_added_to_main_grad'):
                    if getattr(weight, 'zero_out_wgrad', False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = grad_output.t().matmul(total_input)  # bug
            else:
                grad_weight = grad_output.t().matmul(total_input)
            return grad_input, grad_weight, None, None, None, None, None, None, None, None, None
        """,
        twin="""
        def backward(ctx, grad_output, *_):
            input, weight, softmax, target_mask, masked_target_1d, sum_exp_logits, logits_max = ctx.saved_tensors
            grad_output = _vocab_output_grad(ctx, softmax, target_mask, masked_target_1d, sum_exp_logits, grad_output)
            grad_input = grad_output.matmul(weight)
            total_input = input
            wgrad_compute = True
            if wgrad_compute:
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                if hasattr(weight, 'grad_added_to_main_grad'):
                    if getattr(weight, 'zero_out_wgrad', False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            return grad_input, grad_weight, None, None, None, None, None, None, None, None, None
        """,
    ),
    # Class 4. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/tensor_parallel/layers.py,
    # AGLinear.backward (flux all-gather linear). Dropped: the flux GEMM/all-gather set-up, the
    # zero_out_wgrad dummy branch, TE's get_dummy_wgrad. The Megatron-FSDP branch (selected by
    # ``__fsdp_param__``, i.e. by the sharding strategy) writes main_grad with ``out=``; the DDP
    # branch must accumulate. The regression routes bf16/fp16 main_grad of the DDP branch to a
    # plain ``torch.matmul(..., out=weight.main_grad)``: every microbatch overwrites the
    # accumulated gradient, so all but the last are lost.
    Variant(
        4,
        "blind15-hygon-aglinear-bf16-matmul-out",
        bug="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input, grad_input = _flux_ag_dgrad(ctx, input, weight, grad_output)
            wgrad_compute = weight.requires_grad
            if wgrad_compute:
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if hasattr(weight, "__fsdp_param__"):
                        weight.main_grad = weight.get_main_grad()
                        if te_general_gemm is not None:
                            te_general_gemm(total_input, grad_output, out_dtype=weight.main_grad.dtype, layout="NT", out=weight.main_grad, grad=True)
                        else:
                            torch.matmul(grad_output.t(), total_input, out=weight.main_grad)
                    else:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                        elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                            torch.matmul(grad_output.t(), total_input, out=weight.main_grad)  # bug
                        else:
                            raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                if hasattr(weight, 'grad_added_to_main_grad'):
                    grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None
        """,
        twin="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input, grad_input = _flux_ag_dgrad(ctx, input, weight, grad_output)
            wgrad_compute = weight.requires_grad
            if wgrad_compute:
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if hasattr(weight, "__fsdp_param__"):
                        weight.main_grad = weight.get_main_grad()
                        if te_general_gemm is not None:
                            te_general_gemm(total_input, grad_output, out_dtype=weight.main_grad.dtype, layout="NT", out=weight.main_grad, grad=True)
                        else:
                            torch.matmul(grad_output.t(), total_input, out=weight.main_grad)
                    else:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                        elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                        else:
                            raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                if hasattr(weight, 'grad_added_to_main_grad'):
                    grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None
        """,
    ),
    # Class 4. MooreThreads/MT-MegatronLM e53585c,
    # musa_patch/linear_with_grad_accumulation_and_async_allreduce.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward. The MUSA port carries a
    # commented-out torch fallback ``torch.addmm(weight.main_grad, grad_output.t(), total_input,
    # out=weight.main_grad)`` next to the apex kernels; the twin enables it for the dtypes the
    # apex kernels do not take (the snapshot raises there). The regression writes the fallback
    # as ``torch.mm(..., out=weight.main_grad)``, dropping the ``weight.main_grad`` addend: the
    # buffer is overwritten on every microbatch in code that reads neither
    # ``overwrite_main_grad`` nor the sharding mode.
    Variant(
        4,
        "blind15-mtmusa-linear-fallback-mm-out",
        bug="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            wgrad_compute = True
            total_input = input
            grad_input = grad_output.matmul(weight)
            if wgrad_compute:
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if weight.main_grad.dtype == torch.float32 and _HAVE_APEX_WGRAD:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    elif weight.main_grad.dtype in (torch.float16, torch.bfloat16) and _HAVE_APEX_WGRAD:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                    else:
                        torch.mm(grad_output.t(), total_input, out=weight.main_grad)  # bug
                if hasattr(weight, 'grad_added_to_main_grad'):
                    zero = getattr(weight, 'zero_out_wgrad', False)
                    grad_weight = (torch.zeros if zero else torch.empty)(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None
        """,
        twin="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            wgrad_compute = True
            total_input = input
            grad_input = grad_output.matmul(weight)
            if wgrad_compute:
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if weight.main_grad.dtype == torch.float32 and _HAVE_APEX_WGRAD:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                    elif weight.main_grad.dtype in (torch.float16, torch.bfloat16) and _HAVE_APEX_WGRAD:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                    else:
                        torch.addmm(weight.main_grad, grad_output.t(), total_input, out=weight.main_grad)
                if hasattr(weight, 'grad_added_to_main_grad'):
                    zero = getattr(weight, 'zero_out_wgrad', False)
                    grad_weight = (torch.zeros if zero else torch.empty)(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None
        """,
    ),
    # Class 5. swiss-ai/Megatron-LM 81d44dbe, megatron/core/transformer/cuda_graphs.py,
    # _CudagraphReplayNode.backward (+ _CudaGraphRunner.get_input_grads). Dropped: the input
    # copy assertions, the is_first_layer clone. On replay the fused wgrad GEMMs inside the
    # graph write main_grad, but no Python runs to set grad_added_to_main_grad, so the replay
    # node restores the flags from the capture's ground truth before building the dummy wgrads.
    # The regression nests that restore under the FP8 scale-update branch: on a bf16 replay the
    # flags stay False, get_input_grads hands back the captured (None) wgrads, and the DDP
    # grad-ready hooks fire with neither a flag nor a dummy .grad.
    Variant(
        5,
        "blind15-swissai-cudagraph-replay-flags-under-fp8",
        bug="""
        class _CudagraphReplayNode(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                runner = ctx.runner
                assert runner.bwd_graph is not None
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                runner.bwd_graph.replay()
                runner.status = _GraphStatus.FWD_READY

                if runner.fp8_enabled and ctx.is_first_fp8_module:
                    FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)
                    for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():  # bug
                        param.grad_added_to_main_grad = grad_added  # bug

                output_grads = tuple(b.detach() if b is not None else b for b in runner.get_input_grads())
                return None, None, *output_grads


        class _CudaGraphRunner(torch.nn.Module):
            def get_input_grads(self):
                if not self.fuse_wgrad_accumulation:
                    return self.static_grad_inputs
                num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
                dgrads = self.static_grad_inputs[:num_dgrads]
                wgrads = self.static_grad_inputs[num_dgrads:]
                wgrads_with_placeholders = []
                for idx, param in enumerate(self.base_module.parameters()):
                    if getattr(param, "grad_added_to_main_grad", False):
                        factory = torch.zeros if getattr(param, "zero_out_wgrad", False) else torch.empty
                        wgrad = factory(param.main_grad.shape, dtype=param.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        wgrad = wgrads[idx]
                    wgrads_with_placeholders.append(wgrad)
                return tuple(dgrads + wgrads_with_placeholders)
        """,
        twin="""
        class _CudagraphReplayNode(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                runner = ctx.runner
                assert runner.bwd_graph is not None
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                runner.bwd_graph.replay()
                runner.status = _GraphStatus.FWD_READY

                if runner.fp8_enabled and ctx.is_first_fp8_module:
                    FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)
                for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():
                    param.grad_added_to_main_grad = grad_added

                output_grads = tuple(b.detach() if b is not None else b for b in runner.get_input_grads())
                return None, None, *output_grads


        class _CudaGraphRunner(torch.nn.Module):
            def get_input_grads(self):
                if not self.fuse_wgrad_accumulation:
                    return self.static_grad_inputs
                num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
                dgrads = self.static_grad_inputs[:num_dgrads]
                wgrads = self.static_grad_inputs[num_dgrads:]
                wgrads_with_placeholders = []
                for idx, param in enumerate(self.base_module.parameters()):
                    if getattr(param, "grad_added_to_main_grad", False):
                        factory = torch.zeros if getattr(param, "zero_out_wgrad", False) else torch.empty
                        wgrad = factory(param.main_grad.shape, dtype=param.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        wgrad = wgrads[idx]
                    wgrads_with_placeholders.append(wgrad)
                return tuple(dgrads + wgrads_with_placeholders)
        """,
    ),
    # Class 5. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/transformer/hyper_connection.py,
    # HyperConnectionTKModule._tilelang_forward. Dropped: logging, nvtx ranges. TileKernels'
    # _MHCFnNormwMerge backward writes norm_weight's wgrad straight into ``.main_grad`` and returns
    # None whenever the tensor it gets carries main_grad; it sets no grad_added_to_main_grad and
    # returns no dummy. The module therefore hands it a clone when the Parameter has main_grad,
    # so autograd materialises a real .grad for the Parameter and the DDP hook accumulates and
    # reduces it. The regression inverts the conditional expression: with main_grad present the
    # Parameter itself goes in, the kernel writes main_grad silently, and the Parameter's
    # grad-ready hook never gets a gradient (no flag, no dummy): under overlap_grad_reduce the
    # bucket never becomes ready; without it the norm weight is never reduced across DP.
    Variant(
        5,
        "blind15-hygon-mhc-norm-weight-clone-inverted",
        bug="""
        def _tilelang_forward(self, hidden_states):
            from tile_kernels.modeling.mhc import mhc_pre
            s, b, nC = hidden_states.shape
            residual_tk = hidden_states.view(s, b, self.n, self.block_size)

            # TileKernels' _MHCFnNormwMerge backward writes directly into .main_grad
            # and returns None for fn/norm_weight when those attributes exist.
            norm_weight = self.norm_weight.clone() if getattr(self.norm_weight, 'main_grad', None) is None else self.norm_weight  # bug

            layer_input, (post_mix, comb_mix) = mhc_pre(
                residual_tk,
                self.mapping_proj.weight.float(),
                self.scale,
                self.base,
                norm_eps=self.norm_eps,
                norm_weight=norm_weight,
                mhc_mult=self.n,
                post_mult_value=self.post_mult_value,
                pre_eps=self.pre_eps,
                sinkhorn_eps=self.sinkhorn_eps,
                sinkhorn_repeat=self.sinkhorn_iterations,
            )
            self._log_stats(comb_mix)
            return layer_input, comb_mix, post_mix
        """,
        twin="""
        def _tilelang_forward(self, hidden_states):
            from tile_kernels.modeling.mhc import mhc_pre
            s, b, nC = hidden_states.shape
            residual_tk = hidden_states.view(s, b, self.n, self.block_size)

            # TileKernels' _MHCFnNormwMerge backward writes directly into .main_grad
            # and returns None for fn/norm_weight when those attributes exist.
            norm_weight = self.norm_weight.clone() if getattr(self.norm_weight, 'main_grad', None) is not None else self.norm_weight

            layer_input, (post_mix, comb_mix) = mhc_pre(
                residual_tk,
                self.mapping_proj.weight.float(),
                self.scale,
                self.base,
                norm_eps=self.norm_eps,
                norm_weight=norm_weight,
                mhc_mult=self.n,
                post_mult_value=self.post_mult_value,
                pre_eps=self.pre_eps,
                sinkhorn_eps=self.sinkhorn_eps,
                sinkhorn_repeat=self.sinkhorn_iterations,
            )
            self._log_stats(comb_mix)
            return layer_input, comb_mix, post_mix
        """,
    ),
    # Class 6. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/transformer/multi_token_prediction.py,
    # MultiTokenPredictionLayer.backward_dw (kept whole) and MultiTokenPredictionBlock.forward /
    # backward_dw (shortened). With delay_wgrad_compute (forced on by
    # the dualpipev / zb_h1 schedules) the MTP layer's backward_dw must run both the eh_proj
    # linear's and the inner transformer layer's delayed wgrads. The regression returns the
    # inner layer's backward_dw early, so eh_proj's weight gradient is never computed into
    # main_grad (its wgrad store keeps growing).
    Variant(
        6,
        "blind15-hygon-mtp-layer-backward-dw-early-return",
        bug="""
        class MultiTokenPredictionLayer(MegatronModule):
            def backward_dw(self):
                inner = getattr(self, "mtp_model_layer", None)
                if inner is not None and callable(getattr(inner, "backward_dw", None)):
                    return inner.backward_dw()  # bug
                self.eh_proj.backward_dw()


        class MultiTokenPredictionBlock(MegatronModule):
            def forward(self, input_ids, position_ids, hidden_states, attention_mask, embedding=None, **kwargs):
                offset = get_mtp_layer_offset(self.config, self.vp_stage)
                hidden_states_list = list(torch.chunk(hidden_states, 1 + offset, dim=0))
                hidden_states = hidden_states_list[offset]
                for iteration in range(self.config.mtp_num_layers):
                    layer_idx = 0 if self.mtp_use_repeated_layer else iteration
                    (hidden_states, input_ids, position_ids, _) = self.layers[layer_idx](
                        input_ids=input_ids, position_ids=position_ids, hidden_states=hidden_states,
                        attention_mask=attention_mask, embedding=embedding, **kwargs,
                    )
                    hidden_states_list.append(hidden_states)
                return torch.cat(hidden_states_list, dim=0)

            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()
        """,
        twin="""
        class MultiTokenPredictionLayer(MegatronModule):
            def backward_dw(self):
                self.eh_proj.backward_dw()
                inner = getattr(self, "mtp_model_layer", None)
                if inner is not None and callable(getattr(inner, "backward_dw", None)):
                    inner.backward_dw()


        class MultiTokenPredictionBlock(MegatronModule):
            def forward(self, input_ids, position_ids, hidden_states, attention_mask, embedding=None, **kwargs):
                offset = get_mtp_layer_offset(self.config, self.vp_stage)
                hidden_states_list = list(torch.chunk(hidden_states, 1 + offset, dim=0))
                hidden_states = hidden_states_list[offset]
                for iteration in range(self.config.mtp_num_layers):
                    layer_idx = 0 if self.mtp_use_repeated_layer else iteration
                    (hidden_states, input_ids, position_ids, _) = self.layers[layer_idx](
                        input_ids=input_ids, position_ids=position_ids, hidden_states=hidden_states,
                        attention_mask=attention_mask, embedding=embedding, **kwargs,
                    )
                    hidden_states_list.append(hidden_states)
                return torch.cat(hidden_states_list, dim=0)

            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()
        """,
    ),
    # Class 6. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/transformer/transformer_layer.py,
    # TransformerLayer.backward_dw (patched over megatron.core's), with the callers that flush it
    # (TransformerBlock.backward_dw, hcu_megatron/core/models/gpt/gpt_model.py GPTModel.backward_dw). For an MoE layer the MLP's backward_dw takes which expert groups to flush; the
    # regression passes shared_experts=False (as if the shared experts' wgrad had been
    # overlapped elsewhere), so with delay_wgrad_compute the shared experts' delayed weight
    # gradients are never computed and their main_grad stays stale.
    Variant(
        6,
        "blind15-hygon-layer-backward-dw-shared-experts-off",
        bug="""
        class TransformerLayer(MegatronModule):
            def backward_dw(self):
                self.self_attention.backward_dw()
                if self.is_moe_layer:
                    self.mlp.backward_dw(routed_experts=True, shared_experts=False)  # bug
                    return
                self.mlp.backward_dw()


        class TransformerBlock(MegatronModule):
            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()


        class GPTModel(LanguageModule):
            def backward_dw(self):
                self.decoder.backward_dw()

                if self.mtp_process:
                    self.mtp.backward_dw()
        """,
        twin="""
        class TransformerLayer(MegatronModule):
            def backward_dw(self):
                self.self_attention.backward_dw()
                if self.is_moe_layer:
                    self.mlp.backward_dw(routed_experts=True, shared_experts=True)
                    return
                self.mlp.backward_dw()


        class TransformerBlock(MegatronModule):
            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()


        class GPTModel(LanguageModule):
            def backward_dw(self):
                self.decoder.backward_dw()

                if self.mtp_process:
                    self.mtp.backward_dw()
        """,
    ),
    # Class 7. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/tensor_parallel/layers.py,
    # LinearRS.backward (flux GEMM + reduce-scatter linear). Dropped: the flux dgrad kernel set-up,
    # the fp16 branch and the TE dummy cache. The Megatron-FSDP branch (``__fsdp_param__``)
    # overwrites main_grad with matmul(out=); the DDP branch accumulates. Both wrote main_grad,
    # so both must mark the Parameter and return a dummy. The regression picks dummy-versus-real
    # in a conditional expression on the local ``fsdp_overwrite`` flag: on the FSDP path the
    # real wgrad is returned after main_grad was overwritten, with no flag, and the hook adds it
    # again.
    Variant(
        7,
        "blind15-hygon-linears-fsdp-real-wgrad-condexpr",
        bug="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            total_grad_output, grad_input = _flux_rs_dgrad(ctx, input, weight, grad_output)
            wgrad_compute = weight.requires_grad
            total_input = prepare_input_tensor_for_wgrad_compute(input)
            fsdp_overwrite = hasattr(weight, "__fsdp_param__")

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if fsdp_overwrite:
                        weight.main_grad = weight.get_main_grad()
                        torch.matmul(total_grad_output.t(), total_input, out=weight.main_grad)
                    elif weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, total_grad_output, weight.main_grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                if hasattr(weight, 'grad_added_to_main_grad'):
                    zero = getattr(weight, 'zero_out_wgrad', False)
                    dummy = (torch.zeros if zero else torch.empty)(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    grad_weight = total_grad_output.t().matmul(total_input) if fsdp_overwrite else dummy  # bug
                    weight.grad_added_to_main_grad = not fsdp_overwrite  # bug
                else:
                    grad_weight = None
            else:
                grad_weight = total_grad_output.t().matmul(total_input)
            grad_bias = total_grad_output.sum(dim=0) if ctx.use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None
        """,
        twin="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            total_grad_output, grad_input = _flux_rs_dgrad(ctx, input, weight, grad_output)
            wgrad_compute = weight.requires_grad
            total_input = prepare_input_tensor_for_wgrad_compute(input)
            fsdp_overwrite = hasattr(weight, "__fsdp_param__")

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if fsdp_overwrite:
                        weight.main_grad = weight.get_main_grad()
                        torch.matmul(total_grad_output.t(), total_input, out=weight.main_grad)
                    elif weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, total_grad_output, weight.main_grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                if hasattr(weight, 'grad_added_to_main_grad'):
                    zero = getattr(weight, 'zero_out_wgrad', False)
                    dummy = (torch.zeros if zero else torch.empty)(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    grad_weight = dummy
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = total_grad_output.t().matmul(total_input)
            grad_bias = total_grad_output.sum(dim=0) if ctx.use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None
        """,
    ),
    # Class 7. MooreThreads/MT-MegatronLM e53585c,
    # musa_patch/linear_with_grad_accumulation_and_async_allreduce.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward. Dropped: the all-gather /
    # reduce-scatter plumbing, the fp16 kernel. ``wgrad_compute`` is a local flag that the
    # wgrad-deferral buffer switches off (the wgrad is computed into main_grad later, when the
    # buffer is drained); the op-level ``gradient_accumulation_fusion`` still requires the flag
    # and the dummy. The regression chooses what goes back in the weight slot on the local flag
    # inside the return: deferred microbatches return None, the Parameter's AccumulateGrad never
    # runs, and its DDP grad-ready hook never fires for them.
    Variant(
        7,
        "blind15-mtmusa-linear-return-gated-on-wgrad-compute",
        bug="""
        def backward(ctx, grad_output):
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
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                if hasattr(weight, 'grad_added_to_main_grad'):
                    grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, (grad_weight if wgrad_compute else None), grad_bias, None, None, None, None, None  # bug
        """,
        twin="""
        def backward(ctx, grad_output):
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
                grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                if hasattr(weight, 'grad_added_to_main_grad'):
                    grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None
        """,
    ),
    # Class 8. alibaba/ROLL 8eb27cc2, roll/third_party/megatron/offload_states_patch.py,
    # move_grad_data_to_device. Dropped: the commented pin-memory path, the bucket re-views (kept
    # one). RL training offloads Megatron's grad buffers to host between rollouts, parking every
    # ``param.main_grad`` on a one-element host placeholder; the onload must point each
    # param.main_grad back into the fresh device buffer before the fused-wgrad linears run. The
    # regression re-views main_grad only inside the hook-registration branch, which callers skip
    # when hooks are already installed (skip_grad_hook_register=True): the fused wgrad GEMMs
    # then write into the stale one-element host placeholder instead of the grad buffer.
    Variant(
        8,
        "blind15-roll-onload-main-grad-under-hook-gate",
        bug="""
        def move_grad_data_to_device(optimizer, device, pin_memory=True, non_blocking=False, skip_grad_hook_register=False):
            device = torch.device(device)
            for buffer in optimizer.buffers:
                if device == torch.device('cpu'):
                    buffer.grad_data.data = torch.tensor(1, dtype=buffer.grad_data.data.dtype, device=device, pin_memory=pin_memory)
                    for param in buffer.params[::-1]:
                        param.main_grad = torch.tensor(1, dtype=buffer.grad_data.data.dtype, device=device, pin_memory=pin_memory)
                else:
                    buffer.grad_data.data = torch.zeros(buffer.numel, dtype=buffer.grad_dtype, device=device, requires_grad=False)
                    for bucket in buffer.buckets:
                        start_index, end_index = buffer.bucket_indices[bucket.bucket_id]
                        bucket.grad_data.data = buffer._get(torch.Size([end_index - start_index]), start_index, buffer_type=BufferType.GRAD)

            if device.type != 'cpu' and not skip_grad_hook_register:
                for buffer in optimizer.buffers:
                    for param in buffer.params[::-1]:
                        param_start_index, _, _ = buffer.param_index_map[param]
                        param.main_grad = buffer._get(param.data.shape, param_start_index, buffer_type=BufferType.GRAD)  # bug
                for model_chunk in optimizer.model_chunks:
                    for param in model_chunk.module.parameters():
                        if param.requires_grad:
                            grad_acc = param.expand_as(param).grad_fn.next_functions[0][0]
                            grad_acc.register_hook(model_chunk._make_backward_post_hook(param))
                            model_chunk.grad_accs.append(grad_acc)
            elif device.type == 'cpu':
                for model_chunk in optimizer.model_chunks:
                    model_chunk.grad_accs.clear()
        """,
        twin="""
        def move_grad_data_to_device(optimizer, device, pin_memory=True, non_blocking=False, skip_grad_hook_register=False):
            device = torch.device(device)
            for buffer in optimizer.buffers:
                if device == torch.device('cpu'):
                    buffer.grad_data.data = torch.tensor(1, dtype=buffer.grad_data.data.dtype, device=device, pin_memory=pin_memory)
                    for param in buffer.params[::-1]:
                        param.main_grad = torch.tensor(1, dtype=buffer.grad_data.data.dtype, device=device, pin_memory=pin_memory)
                else:
                    buffer.grad_data.data = torch.zeros(buffer.numel, dtype=buffer.grad_dtype, device=device, requires_grad=False)
                    for param in buffer.params[::-1]:
                        param_start_index, _, _ = buffer.param_index_map[param]
                        param.main_grad = buffer._get(param.data.shape, param_start_index, buffer_type=BufferType.GRAD)
                    for bucket in buffer.buckets:
                        start_index, end_index = buffer.bucket_indices[bucket.bucket_id]
                        bucket.grad_data.data = buffer._get(torch.Size([end_index - start_index]), start_index, buffer_type=BufferType.GRAD)

            if device.type != 'cpu' and not skip_grad_hook_register:
                for model_chunk in optimizer.model_chunks:
                    for param in model_chunk.module.parameters():
                        if param.requires_grad:
                            grad_acc = param.expand_as(param).grad_fn.next_functions[0][0]
                            grad_acc.register_hook(model_chunk._make_backward_post_hook(param))
                            model_chunk.grad_accs.append(grad_acc)
            elif device.type == 'cpu':
                for model_chunk in optimizer.model_chunks:
                    model_chunk.grad_accs.clear()
        """,
    ),
    # Class 8. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/tensor_parallel/layers.py,
    # AGLinear.backward, the Megatron-FSDP branch. Dropped: flux set-up, the DDP branch's fp16
    # kernel, the dummy cache. Under Megatron-FSDP ``param.main_grad`` is None until fetched, so
    # the branch does ``weight.main_grad = weight.get_main_grad()`` before the TE GEMM writes it
    # (Megatron-LM #5209's shape). The regression only fetches when the attribute is missing
    # altogether (hasattr), which is never the case for an FSDP param whose main_grad is None:
    # te_general_gemm gets out=None and allocates a fresh output, so the wgrad is lost (or
    # out_dtype=None.dtype fails).
    Variant(
        8,
        "blind15-hygon-aglinear-fsdp-fetch-hasattr",
        bug="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            total_input, grad_input = _flux_ag_dgrad(ctx, input, weight, grad_output)
            grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if hasattr(weight, "__fsdp_param__"):
                    # In case of Megatron-FSDP, need to create main grad buffers in-place
                    if not hasattr(weight, "main_grad"):  # bug
                        weight.main_grad = weight.get_main_grad()
                    from megatron.core.extensions.transformer_engine import te_general_gemm
                    te_general_gemm(total_input, grad_output, out_dtype=weight.main_grad.dtype, layout="NT", out=weight.main_grad, grad=True)
                elif weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                else:
                    raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                if hasattr(weight, 'grad_added_to_main_grad'):
                    grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype, zero=getattr(weight, 'zero_out_wgrad', False))
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            return grad_input, grad_weight, None, None, None, None, None, None
        """,
        twin="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            total_input, grad_input = _flux_ag_dgrad(ctx, input, weight, grad_output)
            grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

            if ctx.gradient_accumulation_fusion:
                if hasattr(weight, "__fsdp_param__"):
                    # In case of Megatron-FSDP, need to create main grad buffers in-place
                    weight.main_grad = weight.get_main_grad()
                    from megatron.core.extensions.transformer_engine import te_general_gemm
                    te_general_gemm(total_input, grad_output, out_dtype=weight.main_grad.dtype, layout="NT", out=weight.main_grad, grad=True)
                elif weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                else:
                    raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                if hasattr(weight, 'grad_added_to_main_grad'):
                    grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype, zero=getattr(weight, 'zero_out_wgrad', False))
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            return grad_input, grad_weight, None, None, None, None, None, None
        """,
    ),
)
