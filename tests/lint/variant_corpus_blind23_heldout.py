"""The twenty-third blind corpus (H-blind23), held-out half: one main_grad bookkeeping variant for
each of the eight classes of issue #19, from the same repositories as the development half
(variant_corpus_blind23.py) but, where the repositories allow, from other functions: never tune a
rule on these.

Sources (repo, commit, path, function):
- moguizhizi/MindSpeed-MM d1ec89ea12bc055621f75009bdce1892a6a2c791
  mindspeed/core/transformer/moe/grouped_mlp_with_comp_and_comm_overlap_all2all.py
  GroupedMlpWithCompAndCommOverlapAll2All.backward (class 1)
- yemokoo/Megatron-LM f504c8221e0cc32fa9d94650a270cea71caafc62
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward (class 2)
- moguizhizi/MindSpeed-MM d1ec89ea12bc055621f75009bdce1892a6a2c791
  mindspeed/core/transformer/moe/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward (class 3)
- yemokoo/Megatron-LM f504c8221e0cc32fa9d94650a270cea71caafc62
  megatron/core/transformer/cuda_graphs.py _CudaGraphRunner.create_fwd_graph / .create_bwd_graph
  (two variants: classes 4 and 5)
- flagos-ai/TransformerEngine-FL fd5f657a04d2f9239fbfbe7fe491e65d701c30a8
  transformer_engine/pytorch/module/layernorm_mlp.py LayerNormMLP.__init__ / .backward_dw, with
  transformer_engine/pytorch/module/base.py TransformerEngineBaseModule.backward_dw as context (class 6)
- flagos-ai/TransformerEngine-FL fd5f657a04d2f9239fbfbe7fe491e65d701c30a8
  transformer_engine/pytorch/ops/fused/backward_linear_add.py BackwardLinearAdd.fuser_backward (class 7)
- flagos-ai/TransformerEngine-FL fd5f657a04d2f9239fbfbe7fe491e65d701c30a8
  transformer_engine/pytorch/module/grouped_linear.py _GroupedLinear.forward (main_grad
  accessors; the bug's site) with a shortened _GroupedLinear.backward as context (class 8)

Conventions as in the development half: twins are the real code shortened (real names and
idioms; docstrings, nvtx ranges, FP8 details, NPU communication overlap and unrelated branches
dropped); no repository history was available, so no variant reverts a known fix.
Adapted, and said so here (a twin must be correct under CONTRACT.md):
- MindSpeed's all-to-all grouped MLP reads ``zero_out_wgrad`` from ``weights2``, the rearranged
  view the grouped matmul runs on, not from ``original_weight2`` that carries the flag and
  main_grad; the twin reads it from ``original_weight2``.
- TE-FL's ``BackwardLinearAdd.fuser_backward`` gates its dummy-grad bookkeeping on the local
  ``accumulate_into_main_grad`` after ``overwrite_main_grad`` has switched it off (TE PR #2936's
  seed bug); the twin gates it on the op-level ``linear_op._accumulate_into_main_grad``.
- Megatron's and MindSpeed's ``LinearWithGradAccumulationAndAsyncCommunication.backward`` are
  shortened to the non-sequence-parallel path.
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


# --- moguizhizi/MindSpeed-MM d1ec89ea
# mindspeed/core/transformer/moe/grouped_mlp_with_comp_and_comm_overlap_all2all.py
# GroupedMlpWithCompAndCommOverlapAll2All.backward (hierarchical all-to-all, zero-memory
# recompute and fc1 dgrad communication dropped; adapted: zero_out_wgrad from original_weight2)
_MS_GMLP_ALL2ALL = """
import torch
from einops import rearrange
from megatron.training import get_args

from mindspeed.core.transformer.moe.moe_utils import get_gemm_backward_need_tensors
from mindspeed.ops.npu_groupmatmul_add import npu_groupmatmul_add_fp32
from .moe_layer_overlap_all2all import gmm_op


class GroupedMlpWithCompAndCommOverlapAll2All(torch.autograd.Function):
    @staticmethod
    def backward(ctx, *grad_outs):
        grad_outs = grad_outs[0]
        mm1_inputs, act_inputs, mm2_inputs, weights1, weights2, original_weight1, original_weight2, group_list = ctx.saved_tensors
        permute2_input_detach, permute2_graph = get_gemm_backward_need_tensors()

        # grad of mm2 dx
        if ctx.use_gmm:
            weights2 = rearrange(weights2, 'n h f -> n f h')
            grad_mm2_inputs = gmm_op(grad_outs, weights2, [], group_list, 0)[0]
        else:
            grad_mm2_inputs = torch.matmul(grad_outs, weights2.t())
        act_graph = mm2_inputs

        # gmm2 dw
        if ctx.use_gmm:
            if get_args().gemm_gradient_accumulation_fusion:

                npu_groupmatmul_add_fp32(mm2_inputs, grad_outs, group_list, original_weight2.main_grad)

                if hasattr(original_weight2, 'grad_added_to_main_grad'):
                    if getattr(original_weight2, 'zero_out_wgrad', False):
                        grad_weights2 = torch.zeros(
                            weights2.transpose(-1, -2).shape,
                            dtype=mm2_inputs.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    else:
                        grad_weights2 = torch.empty(
                            weights2.transpose(-1, -2).shape,
                            dtype=mm2_inputs.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    original_weight2.grad_added_to_main_grad = True
                else:
                    grad_weights2 = None
            else:
                grad_weights2 = gmm_op(mm2_inputs.t(), grad_outs, [], group_list, 2)[0]
        else:
            grad_weights2 = torch.matmul(mm2_inputs.t(), grad_outs)

        # grad of activation_func
        grad_outs.untyped_storage().resize_(0)
        act_graph.backward(grad_mm2_inputs)

        # gmm1 dx
        if ctx.use_gmm:
            weights1 = rearrange(weights1, 'n h f -> n f h')
            mm1_inputs_grad = gmm_op(act_inputs.grad, weights1, [], group_list, 0)[0]
        else:
            mm1_inputs_grad = torch.matmul(act_inputs.grad, weights1.t())
        permute2_graph.backward(mm1_inputs_grad)

        if ctx.use_gmm:
            if get_args().gemm_gradient_accumulation_fusion:
                npu_groupmatmul_add_fp32(mm1_inputs, act_inputs.grad, group_list, original_weight1.main_grad)
                if hasattr(original_weight1, 'grad_added_to_main_grad'):
                    if getattr(original_weight1, 'zero_out_wgrad', False):
                        mm1_weights_grad = torch.zeros(
                            weights1.transpose(-1, -2).shape,
                            dtype=mm1_inputs.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    else:
                        mm1_weights_grad = torch.empty(
                            weights1.transpose(-1, -2).shape,
                            dtype=mm1_inputs.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    original_weight1.grad_added_to_main_grad = True
                else:
                    mm1_weights_grad = None
            else:
                mm1_weights_grad = gmm_op(mm1_inputs.t(), act_inputs.grad, [], group_list, 2)[0]
        else:
            mm1_weights_grad = torch.matmul(mm1_inputs.t(), act_inputs.grad)
        act_inputs.grad.untyped_storage().resize_(0)
        return mm1_inputs_grad, mm1_weights_grad, grad_weights2, None, None
"""

# --- yemokoo/Megatron-LM f504c822 megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.backward (sequence-parallel path dropped)
_YM_LINEAR_GRAD_ACCUM = """
import fused_weight_gradient_mlp_cuda
import torch

from megatron.core.tensor_parallel.layers import prepare_input_tensors_for_wgrad_compute
from megatron.core.parallel_state import get_tensor_model_parallel_group


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
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

        if ctx.allreduce_dgrad:
            # Asynchronous all-reduce
            handle = torch.distributed.all_reduce(
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

# --- moguizhizi/MindSpeed-MM d1ec89ea mindspeed/core/transformer/moe/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.backward (sequence-parallel path dropped)
_MS_MOE_LINEAR = """
import torch
from torch.cuda.amp import custom_bwd

from megatron.core.parallel_state import get_tensor_model_parallel_group
from megatron.core.tensor_parallel.layers import prepare_input_tensors_for_wgrad_compute


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        use_bias = ctx.use_bias
        grad_output_buffer = ctx.grad_output_buffer

        wgrad_compute = True
        if grad_output_buffer is not None:
            grad_output_buffer.append(grad_output)
            wgrad_compute = False

        if wgrad_compute:
            total_input = input
        grad_input = grad_output.matmul(weight)

        if wgrad_compute:
            grad_output, total_input = prepare_input_tensors_for_wgrad_compute(
                grad_output, total_input
            )

        if ctx.async_grad_allreduce:
            # Asynchronous all-reduce
            handle = torch.distributed.all_reduce(
                grad_input, group=get_tensor_model_parallel_group(), async_op=True
            )

        if ctx.gradient_accumulation_fusion:
            if wgrad_compute:
                import fused_weight_gradient_mlp_cuda
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

        if ctx.async_grad_allreduce:
            handle.wait()

        return grad_input, grad_weight, grad_bias, None, None, None, None, None
"""

# --- yemokoo/Megatron-LM f504c822 megatron/core/transformer/cuda_graphs.py
# _CudaGraphRunner.create_fwd_graph / .create_bwd_graph (FP8 state save/restore and RNG
# registration dropped)
_YM_CUDAGRAPH_CAPTURE = """
import torch


class _CudaGraphRunner(torch.nn.Module):
    def create_fwd_graph(self, args, kwargs, clone_inputs=True):
        # save grads and other variables that may be affected by graph warmup
        if self.training and torch.is_grad_enabled():
            save_main_grads = [
                param.main_grad.clone()
                for param in self.base_module.parameters()
                if hasattr(param, 'main_grad')
            ]

        if clone_inputs:
            args, kwargs = self.zero_out_tensors(args, kwargs)

        self.fwd_graph_input_args = args
        self.fwd_graph_input_kwargs = kwargs

        input_tensors = self.get_tensors(args, kwargs)
        self.fwd_graph_input_surface = input_tensors + tuple(self.base_module.parameters())

        self.fwd_graph = torch.cuda.CUDAGraph()

        # warmup again as case graph capture mode may execute a different codepath
        for _ in range(self.num_warmup_steps):
            with self.get_fp8_context():
                outputs = self.base_module.forward(
                    *self.fwd_graph_input_args, **self.fwd_graph_input_kwargs
                )
            if self.training and torch.is_grad_enabled():
                outputs = self.get_tensors(outputs)
                grad_inputs = torch.autograd.grad(
                    outputs=tuple(o for o in outputs if o.requires_grad),
                    inputs=tuple(i for i in self.fwd_graph_input_surface if i.requires_grad),
                    grad_outputs=tuple(
                        torch.zeros_like(o) if o.requires_grad else None for o in outputs
                    ),
                    only_inputs=True,
                    allow_unused=True,
                )

        with self.get_fp8_context():
            torch.cuda.synchronize()
            with torch.cuda.graph(self.fwd_graph, pool=self.fwd_mempool):
                outputs = self.base_module.forward(
                    *self.fwd_graph_input_args, **self.fwd_graph_input_kwargs
                )

        # save cudagraph output buffer
        self.fwd_graph_outputs = outputs
        self.fwd_graph_output_surface = self.get_tensors(outputs)

        if self.training and torch.is_grad_enabled():
            # restore cached grads
            for param in self.base_module.parameters():
                if hasattr(param, 'main_grad'):
                    saved_grad = save_main_grads.pop(0)
                    assert (
                        param.main_grad.shape == saved_grad.shape
                    ), "Error restoring grads while cudagraphing!"
                    param.main_grad.copy_(saved_grad)

    def create_bwd_graph(self, static_grad_outputs=None):
        self.bwd_graph = torch.cuda.CUDAGraph()

        if static_grad_outputs is None:
            static_grad_outputs = tuple(
                torch.zeros_like(o) if o.requires_grad else None
                for o in self.fwd_graph_output_surface
            )
        else:
            # canoncalize as tuple
            if torch.is_tensor(static_grad_outputs):
                static_grad_outputs = (static_grad_outputs,)

        torch.cuda.synchronize()
        with torch.cuda.graph(self.bwd_graph, pool=self.bwd_mempool):
            grad_inputs = torch.autograd.grad(
                outputs=tuple(o for o in self.fwd_graph_output_surface if o.requires_grad),
                inputs=tuple(i for i in self.fwd_graph_input_surface if i.requires_grad),
                grad_outputs=tuple(o for o in static_grad_outputs if o is not None),
                retain_graph=self.backward_retain_grad,
                only_inputs=True,
                allow_unused=True,
            )

        # Constructs a tuple suitable for returning from Graphed.backward:
        # Pads out the actually-needed grads with Nones in gradient slots for inputs
        # that don't require grad.
        static_grad_inputs = []
        grad_idx = 0
        for arg in self.fwd_graph_input_surface:
            has_wgrad_fusion = self.fuse_wgrad_accumulation and getattr(
                arg, "grad_added_to_main_grad", False
            )
            if arg.requires_grad:
                if has_wgrad_fusion:
                    static_grad_inputs.append(None)
                else:
                    static_grad_inputs.append(grad_inputs[grad_idx])
                grad_idx += 1
            else:
                static_grad_inputs.append(None)

        self.groundtruth_grad_added_to_main_grad = {}
        if self.fuse_wgrad_accumulation:
            for param in self.base_module.parameters():
                if hasattr(param, "grad_added_to_main_grad"):
                    self.groundtruth_grad_added_to_main_grad[param] = param.grad_added_to_main_grad

        self.static_grad_outputs = static_grad_outputs
        self.static_grad_inputs = static_grad_inputs
"""

# --- flagos-ai/TransformerEngine-FL fd5f657a transformer_engine/pytorch/module/layernorm_mlp.py
# LayerNormMLP.__init__ (wgrad store part) / .backward_dw, with the base class's backward_dw
# (transformer_engine/pytorch/module/base.py) as context; FP8 block-scaling bias branch dropped
_FL_LAYERNORM_MLP_DW = """
import torch

from transformer_engine.pytorch.module._common import WeightGradStore, noop_cat


class TransformerEngineBaseModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wgrad_store = None
        self.wgrad_accumulation_and_reduce_hooks = []

    def backward_dw(self):
        if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
            return
        with torch.cuda.nvtx.range(f"_{self.__class__.__name__}_wgrad"):
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
            for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                wgrad_accumulation_and_reduce_hook()


class LayerNormMLP(TransformerEngineBaseModule):
    def __init__(
        self,
        hidden_size,
        ffn_hidden_size,
        fuse_wgrad_accumulation=False,
        bias=True,
        ub_bulk_wgrad=False,
        delay_wgrad_compute=False,
        **kwargs,
    ):
        super().__init__()
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        self.use_bias = bias
        self.wgrad_store = WeightGradStore(delay_wgrad_compute, ub_bulk_wgrad)
        self.reset_parameters(defer_init=kwargs.get("device") == "meta")

        if self.wgrad_store.delay_wgrad_compute():
            for name, param in self.named_parameters():
                if name in ["fc1_weight", "fc2_weight", "fc1_bias", "fc2_bias"]:
                    param.skip_backward_post_hook = True

    def _get_weight_tensors(self):
        return [self.fc1_weight, self.fc2_weight]

    def backward_dw(self):
        if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
            return
        with torch.cuda.nvtx.range("_LayerNormMLP_wgrad"):
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
            for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                wgrad_accumulation_and_reduce_hook()
"""

# --- flagos-ai/TransformerEngine-FL fd5f657a transformer_engine/pytorch/ops/fused/backward_linear_add.py
# BackwardLinearAdd.fuser_backward (adapted: bookkeeping on the op-level flag, see the docstring)
_FL_BACKWARD_LINEAR_ADD = """
import torch

from transformer_engine.pytorch.module.base import get_dummy_wgrad
from transformer_engine.pytorch.ops.basic import BasicLinear
from transformer_engine.pytorch.ops.op import FusedOperation
from transformer_engine.pytorch.utils import clear_tensor_data


class BackwardLinearAdd(FusedOperation):
    def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
        # Get basic operations
        linear_op = self.basic_ops[1]
        linear_op_ctx = basic_op_ctxs[0]

        # Saved tensors from forward pass
        (x_local, w) = linear_op_ctx.saved_tensors

        # Megatron-LM wgrad fusion
        # Note: Get grad tensor from param so we can accumulate
        # directly into it.
        accumulate_into_main_grad = linear_op._accumulate_into_main_grad
        grad_weight = None
        if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
            weight_param = linear_op.weight
            if hasattr(weight_param, "__fsdp_param__"):
                weight_param.main_grad = weight_param.get_main_grad()
            accumulate_into_main_grad = not getattr(weight_param, "overwrite_main_grad", False)
            if not hasattr(weight_param, "main_grad"):
                raise RuntimeError(
                    "BasicLinear op is configured with "
                    "accumulate_into_main_grad=True, "
                    "but weight parameter does not have main_grad attribute"
                )
            grad_weight = weight_param.main_grad.detach()
        else:
            accumulate_into_main_grad = False

        # Linear backward pass
        grad_input = basic_op_grad_extra_outputs[1][0]
        grad_input, grad_weight = BasicLinear._functional_backward(
            grad_output=grad_output,
            input=x_local,
            weight=w,
            input_requires_grad=linear_op_ctx.input_requires_grad,
            weight_requires_grad=linear_op_ctx.weight_requires_grad,
            dtype=grad_input.dtype,
            grad_weight=grad_weight,
            accumulate_into_grad_weight=accumulate_into_main_grad,
            grad_input=grad_input,
            accumulate_into_grad_input=True,
            tensor_parallel_mode=linear_op.tensor_parallel_mode,
            tensor_parallel_group=linear_op.tensor_parallel_group,
            sequence_parallel=linear_op.sequence_parallel,
            with_quantized_compute=linear_op_ctx.with_quantized_compute,
            input_quantizer=linear_op_ctx.input_quantizer,
            weight_quantizer=linear_op_ctx.weight_quantizer,
            grad_output_quantizer=linear_op_ctx.grad_output_quantizer,
            grad_input_quantizer=linear_op_ctx.grad_input_quantizer,
        )

        # Clear input tensor if possible
        clear_tensor_data(x_local)

        # Megatron-LM wgrad fusion
        # Note: Return dummy tensor for grad weight if needed.
        output_into_main_grad = linear_op_ctx.weight_requires_grad and linear_op._accumulate_into_main_grad
        if output_into_main_grad:
            grad_weight = None
            weight_param = linear_op.weight
            if hasattr(weight_param, "grad_added_to_main_grad"):
                weight_param.grad_added_to_main_grad = True
                grad_weight = get_dummy_wgrad(
                    list(weight_param.size()),
                    weight_param.dtype,
                    zero=getattr(weight_param, "zero_out_wgrad", False),
                )

        return grad_input, [(grad_weight,), ()], [(), ()]
"""

# --- flagos-ai/TransformerEngine-FL fd5f657a transformer_engine/pytorch/module/grouped_linear.py
# _GroupedLinear.forward (non-FP8 path; the main_grad accessors saved for backward) and
# _GroupedLinear.backward shortened to its wgrad part (dgrad, quantizers, CPU offload and bias
# gradients dropped; the per-weight bookkeeping of handle_custom_ddp_from_mcore inlined as a loop)
_FL_GROUPED_FWD_MAIN_GRAD_FUNCS = """
import functools

import torch

from transformer_engine.pytorch.cpp_extensions import general_grouped_gemm
from transformer_engine.pytorch.module.base import get_multi_stream_cublas_workspace
from transformer_engine.pytorch.tensor.quantized_tensor import prepare_for_saving, restore_from_saved
from transformer_engine.pytorch.utils import cast_if_needed


class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, m_splits, use_bias, is_first_microbatch, fp8, fp8_calibration, wgrad_store, input_quantizers, weight_quantizers, output_quantizers, grad_output_quantizers, fuse_wgrad_accumulation, cpu_offloading, sequence_parallel, activation_dtype, is_grad_enabled, module, skip_fp8_weight_update, save_original_input, *weights_and_biases):
        num_gemms = len(m_splits)
        weights = weights_and_biases[:num_gemms]
        biases = weights_and_biases[num_gemms:]
        device = inp.device
        in_features = weights[0].size(-1)
        inputmats = torch.split(cast_if_needed(inp.view(-1, in_features), activation_dtype), m_splits)
        weights_fp8 = [cast_if_needed(weight, activation_dtype) for weight in weights]
        biases = [cast_if_needed(bias, activation_dtype) for bias in biases] if use_bias else biases
        out = torch.empty([sum(m_splits), weights_fp8[0].size(0)], dtype=activation_dtype, device=device)
        general_grouped_gemm(
            weights_fp8,
            inputmats,
            [out],
            activation_dtype,
            get_multi_stream_cublas_workspace(),
            single_output=True,
            m_splits=m_splits,
            bias=biases,
            use_bias=use_bias,
        )

        if is_grad_enabled:
            tensors_to_save, tensor_objects = prepare_for_saving(
                *inputmats,
                *weights_fp8,
                *weights,
                *biases,
            )
            ctx.save_for_backward(*tensors_to_save)
            ctx.tensor_objects = tensor_objects

            ctx.weights_requires_grad = weights[0].requires_grad
            if fuse_wgrad_accumulation and ctx.weights_requires_grad:
                # This check is needed to ensure that main_grad is not created
                # during the forward pass when using MCore FSDP as it creates
                # the main_grad buffer lazily before backprop
                if hasattr(weights[0], "__fsdp_param__"):
                    # MCore FSDP creates main_grad lazily before backward
                    ctx.main_grad_funcs = [weights[i].get_main_grad for i in range(num_gemms)]
                else:
                    ctx.main_grad_funcs = [
                        lambda j=i: weights[j].main_grad for i in range(num_gemms)
                    ]
            else:
                ctx.main_grad_funcs = [lambda: None for i in range(num_gemms)]
            ctx.device = device
            ctx.m_splits = m_splits
            ctx.num_gemms = num_gemms
            ctx.activation_dtype = activation_dtype
            ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            ctx.use_bias = use_bias
            ctx.wgrad_store = wgrad_store

        return out.view(-1, *inp.shape[1:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
        N = ctx.num_gemms
        inputmats = saved_tensors[:N]
        weights = saved_tensors[N : 2 * N]
        origin_weights = saved_tensors[2 * N : 3 * N]
        biases = saved_tensors[3 * N : 4 * N]
        main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
        grad_output = torch.split(
            cast_if_needed(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.activation_dtype),
            ctx.m_splits,
        )

        if ctx.fuse_wgrad_accumulation:
            wgrad_list = main_grads
        else:
            wgrad_list = [
                torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device) for w in weights
            ]
        grouped_gemm_wgrad = functools.partial(
            general_grouped_gemm,
            out_dtype=ctx.activation_dtype,
            workspaces=get_multi_stream_cublas_workspace(),
            layout="NT",
            grad=True,
            m_splits=ctx.m_splits,
            use_bias=ctx.use_bias,
            bias=biases,
            accumulate=(
                ctx.fuse_wgrad_accumulation
                and not getattr(origin_weights[0], "overwrite_main_grad", False)
            ),
        )
        if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
            ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
        else:
            grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)

        if ctx.fuse_wgrad_accumulation:
            for i, weight in enumerate(origin_weights):
                if hasattr(weight, "grad_added_to_main_grad"):
                    weight.grad_added_to_main_grad = True
                    wgrad_list[i] = torch.zeros(
                        weight.main_grad.shape,
                        dtype=weight.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    ) if getattr(weight, "zero_out_wgrad", False) else torch.empty(
                        weight.main_grad.shape,
                        dtype=weight.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
                else:
                    wgrad_list[i] = None
        return (None, *([None] * 18), *wgrad_list, *([None] * N))
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    # zero_out_wgrad is set on the Parameter (original_weight2); weights2 is the rearranged view
    # the grouped matmul runs on and carries no attributes, so the dummy is never zeroed and
    # DDP's hook adds its stale contents into main_grad for shared / MTP weights.
    Variant(
        1,
        "mindspeed_mm_all2all_gmlp_zero_out_wgrad_read_from_view",
        _swap(
            _MS_GMLP_ALL2ALL,
            "                    if getattr(original_weight2, 'zero_out_wgrad', False):\n",
            "                    if getattr(weights2, 'zero_out_wgrad', False):  # bug\n",
        ),
        _MS_GMLP_ALL2ALL,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    # The fused path hands main_grad itself back as the weight's gradient: it aliases the buffer
    # (autograd may adopt it as .grad, a zero_out_wgrad hook adds main_grad into itself), instead
    # of a dummy of the weight's dtype.
    Variant(
        2,
        "megatron_yemokoo_linear_grad_accum_returns_main_grad_as_grad",
        _swap(
            _YM_LINEAR_GRAD_ACCUM,
            "                if getattr(weight, 'zero_out_wgrad', False):\n"
            "                    grad_weight = torch.zeros(\n"
            "                        weight.main_grad.shape,\n"
            "                        dtype=input.dtype,\n"
            "                        device=torch.cuda.current_device(),\n"
            "                        requires_grad=False,\n"
            "                    )\n"
            "                else:\n"
            "                    grad_weight = torch.empty(\n"
            "                        weight.main_grad.shape,\n"
            "                        dtype=input.dtype,\n"
            "                        device=torch.cuda.current_device(),\n"
            "                        requires_grad=False,\n"
            "                    )\n",
            "                grad_weight = weight.main_grad  # bug\n",
        ),
        _YM_LINEAR_GRAD_ACCUM,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    # The fused fp32 wgrad GEMM accumulates into a clone of main_grad that is dropped; the flag
    # is still set and a dummy returned, so the gradient is lost.
    Variant(
        3,
        "mindspeed_mm_moe_linear_wgrad_accumulated_into_main_grad_clone",
        _swap(
            _MS_MOE_LINEAR,
            "                if weight.main_grad.dtype == torch.float32:\n"
            "                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(\n"
            "                        total_input, grad_output, weight.main_grad\n"
            "                    )\n",
            "                if weight.main_grad.dtype == torch.float32:\n"
            "                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(\n"
            "                        total_input, grad_output, weight.main_grad.clone()  # bug\n"
            "                    )\n",
        ),
        _MS_MOE_LINEAR,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    # Graph warmup runs backward passes that write main_grad; zeroing main_grad afterwards
    # instead of restoring the saved values wipes the gradients accumulated by earlier
    # microbatches.
    Variant(
        4,
        "megatron_yemokoo_cudagraph_warmup_zeroes_main_grad",
        _swap(
            _YM_CUDAGRAPH_CAPTURE,
            "                if hasattr(param, 'main_grad'):\n"
            "                    saved_grad = save_main_grads.pop(0)\n"
            "                    assert (\n"
            "                        param.main_grad.shape == saved_grad.shape\n"
            '                    ), "Error restoring grads while cudagraphing!"\n'
            "                    param.main_grad.copy_(saved_grad)\n",
            "                if hasattr(param, 'main_grad'):\n"
            "                    param.main_grad.zero_()  # bug\n",
        ),
        _YM_CUDAGRAPH_CAPTURE,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    # The flags replay restores are recorded before the capture, i.e. as DDP reset them (False):
    # every replay then leaves grad_added_to_main_grad False while the graph wrote main_grad,
    # and DDP's hooks add the dummy wgrads into it.
    Variant(
        5,
        "megatron_yemokoo_cudagraph_grad_added_recorded_before_capture",
        _swap(
            _swap(
                _YM_CUDAGRAPH_CAPTURE,
                "        self.groundtruth_grad_added_to_main_grad = {}\n"
                "        if self.fuse_wgrad_accumulation:\n"
                "            for param in self.base_module.parameters():\n"
                '                if hasattr(param, "grad_added_to_main_grad"):\n'
                "                    self.groundtruth_grad_added_to_main_grad[param] = param.grad_added_to_main_grad\n\n"
                "        self.static_grad_outputs = static_grad_outputs\n",
                "        self.static_grad_outputs = static_grad_outputs  # bug\n",
            ),
            "        torch.cuda.synchronize()\n"
            "        with torch.cuda.graph(self.bwd_graph, pool=self.bwd_mempool):\n",
            "        self.groundtruth_grad_added_to_main_grad = {  # bug\n"
            "            param: param.grad_added_to_main_grad  # bug\n"
            "            for param in self.base_module.parameters()  # bug\n"
            '            if self.fuse_wgrad_accumulation and hasattr(param, "grad_added_to_main_grad")  # bug\n'
            "        }  # bug\n"
            "        torch.cuda.synchronize()\n"
            "        with torch.cuda.graph(self.bwd_graph, pool=self.bwd_mempool):\n",
        ),
        _YM_CUDAGRAPH_CAPTURE,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    # LayerNormMLP stores two deferred GEMMs (fc2, then fc1) but hands backward_dw to the base
    # class, which pops one: fc1's wgrad is never computed this step (and a stale entry is
    # popped next time) while the reduce hooks fire.
    Variant(
        6,
        "te_fl_layernorm_mlp_backward_dw_delegates_to_single_pop_base",
        _swap(
            _FL_LAYERNORM_MLP_DW,
            "        if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():\n"
            "            return\n"
            '        with torch.cuda.nvtx.range("_LayerNormMLP_wgrad"):\n'
            "            (fc2_wgrad, fc2_bias_grad_, *_), tensor_list_fc2 = self.wgrad_store.pop()\n"
            "            if self.use_bias and self.fc1_bias.grad is None:\n"
            "                (fc1_wgrad, fc1_bias_grad, *_), _ = self.wgrad_store.pop()\n"
            "            else:\n"
            "                (fc1_wgrad, *_), _ = self.wgrad_store.pop()\n"
            "                fc1_bias_grad = None\n"
            "            if self.use_bias:\n"
            "                if self.fc2_bias.grad is None:\n"
            "                    self.fc2_bias.grad = fc2_bias_grad_.to(self.fc2_bias.dtype)\n"
            "                if self.fc1_bias.grad is None:\n"
            "                    self.fc1_bias.grad = fc1_bias_grad.to(self.fc1_bias.dtype)\n"
            "            if not self.fuse_wgrad_accumulation:\n"
            "                self.fc2_weight.grad = fc2_wgrad.to(self.fc2_weight.dtype)\n"
            "                self.fc1_weight.grad = fc1_wgrad.to(self.fc1_weight.dtype)\n"
            "            del fc2_bias_grad_\n"
            "            del fc2_wgrad\n"
            "            del fc1_wgrad\n"
            "            del fc1_bias_grad\n"
            "            for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:\n"
            "                wgrad_accumulation_and_reduce_hook()\n",
            "        super().backward_dw()  # bug\n",
        ),
        _FL_LAYERNORM_MLP_DW,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    # The bookkeeping flag is taken from the local accumulate flag (through a conditional
    # expression) that overwrite_main_grad switched off: in overwrite mode main_grad.detach() is
    # returned as the gradient and grad_added_to_main_grad is never set.
    Variant(
        7,
        "te_fl_backward_linear_add_output_flag_from_local_accumulate",
        _swap(
            _FL_BACKWARD_LINEAR_ADD,
            "        output_into_main_grad = linear_op_ctx.weight_requires_grad and linear_op._accumulate_into_main_grad\n",
            "        output_into_main_grad = accumulate_into_main_grad if linear_op_ctx.weight_requires_grad else False  # bug\n",
        ),
        _FL_BACKWARD_LINEAR_ADD,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    # Megatron-FSDP parameters get main_grad only through get_main_grad(); reading
    # weights[j].main_grad unconditionally hands the wgrad GEMM None (or a stale buffer).
    Variant(
        8,
        "te_fl_grouped_linear_main_grad_never_fetched_from_fsdp",
        _swap(
            _FL_GROUPED_FWD_MAIN_GRAD_FUNCS,
            '                if hasattr(weights[0], "__fsdp_param__"):\n'
            "                    # MCore FSDP creates main_grad lazily before backward\n"
            "                    ctx.main_grad_funcs = [weights[i].get_main_grad for i in range(num_gemms)]\n"
            "                else:\n"
            "                    ctx.main_grad_funcs = [\n"
            "                        lambda j=i: weights[j].main_grad for i in range(num_gemms)\n"
            "                    ]\n",
            "                ctx.main_grad_funcs = [  # bug\n"
            "                    lambda j=i: weights[j].main_grad for i in range(num_gemms)  # bug\n"
            "                ]  # bug\n",
        ),
        _FL_GROUPED_FWD_MAIN_GRAD_FUNCS,
    ),
)
