"""The fifteenth blind corpus, held-out part (H-blind15): the third variant of each issue #19
class, written without reading the linter or its tests, from repositories no earlier corpus used.

Sources (repository, commit, path, function):

- NVIDIA/TensorRT-Model-Optimizer 5a4242fa
  - modelopt/torch/sparsity/weight_sparsity/module.py: ``SparseModule._get_weight``, ``SparseModule._setup``
- alibaba/ChatLearn b7af31a9
  - chatlearn/models/megatron/memory_manager/trainer.py: ``TrainerMemoryManager.free_grad_buffers``,
    ``TrainerMemoryManager.build_grad_buffers``
- huggingface/nanotron 2411b022
  - src/nanotron/optim/gradient_accumulator.py: ``FP32GradientAccumulator.backward``,
    ``FP32GradientAccumulator._accumulate_grad``, ``FP32GradBucketManager.__post_init__``,
    ``get_fp32_accum_hook`` / ``fp32_accum_hook``
- HYGON-AI/Megatron-LM-das 0685d1f
  - hcu_megatron/core/tensor_parallel/layers.py: ``LinearRS.backward``
  - hcu_megatron/core/models/gpt/gpt_model.py: ``GPTModel.backward_dw``
  - hcu_megatron/core/transformer/transformer_block.py, multi_token_prediction.py,
    hcu_megatron/core/distributed/data_parallel_base.py: the ``backward_dw`` callers
- MooreThreads/MT-MegatronLM e53585c
  - musa_patch/multi_token_prediction/finalize_model_grads.py: ``_allreduce_mtp_word_embedding_grads``
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # Class 1. NVIDIA/TensorRT-Model-Optimizer 5a4242fa,
    # modelopt/torch/sparsity/weight_sparsity/module.py, SparseModule._get_weight and
    # SparseModule._setup, kept whole. The masked weight is a stand-in for the Parameter that Megatron's
    # linear receives; ModelOpt forwards the Parameter's main_grad to it so the fused wgrad GEMM
    # accumulates into the Parameter's buffer. The regression gives the stand-in a masked copy
    # of main_grad: the GEMM accumulates into a temporary and the Parameter's main_grad never
    # sees the weight gradient.
    Variant(
        1,
        "blind15-modelopt-sparse-masked-main-grad-copy",
        bug="""
        class SparseModule(DynamicModule):
            @staticmethod
            def _get_weight(mod, weight):
                if mod.is_sparse and mod._weight_mask is not None:
                    masked_weight = weight * mod._weight_mask
                    # Quick workaround for the custom attribute for Megatron.
                    if hasattr(weight, "main_grad"):
                        masked_weight.main_grad = weight.main_grad * mod._weight_mask  # bug
                    return masked_weight
                return weight

            def _setup(self):
                # define hparam to check if sparsity is activated
                hp = Hparam([0, -1], original=0)
                hp.active = 0
                self._register_hparam("is_sparse", hp)

                # define the sparse mask here (don't pre-allocate memory to maximize memory savings)
                self._register_temp_attribute("_weight_mask", None, lambda m, n, v: m.register_buffer(n, v))

                # register dynamic attributes of the class
                self._register_dynamic_attribute("weight", self._get_weight)
        """,
        twin="""
        class SparseModule(DynamicModule):
            @staticmethod
            def _get_weight(mod, weight):
                if mod.is_sparse and mod._weight_mask is not None:
                    masked_weight = weight * mod._weight_mask
                    # Quick workaround for the custom attribute for Megatron.
                    if hasattr(weight, "main_grad"):
                        masked_weight.main_grad = weight.main_grad
                    return masked_weight
                return weight

            def _setup(self):
                # define hparam to check if sparsity is activated
                hp = Hparam([0, -1], original=0)
                hp.active = 0
                self._register_hparam("is_sparse", hp)

                # define the sparse mask here (don't pre-allocate memory to maximize memory savings)
                self._register_temp_attribute("_weight_mask", None, lambda m, n, v: m.register_buffer(n, v))

                # register dynamic attributes of the class
                self._register_dynamic_attribute("weight", self._get_weight)
        """,
    ),
    # Class 2. alibaba/ChatLearn b7af31a9, chatlearn/models/megatron/memory_manager/trainer.py,
    # TrainerMemoryManager.free_grad_buffers / build_grad_buffers. Dropped: the MoE dispatcher
    # clean-up and logging. Between RL phases ChatLearn deletes every ``param.main_grad`` and the
    # buffers' grad_data, then rebuilds them; each param's main_grad must again be a view into
    # its buffer (the buckets reduce buffer.grad_data). The regression rebinds main_grad to a
    # fresh zero tensor of the param's shape: the fused wgrads accumulate into it, the
    # bucket reduce-scatter reads the (zero) buffer, and the weight gradient is lost.
    Variant(
        2,
        "blind15-chatlearn-rebuild-main-grad-fresh-tensor",
        bug="""
        class TrainerMemoryManager:
            def free_grad_buffers(self):
                if self._grad_buffers_freed:
                    return
                self._optimizer.zero_grad(True)
                for p, buffer in self.param_to_buffer().items():
                    del p.main_grad
                for buffer in self._buffers:
                    for bucket in buffer.buckets:
                        del bucket.grad_data
                    del buffer.grad_data
                self._grad_buffers_freed = True

            def build_grad_buffers(self):
                if not self._grad_buffers_freed:
                    return
                for buffer in self._buffers:
                    buffer.grad_data = torch.zeros(buffer.numel, dtype=buffer.grad_dtype, device=torch.cuda.current_device(), requires_grad=False)
                    for bucket_id, bucket in enumerate(buffer.buckets):
                        (start_index, end_index) = buffer.bucket_indices[bucket_id]
                        bucket.grad_data = buffer._get(torch.Size([end_index - start_index]), start_index, buffer_type=BufferType.GRAD)

                for param, buffer in self.param_to_buffer().items():
                    data_start_index, _, bucket_id = buffer.param_index_map[param]
                    param.main_grad = torch.zeros(param.data.shape, dtype=buffer.grad_dtype, device=buffer.grad_data.device)  # bug

                self._grad_buffers_freed = False
        """,
        twin="""
        class TrainerMemoryManager:
            def free_grad_buffers(self):
                if self._grad_buffers_freed:
                    return
                self._optimizer.zero_grad(True)
                for p, buffer in self.param_to_buffer().items():
                    del p.main_grad
                for buffer in self._buffers:
                    for bucket in buffer.buckets:
                        del bucket.grad_data
                    del buffer.grad_data
                self._grad_buffers_freed = True

            def build_grad_buffers(self):
                if not self._grad_buffers_freed:
                    return
                for buffer in self._buffers:
                    buffer.grad_data = torch.zeros(buffer.numel, dtype=buffer.grad_dtype, device=torch.cuda.current_device(), requires_grad=False)
                    for bucket_id, bucket in enumerate(buffer.buckets):
                        (start_index, end_index) = buffer.bucket_indices[bucket_id]
                        bucket.grad_data = buffer._get(torch.Size([end_index - start_index]), start_index, buffer_type=BufferType.GRAD)

                for param, buffer in self.param_to_buffer().items():
                    data_start_index, _, bucket_id = buffer.param_index_map[param]
                    param.main_grad = buffer._get(param.data.shape, data_start_index, buffer_type=BufferType.GRAD)

                self._grad_buffers_freed = False
        """,
    ),
    # Class 3 (converse, nanotron's idiom). huggingface/nanotron 2411b022,
    # src/nanotron/optim/gradient_accumulator.py, FP32GradientAccumulator.backward /
    # _accumulate_grad. Dropped: the ZeRO offsets branch is kept short. nanotron's main_grad is
    # the per-name ``fp32_grad`` buffer and its "already added" flag is
    # ``_is_accumulation_sync_step``: when True the DDP comm hook has already added the half
    # grad into the fp32 buffer. The regression adds on every step unless the flag is set *and*
    # no half grad is present (it always is): the fp32 buffer receives the gradient twice on
    # DDP sync steps.
    Variant(
        3,
        "blind15-nanotron-accumulate-ignores-sync-step",
        bug="""
        class FP32GradientAccumulator(GradientAccumulator):
            def backward(self, loss):
                result = loss.backward()
                for name, elt in self.fp32_grad_buffers.items():
                    self._accumulate_grad(name=name, half_param=elt["half"])
                return result

            def _accumulate_grad(self, name, half_param):
                assert half_param.grad is not None, f"Expected param {name} to have gradient."
                fp32_grad = self.get_grad_buffer(name=name)

                if not self._is_accumulation_sync_step or half_param.grad is not None:  # bug
                    fp32_grad.add_(half_param.grad)

                half_param.grad = None

                if name in self.parameters:
                    fp32_param = self.parameters[name]["fp32"]
                    if hasattr(self, "param_name_to_offsets"):
                        if name not in self.param_name_to_offsets:
                            return
                        start_offset, end_offset = self.param_name_to_offsets[name]
                        grad = fp32_grad.view(-1)[start_offset:end_offset]
                    else:
                        grad = fp32_grad
                    fp32_param.grad = grad
        """,
        twin="""
        class FP32GradientAccumulator(GradientAccumulator):
            def backward(self, loss):
                result = loss.backward()
                for name, elt in self.fp32_grad_buffers.items():
                    self._accumulate_grad(name=name, half_param=elt["half"])
                return result

            def _accumulate_grad(self, name, half_param):
                assert half_param.grad is not None, f"Expected param {name} to have gradient."
                fp32_grad = self.get_grad_buffer(name=name)

                if self._is_accumulation_sync_step is False:
                    fp32_grad.add_(half_param.grad)

                half_param.grad = None

                if name in self.parameters:
                    fp32_param = self.parameters[name]["fp32"]
                    if hasattr(self, "param_name_to_offsets"):
                        if name not in self.param_name_to_offsets:
                            return
                        start_offset, end_offset = self.param_name_to_offsets[name]
                        grad = fp32_grad.view(-1)[start_offset:end_offset]
                    else:
                        grad = fp32_grad
                    fp32_param.grad = grad
        """,
    ),
    # Class 4. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/tensor_parallel/layers.py,
    # LinearRS.backward. Dropped: flux GEMM/reduce-scatter set-up, fp16 kernel, dummy cache. The
    # snapshot overwrites main_grad with matmul(out=) only on the Megatron-FSDP branch (chosen by
    # ``__fsdp_param__``) and accumulates with the apex kernel otherwise. The regression folds
    # both into one path that fetches main_grad when it is None and always writes with
    # ``out=``: under plain DDP every microbatch replaces the accumulated gradient.
    Variant(
        4,
        "blind15-hygon-linears-walrus-matmul-out",
        bug="""
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            total_grad_output, grad_input = _flux_rs_dgrad(ctx, input, weight, grad_output)
            wgrad_compute = weight.requires_grad
            total_input = prepare_input_tensor_for_wgrad_compute(input)

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if (main_grad := getattr(weight, "main_grad", None)) is None:
                        main_grad = weight.main_grad = weight.get_main_grad()
                    torch.matmul(total_grad_output.t(), total_input, out=main_grad)  # bug
                if hasattr(weight, 'grad_added_to_main_grad'):
                    zero = getattr(weight, 'zero_out_wgrad', False)
                    grad_weight = (torch.zeros if zero else torch.empty)(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
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

            if ctx.gradient_accumulation_fusion:
                if wgrad_compute:
                    if hasattr(weight, "__fsdp_param__"):
                        weight.main_grad = weight.get_main_grad()
                        torch.matmul(total_grad_output.t(), total_input, out=weight.main_grad)
                    elif weight.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, total_grad_output, weight.main_grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                if hasattr(weight, 'grad_added_to_main_grad'):
                    zero = getattr(weight, 'zero_out_wgrad', False)
                    grad_weight = (torch.zeros if zero else torch.empty)(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = total_grad_output.t().matmul(total_input)
            grad_bias = total_grad_output.sum(dim=0) if ctx.use_bias else None
            return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None
        """,
    ),
    # Class 5 (nanotron's idiom). huggingface/nanotron 2411b022,
    # src/nanotron/optim/gradient_accumulator.py, FP32GradBucketManager.__post_init__ and
    # get_fp32_accum_hook / fp32_accum_hook. Dropped: the reduce-scatter branch (raises
    # NotImplementedError in the snapshot). The DDP comm hook adds each half grad into the fp32
    # buffer; the manager that carries the hook's state marks the accumulator
    # (``_is_accumulation_sync_step = True``) so FP32GradientAccumulator._accumulate_grad does not
    # add it again. The regression marks it only when there is a real data-parallel group,
    # but the hook adds into the fp32 buffer before it looks at the group size: with a
    # one-rank dp_cp group the gradient is accumulated twice.
    Variant(
        5,
        "blind15-nanotron-bucket-manager-mark-only-multi-rank",
        bug="""
        @dataclasses.dataclass
        class FP32GradBucketManager:
            dp_cp_pg: dist.ProcessGroup
            accumulator: FP32GradientAccumulator
            param_id_to_name: Dict[int, str]

            def __post_init__(self):
                self.accumulator._is_accumulation_sync_step = self.dp_cp_pg.size() > 1  # bug


        def get_fp32_accum_hook(reduce_scatter, reduce_op=dist.ReduceOp.AVG):
            def fp32_accum_hook(state, bucket):
                dp_cp_pg = state.dp_cp_pg
                accumulator = state.accumulator
                param_id_to_name = state.param_id_to_name
                for param, grad in zip(bucket.parameters(), bucket.gradients()):
                    name = param_id_to_name[id(param)]
                    fp32_grad_buffer = accumulator.get_grad_buffer(name)
                    fp32_grad_buffer.add_(grad.view_as(fp32_grad_buffer))
                if dp_cp_pg.size() == 1:
                    fut = torch.futures.Future()
                    fut.set_result(bucket.buffer())
                    return fut
                grad_buffer_tensor_list = [accumulator.get_grad_buffer(param_id_to_name[id(p)]).view(-1) for p in bucket.parameters()]
                accumulator.fp32_grads_allreduce_handle = dist.all_reduce_coalesced(grad_buffer_tensor_list, group=dp_cp_pg, async_op=True, op=reduce_op)
                fut = torch.futures.Future()
                fut.set_result(bucket.buffer())
                return fut

            return fp32_accum_hook
        """,
        twin="""
        @dataclasses.dataclass
        class FP32GradBucketManager:
            dp_cp_pg: dist.ProcessGroup
            accumulator: FP32GradientAccumulator
            param_id_to_name: Dict[int, str]

            def __post_init__(self):
                self.accumulator._is_accumulation_sync_step = True


        def get_fp32_accum_hook(reduce_scatter, reduce_op=dist.ReduceOp.AVG):
            def fp32_accum_hook(state, bucket):
                dp_cp_pg = state.dp_cp_pg
                accumulator = state.accumulator
                param_id_to_name = state.param_id_to_name
                for param, grad in zip(bucket.parameters(), bucket.gradients()):
                    name = param_id_to_name[id(param)]
                    fp32_grad_buffer = accumulator.get_grad_buffer(name)
                    fp32_grad_buffer.add_(grad.view_as(fp32_grad_buffer))
                if dp_cp_pg.size() == 1:
                    fut = torch.futures.Future()
                    fut.set_result(bucket.buffer())
                    return fut
                grad_buffer_tensor_list = [accumulator.get_grad_buffer(param_id_to_name[id(p)]).view(-1) for p in bucket.parameters()]
                accumulator.fp32_grads_allreduce_handle = dist.all_reduce_coalesced(grad_buffer_tensor_list, group=dp_cp_pg, async_op=True, op=reduce_op)
                fut = torch.futures.Future()
                fut.set_result(bucket.buffer())
                return fut

            return fp32_accum_hook
        """,
    ),
    # Class 6. HYGON-AI/Megatron-LM-das 0685d1f, hcu_megatron/core/models/gpt/gpt_model.py,
    # GPTModel.backward_dw (patched over megatron.core's), with TransformerBlock /
    # MultiTokenPredictionBlock.backward_dw and data_parallel_base._BaseDataParallel.backward_dw.
    # With delay_wgrad_compute the model's backward_dw must flush the decoder's and, on the MTP
    # stage, also the MTP block's delayed wgrads. The regression dispatches to one or the other
    # in a conditional expression: on the MTP stage the decoder layers' delayed weight gradients
    # are never computed into main_grad.
    Variant(
        6,
        "blind15-hygon-gptmodel-backward-dw-either-or",
        bug="""
        class GPTModel(LanguageModule):
            def backward_dw(self):
                (self.mtp if self.mtp_process else self.decoder).backward_dw()  # bug


        class TransformerBlock(MegatronModule):
            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()


        class MultiTokenPredictionBlock(MegatronModule):
            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()


        class _BaseDataParallel:
            def backward_dw(self, *inputs, **kwargs):
                return self.module.backward_dw(*inputs, **kwargs)
        """,
        twin="""
        class GPTModel(LanguageModule):
            def backward_dw(self):
                self.decoder.backward_dw()

                if self.mtp_process:
                    self.mtp.backward_dw()


        class TransformerBlock(MegatronModule):
            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()


        class MultiTokenPredictionBlock(MegatronModule):
            def backward_dw(self):
                for layer in self.layers:
                    layer.backward_dw()


        class _BaseDataParallel:
            def backward_dw(self, *inputs, **kwargs):
                return self.module.backward_dw(*inputs, **kwargs)
        """,
    ),
    # Class 7. MooreThreads/MT-MegatronLM e53585c,
    # musa_patch/multi_token_prediction/finalize_model_grads.py,
    # _allreduce_mtp_word_embedding_grads. Dropped: the interleaved-stage selection. Which
    # gradient to all-reduce (main_grad or .grad) is picked in a conditional expression on
    # whether the Parameter has main_grad. The regression picks it on the op-level fusion flag
    # in the config: under Megatron DDP without gradient_accumulation_fusion the embedding's
    # gradient lives in main_grad (the DDP hook moved .grad there and cleared it), so the
    # tied embedding's main_grad is never summed across the first/MTP stages (or .grad is None).
    Variant(
        7,
        "blind15-mtmusa-mtp-embedding-grad-attr-on-config",
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
                    grad_attr = "main_grad" if config.gradient_accumulation_fusion else "grad"  # bug
                    orig_grad = getattr(weight, grad_attr)
                    grad = _unshard_if_dtensor(orig_grad)
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
    # Class 8. alibaba/ChatLearn b7af31a9, chatlearn/models/megatron/memory_manager/trainer.py,
    # TrainerMemoryManager.build_grad_buffers. Dropped: logging. After free_grad_buffers deleted
    # every param.main_grad (and zero_grad(True) cleared every .grad), build_grad_buffers must
    # re-expose main_grad on every trainable param before the next training phase's fused-wgrad
    # linears run. The regression rebuilds it only for params that still hold a .grad, which
    # after the free is none of them: main_grad stays None and the fused wgrad path has no
    # buffer to write into.
    Variant(
        8,
        "blind15-chatlearn-rebuild-main-grad-only-with-grad",
        bug="""
        class TrainerMemoryManager:
            def build_grad_buffers(self):
                if not self._grad_buffers_freed:
                    return
                for buffer in self._buffers:
                    buffer.grad_data = torch.zeros(buffer.numel, dtype=buffer.grad_dtype, device=torch.cuda.current_device(), requires_grad=False)
                    for bucket_id, bucket in enumerate(buffer.buckets):
                        (start_index, end_index) = buffer.bucket_indices[bucket_id]
                        bucket.grad_data = buffer._get(torch.Size([end_index - start_index]), start_index, buffer_type=BufferType.GRAD)

                for param, buffer in self.param_to_buffer().items():
                    data_start_index, _, bucket_id = buffer.param_index_map[param]
                    param.main_grad = buffer._get(param.data.shape, data_start_index, buffer_type=BufferType.GRAD) if param.grad is not None else None  # bug

                self._grad_buffers_freed = False
        """,
        twin="""
        class TrainerMemoryManager:
            def build_grad_buffers(self):
                if not self._grad_buffers_freed:
                    return
                for buffer in self._buffers:
                    buffer.grad_data = torch.zeros(buffer.numel, dtype=buffer.grad_dtype, device=torch.cuda.current_device(), requires_grad=False)
                    for bucket_id, bucket in enumerate(buffer.buckets):
                        (start_index, end_index) = buffer.bucket_indices[bucket_id]
                        bucket.grad_data = buffer._get(torch.Size([end_index - start_index]), start_index, buffer_type=BufferType.GRAD)

                for param, buffer in self.param_to_buffer().items():
                    data_start_index, _, bucket_id = buffer.param_index_map[param]
                    param.main_grad = buffer._get(param.data.shape, data_start_index, buffer_type=BufferType.GRAD)

                self._grad_buffers_freed = False
        """,
    ),
)
