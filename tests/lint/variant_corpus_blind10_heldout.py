"""The held-out half of the tenth blind corpus (H-blind10): 8 variants, the third written for each
class 1..8 of issue #19 (chosen before any measurement: simply the third one written per class). Same
rules as variant_corpus_blind10.py: each is grounded in a real function read from a repository snapshot
in /work/.mirror, the twin is that code shortened, the bug one regression of the class marked ``# bug``
(or, where said, the shipped code with the twin as its correction). Sources (snapshot HEAD):

- Ascend/MindSpeed 028de58: mindspeed/core/qat/layers.py, mindspeed/te/pytorch/module/linear.py
- NVIDIA-NeMo/Megatron-Bridge 067f987: src/megatron/bridge/peft/lora_layers.py (_make_lora_branch)
- sail-sg/zero-bubble-pipeline-parallelism 39f2c18: megatron/core/tensor_parallel/layers.py
- volcengine/veScale 20cf5c7: legacy/vescale/ddp/distributed_data_parallel.py
- HYGON-AI/Megatron-LM-das 0685d1f: hcu_megatron/core/transformer/multi_token_prediction.py
- NVIDIA/TransformerEngine d0067d0: transformer_engine/pytorch/ops/fused/userbuffers_backward_linear.py
- NVIDIA/NeMo 8cfedd7: nemo/collections/llm/peft/lora.py (TEFusedLoRALinear)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # Ascend/MindSpeed 028de58, mindspeed/core/qat/layers.py, _linear_with_grad_accumulation_and_async_qat_forward/ _backward. NOTE: the
    # bug is the code at this HEAD: it saves the fake-quantized `quant_weight` (a fresh tensor without main_grad or flags) and runs the
    # fused wgrad GEMM, the dummy and grad_added_to_main_grad on it; the twin keeps the Parameter on ctx and does the bookkeeping there.
    Variant(
        1,
        "blind10-mindspeed-qat-fakequant-weight",
        bug="""
            def _linear_with_grad_accumulation_and_async_qat_forward(
                ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
                grad_output_buffer, wgrad_deferral_limit, fakequant_func, input_fakequant_func=None,
            ):
                quant_weight = fakequant_func(weight, [1, 32], False)
                if input_fakequant_func is not None:
                    input = input_fakequant_func(input, [1, 32], False)
                ctx.save_for_backward(input, quant_weight)

                ctx.use_bias = bias is not None
                ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
                ctx.allreduce_dgrad = allreduce_dgrad
                ctx.sequence_parallel = sequence_parallel
                ctx.wgrad_deferral_limit = wgrad_deferral_limit
                ctx.grad_output_buffer = grad_output_buffer

                output = torch.matmul(input, quant_weight.t())
                if bias is not None:
                    output = output + bias
                return output


            def _linear_with_grad_accumulation_and_async_qat_backward(ctx, grad_output):
                input, quant_weight = ctx.saved_tensors
                use_bias = ctx.use_bias
                grad_output_buffer = ctx.grad_output_buffer
                wgrad_deferral_limit = ctx.wgrad_deferral_limit

                wgrad_compute = True
                if grad_output_buffer is not None:
                    if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                        grad_output_buffer.append(grad_output)
                        wgrad_compute = False
                total_input = input
                grad_input = grad_output.matmul(quant_weight)

                if wgrad_compute:
                    grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)

                if ctx.gradient_accumulation_fusion:
                    if wgrad_compute:
                        if quant_weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, quant_weight.main_grad)  # bug
                        elif quant_weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, quant_weight.main_grad)  # bug
                        else:
                            raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                    if hasattr(quant_weight, 'grad_added_to_main_grad'):  # bug
                        if getattr(quant_weight, 'zero_out_wgrad', False):
                            grad_weight = torch.zeros(
                                quant_weight.main_grad.shape,
                                dtype=input.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        else:
                            grad_weight = torch.empty(
                                quant_weight.main_grad.shape,
                                dtype=input.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        quant_weight.grad_added_to_main_grad = True  # bug
                    else:
                        grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                grad_bias = grad_output.sum(dim=0) if use_bias else None
                return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None
        """,
        twin="""
            def _linear_with_grad_accumulation_and_async_qat_forward(
                ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
                grad_output_buffer, wgrad_deferral_limit, fakequant_func, input_fakequant_func=None,
            ):
                quant_weight = fakequant_func(weight, [1, 32], False)
                if input_fakequant_func is not None:
                    input = input_fakequant_func(input, [1, 32], False)
                ctx.save_for_backward(input, quant_weight)
                ctx.weight_param = weight

                ctx.use_bias = bias is not None
                ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
                ctx.allreduce_dgrad = allreduce_dgrad
                ctx.sequence_parallel = sequence_parallel
                ctx.wgrad_deferral_limit = wgrad_deferral_limit
                ctx.grad_output_buffer = grad_output_buffer

                output = torch.matmul(input, quant_weight.t())
                if bias is not None:
                    output = output + bias
                return output


            def _linear_with_grad_accumulation_and_async_qat_backward(ctx, grad_output):
                input, quant_weight = ctx.saved_tensors
                weight = ctx.weight_param
                use_bias = ctx.use_bias
                grad_output_buffer = ctx.grad_output_buffer
                wgrad_deferral_limit = ctx.wgrad_deferral_limit

                wgrad_compute = True
                if grad_output_buffer is not None:
                    if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                        grad_output_buffer.append(grad_output)
                        wgrad_compute = False
                total_input = input
                grad_input = grad_output.matmul(quant_weight)

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
                return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None
        """,
    ),
    # NVIDIA-NeMo/Megatron-Bridge 067f987, src/megatron/bridge/peft/lora_layers.py, TEFusedLoRALinear._make_lora_branch. The te.ops.Linear ops must alias the
    # adapter's own Parameters (`op.weight = linear_in_weight`); wrapping them in a fresh `torch.nn.Parameter(...)` drops main_grad / grad_added_to_main_grad, so
    # the op built with accumulate_into_main_grad has no buffer to write and the adapter Parameter the DDP hooks watch never gets its gradient.
    Variant(
        2,
        "blind10-bridge-lora-branch-fresh-parameter",
        bug="""
            class TEFusedLoRALinear(LoRALinear):
                def _make_lora_branch(
                    self,
                    *,
                    in_features: int,
                    out_features: int,
                    tensor_parallel_mode: Optional[str],
                    tensor_parallel_group: Optional[torch.distributed.ProcessGroup],
                    sequence_parallel: bool,
                    accumulate_into_main_grad: bool,
                ) -> te.ops.Sequential:
                    from megatron.bridge.peft.utils import ParallelLinearAdapter

                    if not isinstance(self.adapter, ParallelLinearAdapter):
                        raise ValueError(f"Unsupported class for LoRA adapter ({self.adapter.__class__.__name__})")

                    linear_in_weight = self.adapter.linear_in.weight
                    linear_out_weight = self.adapter.linear_out.weight
                    lora_dim = linear_out_weight.size(1)
                    dropout = getattr(self.adapter.dropout, "p", 0.0)
                    dropout_position = self.adapter.dropout_position
                    scale = self.adapter.alpha / self.adapter.dim

                    lora_branch = te.ops.Sequential()
                    if dropout > 0 and dropout_position == "pre":
                        lora_branch.append(te.ops.Dropout(dropout))

                    op = te.ops.Linear(
                        in_features,
                        lora_dim,
                        bias=False,
                        device="meta",
                        dtype=linear_in_weight.dtype,
                        tensor_parallel_mode=tensor_parallel_mode,
                        tensor_parallel_group=tensor_parallel_group,
                        sequence_parallel=sequence_parallel,
                        accumulate_into_main_grad=accumulate_into_main_grad,
                    )
                    op.weight = torch.nn.Parameter(linear_in_weight.data)  # bug
                    lora_branch.append(op)

                    if tensor_parallel_mode == "column":
                        raise NotImplementedError("Column tensor parallelism is not yet supported")
                    op = te.ops.Linear(
                        lora_dim,
                        out_features,
                        bias=False,
                        device="meta",
                        dtype=linear_out_weight.dtype,
                        tensor_parallel_mode=None if tensor_parallel_mode is None else "column",
                        tensor_parallel_group=tensor_parallel_group,
                        sequence_parallel=False,
                        accumulate_into_main_grad=accumulate_into_main_grad,
                    )
                    op.weight = torch.nn.Parameter(linear_out_weight.data)  # bug
                    lora_branch.append(op)

                    if scale != 1:
                        lora_branch.append(te.ops.ConstantScale(scale))
                    if dropout > 0 and dropout_position == "post":
                        lora_branch.append(te.ops.Dropout(dropout))
                    lora_branch.append(te.ops.AddExtraInput(in_place=True))
                    return lora_branch
        """,
        twin="""
            class TEFusedLoRALinear(LoRALinear):
                def _make_lora_branch(
                    self,
                    *,
                    in_features: int,
                    out_features: int,
                    tensor_parallel_mode: Optional[str],
                    tensor_parallel_group: Optional[torch.distributed.ProcessGroup],
                    sequence_parallel: bool,
                    accumulate_into_main_grad: bool,
                ) -> te.ops.Sequential:
                    from megatron.bridge.peft.utils import ParallelLinearAdapter

                    if not isinstance(self.adapter, ParallelLinearAdapter):
                        raise ValueError(f"Unsupported class for LoRA adapter ({self.adapter.__class__.__name__})")

                    linear_in_weight = self.adapter.linear_in.weight
                    linear_out_weight = self.adapter.linear_out.weight
                    lora_dim = linear_out_weight.size(1)
                    dropout = getattr(self.adapter.dropout, "p", 0.0)
                    dropout_position = self.adapter.dropout_position
                    scale = self.adapter.alpha / self.adapter.dim

                    lora_branch = te.ops.Sequential()
                    if dropout > 0 and dropout_position == "pre":
                        lora_branch.append(te.ops.Dropout(dropout))

                    op = te.ops.Linear(
                        in_features,
                        lora_dim,
                        bias=False,
                        device="meta",
                        dtype=linear_in_weight.dtype,
                        tensor_parallel_mode=tensor_parallel_mode,
                        tensor_parallel_group=tensor_parallel_group,
                        sequence_parallel=sequence_parallel,
                        accumulate_into_main_grad=accumulate_into_main_grad,
                    )
                    op.weight = linear_in_weight
                    lora_branch.append(op)

                    if tensor_parallel_mode == "column":
                        raise NotImplementedError("Column tensor parallelism is not yet supported")
                    op = te.ops.Linear(
                        lora_dim,
                        out_features,
                        bias=False,
                        device="meta",
                        dtype=linear_out_weight.dtype,
                        tensor_parallel_mode=None if tensor_parallel_mode is None else "column",
                        tensor_parallel_group=tensor_parallel_group,
                        sequence_parallel=False,
                        accumulate_into_main_grad=accumulate_into_main_grad,
                    )
                    op.weight = linear_out_weight
                    lora_branch.append(op)

                    if scale != 1:
                        lora_branch.append(te.ops.ConstantScale(scale))
                    if dropout > 0 and dropout_position == "post":
                        lora_branch.append(te.ops.Dropout(dropout))
                    lora_branch.append(te.ops.AddExtraInput(in_place=True))
                    return lora_branch
        """,
    ),
    # sail-sg/zero-bubble-pipeline-parallelism 39f2c18, megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward
    # (split-backward WeightGradStore path). When the wgrad is deferred, grad_added_to_main_grad is set and a dummy returned right away, so the deferred
    # GEMM must be queued for every main_grad dtype; skipping the queue for fp16/bf16 leaves the flag set with nothing ever written into main_grad.
    Variant(
        3,
        "blind10-zbpp-deferred-fp16-not-queued",
        bug="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    weight.main_grad = ctx.weight_main_grad
                    use_bias = ctx.use_bias

                    def process_wgrad(_weight, _grad_output, _total_input, _handle, wgrad_gemm_accum_func=None):
                        grad_output_, total_input_ = prepare_for_wgrad_compute(_grad_output, _total_input, _handle)
                        wgrad_gemm_accum_func(total_input_, grad_output_, _weight.main_grad)

                    from megatron.core.zbpp_utils import WeightGradStore
                    wgrad_compute = not WeightGradStore.split_bw()

                    if wgrad_compute:
                        grad_output, total_input, handle = pre_process(grad_output, input, async_op=wgrad_compute)
                    grad_input = grad_output.matmul(weight)
                    if wgrad_compute:
                        grad_output, total_input = prepare_for_wgrad_compute(grad_output, total_input, handle)

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
                        else:
                            if weight.main_grad.dtype == torch.float32:
                                WeightGradStore.put(weight, functools.partial(
                                    pre_process, grad_output, input
                                ), functools.partial(
                                    process_wgrad, weight, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32
                                ))
                            elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                                pass  # bug
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
        """,
        twin="""
            class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
                @staticmethod
                @custom_bwd
                def backward(ctx, grad_output):
                    input, weight = ctx.saved_tensors
                    weight.main_grad = ctx.weight_main_grad
                    use_bias = ctx.use_bias

                    def process_wgrad(_weight, _grad_output, _total_input, _handle, wgrad_gemm_accum_func=None):
                        grad_output_, total_input_ = prepare_for_wgrad_compute(_grad_output, _total_input, _handle)
                        wgrad_gemm_accum_func(total_input_, grad_output_, _weight.main_grad)

                    from megatron.core.zbpp_utils import WeightGradStore
                    wgrad_compute = not WeightGradStore.split_bw()

                    if wgrad_compute:
                        grad_output, total_input, handle = pre_process(grad_output, input, async_op=wgrad_compute)
                    grad_input = grad_output.matmul(weight)
                    if wgrad_compute:
                        grad_output, total_input = prepare_for_wgrad_compute(grad_output, total_input, handle)

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
                        else:
                            if weight.main_grad.dtype == torch.float32:
                                WeightGradStore.put(weight, functools.partial(
                                    pre_process, grad_output, input
                                ), functools.partial(
                                    process_wgrad, weight, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32
                                ))
                            elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                                WeightGradStore.put(weight, functools.partial(
                                    pre_process, grad_output, input
                                ), functools.partial(
                                    process_wgrad, weight, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16
                                ))
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
        """,
    ),
    # Ascend/MindSpeed 028de58, mindspeed/te/pytorch/module/linear.py, _calculate_grad_weight / _create_grad_weight_placeholder. The fused path must
    # accumulate into main_grad (npu_matmul_add_fp32); writing the GEMM with `out=weight_param.main_grad` overwrites it in code that consults neither
    # overwrite_main_grad nor the sharding strategy, losing earlier microbatches while the placeholder still tells DDP the gradient was added.
    Variant(
        4,
        "blind10-mindspeed-te-grad-weight-matmul-out",
        bug='''
            def _calculate_grad_weight(
                ctx, inp: torch.Tensor, weight_param: torch.Tensor, grad: torch.Tensor
            ) -> Optional[torch.Tensor]:
                """Calculate gradient of weight."""
                grad, total_input = reshape_to_2D(grad), reshape_to_2D(inp)

                if ctx.gradient_accumulation_fusion and weight_param.main_grad.dtype != torch.float32:
                    raise RuntimeError(
                        f"Unsupported gradient type ({weight_param.main_grad.dtype}) for gradient accumulation fusion, "
                        f"expected type is float32"
                    )

                if ctx.fp8_enable:
                    from mindspeed.te.pytorch.fp8.recipes import MXFP8BlockScaling, MXFP832x32BlockScaling

                    if ctx.gradient_accumulation_fusion and isinstance(
                        ctx.fp8_meta.fp8_recipe, (MXFP8BlockScaling, MXFP832x32BlockScaling)
                    ):
                        fp8_matmul_add(weight_param.main_grad, grad, total_input, ctx.fp8_meta)
                        return _create_grad_weight_placeholder(weight_param)
                    else:
                        grad_weight, _, _ = fp8_matmul(grad, total_input, ctx.fp8_meta, MatmulKey.dw)
                        return grad_weight
                elif ctx.gradient_accumulation_fusion:
                    torch.matmul(grad.t(), total_input, out=weight_param.main_grad)  # bug
                    return _create_grad_weight_placeholder(weight_param)
                else:
                    return grad.t().matmul(total_input)


            def _create_grad_weight_placeholder(weight: torch.Tensor) -> Optional[torch.Tensor]:
                if not hasattr(weight, 'grad_added_to_main_grad'):
                    return None

                if getattr(weight, 'zero_out_wgrad', False):
                    grad_weight = torch.zeros(
                        weight.main_grad.shape,
                        dtype=weight.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
                else:
                    grad_weight = torch.empty(
                        weight.main_grad.shape,
                        dtype=weight.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
                weight.grad_added_to_main_grad = True
                return grad_weight
        ''',
        twin='''
            def _calculate_grad_weight(
                ctx, inp: torch.Tensor, weight_param: torch.Tensor, grad: torch.Tensor
            ) -> Optional[torch.Tensor]:
                """Calculate gradient of weight."""
                grad, total_input = reshape_to_2D(grad), reshape_to_2D(inp)

                if ctx.gradient_accumulation_fusion and weight_param.main_grad.dtype != torch.float32:
                    raise RuntimeError(
                        f"Unsupported gradient type ({weight_param.main_grad.dtype}) for gradient accumulation fusion, "
                        f"expected type is float32"
                    )

                if ctx.fp8_enable:
                    from mindspeed.te.pytorch.fp8.recipes import MXFP8BlockScaling, MXFP832x32BlockScaling

                    if ctx.gradient_accumulation_fusion and isinstance(
                        ctx.fp8_meta.fp8_recipe, (MXFP8BlockScaling, MXFP832x32BlockScaling)
                    ):
                        fp8_matmul_add(weight_param.main_grad, grad, total_input, ctx.fp8_meta)
                        return _create_grad_weight_placeholder(weight_param)
                    else:
                        grad_weight, _, _ = fp8_matmul(grad, total_input, ctx.fp8_meta, MatmulKey.dw)
                        return grad_weight
                elif ctx.gradient_accumulation_fusion:
                    from mindspeed.ops.npu_matmul_add import npu_matmul_add_fp32

                    npu_matmul_add_fp32(total_input, grad, weight_param.main_grad)
                    return _create_grad_weight_placeholder(weight_param)
                else:
                    return grad.t().matmul(total_input)


            def _create_grad_weight_placeholder(weight: torch.Tensor) -> Optional[torch.Tensor]:
                if not hasattr(weight, 'grad_added_to_main_grad'):
                    return None

                if getattr(weight, 'zero_out_wgrad', False):
                    grad_weight = torch.zeros(
                        weight.main_grad.shape,
                        dtype=weight.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
                else:
                    grad_weight = torch.empty(
                        weight.main_grad.shape,
                        dtype=weight.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
                weight.grad_added_to_main_grad = True
                return grad_weight
        ''',
    ),
    # volcengine/veScale 20cf5c7, legacy/vescale/ddp/distributed_data_parallel.py, _make_sparse_module_backward_hook (MoE experts). Experts
    # that received no tokens have no `.grad` and nothing in main_grad, so the module hook must mark them `register_grad_maybe_absent`;
    # firing `register_grad_ready` for them treats an untouched main_grad as a finished gradient with no bookkeeping behind it.
    Variant(
        5,
        "blind10-vescale-sparse-module-grad-ready",
        bug="""
            class DistributedDataParallel(torch.nn.Module):
                def _make_param_hook(
                    self,
                    fqn: str,
                    param: torch.nn.Parameter,
                    param_to_grad_buffer: Dict[torch.nn.Parameter, GradBuffer],
                ):
                    def param_hook(*unused):
                        if param.requires_grad:
                            if self.overlap_grad_reduce:
                                assert param.grad is not None, "param.grad being None is not safe when overlap_grad_reduce is True"
                            model_parallel_device_mesh, placements = None, None
                            if param.grad is not None:
                                if isinstance(param.data, DTensor):
                                    param.main_grad.add_(param.grad._local_tensor.data)  # add DTensor's data
                                    model_parallel_device_mesh = param.grad._spec.mesh
                                    placements = param.grad._spec.placements
                                    self.model_parallel_device_mesh = model_parallel_device_mesh
                                else:
                                    param.main_grad.add_(param.grad.data)
                                    model_parallel_device_mesh = self.model_parallel_device_mesh
                                    placements = self.fx_grad_sharding[fqn].grad_sharding if fqn in self.fx_grad_sharding else None
                            param.grad = None

                            if (
                                model_parallel_device_mesh is not None
                                and placements is not None
                                and any(p.is_partial() for p in placements)
                            ):
                                param_to_grad_buffer[param].register_partial_grad_ready(
                                    param, model_parallel_device_mesh, placements
                                )
                            if self.overlap_grad_reduce:
                                param_to_grad_buffer[param].register_grad_ready(param)

                    return param_hook

                def _make_sparse_module_backward_hook(self, sparse_module, param_to_grad_buffer):
                    def backward_hook(*unused):
                        # we do nothing if not overlap_grad_reduce.
                        if not self.overlap_grad_reduce:
                            return
                        # force to mark all parameters in the sparse_module as ready for allreduce
                        # once we found the back propagation of the module is finished.
                        for param in sparse_module.parameters():
                            param_to_grad_buffer[param].register_grad_ready(param)  # bug

                    return backward_hook

                def _make_sparse_module_pre_hook(self):
                    def sparse_module_pre_hook(module, args):
                        for x in args:
                            if isinstance(x, torch.Tensor) and x.requires_grad:
                                x.register_hook(self._make_sparse_module_backward_hook(module, self.param_to_grad_buffer))
                                break

                    return sparse_module_pre_hook
        """,
        twin="""
            class DistributedDataParallel(torch.nn.Module):
                def _make_param_hook(
                    self,
                    fqn: str,
                    param: torch.nn.Parameter,
                    param_to_grad_buffer: Dict[torch.nn.Parameter, GradBuffer],
                ):
                    def param_hook(*unused):
                        if param.requires_grad:
                            if self.overlap_grad_reduce:
                                assert param.grad is not None, "param.grad being None is not safe when overlap_grad_reduce is True"
                            model_parallel_device_mesh, placements = None, None
                            if param.grad is not None:
                                if isinstance(param.data, DTensor):
                                    param.main_grad.add_(param.grad._local_tensor.data)  # add DTensor's data
                                    model_parallel_device_mesh = param.grad._spec.mesh
                                    placements = param.grad._spec.placements
                                    self.model_parallel_device_mesh = model_parallel_device_mesh
                                else:
                                    param.main_grad.add_(param.grad.data)
                                    model_parallel_device_mesh = self.model_parallel_device_mesh
                                    placements = self.fx_grad_sharding[fqn].grad_sharding if fqn in self.fx_grad_sharding else None
                            param.grad = None

                            if (
                                model_parallel_device_mesh is not None
                                and placements is not None
                                and any(p.is_partial() for p in placements)
                            ):
                                param_to_grad_buffer[param].register_partial_grad_ready(
                                    param, model_parallel_device_mesh, placements
                                )
                            if self.overlap_grad_reduce:
                                param_to_grad_buffer[param].register_grad_ready(param)

                    return param_hook

                def _make_sparse_module_backward_hook(self, sparse_module, param_to_grad_buffer):
                    def backward_hook(*unused):
                        # we do nothing if not overlap_grad_reduce.
                        if not self.overlap_grad_reduce:
                            return
                        # force to mark all parameters in the sparse_module as ready for allreduce
                        # once we found the back propagation of the module is finished.
                        for param in sparse_module.parameters():
                            param_to_grad_buffer[param].register_grad_maybe_absent(param)

                    return backward_hook

                def _make_sparse_module_pre_hook(self):
                    def sparse_module_pre_hook(module, args):
                        for x in args:
                            if isinstance(x, torch.Tensor) and x.requires_grad:
                                x.register_hook(self._make_sparse_module_backward_hook(module, self.param_to_grad_buffer))
                                break

                    return sparse_module_pre_hook
        """,
    ),
    # HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/transformer/multi_token_prediction.py, MultiTokenPredictionLayer.backward_dw /
    # MultiTokenPredictionBlock.backward_dw. eh_proj is a linear built with the delayed wgrad config; a block-level backward_dw that calls
    # only each layer's mtp_model_layer.backward_dw bypasses the layer's own backward_dw, so eh_proj's weight gradient is never computed.
    Variant(
        6,
        "blind10-hygon-mtp-block-skips-eh-proj",
        bug="""
            class MultiTokenPredictionLayer:
                def backward_dw(self):
                    self.eh_proj.backward_dw()
                    if (
                        hasattr(self, "mtp_model_layer")
                        and hasattr(self.mtp_model_layer, "backward_dw")
                        and callable(self.mtp_model_layer.backward_dw)
                    ):
                        self.mtp_model_layer.backward_dw()


            class MultiTokenPredictionBlock:
                def forward(
                    self,
                    input_ids: Tensor,
                    position_ids: Tensor,
                    hidden_states: Tensor,
                    attention_mask: Tensor,
                    padding_mask: Optional[Tensor] = None,
                    rotary_pos_emb: Optional[Tensor] = None,
                    inference_params: Optional[InferenceParams] = None,
                    packed_seq_params: Optional[PackedSeqParams] = None,
                    sequence_len_offset: Optional[Tensor] = None,
                    extra_block_kwargs: Optional[dict] = None,
                    embedding=None,
                ) -> Tensor:
                    offset = get_mtp_layer_offset(self.config, self.vp_stage)
                    hidden_states_list = list(torch.chunk(hidden_states, 1 + offset, dim=0))
                    hidden_states = hidden_states_list[offset]
                    for iteration in range(self.config.mtp_num_layers):
                        layer_idx = 0 if self.mtp_use_repeated_layer else iteration
                        global_iteration = iteration + offset
                        with _fork_recompute_mtp_layer_flag():
                            if get_adaptor_args().recompute_mtp_layer_ids is not None:
                                set_recompute_mtp_layer_flag(global_iteration in get_adaptor_args().recompute_mtp_layer_ids)
                            (hidden_states, input_ids, position_ids, padding_mask) = self.layers[layer_idx](
                                input_ids=input_ids,
                                position_ids=position_ids,
                                hidden_states=hidden_states,
                                attention_mask=attention_mask,
                                padding_mask=padding_mask,
                                inference_params=inference_params,
                                rotary_pos_emb=rotary_pos_emb,
                                packed_seq_params=packed_seq_params,
                                sequence_len_offset=sequence_len_offset,
                                embedding=embedding,
                                **(extra_block_kwargs or {}),
                            )
                        hidden_states_list.append(hidden_states)
                    hidden_states = torch.cat(hidden_states_list, dim=0)
                    return hidden_states

                def backward_dw(self):
                    for layer in self.layers:
                        layer.mtp_model_layer.backward_dw()  # bug
        """,
        twin="""
            class MultiTokenPredictionLayer:
                def backward_dw(self):
                    self.eh_proj.backward_dw()
                    if (
                        hasattr(self, "mtp_model_layer")
                        and hasattr(self.mtp_model_layer, "backward_dw")
                        and callable(self.mtp_model_layer.backward_dw)
                    ):
                        self.mtp_model_layer.backward_dw()


            class MultiTokenPredictionBlock:
                def forward(
                    self,
                    input_ids: Tensor,
                    position_ids: Tensor,
                    hidden_states: Tensor,
                    attention_mask: Tensor,
                    padding_mask: Optional[Tensor] = None,
                    rotary_pos_emb: Optional[Tensor] = None,
                    inference_params: Optional[InferenceParams] = None,
                    packed_seq_params: Optional[PackedSeqParams] = None,
                    sequence_len_offset: Optional[Tensor] = None,
                    extra_block_kwargs: Optional[dict] = None,
                    embedding=None,
                ) -> Tensor:
                    offset = get_mtp_layer_offset(self.config, self.vp_stage)
                    hidden_states_list = list(torch.chunk(hidden_states, 1 + offset, dim=0))
                    hidden_states = hidden_states_list[offset]
                    for iteration in range(self.config.mtp_num_layers):
                        layer_idx = 0 if self.mtp_use_repeated_layer else iteration
                        global_iteration = iteration + offset
                        with _fork_recompute_mtp_layer_flag():
                            if get_adaptor_args().recompute_mtp_layer_ids is not None:
                                set_recompute_mtp_layer_flag(global_iteration in get_adaptor_args().recompute_mtp_layer_ids)
                            (hidden_states, input_ids, position_ids, padding_mask) = self.layers[layer_idx](
                                input_ids=input_ids,
                                position_ids=position_ids,
                                hidden_states=hidden_states,
                                attention_mask=attention_mask,
                                padding_mask=padding_mask,
                                inference_params=inference_params,
                                rotary_pos_emb=rotary_pos_emb,
                                packed_seq_params=packed_seq_params,
                                sequence_len_offset=sequence_len_offset,
                                embedding=embedding,
                                **(extra_block_kwargs or {}),
                            )
                        hidden_states_list.append(hidden_states)
                    hidden_states = torch.cat(hidden_states_list, dim=0)
                    return hidden_states

                def backward_dw(self):
                    for layer in self.layers:
                        layer.backward_dw()
        """,
    ),
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/ops/fused/userbuffers_backward_linear.py, UserbuffersBackwardLinear.fuser_backward. NOTE:
    # the bug is the code at this HEAD: the dummy is chosen on the local `accumulate_into_main_grad` that get_accumulate_flag_in_param turns False under
    # overwrite_main_grad, so the overwritten main_grad itself goes back as the grad and no flag is set; the twin decides it on the op-level flag.
    Variant(
        7,
        "blind10-te-userbuffers-backward-linear-dummy-on-local-flag",
        bug="""
            class UserbuffersBackwardLinear(FusedOperation):
                def fuser_backward(
                    self,
                    basic_op_ctxs: list[OperationContext],
                    grad_output: torch.Tensor,
                    *,
                    basic_op_grad_extra_outputs: list[tuple[torch.Tensor, ...]],
                ) -> tuple[
                    torch.Tensor,
                    list[tuple[Optional[torch.Tensor], ...]],
                    list[tuple[()]],
                ]:

                    # Get basic operations
                    idx = self._op_idxs["linear"]
                    linear_op = self.basic_ops[idx]
                    linear_op_ctx = basic_op_ctxs[0]
                    bias_op = None
                    if self._op_idxs["bias"] is not None:
                        idx = self._op_idxs["bias"]
                        bias_op = self.basic_ops[idx]

                    # Saved tensors from forward pass
                    (x_local, w) = linear_op_ctx.saved_tensors

                    # Megatron-LM wgrad fusion
                    accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                    grad_weight = None
                    if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                        weight_param = linear_op.weight
                        main_grad = get_main_grad_from_param(weight_param, op_label="UserbuffersBackwardLinear")
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                        grad_weight = main_grad.detach()
                    else:
                        accumulate_into_main_grad = False

                    # Linear backward pass
                    retval = UserbuffersBackwardLinear._functional_backward(
                        grad_output=grad_output,
                        input=x_local,
                        weight=w,
                        weight_requires_grad=linear_op_ctx.weight_requires_grad,
                        bias_requires_grad=(bias_op is not None),
                        dtype=linear_op_ctx.dtype,
                        grad_weight=grad_weight,
                        accumulate_into_grad_weight=accumulate_into_main_grad,
                        tensor_parallel_mode=self.tensor_parallel_mode,
                        tensor_parallel_group=self.tensor_parallel_group,
                        sequence_parallel=self.sequence_parallel,
                        with_quantized_compute=linear_op_ctx.with_quantized_compute,
                        input_quantizer=linear_op_ctx.input_quantizer,
                        weight_quantizer=linear_op_ctx.weight_quantizer,
                        grad_output_quantizer=linear_op_ctx.grad_output_quantizer,
                        grad_input_quantizer=None,  # Not supported
                        ub_comm_name=linear_op._userbuffers_options["comm_name"],
                    )
                    grad_input, grad_weight, extra_outputs = retval
                    grad_bias = None
                    if bias_op is not None:
                        grad_bias = extra_outputs["grad_bias"]

                    # Clear input tensor if possible
                    clear_tensor_data(x_local)

                    # Megatron-LM wgrad fusion
                    # Note: Return dummy tensor for grad weight if needed.
                    if accumulate_into_main_grad:  # bug
                        grad_weight = get_dummy_wgrads_for_params([linear_op.weight])[0]

                    # Return gradients
                    grad_params = [() for _ in range(len(self.basic_ops))]
                    grad_params[self._op_idxs["linear"]] = (grad_weight,)
                    if bias_op is not None:
                        grad_params[self._op_idxs["bias"]] = (grad_bias,)
                    grad_extra_inputs = [() for _ in range(len(self.basic_ops))]
                    return grad_input, grad_params, grad_extra_inputs
        """,
        twin="""
            class UserbuffersBackwardLinear(FusedOperation):
                def fuser_backward(
                    self,
                    basic_op_ctxs: list[OperationContext],
                    grad_output: torch.Tensor,
                    *,
                    basic_op_grad_extra_outputs: list[tuple[torch.Tensor, ...]],
                ) -> tuple[
                    torch.Tensor,
                    list[tuple[Optional[torch.Tensor], ...]],
                    list[tuple[()]],
                ]:

                    # Get basic operations
                    idx = self._op_idxs["linear"]
                    linear_op = self.basic_ops[idx]
                    linear_op_ctx = basic_op_ctxs[0]
                    bias_op = None
                    if self._op_idxs["bias"] is not None:
                        idx = self._op_idxs["bias"]
                        bias_op = self.basic_ops[idx]

                    # Saved tensors from forward pass
                    (x_local, w) = linear_op_ctx.saved_tensors

                    # Megatron-LM wgrad fusion
                    accumulate_into_main_grad = linear_op._accumulate_into_main_grad
                    grad_weight = None
                    if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
                        weight_param = linear_op.weight
                        main_grad = get_main_grad_from_param(weight_param, op_label="UserbuffersBackwardLinear")
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
                        grad_weight = main_grad.detach()
                    else:
                        accumulate_into_main_grad = False

                    # Linear backward pass
                    retval = UserbuffersBackwardLinear._functional_backward(
                        grad_output=grad_output,
                        input=x_local,
                        weight=w,
                        weight_requires_grad=linear_op_ctx.weight_requires_grad,
                        bias_requires_grad=(bias_op is not None),
                        dtype=linear_op_ctx.dtype,
                        grad_weight=grad_weight,
                        accumulate_into_grad_weight=accumulate_into_main_grad,
                        tensor_parallel_mode=self.tensor_parallel_mode,
                        tensor_parallel_group=self.tensor_parallel_group,
                        sequence_parallel=self.sequence_parallel,
                        with_quantized_compute=linear_op_ctx.with_quantized_compute,
                        input_quantizer=linear_op_ctx.input_quantizer,
                        weight_quantizer=linear_op_ctx.weight_quantizer,
                        grad_output_quantizer=linear_op_ctx.grad_output_quantizer,
                        grad_input_quantizer=None,  # Not supported
                        ub_comm_name=linear_op._userbuffers_options["comm_name"],
                    )
                    grad_input, grad_weight, extra_outputs = retval
                    grad_bias = None
                    if bias_op is not None:
                        grad_bias = extra_outputs["grad_bias"]

                    # Clear input tensor if possible
                    clear_tensor_data(x_local)

                    # Megatron-LM wgrad fusion
                    # Note: Return dummy tensor for grad weight if needed.
                    if linear_op_ctx.weight_requires_grad and linear_op._accumulate_into_main_grad:
                        grad_weight = get_dummy_wgrads_for_params([linear_op.weight])[0]

                    # Return gradients
                    grad_params = [() for _ in range(len(self.basic_ops))]
                    grad_params[self._op_idxs["linear"]] = (grad_weight,)
                    if bias_op is not None:
                        grad_params[self._op_idxs["bias"]] = (grad_bias,)
                    grad_extra_inputs = [() for _ in range(len(self.basic_ops))]
                    return grad_input, grad_params, grad_extra_inputs
        """,
    ),
    # NVIDIA/NeMo 8cfedd7, nemo/collections/llm/peft/lora.py, TEFusedLoRALinear.__init__/_make_fused_branches/forward. The fused branches (te.ops.Linear
    # with accumulate_into_main_grad) must be built lazily at the first forward, after DDP / Megatron-FSDP wrapped the model and registered the pre-forward
    # hooks that expose main_grad; building them in the constructor snapshots an empty hook list, so those hooks are never replayed before the ops run.
    Variant(
        8,
        "blind10-nemo-fused-lora-eager-branches",
        bug='''
            class TEFusedLoRALinear(LoRALinear):
                """LoRA adapter wrapper using Transformer Engine operation fuser"""

                def __init__(self, to_wrap: nn.Module, adapter: nn.Module):
                    super().__init__(to_wrap, adapter)
                    self._fused_branches: Optional[tuple[te.ops.Sequential, te.ops.Sequential]] = self._make_fused_branches()  # bug

                def _make_fused_branches(self) -> tuple[te.ops.Sequential, te.ops.Sequential]:
                    kwargs = {
                        "in_features": self.to_wrap.weight.size(1),
                        "out_features": self.to_wrap.weight.size(0),
                        "tensor_parallel_mode": None,
                        "tensor_parallel_group": None,
                        "sequence_parallel": False,
                    }
                    tensor_parallel_size = parallel_state.get_tensor_model_parallel_world_size()
                    if tensor_parallel_size > 1:
                        kwargs["tensor_parallel_group"] = parallel_state.get_tensor_model_parallel_group()
                        if isinstance(self.to_wrap, (te.Linear, te.LayerNormLinear)):
                            kwargs["tensor_parallel_mode"] = self.to_wrap.parallel_mode
                            kwargs["sequence_parallel"] = self.to_wrap.sequence_parallel

                    accumulate_into_main_grad = False
                    if isinstance(self.to_wrap, (te.Linear, te.LayerNormLinear)):
                        accumulate_into_main_grad = self.to_wrap.fuse_wgrad_accumulation
                    kwargs["accumulate_into_main_grad"] = accumulate_into_main_grad

                    main_branch = self._make_main_branch(**kwargs)
                    lora_branch = self._make_lora_branch(**kwargs)

                    forward_pre_hooks = []
                    forward_post_hooks = []
                    for submodule in self.modules():
                        for hook in submodule._forward_pre_hooks.values():
                            forward_pre_hooks.append((submodule, hook))
                        for hook in submodule._forward_hooks.values():
                            forward_post_hooks.append((submodule, hook))

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
                    # Construct fused impl if needed
                    # Note: We initialize during the first forward pass in
                    # case the params are modified after the constructor.
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
                """LoRA adapter wrapper using Transformer Engine operation fuser"""

                def __init__(self, to_wrap: nn.Module, adapter: nn.Module):
                    super().__init__(to_wrap, adapter)
                    self._fused_branches: Optional[tuple[te.ops.Sequential, te.ops.Sequential]] = None

                def _make_fused_branches(self) -> tuple[te.ops.Sequential, te.ops.Sequential]:
                    kwargs = {
                        "in_features": self.to_wrap.weight.size(1),
                        "out_features": self.to_wrap.weight.size(0),
                        "tensor_parallel_mode": None,
                        "tensor_parallel_group": None,
                        "sequence_parallel": False,
                    }
                    tensor_parallel_size = parallel_state.get_tensor_model_parallel_world_size()
                    if tensor_parallel_size > 1:
                        kwargs["tensor_parallel_group"] = parallel_state.get_tensor_model_parallel_group()
                        if isinstance(self.to_wrap, (te.Linear, te.LayerNormLinear)):
                            kwargs["tensor_parallel_mode"] = self.to_wrap.parallel_mode
                            kwargs["sequence_parallel"] = self.to_wrap.sequence_parallel

                    accumulate_into_main_grad = False
                    if isinstance(self.to_wrap, (te.Linear, te.LayerNormLinear)):
                        accumulate_into_main_grad = self.to_wrap.fuse_wgrad_accumulation
                    kwargs["accumulate_into_main_grad"] = accumulate_into_main_grad

                    main_branch = self._make_main_branch(**kwargs)
                    lora_branch = self._make_lora_branch(**kwargs)

                    forward_pre_hooks = []
                    forward_post_hooks = []
                    for submodule in self.modules():
                        for hook in submodule._forward_pre_hooks.values():
                            forward_pre_hooks.append((submodule, hook))
                        for hook in submodule._forward_hooks.values():
                            forward_post_hooks.append((submodule, hook))

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
                    # Construct fused impl if needed
                    # Note: We initialize during the first forward pass in
                    # case the params are modified after the constructor.
                    if self._fused_branches is None:
                        self._fused_branches = self._make_fused_branches()

                    main_branch, lora_branch = self._fused_branches
                    linear_output, linear_input = main_branch(x)
                    with te.fp8_autocast(enabled=False):
                        out = lora_branch(linear_input, linear_output)
                    return out, None
        ''',
    ),
)
