"""The twenty-first blind corpus (H-blind21), development half: main_grad bookkeeping variants
of the eight classes of issue #19, two per class, grounded in code from repositories no earlier
blind corpus used: OpenSQZ MegatronApp (a Megatron-core fork: the fused-wgrad linear with
deferred embedding wgrads, Megatron-FSDP's ``custom_fsdp`` buffers and hooks, the DDP
backward hook, CUDA-graph replay, shared experts, Mamba), ChenQiaoling00 Seq1F1B (a sequence-level
1F1B Megatron fork: the legacy fused-wgrad linear and the legacy contiguous-buffer DDP), axonn-ai
axonn (4D tensor-parallel linear whose weight gradients are deferred with ``accumulate_later``
on the all-gathered weight's owner) and NVIDIA-NeMo RL (Megatron-Bridge integration: pre-wrap
hooks that attach PEFT adapters before DDP).

Sources (repo, commit, path, function):
- axonn-ai/axonn 660a22464e64a19ccaf2cc0f00b46cfd2d8603bc
  axonn/intra_layer/fully_connected.py AsyncLinear.forward / .backward
- axonn-ai/axonn 660a22464e64a19ccaf2cc0f00b46cfd2d8603bc
  axonn/intra_layer/fully_connected.py Linear.forward (with AsyncLinear.apply)
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/distributed/custom_fsdp/param_and_grad_buffer.py
  ParamAndGradBuffer.update_main_grads
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/distributed/custom_fsdp/param_and_grad_buffer.py
  ParamAndGradBuffer._init_each_parameter_group_buffers (meta-device reset) / ._reset_parameters
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward
  (two variants: classes 3 and 7)
- ChenQiaoling00/Seq1F1B f54b286c75d5510994cb3802d1a8a5c71124d59b
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward
  (two variants: classes 3 and 7)
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py
  FullyShardedDataParallel._register_fsdp_hooks._grad_acc
- ChenQiaoling00/Seq1F1B f54b286c75d5510994cb3802d1a8a5c71124d59b
  megatron/model/distributed.py DistributedDataParallel.__init__ / ._make_param_hook
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/transformer/cuda_graphs.py _CudagraphReplayNode.backward
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/distributed/distributed_data_parallel.py
  DistributedDataParallel._make_backward_post_hook
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/transformer/moe/shared_experts.py SharedExpertMLP.__init__, with
  megatron/core/transformer/mlp.py MLP
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/ssm/mamba_mixer.py MambaMixer.__init__, megatron/core/ssm/mamba_layer.py
  MambaLayer
- OpenSQZ/MegatronApp 99c64daded92edb31f276325b364a2b764062ef7
  megatron/core/distributed/custom_fsdp/param_and_grad_buffer.py
  ParamAndGradBuffer._init_each_parameter_group_buffers (main_grad buffer binding)
- NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909
  nemo_rl/models/megatron/setup.py setup_model_and_optimizer (PEFT pre-wrap hook)

Conventions: twins are the real code shortened (real names and idioms; docstrings, FP8
bookkeeping, sequence-parallel communication details, logging and unrelated branches dropped).
Adapted where the real code lacks the main_grad feature a class is about, and said so here:
- axonn has no ``main_grad``: its ``overlap_communication.accumulate()`` later adds each pending
  ``(param, grad)`` into ``param.grad`` (a Megatron-style wrapper would add it into
  ``param.main_grad``). Only the owner handed to ``accumulate_later`` ever receives the weight
  gradient: a gathered copy or a cast copy receives it and drops it.
- Seq1F1B's linear predates ``grad_added_to_main_grad``: its fused path returns ``None`` and the
  legacy DDP hook folds any non-None ``.grad`` into ``main_grad``. The class-7 twins (Seq1F1B and
  MegatronApp) are given Megatron-FSDP's ``overwrite_main_grad`` (a local ``accumulate`` flag
  chooses the GEMM's accumulate-vs-overwrite; the returned gradient and the bookkeeping stay on
  the op-level ``gradient_accumulation_fusion``), as Megatron-core does after #5209.
- MegatronApp's MLP, SharedExpertMLP, MambaMixer and MambaLayer have no ``backward_dw`` (the
  fork predates ``delay_wgrad_compute``); the twins give them the one later Megatron-core has
  (flush ``linear_fc2`` then ``linear_fc1``; the Mamba mixer flushes ``out_proj`` and ``in_proj``),
  SharedExpertMLP running it on its overlap stream when ``moe_shared_expert_overlap`` is set.
- NeMo-RL's PEFT hook is shortened to the pre-wrap list and the ``get_model`` call.
Bugs are written as ``_swap(twin, old, new)``: one passage of the twin replaced, the changed
line(s) carrying ``# bug`` (a dropped line marks the line that now stands in its place).
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- axonn-ai/axonn 660a2246 axonn/intra_layer/fully_connected.py AsyncLinear
_AXONN_ASYNC_LINEAR = """
class AsyncLinear(Function):
    @staticmethod
    @version_aware_custom_fwd
    def forward(
        ctx,
        input_,
        weight,
        forward_all_reduce_group,
        backward_all_reduce_group,
        depth_parallel_group,
        local_weight_shape,
        cache_weights,
    ):
        original_weight = weight
        weight = _gather(
            weight, dim=0, process_group=depth_parallel_group, cache=cache_weights
        )
        weight = weight.reshape(local_weight_shape)
        ctx.save_for_backward(input_, original_weight)
        ctx.backward_all_reduce_group = backward_all_reduce_group
        ctx.depth_parallel_group = depth_parallel_group
        ctx.shape = local_weight_shape
        output = input_.matmul(weight.t())
        dist.all_reduce(output, group=forward_all_reduce_group, async_op=False)

        return output

    @staticmethod
    @version_aware_custom_bwd
    def backward(ctx, grad_output):
        input_, original_weight = ctx.saved_tensors
        weight = _gather(
            original_weight, dim=0, process_group=ctx.depth_parallel_group, cache=False
        )
        weight = weight.reshape(ctx.shape)
        handle = None
        overlap_reduce_scatter = overlap_communication.OVERLAP_REDUCE_SCATTER
        overlap_all_reduce = overlap_communication.OVERLAP_ALL_REDUCE
        if dist.get_world_size(ctx.backward_all_reduce_group) > 1 or (
            not overlap_reduce_scatter
        ):
            grad_input, grad_weight = None, None

            if ctx.needs_input_grad[0]:
                grad_input = grad_output.matmul(weight)
                handle = dist.all_reduce(
                    grad_input,
                    group=ctx.backward_all_reduce_group,
                    async_op=overlap_all_reduce,
                )
            if ctx.needs_input_grad[1]:
                grad_weight = (
                    grad_output.reshape(-1, grad_output.shape[-1])
                    .t()
                    .mm(input_.view(-1, input_.shape[-1]))
                )

                grad_weight = grad_weight.reshape(-1)
                grad_weight = _reduce_scatter(
                    grad_weight,
                    dim=0,
                    process_group=ctx.depth_parallel_group,
                    overlap_comm=overlap_reduce_scatter,
                )

            if handle and overlap_all_reduce:
                handle.wait()
            if overlap_reduce_scatter and ctx.needs_input_grad[1]:
                overlap_communication.accumulate_later(original_weight, grad_weight)
                grad_weight = None  # weight gradients are not ready yet
            return grad_input, grad_weight, None, None, None, None, None, None, None
        else:
            grad_input, grad_weight = None, None

            if ctx.needs_input_grad[1]:
                grad_weight = (
                    grad_output.reshape(-1, grad_output.shape[-1])
                    .t()
                    .mm(input_.view(-1, input_.shape[-1]))
                ).reshape(-1)
                grad_weight = _reduce_scatter(
                    grad_weight,
                    dim=0,
                    process_group=ctx.depth_parallel_group,
                    overlap_comm=True,
                )
                overlap_communication.accumulate_later(original_weight, grad_weight)
                grad_weight = None  # weight gradients are not ready yet

            if ctx.needs_input_grad[0]:
                grad_input = grad_output.matmul(weight)
            return grad_input, grad_weight, None, None, None, None, None, None, None
"""

# --- axonn-ai/axonn 660a2246 axonn/intra_layer/fully_connected.py Linear.forward
# (shortened: the 4D batch/channel transitions kept, the bias branch kept).
_AXONN_LINEAR_FORWARD = """
class Linear(torch.nn.Module):
    def forward(
        self,
        x,
        cache_weights_in_all_gather=False,
    ):
        original_shape_x = x.shape
        x = x.reshape(-1, x.shape[-1])
        weight = self.weight
        if not self.expert_mode and (self.inner_group_size * self.outer_group_size > 1):
            inner_group_batch_sizes = gather_batch_sizes(x.shape[0], self.inner_group)
            x = GatherBatchScatterChannels.apply(
                x, inner_group_batch_sizes, self.inner_group
            )
            outer_group_batch_sizes = gather_batch_sizes(x.shape[0], self.outer_group)
            x = Gatherv.apply(x, outer_group_batch_sizes, self.outer_group)
        x = AsyncLinear.apply(
            x,
            weight,
            self.inner_group,
            self.outer_group,
            self.depth_group,
            (self.local_out_features, self.local_in_features),
            cache_weights_in_all_gather,
        )
        if not self.expert_mode and (self.inner_group_size * self.outer_group_size > 1):
            x = GatherChannelsScatterBatch.apply(
                x, outer_group_batch_sizes, self.outer_group
            )
            x = Dropv.apply(x, inner_group_batch_sizes, self.inner_group)

        x = x.reshape(*original_shape_x[:-1], x.shape[-1])

        if self.bias is None:
            return x
        else:
            bias = self.bias
            if not self.expert_mode:
                bias = Gather.apply(bias, self.outer_group)
            if self.skip_bias_add:
                return x, bias
            else:
                return x + bias
"""

# --- OpenSQZ/MegatronApp 99c64dad custom_fsdp/param_and_grad_buffer.py update_main_grads
_MA_UPDATE_MAIN_GRADS = """
class ParamAndGradBuffer:
    def update_main_grads(self):
        \"\"\"Update the main gradients for preparing the optimizer step.\"\"\"
        for _, param in self.optimizer_named_parameters:
            param.reset_attribute()
            orig_param = param.orig_param
            group = self.parameter_groups[self.param_to_param_group[orig_param]]
            item_id = group.main_grad_buffer.param_idx[orig_param]
            optimizer_grad = group.main_grad_buffer.get_item(
                item_id, only_shard=group.main_weight_buffer.is_data_distributed
            )
            setattr(
                param,
                'grad',
                optimizer_grad.to(param.dtype) if optimizer_grad.numel() > 0 else None,
            )
"""

# --- OpenSQZ/MegatronApp 99c64dad custom_fsdp/param_and_grad_buffer.py
# _init_each_parameter_group_buffers (the meta-device reset loop) and _reset_parameters.
_MA_FSDP_META_RESET = """
class ParamAndGradBuffer:
    def _init_each_parameter_group_buffers(self, reset_context_args):
        module_reset_flag = {}
        for group in self.parameter_groups:
            wbuf = group.model_weight_buffer
            if wbuf:
                wbuf.data = torch.empty(wbuf.data_size, dtype=wbuf.dtype, device=self.device)
                bucket = wbuf.fetch_bucket()
            for item_id, p in enumerate(group.params):
                if wbuf:
                    if self.reset_parameters_for_meta_device_init_module and p.is_meta:
                        m_name, m = self.param_to_direct_module[p]
                        if not module_reset_flag.get(m_name, False) and hasattr(
                            m, "reset_parameters"
                        ):
                            old_params = list(m.parameters(recurse=False))
                            m.to_empty(device=self.device, recurse=False)
                            with ResetParametersContext(**reset_context_args):
                                m.reset_parameters()
                            module_reset_flag[m_name] = True
                            new_params = list(m.parameters(recurse=False))

                            self._reset_parameters(old_params, new_params)
                            p = group.params[item_id]
                    wbuf.set_item(item_id, p.data)
                    p.data = wbuf.get_item_from_bucket(bucket, item_id).view(p.shape)

        for group in self.parameter_groups:
            gbuf = group.main_grad_buffer
            if not gbuf:
                continue
            gbuf.data = torch.empty(gbuf.data_size, dtype=gbuf.dtype, device=self.device)
            gbuf.data.zero_()
            for item_id, p in enumerate(group.params):
                p.fsdp_managed_main_grad = gbuf.get_item(item_id)
                p._gbuf = gbuf
                p._item_id = item_id

    def _reset_parameters(self, old_params, new_params):
        assert len(old_params) == len(new_params)
        param_map = {}
        for old_param, new_param in zip(old_params, new_params):
            param_map[old_param] = new_param
            self.param_to_name[new_param] = self.param_to_name[old_param]
            del self.param_to_name[old_param]
            self.param_to_param_group[new_param] = self.param_to_param_group[old_param]
            del self.param_to_param_group[old_param]
            self.param_to_direct_module[new_param] = self.param_to_direct_module[old_param]
            del self.param_to_direct_module[old_param]

        for item_id, p in enumerate(self.params):
            if p in param_map:
                self.params[item_id] = param_map[p]

        for group in self.parameter_groups:
            for item_id, p in enumerate(group.params):
                if p not in param_map:
                    continue
                new_p = param_map[p]
                group.params[item_id] = new_p
                for buf in [group.model_weight_buffer, group.main_weight_buffer, group.main_grad_buffer]:
                    if buf is None:
                        continue
                    buf.param_idx[new_p] = buf.param_idx[p]
                    del buf.param_idx[p]
"""

# --- OpenSQZ/MegatronApp 99c64dad megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.backward (shortened: the sequence-parallel
# all-gather / reduce-scatter kept in outline).
_MA_LINEAR_BACKWARD = """
class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @custom_bwd
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

        if wgrad_compute:
            if ctx.sequence_parallel:
                dim_size = list(input.size())
                dim_size[0] = dim_size[0] * get_tensor_model_parallel_world_size()
                all_gather_buffer = get_global_memory_buffer().get_tensor(dim_size, input.dtype, "mpu")
                handle = dist_all_gather_func(
                    all_gather_buffer, input, group=get_tensor_model_parallel_group(), async_op=True
                )
                total_input = all_gather_buffer
            else:
                total_input = input
        grad_input = grad_output.matmul(weight)

        if ctx.sequence_parallel and wgrad_compute:
            handle.wait()

        if wgrad_compute:
            grad_output, total_input = prepare_input_tensors_for_wgrad_compute(
                grad_output, total_input
            )

        if ctx.allreduce_dgrad:
            handle = dist.all_reduce(
                grad_input, group=get_tensor_model_parallel_group(), async_op=True
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
                # When overlap_grad_reduce is True, need to ensure that backward hooks
                # are all run on the main backprop thread to prevent deadlocks. Setup
                # dummy grad_weight tensor to prevent backward hooks from being run
                # in a background thread.
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

        if ctx.allreduce_dgrad:
            handle.wait()

        return grad_input, grad_weight, grad_bias, None, None, None, None, None
"""

# --- OpenSQZ/MegatronApp 99c64dad layers.py backward, given Megatron-FSDP's overwrite_main_grad
# (a local ``accumulate`` picks the GEMM; the dummy and the flag stay on the op-level switch).
_MA_LINEAR_BACKWARD_OVERWRITE = """
class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @custom_bwd
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
            grad_output, total_input = prepare_input_tensors_for_wgrad_compute(
                grad_output, total_input
            )

        if ctx.gradient_accumulation_fusion:
            accumulate = not getattr(weight, 'overwrite_main_grad', False)
            if wgrad_compute:
                if not accumulate:
                    weight.main_grad.copy_(grad_output.t().matmul(total_input))
                elif weight.main_grad.dtype == torch.float32:
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
"""

# --- ChenQiaoling00/Seq1F1B f54b286c megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.backward (shortened).
_S1_LINEAR_BACKWARD = """
class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        use_bias = ctx.use_bias

        if ctx.sequence_parallel:
            world_size = get_tensor_model_parallel_world_size()
            dim_size = list(input.size())
            dim_size[0] = dim_size[0] * world_size

            all_gather_buffer = get_global_memory_buffer().get_tensor(dim_size, input.dtype, "mpu")
            handle = torch.distributed._all_gather_base(
                all_gather_buffer, input, group=get_tensor_model_parallel_group(), async_op=True
            )
            total_input = all_gather_buffer
        else:
            total_input = input
        grad_input = grad_output.matmul(weight)

        if ctx.sequence_parallel:
            handle.wait()

        grad_output = grad_output.contiguous()
        grad_output = grad_output.view(
            grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2]
        )
        total_input = total_input.view(
            total_input.shape[0] * total_input.shape[1], total_input.shape[2]
        )

        if ctx.async_grad_allreduce:
            handle = torch.distributed.all_reduce(
                grad_input, group=get_tensor_model_parallel_group(), async_op=True
            )

        if ctx.gradient_accumulation_fusion:
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
            grad_weight = None
        else:
            grad_weight = grad_output.t().matmul(total_input)
        grad_bias = grad_output.sum(dim=0) if use_bias else None

        if ctx.async_grad_allreduce:
            handle.wait()

        return grad_input, grad_weight, grad_bias, None, None, None
"""

# --- ChenQiaoling00/Seq1F1B f54b286c layers.py backward, given Megatron-FSDP's
# overwrite_main_grad (adapted, see the module docstring).
_S1_LINEAR_BACKWARD_OVERWRITE = """
class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        use_bias = ctx.use_bias
        total_input = input
        grad_input = grad_output.matmul(weight)

        grad_output = grad_output.contiguous()
        grad_output = grad_output.view(
            grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2]
        )
        total_input = total_input.view(
            total_input.shape[0] * total_input.shape[1], total_input.shape[2]
        )

        accumulate = ctx.gradient_accumulation_fusion and not getattr(
            weight, 'overwrite_main_grad', False
        )
        if ctx.gradient_accumulation_fusion and not accumulate:
            weight.main_grad.copy_(grad_output.t().matmul(total_input))
        elif accumulate and weight.main_grad.dtype == torch.float32:
            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                total_input, grad_output, weight.main_grad
            )
        elif accumulate:
            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(
                total_input, grad_output, weight.main_grad
            )
        grad_weight = (
            None if ctx.gradient_accumulation_fusion else grad_output.t().matmul(total_input)
        )
        grad_bias = grad_output.sum(dim=0) if use_bias else None

        return grad_input, grad_weight, grad_bias, None, None, None
"""

# --- OpenSQZ/MegatronApp 99c64dad custom_fsdp/fully_sharded_data_parallel.py _grad_acc
# (shortened: the post-backward hook around it kept in outline).
_MA_FSDP_GRAD_ACC = """
class FullyShardedDataParallel(_BaseDataParallel):
    def _register_fsdp_hooks(self, root_module):
        fsdp_unit_modules = self.fsdp_unit_modules

        def _grad_acc(param):
            \"\"\"
            Accumulate the gradient in the main_grad buffer.
            \"\"\"
            group_id = self.param_and_grad_buffer.param_to_param_group[param]
            group = self.param_and_grad_buffer.parameter_groups[group_id]
            if not group.requires_grad:
                return

            overwrite_main_grad = self.ddp_config.data_parallel_sharding_strategy in [
                "optim_grads",
                "optim_grads_params",
            ]
            if overwrite_main_grad:
                if not param.grad_added_to_main_grad:
                    if param.grad is not None:
                        param.main_grad.copy_(param.grad)
                        del param.grad
                    else:
                        param.main_grad.zero_()
            else:
                if not param.grad_added_to_main_grad:
                    if param.grad is not None:
                        param.main_grad.add_(param.grad)
                        del param.grad
            # Reset the grad accumulate flag.
            param.grad_added_to_main_grad = False

        def _post_backward(module, *unused):
            if isinstance(module, tuple(fsdp_unit_modules)):
                param_list = list(module.parameters())
            else:
                param_list = list(module.parameters(recurse=False))

            for param in param_list:
                _grad_acc(param)
                self._params_require_handle_grad.discard(param)

            grad_reduce_every_bprop = self.ddp_config.data_parallel_sharding_strategy in [
                "optim_grads",
                "optim_grads_params",
            ]
            if grad_reduce_every_bprop or self.is_last_microbatch:
                self.grad_reduce_pipeline.reduce_gradients(
                    param_list, suggested_queue_capacity=self.suggested_RS_queue_capacity
                )
"""

# --- ChenQiaoling00/Seq1F1B f54b286c megatron/model/distributed.py DistributedDataParallel
# (shortened: the buffer sizing loop and the non-contiguous path dropped).
_S1_LEGACY_DDP = """
class DistributedDataParallel(DistributedDataParallelBase):
    def __init__(self, module, accumulate_allreduce_grads_in_fp32, use_contiguous_buffers):
        super(DistributedDataParallel, self).__init__(module)
        self.accumulate_allreduce_grads_in_fp32 = accumulate_allreduce_grads_in_fp32
        self.use_contiguous_buffers = use_contiguous_buffers

        self._grad_buffers = None
        if self.use_contiguous_buffers:
            self._grad_buffers = {}

            def _get_buffer_type(param):
                return torch.float if self.accumulate_allreduce_grads_in_fp32 else param.dtype

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
                    param.main_grad = self._grad_buffers[dtype].get(
                        param.data.shape, type_num_elements[dtype])

            self.grad_accs = []
            for param in self.module.parameters():
                if param.requires_grad:
                    param_tmp = param.expand_as(param)
                    grad_acc = param_tmp.grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_param_hook(param))
                    self.grad_accs.append(grad_acc)

    def _make_param_hook(self, param):
        \"\"\"Create the all-reduce hook for backprop.\"\"\"
        def param_hook(*unused):
            # Add the gradient to the buffer.
            if param.grad is not None:
                # The gradient function of linear layers is fused with GEMMs
                param.main_grad.add_(param.grad.data)
                # Now we can deallocate grad memory.
                param.grad = None
        return param_hook

    def zero_grad_buffer(self):
        assert self._grad_buffers is not None, 'buffers are not initialized.'
        for _, buffer_ in self._grad_buffers.items():
            buffer_.zero()
"""

# --- OpenSQZ/MegatronApp 99c64dad megatron/core/transformer/cuda_graphs.py
# _CudagraphReplayNode.backward (shortened: the FP8 scale update dropped).
_MA_CUDAGRAPH_BACKWARD = """
class _CudagraphReplayNode(torch.autograd.Function):
    @staticmethod
    def backward(ctx, *grads):
        \"\"\"Replay the backward graph of the passed runner.\"\"\"

        runner = ctx.runner
        assert (
            runner.bwd_graph is not None
        ), "Tried replaying bwd cudagraph before calling 'create_bwd_cudagraph'!"
        assert (
            runner.status == _GraphStatus.BWD_READY
        ), "Tried calling the bwd cudagraph when the fwd cudagraph was expected to be called next!"
        assert len(grads) == len(
            runner.static_grad_outputs
        ), "Bwd cudagraph received a different number of tensors than what it was graphed with!"

        # Copy new data into bwd graph input buffer
        for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
            if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                cudagraph_output_grad.copy_(user_output_grad)

        runner.bwd_graph.replay()
        runner.status = _GraphStatus.FWD_READY

        # If using gradient_accumulation_fusion, whenever `main_grad` is calculated
        # the `grad_added_to_main_grad` attribute is expected to set. However when using
        # cudagraphs this doesn't occur so we emulate this behavior here.
        for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():
            param.grad_added_to_main_grad = grad_added

        if runner.is_first_layer:
            output_grads = tuple(
                b.clone().detach() if b is not None else b for b in runner.get_input_grads()
            )
        else:
            output_grads = tuple(
                b.detach() if b is not None else b for b in runner.get_input_grads()
            )
        return None, None, *output_grads
"""

# --- OpenSQZ/MegatronApp 99c64dad distributed_data_parallel.py _make_backward_post_hook
_MA_DDP_HOOK = """
class DistributedDataParallel(_BaseDataParallel):
    def _make_backward_post_hook(self, param: torch.nn.Parameter):
        \"\"\"
        Creates a backward post-hook to dispatch an all-reduce / reduce-scatter when
        ready (i.e., when all grads in a bucket have been computed in all microbatches
        in a batch).
        \"\"\"

        def hook(*unused):
            if is_graph_capturing():
                return

            if param in self.param_to_bucket_group:
                assert param.requires_grad
                if self.ddp_config.overlap_grad_reduce:
                    assert (
                        param.grad is not None
                    ), 'param.grad being None is not safe when overlap_grad_reduce is True'
                if param.grad is not None and (
                    not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                ):
                    param.main_grad.add_(param.grad.data)
                param.grad = None

                if self.ddp_config.overlap_grad_reduce:
                    self.param_to_bucket_group[param].register_grad_ready(param)

        return hook
"""

# --- OpenSQZ/MegatronApp 99c64dad moe/shared_experts.py SharedExpertMLP, with mlp.py MLP
# (adapted: backward_dw added as in later Megatron-core, see the module docstring).
_MA_SHARED_EXPERTS = """
class MLP(MegatronModule):
    def backward_dw(self):
        self.linear_fc2.backward_dw()
        self.linear_fc1.backward_dw()


class SharedExpertMLP(MLP):
    # This stream is used when '--moe-shared-expert-overlap' is set.
    stream = None

    def __init__(self, config: TransformerConfig, submodules: MLPSubmodules, gate: bool):
        config = deepcopy(config)
        assert config.add_bias_linear == False, "bias is not supported in the shared experts, "
        config.ffn_hidden_size = config.moe_shared_expert_intermediate_size
        super().__init__(config=config, submodules=submodules)

        self.use_shared_expert_gate = gate
        if self.use_shared_expert_gate:
            self.gate_weight = torch.nn.Parameter(torch.empty((1, self.config.hidden_size)))
            if config.perform_initialization:
                config.init_method(self.gate_weight)
            self.gate_weight.data = self.gate_weight.data.to(dtype=config.params_dtype)
            setattr(self.gate_weight, 'sequence_parallel', self.config.sequence_parallel)
        else:
            self.gate_weight = None

        if self.config.moe_shared_expert_overlap:
            for linear in [self.linear_fc1, self.linear_fc2]:
                if hasattr(linear, 'parallel_mode'):
                    linear.parallel_mode = None
            if SharedExpertMLP.stream is None:
                SharedExpertMLP.stream = torch.cuda.Stream()

    def backward_dw(self):
        if self.config.moe_shared_expert_overlap:
            with torch.cuda.stream(self.stream):
                super().backward_dw()
            torch.cuda.current_stream().wait_stream(self.stream)
        else:
            super().backward_dw()
"""

# --- OpenSQZ/MegatronApp 99c64dad ssm/mamba_mixer.py MambaMixer, ssm/mamba_layer.py MambaLayer
# (adapted: backward_dw added, see the module docstring; the SSM kernels dropped).
_MA_MAMBA = """
class MambaMixer(MegatronModule):
    def __init__(self, config, submodules, d_model, d_state=128, headdim=None, ngroups=None, layer_number=None, bias=False):
        super().__init__(config)
        self.d_model = d_model
        self.d_state = d_state
        self.d_inner = self.config.mamba_num_heads * headdim
        self.nheads = self.config.mamba_num_heads
        self.ngroups = ngroups
        self.in_proj = build_module(
            submodules.in_proj,
            self.d_model,
            self.d_inner * 2 + 2 * self.ngroups * self.d_state + self.nheads,
            config=self.config,
            init_method=self.config.init_method,
            gather_output=False,
            bias=bias,
            skip_bias_add=False,
            is_expert=False,
            tp_comm_buffer_name='fc1',
        )
        self.out_proj = build_module(
            submodules.out_proj,
            self.d_inner,
            self.d_model,
            config=self.config,
            init_method=self.config.output_layer_init_method,
            bias=bias,
            input_is_parallel=True,
            skip_bias_add=True,
            is_expert=False,
            tp_comm_buffer_name='fc2',
        )

    def backward_dw(self):
        self.out_proj.backward_dw()
        self.in_proj.backward_dw()

    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None):
        device = self.out_proj.weight.device
        conv_dtype = self.conv1d.weight.dtype if dtype is None else dtype
        conv_state = torch.zeros(batch_size, self.conv1d.weight.shape[0], self.d_conv, device=device, dtype=conv_dtype)
        ssm_state = torch.zeros(batch_size, self.nheads_local, self.headdim, self.d_state, device=device, dtype=dtype)
        return conv_state, ssm_state


class MambaLayer(MegatronModule):
    def __init__(self, config, submodules, mamba_ssm_ngroups=8, layer_number=1, residual_in_fp32=False):
        super().__init__(config)
        self.layer_number = layer_number
        self.residual_in_fp32 = residual_in_fp32
        self.mixer = build_module(
            submodules.mixer,
            self.config,
            d_model=self.config.hidden_size,
            ngroups=mamba_ssm_ngroups,
            layer_number=layer_number,
        )
        self.norm = build_module(submodules.norm, self.config, self.config.hidden_size)

    def backward_dw(self):
        if hasattr(self.mixer, "backward_dw"):
            self.mixer.backward_dw()
"""

# --- OpenSQZ/MegatronApp 99c64dad custom_fsdp/param_and_grad_buffer.py: the main_grad binding
# at the end of _init_each_parameter_group_buffers.
_MA_FSDP_MAIN_GRAD_BIND = """
class ParamAndGradBuffer:
    def _init_each_parameter_group_buffers(self):
        def _alloc(dtype, size):
            return torch.empty(size, dtype=dtype, device=self.device)

        # Initialize the main grad buffer data of each parameter group.
        for group in self.parameter_groups:
            gbuf = group.main_grad_buffer
            if not gbuf:
                continue
            gbuf.data = _alloc(gbuf.dtype, gbuf.data_size)
            gbuf.data.zero_()
            for item_id, p in enumerate(group.params):
                p.fsdp_managed_main_grad = gbuf.get_item(item_id)
                p._gbuf = gbuf
                p._item_id = item_id

                def main_grad_getter(p):
                    # Make sure main_grad memory storage ready.
                    bucket = p._gbuf.fetch_bucket()
                    gbuf = p._gbuf
                    item_id = p._item_id
                    return gbuf.get_item_from_bucket(bucket, item_id).view(p.shape)

                setattr(p.__class__, 'main_grad', property(main_grad_getter))

            if gbuf.is_data_distributed:
                gbuf.free_bucket_storage()

        gc.collect()
        torch.cuda.empty_cache()
"""

# --- NVIDIA-NeMo/RL 7ea279ab nemo_rl/models/megatron/setup.py setup_model_and_optimizer
# (shortened to the PEFT pre-wrap hook and the get_model call).
_NRL_SETUP_PEFT = """
def setup_model_and_optimizer(policy_cfg, megatron_cfg, load_optimizer=True, state=None):
    pre_wrap_hook = []
    use_peft = policy_cfg["megatron_cfg"].get("peft", {}).get("enabled", False)
    if use_peft:
        peft_cfg = policy_cfg["megatron_cfg"].get("peft", {})
        peft = LoRA(
            target_modules=peft_cfg["target_modules"],
            exclude_modules=peft_cfg["exclude_modules"],
            dim=peft_cfg["dim"],
            alpha=peft_cfg["alpha"],
            dropout=peft_cfg["dropout"],
            dropout_position=peft_cfg["dropout_position"],
            lora_A_init_method=peft_cfg["lora_A_init_method"],
            lora_B_init_method=peft_cfg["lora_B_init_method"],
            a2a_experimental=peft_cfg["a2a_experimental"],
            lora_dtype=peft_cfg["lora_dtype"],
        )
    else:
        peft = None

    megatron_cfg.peft = peft

    if megatron_cfg.peft is not None:
        pre_peft_hook = _create_peft_pre_wrap_hook(megatron_cfg, state)
        megatron_cfg.model.register_pre_wrap_hook(pre_peft_hook)

        def composed_peft_hook(model: list[MegatronModule]) -> list[MegatronModule]:
            model = pre_peft_hook(model)
            return model

        pre_wrap_hook.extend([composed_peft_hook])

    pg_collection = ProcessGroupCollection.use_mpu_process_groups()
    setattr(megatron_cfg.model, "_pg_collection", pg_collection)
    model = get_model(
        megatron_cfg.model,
        megatron_cfg.ddp,
        use_torch_fsdp2=megatron_cfg.dist.use_torch_fsdp2,
        overlap_param_gather_with_optimizer_step=megatron_cfg.optimizer.overlap_param_gather_with_optimizer_step,
        data_parallel_random_init=megatron_cfg.rng.data_parallel_random_init,
        pre_wrap_hook=pre_wrap_hook,
        mixed_precision_wrapper=Float16Module,
        pg_collection=pg_collection,
        wrap_with_ddp=load_optimizer,
    )

    if load_optimizer:
        optimizer, scheduler = setup_optimizer(
            optimizer_config=megatron_cfg.optimizer,
            scheduler_config=megatron_cfg.scheduler,
            model=model,
            use_gloo_process_groups=megatron_cfg.dist.use_gloo_process_groups,
        )
    else:
        optimizer, scheduler = None, None
    return model, optimizer, scheduler
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        1,
        "axonn_async_linear_defers_wgrad_to_gathered_weight",
        _swap(
            _AXONN_ASYNC_LINEAR,
            "                    overlap_comm=True,\n"
            "                )\n"
            "                overlap_communication.accumulate_later(original_weight, grad_weight)\n",
            "                    overlap_comm=True,\n"
            "                )\n"
            "                overlap_communication.accumulate_later(weight, grad_weight)  # bug\n",
        ),
        _AXONN_ASYNC_LINEAR,
    ),
    Variant(
        1,
        "megatronapp_fsdp_update_main_grads_sets_model_param_grad",
        _swap(
            _MA_UPDATE_MAIN_GRADS,
            "            setattr(\n                param,\n",
            "            setattr(\n                orig_param,  # bug\n",
        ),
        _MA_UPDATE_MAIN_GRADS,
    ),
    # ---------------------------------------------------------------- 2: rebound parameter
    Variant(
        2,
        "axonn_linear_forward_casts_weight_before_async_linear",
        _swap(
            _AXONN_LINEAR_FORWARD,
            "        weight = self.weight\n",
            "        weight = self.weight.to(x.dtype)  # bug\n",
        ),
        _AXONN_LINEAR_FORWARD,
    ),
    Variant(
        2,
        "megatronapp_fsdp_meta_reset_params_not_remapped",
        _swap(
            _MA_FSDP_META_RESET,
            "                            self._reset_parameters(old_params, new_params)\n"
            "                            p = group.params[item_id]\n",
            "                            p = dict(zip(old_params, new_params))[p]  # bug\n",
        ),
        _MA_FSDP_META_RESET,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    Variant(
        3,
        "megatronapp_linear_flag_set_on_unfused_path",
        _swap(
            _MA_LINEAR_BACKWARD,
            "        else:\n"
            "            grad_weight = grad_output.t().matmul(total_input)\n"
            "        grad_bias = grad_output.sum(dim=0) if use_bias else None\n",
            "        else:\n"
            "            grad_weight = grad_output.t().matmul(total_input)\n"
            "            if hasattr(weight, 'grad_added_to_main_grad'):  # bug\n"
            "                weight.grad_added_to_main_grad = True  # bug\n"
            "        grad_bias = grad_output.sum(dim=0) if use_bias else None\n",
        ),
        _MA_LINEAR_BACKWARD,
    ),
    Variant(
        3,
        "seq1f1b_linear_fused_path_returns_real_wgrad",
        _swap(
            _S1_LINEAR_BACKWARD,
            '                raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")\n'
            "            grad_weight = None\n",
            '                raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")\n'
            "            grad_weight = grad_output.t().matmul(total_input)  # bug\n",
        ),
        _S1_LINEAR_BACKWARD,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        4,
        "megatronapp_fsdp_grad_acc_always_copies",
        _swap(
            _MA_FSDP_GRAD_ACC,
            "            overwrite_main_grad = self.ddp_config.data_parallel_sharding_strategy in [\n"
            '                "optim_grads",\n'
            '                "optim_grads_params",\n'
            "            ]\n"
            "            if overwrite_main_grad:\n"
            "                if not param.grad_added_to_main_grad:\n"
            "                    if param.grad is not None:\n"
            "                        param.main_grad.copy_(param.grad)\n"
            "                        del param.grad\n"
            "                    else:\n"
            "                        param.main_grad.zero_()\n"
            "            else:\n"
            "                if not param.grad_added_to_main_grad:\n"
            "                    if param.grad is not None:\n"
            "                        param.main_grad.add_(param.grad)\n"
            "                        del param.grad\n",
            "            if not param.grad_added_to_main_grad:  # bug\n"
            "                if param.grad is not None:\n"
            "                    param.main_grad.copy_(param.grad)  # bug\n"
            "                    del param.grad\n"
            "                else:\n"
            "                    param.main_grad.zero_()  # bug\n",
        ),
        _MA_FSDP_GRAD_ACC,
    ),
    Variant(
        4,
        "seq1f1b_legacy_ddp_hook_copies_grad",
        _swap(
            _S1_LEGACY_DDP,
            "                param.main_grad.add_(param.grad.data)\n",
            "                param.main_grad.copy_(param.grad.data)  # bug\n",
        ),
        _S1_LEGACY_DDP,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        5,
        "megatronapp_cudagraph_replay_drops_flag_restore",
        _swap(
            _MA_CUDAGRAPH_BACKWARD,
            "        # If using gradient_accumulation_fusion, whenever `main_grad` is calculated\n"
            "        # the `grad_added_to_main_grad` attribute is expected to set. However when using\n"
            "        # cudagraphs this doesn't occur so we emulate this behavior here.\n"
            "        for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():\n"
            "            param.grad_added_to_main_grad = grad_added\n\n"
            "        if runner.is_first_layer:\n",
            "        if runner.is_first_layer:  # bug\n",
        ),
        _MA_CUDAGRAPH_BACKWARD,
    ),
    Variant(
        5,
        "megatronapp_ddp_hook_ignores_grad_added_flag",
        _swap(
            _MA_DDP_HOOK,
            "                if param.grad is not None and (\n"
            "                    not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)\n"
            "                ):\n",
            "                if param.grad is not None:  # bug\n",
        ),
        _MA_DDP_HOOK,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    Variant(
        6,
        "megatronapp_shared_experts_backward_dw_only_when_overlapped",
        _swap(
            _MA_SHARED_EXPERTS,
            "    def backward_dw(self):\n"
            "        if self.config.moe_shared_expert_overlap:\n"
            "            with torch.cuda.stream(self.stream):\n"
            "                super().backward_dw()\n"
            "            torch.cuda.current_stream().wait_stream(self.stream)\n"
            "        else:\n"
            "            super().backward_dw()\n",
            "    def backward_dw(self):\n"
            "        if not self.config.moe_shared_expert_overlap:\n"
            "            return  # bug\n"
            "        with torch.cuda.stream(self.stream):\n"
            "            super().backward_dw()\n"
            "        torch.cuda.current_stream().wait_stream(self.stream)\n",
        ),
        _MA_SHARED_EXPERTS,
    ),
    Variant(
        6,
        "megatronapp_mamba_mixer_without_backward_dw",
        _swap(
            _MA_MAMBA,
            "    def backward_dw(self):\n"
            "        self.out_proj.backward_dw()\n"
            "        self.in_proj.backward_dw()\n\n"
            "    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None):\n",
            "    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None):  # bug\n",
        ),
        _MA_MAMBA,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    Variant(
        7,
        "seq1f1b_linear_returned_wgrad_on_accumulate_flag",
        _swap(
            _S1_LINEAR_BACKWARD_OVERWRITE,
            "            None if ctx.gradient_accumulation_fusion else grad_output.t().matmul(total_input)\n",
            "            None if accumulate else grad_output.t().matmul(total_input)  # bug\n",
        ),
        _S1_LINEAR_BACKWARD_OVERWRITE,
    ),
    Variant(
        7,
        "megatronapp_linear_dummy_and_flag_on_accumulate",
        _swap(
            _MA_LINEAR_BACKWARD_OVERWRITE,
            "            if hasattr(weight, 'grad_added_to_main_grad'):\n",
            "            if accumulate and hasattr(weight, 'grad_added_to_main_grad'):  # bug\n",
        ),
        _MA_LINEAR_BACKWARD_OVERWRITE,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    Variant(
        8,
        "megatronapp_fsdp_main_grad_bound_before_bucket_freed",
        _swap(
            _MA_FSDP_MAIN_GRAD_BIND,
            "\n                def main_grad_getter(p):\n"
            "                    # Make sure main_grad memory storage ready.\n"
            "                    bucket = p._gbuf.fetch_bucket()\n"
            "                    gbuf = p._gbuf\n"
            "                    item_id = p._item_id\n"
            "                    return gbuf.get_item_from_bucket(bucket, item_id).view(p.shape)\n\n"
            "                setattr(p.__class__, 'main_grad', property(main_grad_getter))\n",
            "                p.main_grad = gbuf.get_item_from_bucket(gbuf.fetch_bucket(), item_id).view(p.shape)  # bug\n",
        ),
        _MA_FSDP_MAIN_GRAD_BIND,
    ),
    Variant(
        8,
        "nemo_rl_peft_adapters_attached_after_ddp_wrap",
        _swap(
            _swap(
                _NRL_SETUP_PEFT,
                "    if megatron_cfg.peft is not None:\n"
                "        pre_peft_hook = _create_peft_pre_wrap_hook(megatron_cfg, state)\n"
                "        megatron_cfg.model.register_pre_wrap_hook(pre_peft_hook)\n\n"
                "        def composed_peft_hook(model: list[MegatronModule]) -> list[MegatronModule]:\n"
                "            model = pre_peft_hook(model)\n"
                "            return model\n\n"
                "        pre_wrap_hook.extend([composed_peft_hook])\n\n",
                "",
            ),
            "        wrap_with_ddp=load_optimizer,\n    )\n",
            "        wrap_with_ddp=load_optimizer,\n    )\n"
            "    if megatron_cfg.peft is not None:\n"
            "        model = megatron_cfg.peft(model, training=True)  # bug\n",
        ),
        _NRL_SETUP_PEFT,
    ),
)
