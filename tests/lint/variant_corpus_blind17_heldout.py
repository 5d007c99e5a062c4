"""The held-out part of the seventeenth blind corpus (H-blind17): one main_grad bookkeeping
variant per class of issue #19, grounded in the same repositories as the main part.

Sources (repo, commit, path, function):
- huggingface/nanotron 2411b022a75fb7f7561a1bb4166706da5e1b76de src/nanotron/optim/gradient_accumulator.py
  FP32GradientAccumulator.get_grad_buffer / .get_parameter_for_optimizer, get_fp32_accum_hook
- huggingface/nanotron 2411b022a75fb7f7561a1bb4166706da5e1b76de src/nanotron/fp8/linear.py
  _FP8Matmul.backward
- NVIDIA-NeMo/Automodel 36044ad3d139363fb6c73c24af2e7c6b65ec52f6 nemo_automodel/components/moe/experts.py
  GroupedExpertsTE._set_stacked_weight / .gate_and_up_projs / .init_token_dispatcher
- volcengine/veScale 20cf5c7161b9c11e4baafb7e78cd978523d98671 legacy/vescale/ddp/distributed_data_parallel.py
  DistributedDataParallel._make_param_hook
- yandex/YaFSDP 669fc366f1fb9dcd311c862a1c7450990c8d3721 ya_fsdp/ya_fsdp.py
  SuperTensor.set_buffers / .reduce_scatter_grad
- sail-sg/zero-bubble-pipeline-parallelism 39f2c186a27580b7051eb51e0f651e1efd0a8170
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward,
  megatron/core/zbpp_utils.py WeightGradStore.put

Conventions as in variant_corpus_blind17: twins are the real code shortened (helpers stand for
elided inline code; where the real code has a latent fault the variant is not about, the twin
is the repaired form), bugs are `_swap(twin, old, new)` with the changed line(s) marked `# bug`.
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- huggingface/nanotron 2411b022 src/nanotron/optim/gradient_accumulator.py (shortened).
_NANOTRON_ACCUM_HOOK = """
import torch
import torch.distributed as dist


class FP32GradientAccumulator(GradientAccumulator):
    def get_parameter_for_optimizer(self, name):
        return self.parameters[name]["fp32"]

    def get_grad_buffer(self, name):
        # Returns the gradient of the parameter from the appropriate grad bucket.
        return self.fp32_grad_buffers[name]["fp32_grad"]


def get_fp32_accum_hook(reduce_scatter, reduce_op=dist.ReduceOp.AVG):
    def fp32_accum_hook(state, bucket):
        dp_cp_pg = state.dp_cp_pg
        accumulator = state.accumulator
        param_id_to_name = state.param_id_to_name

        # Add new incoming gradient
        for param, grad in zip(bucket.parameters(), bucket.gradients()):
            name = param_id_to_name[id(param)]
            fp32_grad_buffer = accumulator.get_grad_buffer(name)
            fp32_grad_buffer.add_(grad.view_as(fp32_grad_buffer))

        if dp_cp_pg.size() == 1:
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        grad_buffer_tensor_list = [accumulator.get_grad_buffer(param_id_to_name[id(param)]).view(-1) for param in bucket.parameters()]
        accumulator.fp32_grads_allreduce_handle = dist.all_reduce_coalesced(grad_buffer_tensor_list, group=dp_cp_pg, async_op=True, op=reduce_op)
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    return fp32_accum_hook
"""

# --- NVIDIA-NeMo/Automodel 36044ad3 nemo_automodel/components/moe/experts.py GroupedExpertsTE
# (checkpoint-load setter path; fused wgrad and the Megatron-FSDP main_grad exposure added).
_AUTOMODEL_SET_STACKED = """
from torch import nn
from torch.distributed.tensor import DTensor


def _expose_main_grads(module, args):
    # Megatron-FSDP leaves param.main_grad None until fetched; TE's fused wgrad writes into it.
    for param in module.parameters(recurse=False):
        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
            param.main_grad = param.get_main_grad()


class GroupedExpertsTE(nn.Module):
    def _set_stacked_weight(self, linear, stacked, transpose=False):
        if transpose:
            stacked = stacked.transpose(-1, -2)  # [num_experts, out, in]
        for i in range(linear.num_gemms):
            weight_param = getattr(linear, f"weight{i}")
            if isinstance(weight_param, DTensor):
                weight_param = weight_param.to_local()
            weight_param.data.copy_(stacked[i])

    @property
    def gate_and_up_projs(self):
        return self._to_ep_dtensor(self._get_stacked_weight(self.gate_up_linear, transpose=True))

    @gate_and_up_projs.setter
    def gate_and_up_projs(self, value):
        if value is None:
            return
        if isinstance(value, DTensor):
            value = value.to_local()
        self._set_stacked_weight(self.gate_up_linear, value, transpose=True)
        self._weights_loaded_from_checkpoint = True

    def enable_fused_wgrad(self):
        for linear in (self.gate_up_linear, self.down_linear):
            linear.fuse_wgrad_accumulation = True
            linear.register_forward_pre_hook(_expose_main_grads)
"""

# --- volcengine/veScale 20cf5c71 legacy/vescale/ddp/distributed_data_parallel.py
# DistributedDataParallel._make_param_hook (partial-grad all-reduce dropped).
_VESCALE_PARAM_HOOK = """
import torch
from vescale.dtensor.dtensor import DTensor

_DDP_IGNORE_TAG = "DDP_IGNORE"


class DistributedDataParallel(torch.nn.Module):
    def _make_param_hook(self, fqn, param, param_to_grad_buffer):
        def param_hook(*unused):
            if param.requires_grad:
                if hasattr(param, _DDP_IGNORE_TAG):
                    if isinstance(param.data, DTensor):
                        grad = param.grad._local_tensor.data
                    else:
                        grad = param.grad.data
                    param.grad = None
                    if param.main_grad is None:
                        param.main_grad = grad
                    else:
                        param.main_grad.add_(grad)
                    return

                if self.overlap_grad_reduce:
                    assert param.grad is not None, "param.grad being None is not safe when overlap_grad_reduce is True"
                if param.grad is not None:
                    if isinstance(param.data, DTensor):
                        param.main_grad.add_(param.grad._local_tensor.data)
                    else:
                        param.main_grad.add_(param.grad.data)
                param.grad = None
                if self.overlap_grad_reduce:
                    param_to_grad_buffer[param].register_grad_ready(param)

        return param_hook
"""

# --- huggingface/nanotron 2411b022 src/nanotron/fp8/linear.py _FP8Matmul.backward (shortened;
# the weight's requires_grad is off, so backward hands dW to weight.grad itself).
_NANOTRON_FP8_MATMUL = """
import torch

from nanotron.fp8.dtypes import DTypes
from nanotron.fp8.kernel import fp8_matmul_kernel
from nanotron.fp8.tensor import FP8Tensor


class _FP8Matmul(torch.autograd.Function):
    @staticmethod
    @torch.no_grad()
    def forward(ctx, input, weight, fp8_meta, phony):
        if type(input) == torch.Tensor:
            input = FP8Tensor(input, dtype=DTypes.FP8E4M3)
        ctx.save_for_backward(input, weight)
        ctx.fp8_meta = fp8_meta
        output = fp8_matmul_kernel(mat_a=weight.data, transpose_a=True, mat_b=input, transpose_b=False, use_split_accumulator=False)
        return output, phony

    @staticmethod
    @torch.no_grad()
    def backward(ctx, grad_output, grad_phony):
        input, weight = ctx.saved_tensors
        if type(grad_output) == torch.Tensor:
            grad_output = FP8Tensor(grad_output.contiguous(), dtype=DTypes.FP8E5M2)
        grad_input = fp8_matmul_kernel(mat_a=grad_output, transpose_a=True, mat_b=weight, transpose_b=True, use_split_accumulator=True)
        grad_weight = fp8_matmul_kernel(mat_a=input, transpose_a=False, mat_b=grad_output, transpose_b=False, use_split_accumulator=True)
        if weight.grad is None:
            weight.grad = grad_weight
        else:
            weight.grad.add_(grad_weight)
        return grad_input, None, None, None
"""

# --- yandex/YaFSDP 669fc366 ya_fsdp/ya_fsdp.py SuperTensor.set_buffers / reduce_scatter_grad
# (the reduce-scatter runs as the grad buffer's free hook; YCCL branch dropped).
_YAFSDP_FREE_HOOK = """
import torch


class SuperTensor:
    def set_buffers(self, weight_reusable_buffer, grad_reusable_buffer):
        self.weight_reusable_buffer = weight_reusable_buffer.get_prefix(self.total_numel, self.padded_numel, self.name)
        if grad_reusable_buffer is not None:
            self.grad_reusable_buffer = grad_reusable_buffer.get_prefix(self.total_numel, self.padded_numel, f"{self.name}_grad")
            self.grad_reusable_buffer.register_free_hook(lambda stream: self.reduce_scatter_grad(stream))

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

# --- sail-sg/zero-bubble-pipeline-parallelism 39f2c186 megatron/core/tensor_parallel/layers.py
# The wgrad-or-defer step factored into a static method, and a vocab-parallel output subclass
# that overrides backward.
_ZBPP_SUBCLASS = """
import functools

import fused_weight_gradient_mlp_cuda
import torch

from megatron.core.zbpp_utils import WeightGradStore


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def accumulate_wgrad(weight, grad_output, input):
        gemm = fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32
        if not WeightGradStore.split_bw():
            process_wgrad(weight, *pre_process(grad_output, input, async_op=False), wgrad_gemm_accum_func=gemm)
        else:
            WeightGradStore.put(weight, functools.partial(pre_process, grad_output, input), functools.partial(process_wgrad, weight, wgrad_gemm_accum_func=gemm))

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        weight.main_grad = ctx.weight_main_grad
        grad_input = grad_output.matmul(weight)
        LinearWithGradAccumulationAndAsyncCommunication.accumulate_wgrad(weight, grad_output, input)
        weight.grad_added_to_main_grad = True
        return grad_input, _dummy_wgrad(weight, input.dtype), None, None, None, None, None, None


class VocabParallelOutputLinear(LinearWithGradAccumulationAndAsyncCommunication):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        weight.main_grad = ctx.weight_main_grad
        grad_output = grad_output.to(input.dtype)
        grad_input = grad_output.matmul(weight)
        VocabParallelOutputLinear.accumulate_wgrad(weight, grad_output, input)
        weight.grad_added_to_main_grad = True
        return grad_input, _dummy_wgrad(weight, input.dtype), None, None, None, None, None, None
"""

# --- sail-sg/zero-bubble-pipeline-parallelism 39f2c186 megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.backward, sequence-parallel return kept.
_ZBPP_SEQ_PARALLEL = """
import functools

import fused_weight_gradient_mlp_cuda
import torch

from megatron.core.zbpp_utils import WeightGradStore


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        weight.main_grad = ctx.weight_main_grad
        wgrad_compute = not WeightGradStore.split_bw()
        grad_input = grad_output.matmul(weight)
        grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, input)
        if ctx.sequence_parallel:
            sub_grad_input, handle = _reduce_scatter_grad_input(grad_input, input, async_op=wgrad_compute)

        if ctx.gradient_accumulation_fusion:
            if wgrad_compute:
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
            else:
                WeightGradStore.put(
                    weight,
                    functools.partial(pre_process, grad_output, input),
                    functools.partial(process_wgrad, weight, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32),
                )
            grad_weight = _dummy_wgrad(weight, input.dtype)
            weight.grad_added_to_main_grad = True
        else:
            grad_weight = grad_output.t().matmul(total_input)
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None

        if ctx.sequence_parallel:
            if handle is not None:
                handle.wait()
            return sub_grad_input, grad_weight, grad_bias, None, None, None, None, None
        return grad_input, grad_weight, grad_bias, None, None, None, None, None
"""

# --- NVIDIA-NeMo/Automodel 36044ad3 nemo_automodel/components/moe/experts.py
# GroupedExpertsTE.init_token_dispatcher (fused wgrad and Megatron-FSDP main_grad exposure added).
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
        self.ep_size = ep_mesh.size()
        self.num_local_experts = self.config.n_routed_experts // self.ep_size
        gate_up_out_features = self.config.moe_inter_dim * 2 if self.is_gated else self.config.moe_inter_dim
        fuse = self.config.gradient_accumulation_fusion
        self.gate_up_linear = GroupedLinear(
            num_gemms=self.num_local_experts,
            in_features=self.config.expert_dim,
            out_features=gate_up_out_features,
            bias=self.expert_bias,
            params_dtype=self.config.dtype,
            fuse_wgrad_accumulation=fuse,
            device="meta",
        )
        self.down_linear = GroupedLinear(
            num_gemms=self.num_local_experts,
            in_features=self.config.moe_inter_dim,
            out_features=self.config.expert_dim,
            bias=self.expert_bias,
            params_dtype=self.config.dtype,
            fuse_wgrad_accumulation=fuse,
            device="meta",
        )
        if fuse:
            self.gate_up_linear.register_forward_pre_hook(_expose_main_grads)
            self.down_linear.register_forward_pre_hook(_expose_main_grads)
"""


VARIANTS = (
    Variant(
        cls=1,
        name="nanotron_accum_hook_adds_into_fp32_param",
        bug=_swap(
            _NANOTRON_ACCUM_HOOK,
            "            fp32_grad_buffer = accumulator.get_grad_buffer(name)\n",
            "            fp32_grad_buffer = accumulator.get_parameter_for_optimizer(name)  # bug\n",
        ),
        twin=_NANOTRON_ACCUM_HOOK,
    ),
    Variant(
        cls=2,
        name="automodel_set_stacked_weight_rebinds_parameter",
        bug=_swap(
            _AUTOMODEL_SET_STACKED,
            "            weight_param.data.copy_(stacked[i])\n",
            '            setattr(linear, f"weight{i}", nn.Parameter(stacked[i].contiguous()))  # bug\n',
        ),
        twin=_AUTOMODEL_SET_STACKED,
    ),
    Variant(
        cls=3,
        name="vescale_ignored_param_hook_keeps_grad",
        bug=_swap(
            _VESCALE_PARAM_HOOK,
            "                    param.grad = None\n"
            "                    if param.main_grad is None:\n"
            "                        param.main_grad = grad\n"
            "                    else:\n"
            "                        param.main_grad.add_(grad)\n",
            "                    if param.main_grad is None:\n"
            "                        param.main_grad = grad\n"
            "                    else:\n"
            "                        param.main_grad.add_(grad)\n"
            "                        param.grad = None  # bug\n",
        ),
        twin=_VESCALE_PARAM_HOOK,
    ),
    Variant(
        cls=4,
        name="nanotron_fp8_matmul_overwrites_grad",
        bug=_swap(
            _NANOTRON_FP8_MATMUL,
            "        if weight.grad is None:\n"
            "            weight.grad = grad_weight\n"
            "        else:\n"
            "            weight.grad.add_(grad_weight)\n",
            "        weight.grad = grad_weight  # bug\n",
        ),
        twin=_NANOTRON_FP8_MATMUL,
    ),
    Variant(
        cls=5,
        name="yafsdp_free_hook_resets_flags_only_when_adding",
        bug=_swap(
            _YAFSDP_FREE_HOOK,
            "            if not reduce_in_master_grad:\n"
            "                self.fp32_grad_shard.add_(target_tensor)\n"
            "\n"
            "            reduce_grad_buffer.end_processing(self)\n"
            "            self.first_reduce_scatter = False\n"
            "            for param in self.params:\n"
            "                param.grad_accumulation = False\n",
            "            if not reduce_in_master_grad:\n"
            "                self.fp32_grad_shard.add_(target_tensor)\n"
            "                for param in self.params:  # bug\n"
            "                    param.grad_accumulation = False  # bug\n"
            "\n"
            "            reduce_grad_buffer.end_processing(self)\n"
            "            self.first_reduce_scatter = False\n",
        ),
        twin=_YAFSDP_FREE_HOOK,
    ),
    Variant(
        cls=6,
        name="zbpp_output_linear_backward_skips_deferral",
        bug=_swap(
            _ZBPP_SUBCLASS,
            "        VocabParallelOutputLinear.accumulate_wgrad(weight, grad_output, input)\n",
            "        if not WeightGradStore.split_bw():  # bug\n"
            "            process_wgrad(weight, *pre_process(grad_output, input, async_op=False), wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32)  # bug\n",
        ),
        twin=_ZBPP_SUBCLASS,
    ),
    Variant(
        cls=7,
        name="zbpp_sequence_parallel_return_gated_on_wgrad_compute",
        bug=_swap(
            _ZBPP_SEQ_PARALLEL,
            "            return sub_grad_input, grad_weight, grad_bias, None, None, None, None, None\n",
            "            return sub_grad_input, (grad_weight if wgrad_compute else None), grad_bias, None, None, None, None, None  # bug\n",
        ),
        twin=_ZBPP_SEQ_PARALLEL,
    ),
    Variant(
        cls=8,
        name="automodel_expose_main_grads_checks_hasattr",
        bug=_swap(
            _AUTOMODEL_EXPERTS_TE,
            '        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):\n',
            '        if not hasattr(param, "main_grad") and hasattr(param, "get_main_grad"):  # bug\n',
        ),
        twin=_AUTOMODEL_EXPERTS_TE,
    ),
)
