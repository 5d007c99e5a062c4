"""The seventeenth blind corpus (H-blind17): main_grad bookkeeping variants of the eight classes
of issue #19, grounded in code from repositories no earlier blind corpus used: sail-sg's
zero-bubble Megatron fork (`WeightGradStore`, split backward), hpcaitech ColossalAI (`.grad` of the
Parameter as the accumulation buffer, `use_zbv` deferral, `weight_origin` versus its view),
yandex YaFSDP (`MetaParam.grad_buffer`, `grad_accumulation` as the overwrite-versus-add flag,
fp32 grad shards), huggingface nanotron (`FP32GradientAccumulator` fp32 grad buffers and
`_is_accumulation_sync_step`), DeepSpeed's BF16_Optimizer (`hp_grad`, grad-acc hooks) and
NVIDIA-NeMo Automodel (TE GroupedLinear experts under Megatron-FSDP).

Sources (repo, commit, path, function):
- sail-sg/zero-bubble-pipeline-parallelism 39f2c186a27580b7051eb51e0f651e1efd0a8170
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.forward / .backward
- sail-sg/zero-bubble-pipeline-parallelism 39f2c186a27580b7051eb51e0f651e1efd0a8170
  megatron/core/zbpp_utils.py WeightGradStore.put / .flush / .pop
- hpcaitech/ColossalAI 4f9953be335ef371b3848719ddafe596c01ecd37
  colossalai/pipeline/weight_grad_store.py WeightGradStore.pop
- hpcaitech/ColossalAI 4f9953be335ef371b3848719ddafe596c01ecd37
  colossalai/shardformer/layer/_operation.py MatmulWithGradAccum.backward, MatmulWithAsyncCommunication.backward
- hpcaitech/ColossalAI 4f9953be335ef371b3848719ddafe596c01ecd37
  colossalai/shardformer/layer/linear.py Linear1D_Col.forward, VocabParallelLMHead1D.forward
- hpcaitech/ColossalAI 4f9953be335ef371b3848719ddafe596c01ecd37
  colossalai/pipeline/schedule/zero_bubble_pp.py ZeroBubbleVPipeScheduler.schedule_b / .schedule_w
- yandex/YaFSDP 669fc366f1fb9dcd311c862a1c7450990c8d3721 ya_fsdp/meta_param.py
  Narrow.forward / .backward, MetaParam.materialize, materialize_params
- yandex/YaFSDP 669fc366f1fb9dcd311c862a1c7450990c8d3721 ya_fsdp/ya_fsdp.py
  SuperTensor.reduce_scatter_grad, .get_backward_pre_hook, .pre_forward
- huggingface/nanotron 2411b022a75fb7f7561a1bb4166706da5e1b76de src/nanotron/optim/gradient_accumulator.py
  FP32GradientAccumulator._accumulate_grad, FP32GradBucketManager.__post_init__, get_fp32_accum_hook
- deepspeedai/DeepSpeed edaa7221267243c7be7fb49c5d5f5c4fb97b4641 deepspeed/runtime/bf16_optimizer.py
  BF16_Optimizer._update_hp_grad / .update_hp_grads / .create_grad_acc_hooks
- NVIDIA-NeMo/Automodel 36044ad3d139363fb6c73c24af2e7c6b65ec52f6 nemo_automodel/components/moe/experts.py
  GroupedExpertsTE.init_token_dispatcher (and components/distributed/megatron_fsdp.py for the
  Megatron-FSDP parameter attributes)

Conventions: twins are the real code shortened (real names and idioms; helpers such as
`pre_process`, `process_wgrad`, `_dummy_wgrad` and `backward_b_step` stand for elided inline
code). Where the real code carries a latent fault the variant is not about, the twin is the
repaired form (ColossalAI's fused check reads `weight_origin.grad`, not the view's `.grad`;
YaFSDP's `Narrow.backward` sets `grad_accumulation` only when it wrote the buffer).
Automodel's real GroupedExpertsTE builds GroupedLinear without `fuse_wgrad_accumulation`; its
twin adds that switch and the Megatron-FSDP `get_main_grad()` exposure of Megatron-LM's fix.
Bugs are written as `_swap(twin, old, new)`: one passage of the twin replaced, the changed
line(s) carrying `# bug`. Per-repository stand-ins for main_grad: ColossalAI's Parameter `.grad`
(the fused kernel accumulates into it and `None` is returned to autograd), YaFSDP's
`MetaParam.grad_buffer` with `grad_accumulation` (False: overwrite by `copy_`, True: `add_`),
nanotron's `get_grad_buffer(name)` and DeepSpeed's `hp_grad`.
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- sail-sg/zero-bubble-pipeline-parallelism 39f2c186 megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication (shortened: sequence-parallel gathers, dgrad
# all-reduce and the fp16 main_grad kernel dropped; wgrad, deferral and bookkeeping kept).
_ZBPP_LINEAR = """
import functools

import fused_weight_gradient_mlp_cuda
import torch

from megatron.core.zbpp_utils import WeightGradStore


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel, grad_output_buffer, wgrad_deferral_limit):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.weight_main_grad = weight.main_grad
        output = torch.matmul(input, weight.t())
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        weight.main_grad = ctx.weight_main_grad
        wgrad_compute = not WeightGradStore.split_bw()
        grad_input = grad_output.matmul(weight)
        grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, input)

        if ctx.gradient_accumulation_fusion:
            if wgrad_compute:
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
            else:
                WeightGradStore.put(
                    weight,
                    functools.partial(pre_process, grad_output, input),
                    functools.partial(process_wgrad, weight, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32),
                )
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
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
        return grad_input, grad_weight, grad_bias, None, None, None, None, None
"""

# The same backward with the dummy-versus-real choice written as one conditional expression
# keyed on the op-level fusion flag (as the TE/Megatron fixes write it).
_ZBPP_LINEAR_CONDEXPR = """
import functools

import fused_weight_gradient_mlp_cuda
import torch

from megatron.core.zbpp_utils import WeightGradStore


def _dummy_wgrad(weight, dtype):
    if getattr(weight, "zero_out_wgrad", False):
        return torch.zeros(weight.shape, dtype=dtype, device=torch.cuda.current_device(), requires_grad=False)
    return torch.empty(weight.shape, dtype=dtype, device=torch.cuda.current_device(), requires_grad=False)


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        weight.main_grad = ctx.weight_main_grad
        wgrad_compute = not WeightGradStore.split_bw()
        grad_input = grad_output.matmul(weight)
        grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, input)

        if ctx.gradient_accumulation_fusion:
            if wgrad_compute:
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
            else:
                WeightGradStore.put(
                    weight,
                    functools.partial(pre_process, grad_output, input),
                    functools.partial(process_wgrad, weight, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32),
                )
            if hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
        grad_weight = _dummy_wgrad(weight, input.dtype) if ctx.gradient_accumulation_fusion else grad_output.t().matmul(total_input)
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
        return grad_input, grad_weight, grad_bias, None, None, None, None, None
"""

# --- hpcaitech/ColossalAI 4f9953be colossalai/pipeline/weight_grad_store.py WeightGradStore
# (whole class; `func(x, dy, grad)` accumulates dW into grad, `func(x, dy)` returns dW).
_COLOSSAL_WGS = """
import queue


class WeightGradStore:
    cache = []
    weight_grad_queue = [queue.Queue(), queue.Queue()]

    @classmethod
    def put(cls, total_input, grad_output, weight, func):
        cls.cache.append((total_input, grad_output, weight, func))

    @classmethod
    def flush(cls, chunk=0):
        cls.weight_grad_queue[chunk].put(cls.cache)
        cls.cache = []

    @classmethod
    def pop(cls, chunk=0):
        if cls.weight_grad_queue[chunk].qsize() > 0:
            stored_grads = cls.weight_grad_queue[chunk].get()
            for total_input, grad_output, weight, func in stored_grads:
                if isinstance(weight, tuple):
                    # weight_cal (a view, for Gemini's __torch_function__) computes dw,
                    # weight_origin (the Parameter) is the one updated
                    weight_cal, weight_origin = weight
                    if weight_origin.grad is not None:
                        func(total_input, grad_output, weight_origin.grad)
                    else:
                        grad_weight = func(total_input, grad_output)
                        weight_origin.grad = grad_weight
                else:
                    if weight.grad is not None:
                        func(total_input, grad_output, weight.grad)
                    else:
                        grad_weight = func(total_input, grad_output)
                        weight.grad = grad_weight
        else:
            raise Exception("Pop empty queue.")
"""

# --- hpcaitech/ColossalAI 4f9953be colossalai/shardformer/layer/_operation.py
# MatmulWithGradAccum.backward (zbv branch dropped here; the fused check reads the Parameter).
_COLOSSAL_MATMUL_ACCUM = """
import torch

try:
    import fused_weight_gradient_mlp_cuda

    _grad_accum_fusion_available = True
except ImportError:
    _grad_accum_fusion_available = False


class MatmulWithGradAccum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight, bias, async_grad_allreduce, use_zbv=False):
        ctx.save_for_backward(input_, weight, bias)
        ctx.use_bias = bias is not None
        output = torch.matmul(input_, weight)
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        use_bias = ctx.use_bias
        # In order to be hooked into Gemini's '__torch_function__', adding a view operation to weight.
        weight_origin = weight
        weight = weight.view(weight.shape)

        total_input = input
        grad_input = grad_output.matmul(weight.T)
        grad_output = grad_output.contiguous()
        if len(grad_output.shape) > 2:
            grad_output = grad_output.view(-1, grad_output.shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])

        if _grad_accum_fusion_available and weight_origin.grad is not None:
            grad = weight_origin.grad
            if grad.dtype == torch.float32:
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, grad)
                grad_weight = None
            elif grad.dtype == torch.float16:
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, grad)
                grad_weight = None
            else:
                grad_weight = total_input.t().matmul(grad_output)
        else:
            grad_weight = total_input.t().matmul(grad_output)
        grad_bias = grad_output.sum(dim=0) if use_bias else None
        return grad_input, grad_weight, grad_bias, None, None
"""

# --- hpcaitech/ColossalAI 4f9953be colossalai/shardformer/layer/_operation.py
# MatmulWithAsyncCommunication.backward (zbv and fused paths; the accumulate-into-.grad
# decision and the deferral are computed once, the return picks None or the real dW).
_COLOSSAL_MATMUL_ZBV = """
import functools

import torch
import torch.distributed as dist

from colossalai.pipeline.weight_grad_store import WeightGradStore

from .utils import execute_conv1d_w_pass, execute_conv1d_w_pass_grad_accum

try:
    import fused_weight_gradient_mlp_cuda

    _grad_accum_fusion_available = True
except ImportError:
    _grad_accum_fusion_available = False


class MatmulWithAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        use_zbv = ctx.use_zbv
        weight_origin = weight
        weight = weight.view(weight.shape)

        total_input = input
        grad_input = grad_output.matmul(weight.T)
        grad_output = grad_output.contiguous()
        if len(grad_output.shape) > 2:
            grad_output = grad_output.view(-1, grad_output.shape[-1])
            total_input = total_input.view(-1, total_input.shape[-1])
        handle = dist.all_reduce(grad_input, group=ctx.process_group, async_op=True)

        accum_into_grad = _grad_accum_fusion_available and weight_origin.grad is not None
        wgrad_now = accum_into_grad and not use_zbv
        if use_zbv:
            w_pass = execute_conv1d_w_pass_grad_accum if accum_into_grad else functools.partial(execute_conv1d_w_pass, wgrad_gemm_func=torch.matmul)
            WeightGradStore.put(total_input, grad_output, (weight, weight_origin), w_pass)
        if wgrad_now:
            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight_origin.grad)
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None

        handle.wait()
        return grad_input, (None if use_zbv or accum_into_grad else total_input.t().matmul(grad_output)), grad_bias, None, None, None, None
"""

# --- hpcaitech/ColossalAI 4f9953be colossalai/shardformer/layer/linear.py Linear1D_Col and its
# subclass VocabParallelLMHead1D (which in this variant runs its own matmul Function).
_COLOSSAL_LM_HEAD = """
import functools

import torch

from colossalai.pipeline.weight_grad_store import WeightGradStore

from ._operation import _reduce, linear_with_async_comm
from .utils import execute_w_pass


class Linear1D_Col(ParallelModule):
    def __init__(self, in_features, out_features, process_group=None, use_zbv=False, **kwargs):
        super().__init__(**kwargs)
        self.in_features = in_features
        self.out_features = out_features
        self.process_group = process_group
        self.use_zbv = use_zbv

    def forward(self, input_):
        bias = self.bias if not self.skip_bias_add else None
        return linear_with_async_comm(input_, self.weight, bias, self.process_group, True, use_zbv=self.use_zbv)


class _VocabParallelMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight, process_group, use_zbv):
        ctx.save_for_backward(input_, weight)
        ctx.process_group = process_group
        ctx.use_zbv = use_zbv
        return torch.matmul(input_, weight.t())

    @staticmethod
    def backward(ctx, grad_output):
        input_, weight = ctx.saved_tensors
        weight_origin = weight
        weight = weight.view(weight.shape)
        grad_input = grad_output.matmul(weight)
        grad_output = grad_output.reshape(-1, grad_output.shape[-1])
        total_input = input_.reshape(-1, input_.shape[-1])
        if ctx.use_zbv:
            WeightGradStore.put(total_input, grad_output, (weight, weight_origin), functools.partial(execute_w_pass, wgrad_gemm_func=torch.matmul))
            grad_weight = None
        else:
            grad_weight = grad_output.t().matmul(total_input)
        _reduce(grad_input, group=ctx.process_group)
        return grad_input, grad_weight, None, None


class VocabParallelLMHead1D(Linear1D_Col, PaddingParallelModule):
    def forward(self, input_):
        output = _VocabParallelMatmul.apply(input_, self.weight, self.process_group, self.use_zbv)
        return output[..., : self.num_valid_embeddings_local]
"""

# --- hpcaitech/ColossalAI 4f9953be colossalai/pipeline/schedule/zero_bubble_pp.py
# ZeroBubbleVPipeScheduler.schedule_b / schedule_w and a subclass that runs the last stage's
# chunk-1 W pass right after its B pass.
_COLOSSAL_ZBV_SCHED = """
from colossalai.pipeline.weight_grad_store import WeightGradStore


class ZeroBubbleVPipeScheduler(PipelineSchedule):
    def schedule_b(self, scheduled_node, model_chunk, model_chunk_id, optimizer):
        input_obj = self.input_tensors[model_chunk_id].pop(0)
        output_obj = self.output_tensors[model_chunk_id].pop(0)
        output_tensor_grad = self.recv_backward_buffer[model_chunk_id].pop(0)
        input_object_grad = self.backward_b_step(
            model_chunk=model_chunk,
            model_chunk_id=model_chunk_id,
            optimizer=optimizer,
            input_obj=input_obj,
            output_obj=output_obj,
            output_obj_grad=output_tensor_grad,
        )
        self.send_backward_buffer[model_chunk_id].append(input_object_grad)
        WeightGradStore.flush(chunk=model_chunk_id)

    def schedule_w(self, scheduled_node, model_chunk, model_chunk_id, optimizer):
        WeightGradStore.pop(chunk=model_chunk_id)


class FusedTailWScheduler(ZeroBubbleVPipeScheduler):
    def _w_fused_into_b(self, model_chunk_id):
        return self.stage_manager.is_last_stage(ignore_chunk=True) and model_chunk_id == 1

    def schedule_b(self, scheduled_node, model_chunk, model_chunk_id, optimizer):
        super().schedule_b(scheduled_node, model_chunk, model_chunk_id, optimizer)
        if self._w_fused_into_b(model_chunk_id):
            WeightGradStore.pop(chunk=model_chunk_id)

    def schedule_w(self, scheduled_node, model_chunk, model_chunk_id, optimizer):
        if self._w_fused_into_b(model_chunk_id):
            return
        super().schedule_w(scheduled_node, model_chunk, model_chunk_id, optimizer)
"""

# --- yandex/YaFSDP 669fc366 ya_fsdp/meta_param.py Narrow and MetaParam (shortened).
_YAFSDP_NARROW = """
import torch


class Narrow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, buffer, grad_buffer, metaparam):
        ctx.metaparam = metaparam
        ctx.set_materialize_grads(False)
        param_view = buffer.narrow(0, metaparam.offset, metaparam.numel).view(metaparam.shape)
        if grad_buffer is not None:
            param_view.grad_ = grad_buffer.narrow(0, metaparam.offset, metaparam.numel).view(metaparam.shape)
        param_view.metaparam = metaparam
        return param_view

    @staticmethod
    def backward(ctx, grad_output):
        if grad_output is not None:
            if not ctx.metaparam.grad_accumulation:
                ctx.metaparam.grad_buffer.narrow(0, ctx.metaparam.offset, ctx.metaparam.numel).copy_(grad_output.view(-1))
            else:
                ctx.metaparam.grad_buffer.narrow(0, ctx.metaparam.offset, ctx.metaparam.numel).add_(grad_output.view(-1))
            ctx.metaparam.grad_accumulation = True
        return None, None, None


class MetaParam:
    def __init__(self, parent_module, parent_module_name, name, param):
        self.parent_module = parent_module
        self.name = name
        self.shape = param.shape
        self.numel = param.numel()
        self.grad_accumulation = False
        self.param = param

    def set_buffer(self, buffer, grad_buffer, offset):
        self.buffer = buffer
        self.grad_buffer = grad_buffer
        self.offset = offset

    def materialize(self):
        pseudo_param = Narrow.apply(self.buffer, self.grad_buffer, self)
        pseudo_param.ya_fsdp_param = True
        setattr(self.parent_module, self.name, pseudo_param)
"""

# --- yandex/YaFSDP 669fc366 ya_fsdp/ya_fsdp.py SuperTensor.reduce_scatter_grad (YCCL branch dropped).
_YAFSDP_REDUCE_SCATTER = """
import torch


class SuperTensor:
    def get_buffer_to_reduce_scatter(self, stream):
        if self.reusable_fp32_grad_buffer is None:
            return self.grad_reusable_buffer
        with torch.cuda.stream(stream):
            self.reusable_fp32_grad_buffer.start_prepare(self)
            self.reusable_fp32_grad_buffer.get().copy_(self.grad_reusable_buffer.get())
            self.reusable_fp32_grad_buffer.end_prepare(self)
        return self.reusable_fp32_grad_buffer

    def reduce_scatter_grad(self, comm_stream):
        with torch.cuda.stream(comm_stream):
            reduce_grad_buffer = self.get_buffer_to_reduce_scatter(comm_stream)
            reduce_grad_buffer.start_processing(self)

            # If it's the first call of reduce_scatter, fp32_grad_shard is zero-filled, so it can be used as the output
            reduce_in_master_grad = self.first_reduce_scatter and self.reusable_fp32_grad_buffer is not None

            if reduce_in_master_grad:
                target_tensor = self.fp32_grad_shard
            else:
                target_tensor = reduce_grad_buffer.get().narrow(0, self.shard_size * self._data_parallel_process_group.rank(), self.shard_size)
            torch.distributed.reduce_scatter_tensor(target_tensor, reduce_grad_buffer.get(), group=self._data_parallel_process_group)
            if not reduce_in_master_grad:
                self.fp32_grad_shard.add_(target_tensor)

            reduce_grad_buffer.end_processing(self)
            self.first_reduce_scatter = False
            for param in self.params:
                param.grad_accumulation = False
"""

# --- yandex/YaFSDP 669fc366 ya_fsdp/ya_fsdp.py SuperTensor.get_backward_pre_hook / pre_forward
# and ya_fsdp/meta_param.py materialize_params.
_YAFSDP_PRE_FORWARD = """
def materialize_params(meta_params, buffer, grad_buffer):
    offset = 0
    for param in meta_params:
        param.set_buffer(buffer, grad_buffer, offset)
        offset += param.numel
        param.materialize()


class SuperTensor:
    def get_backward_pre_hook(self):
        def backward_pre_hook(module, input_grads):
            grad_buffer_is_same = self.grad_reusable_buffer.is_gained(self)
            self.grad_reusable_buffer.start_prepare(self)
            self.all_gather(self.comm_stream)
            if not grad_buffer_is_same and not self.grad_reusable_buffer.is_super_tensor_superset_of_previous_owner():
                self.grad_reusable_buffer.get().zero_()
            self.weight_reusable_buffer.start_processing(self)

        return backward_pre_hook

    def pre_forward(self, inputs):
        gated_ = GateGradFlow.apply(self.get_backward_hook(), self.weight_grad_flow, *inputs)
        weight_reusable_buffer = gated_[0]
        materialize_params(
            self.params,
            weight_reusable_buffer,
            self.grad_reusable_buffer.get() if self.grad_reusable_buffer is not None else None,
        )
        return list(gated_)[1:]
"""

# --- huggingface/nanotron 2411b022 src/nanotron/optim/gradient_accumulator.py
# FP32GradientAccumulator._accumulate_grad, FP32GradBucketManager, get_fp32_accum_hook (shortened).
_NANOTRON_FP32_HOOK = """
import dataclasses

import torch
import torch.distributed as dist


class FP32GradientAccumulator(GradientAccumulator):
    def _accumulate_grad(self, name, half_param):
        assert half_param.grad is not None, f"Expected param {name} to have gradient."
        fp32_grad = self.get_grad_buffer(name=name)
        if self._is_accumulation_sync_step is False:
            # WARNING: We assume fp32_grad_bucket is already zeroed
            fp32_grad.add_(half_param.grad)
            # In case _is_accumulation_sync_step = True: no need to add half gradients, because it's done in the allreduce hook
        half_param.grad = None


@dataclasses.dataclass
class FP32GradBucketManager:
    dp_cp_pg: dist.ProcessGroup
    accumulator: FP32GradientAccumulator
    param_id_to_name: dict

    def __post_init__(self):
        self.accumulator._is_accumulation_sync_step = True


def get_fp32_accum_hook(reduce_scatter, reduce_op=dist.ReduceOp.AVG):
    def fp32_accum_hook(state, bucket):
        accumulator = state.accumulator
        for param, grad in zip(bucket.parameters(), bucket.gradients()):
            name = state.param_id_to_name[id(param)]
            fp32_grad_buffer = accumulator.get_grad_buffer(name)
            fp32_grad_buffer.add_(grad.view_as(fp32_grad_buffer))

        if state.dp_cp_pg.size() == 1:
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        grad_buffer_tensor_list = [accumulator.get_grad_buffer(state.param_id_to_name[id(param)]).view(-1) for param in bucket.parameters()]
        accumulator.fp32_grads_allreduce_handle = dist.all_reduce_coalesced(grad_buffer_tensor_list, group=state.dp_cp_pg, async_op=True, op=reduce_op)
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    return fp32_accum_hook
"""

# --- deepspeedai/DeepSpeed edaa7221 deepspeed/runtime/bf16_optimizer.py BF16_Optimizer (shortened).
_DEEPSPEED_BF16 = """
import torch


class BF16_Optimizer(ZeROOptimizer):
    @torch.no_grad()
    def _update_hp_grad(self, lp, group_idx, param_idx, clear_lp_grads):
        if lp.grad is None:
            return
        hp_grad = self.fp32_groups_gradients[group_idx][param_idx]
        assert hp_grad is not None, f"high precision param has no gradient, lp param_id = {id(lp)}"
        hp_grad.data.add_(lp.grad.data.to(hp_grad.dtype).view(hp_grad.shape))
        lp._hp_grad = hp_grad
        self.fp32_groups_has_gradients[group_idx][param_idx] = True
        if clear_lp_grads:
            lp.grad.zero_()

    @torch.no_grad()
    def _update_hp_grads_func(self, clear_lp_grads=False):
        for i, group in enumerate(self.bf16_groups):
            for j, lp in enumerate(group):
                self._update_hp_grad(lp, i, j, clear_lp_grads)

    @torch.no_grad()
    def update_hp_grads(self, clear_lp_grads=False):
        if self.immediate_grad_update:
            return
        if self.graph_harvesting:
            graph_process(False, self._update_hp_grads_func, clear_lp_grads)
        else:
            self._update_hp_grads_func(clear_lp_grads)

    def accumulate_hp_grads_and_remove_lp(self, lp_param, group_idx, param_idx):
        assert self.immediate_grad_update
        self._update_hp_grad(lp_param, group_idx, param_idx, clear_lp_grads=False)

    def create_grad_acc_hooks(self):
        for i, param_group in enumerate(self.bf16_groups):
            for j, param in enumerate(param_group):
                if param.requires_grad:

                    def wrapper(param, i, j):
                        def accumulate_hp_grads_and_remove_lp(*notneeded):
                            self.accumulate_hp_grads_and_remove_lp(param, i, j)

                        self._grad_acc_hooks.append(register_grad_hook(param, accumulate_hp_grads_and_remove_lp))

                    wrapper(param, i, j)
"""

# --- NVIDIA-NeMo/Automodel 36044ad3 nemo_automodel/components/moe/experts.py
# GroupedExpertsTE.init_token_dispatcher (with fused wgrad accumulation and the Megatron-FSDP
# main_grad exposure of Megatron-LM's "Fix TE grouped MLP fused main-grad setup").
_AUTOMODEL_EXPERTS_TE = """
from torch import nn


def _expose_main_grads(module, args):
    # Megatron-FSDP leaves param.main_grad None until fetched; TE's fused wgrad writes into it.
    for param in module.parameters(recurse=False):
        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
            param.main_grad = param.get_main_grad()


class GroupedExpertsTE(nn.Module):
    def init_token_dispatcher(self, ep_mesh, moe_mesh=None):
        from transformer_engine.pytorch import GroupedLinear

        self.ep_mesh = ep_mesh
        self.ep_rank = ep_mesh.get_local_rank()
        self.ep_size = ep_mesh.size()
        self.num_local_experts = self.config.n_routed_experts // self.ep_size
        gate_up_out_features = self.config.moe_inter_dim * 2 if self.is_gated else self.config.moe_inter_dim

        self.gate_up_linear = GroupedLinear(
            num_gemms=self.num_local_experts,
            in_features=self.config.expert_dim,
            out_features=gate_up_out_features,
            bias=self.expert_bias,
            params_dtype=self.config.dtype,
            fuse_wgrad_accumulation=self.config.gradient_accumulation_fusion,
            device="meta",
        )
        self.down_linear = GroupedLinear(
            num_gemms=self.num_local_experts,
            in_features=self.config.moe_inter_dim,
            out_features=self.config.expert_dim,
            bias=self.expert_bias,
            params_dtype=self.config.dtype,
            fuse_wgrad_accumulation=self.config.gradient_accumulation_fusion,
            device="meta",
        )
        if self.config.gradient_accumulation_fusion:
            for linear in (self.gate_up_linear, self.down_linear):
                linear.register_forward_pre_hook(_expose_main_grads)
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        cls=1,
        name="colossalai_wgs_pop_sets_grad_on_weight_cal",
        bug=_swap(
            _COLOSSAL_WGS,
            "                        weight_origin.grad = grad_weight\n",
            "                        weight_cal.grad = grad_weight  # bug\n",
        ),
        twin=_COLOSSAL_WGS,
    ),
    Variant(
        cls=1,
        name="yafsdp_narrow_flag_on_original_param",
        bug=_swap(
            _YAFSDP_NARROW,
            "            ctx.metaparam.grad_accumulation = True\n",
            "            ctx.metaparam.param.grad_accumulation = True  # bug\n",
        ),
        twin=_YAFSDP_NARROW,
    ),
    # ---------------------------------------------------------------- 2: rebound / copy
    Variant(
        cls=2,
        name="zbpp_forward_stashes_main_grad_copy",
        bug=_swap(
            _ZBPP_LINEAR,
            "        ctx.weight_main_grad = weight.main_grad\n",
            "        ctx.weight_main_grad = weight.main_grad.detach().clone()  # bug\n",
        ),
        twin=_ZBPP_LINEAR,
    ),
    Variant(
        cls=2,
        name="yafsdp_materialize_wraps_fresh_parameter",
        bug=_swap(
            _YAFSDP_NARROW,
            "        setattr(self.parent_module, self.name, pseudo_param)\n",
            "        setattr(self.parent_module, self.name, torch.nn.Parameter(pseudo_param.detach()))  # bug\n",
        ),
        twin=_YAFSDP_NARROW,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    Variant(
        cls=3,
        name="zbpp_flag_set_on_unfused_path",
        bug=_swap(
            _ZBPP_LINEAR,
            "            grad_weight = grad_output.t().matmul(total_input)\n",
            "            grad_weight = grad_output.t().matmul(total_input)\n"
            "            weight.grad_added_to_main_grad = True  # bug\n",
        ),
        twin=_ZBPP_LINEAR,
    ),
    Variant(
        cls=3,
        name="colossalai_fp16_accum_also_returns_wgrad",
        bug=_swap(
            _COLOSSAL_MATMUL_ACCUM,
            "                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, grad)\n"
            "                grad_weight = None\n",
            "                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, grad)\n"
            "                grad_weight = total_input.t().matmul(grad_output)  # bug\n",
        ),
        twin=_COLOSSAL_MATMUL_ACCUM,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        cls=4,
        name="yafsdp_narrow_backward_always_copies",
        bug=_swap(
            _YAFSDP_NARROW,
            "            if not ctx.metaparam.grad_accumulation:\n"
            "                ctx.metaparam.grad_buffer.narrow(0, ctx.metaparam.offset, ctx.metaparam.numel).copy_(grad_output.view(-1))\n"
            "            else:\n"
            "                ctx.metaparam.grad_buffer.narrow(0, ctx.metaparam.offset, ctx.metaparam.numel).add_(grad_output.view(-1))\n",
            "            ctx.metaparam.grad_buffer.narrow(0, ctx.metaparam.offset, ctx.metaparam.numel).copy_(grad_output.view(-1))  # bug\n",
        ),
        twin=_YAFSDP_NARROW,
    ),
    Variant(
        cls=4,
        name="yafsdp_reduce_scatter_into_master_grad_every_time",
        bug=_swap(
            _YAFSDP_REDUCE_SCATTER,
            "            reduce_in_master_grad = self.first_reduce_scatter and self.reusable_fp32_grad_buffer is not None\n",
            "            reduce_in_master_grad = self.reusable_fp32_grad_buffer is not None  # bug\n",
        ),
        twin=_YAFSDP_REDUCE_SCATTER,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        cls=5,
        name="nanotron_sync_flag_only_for_multi_rank_dp",
        bug=_swap(
            _NANOTRON_FP32_HOOK,
            "        self.accumulator._is_accumulation_sync_step = True\n",
            "        self.accumulator._is_accumulation_sync_step = self.dp_cp_pg.size() > 1  # bug\n",
        ),
        twin=_NANOTRON_FP32_HOOK,
    ),
    Variant(
        cls=5,
        name="deepspeed_graph_harvest_readds_hooked_grads",
        bug=_swap(
            _DEEPSPEED_BF16,
            "        if self.immediate_grad_update:\n"
            "            return\n"
            "        if self.graph_harvesting:\n"
            "            graph_process(False, self._update_hp_grads_func, clear_lp_grads)\n"
            "        else:\n",
            "        if self.graph_harvesting:  # bug\n"
            "            graph_process(False, self._update_hp_grads_func, clear_lp_grads)  # bug\n"
            "        elif self.immediate_grad_update:  # bug\n"
            "            return\n"
            "        else:\n",
        ),
        twin=_DEEPSPEED_BF16,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    Variant(
        cls=6,
        name="colossalai_lm_head_matmul_skips_zbv_put",
        bug=_swap(
            _COLOSSAL_LM_HEAD,
            "            WeightGradStore.put(total_input, grad_output, (weight, weight_origin), functools.partial(execute_w_pass, wgrad_gemm_func=torch.matmul))\n"
            "            grad_weight = None\n",
            "            grad_weight = None  # dW is computed in the W pass  # bug\n",
        ),
        twin=_COLOSSAL_LM_HEAD,
    ),
    Variant(
        cls=6,
        name="colossalai_fused_tail_scheduler_never_pops",
        bug=_swap(
            _COLOSSAL_ZBV_SCHED,
            "        super().schedule_b(scheduled_node, model_chunk, model_chunk_id, optimizer)\n"
            "        if self._w_fused_into_b(model_chunk_id):\n"
            "            WeightGradStore.pop(chunk=model_chunk_id)\n",
            "        super().schedule_b(scheduled_node, model_chunk, model_chunk_id, optimizer)  # bug\n",
        ),
        twin=_COLOSSAL_ZBV_SCHED,
    ),
    # ---------------------------------------------------------------- 7: seed shape, other syntax
    Variant(
        cls=7,
        name="zbpp_dummy_chosen_on_wgrad_compute",
        bug=_swap(
            _ZBPP_LINEAR_CONDEXPR,
            "        grad_weight = _dummy_wgrad(weight, input.dtype) if ctx.gradient_accumulation_fusion else grad_output.t().matmul(total_input)\n",
            "        grad_weight = _dummy_wgrad(weight, input.dtype) if wgrad_compute else grad_output.t().matmul(total_input)  # bug\n",
        ),
        twin=_ZBPP_LINEAR_CONDEXPR,
    ),
    Variant(
        cls=7,
        name="colossalai_return_gated_on_wgrad_now",
        bug=_swap(
            _COLOSSAL_MATMUL_ZBV,
            "        return grad_input, (None if use_zbv or accum_into_grad else total_input.t().matmul(grad_output)), grad_bias, None, None, None, None\n",
            "        return grad_input, (None if wgrad_now else total_input.t().matmul(grad_output)), grad_bias, None, None, None, None  # bug\n",
        ),
        twin=_COLOSSAL_MATMUL_ZBV,
    ),
    # ---------------------------------------------------------------- 8: buffer not made available
    Variant(
        cls=8,
        name="yafsdp_pre_forward_hides_unowned_grad_buffer",
        bug=_swap(
            _YAFSDP_PRE_FORWARD,
            "            self.grad_reusable_buffer.get() if self.grad_reusable_buffer is not None else None,\n",
            "            self.grad_reusable_buffer.get() if self.grad_reusable_buffer is not None and self.grad_reusable_buffer.is_gained(self) else None,  # bug\n",
        ),
        twin=_YAFSDP_PRE_FORWARD,
    ),
    Variant(
        cls=8,
        name="automodel_main_grad_hook_on_wrapper_module",
        bug=_swap(
            _AUTOMODEL_EXPERTS_TE,
            "            for linear in (self.gate_up_linear, self.down_linear):\n"
            "                linear.register_forward_pre_hook(_expose_main_grads)\n",
            "            self.register_forward_pre_hook(_expose_main_grads)  # bug\n",
        ),
        twin=_AUTOMODEL_EXPERTS_TE,
    ),
)
