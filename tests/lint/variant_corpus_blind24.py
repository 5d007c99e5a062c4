"""The twenty-fourth blind corpus (H-blind24), development half: main_grad bookkeeping variants
of the eight classes of issue #19, two per class, grounded in code from repositories no earlier
blind corpus used: ptrendx TransformerEngine (a Transformer Engine fork carrying the newest
op-fuser code: the fusible ``GroupedLinear`` op with its own ``WeightGradStore`` and
``backward_dw``, the fused grouped-MLP backward helper ``_compute_grad_params``, the fused
``BackwardLinearScale``, and the FP8 ``quantized_model_init`` example that hands TE modules
hand-allocated ``main_grad`` buffers), momo609 mindspeed (a MindSpeed fork: the communication-
over-computation row-parallel linear whose NPU-alignment helper returns a re-laid-out copy of the
weight, and the fb-overlap ``WeightGradStore``), and Cuiym715 zero-bubble-pipeline-parallelism
(a zero-bubble pipeline fork of Megatron-LM: the split-backward linear whose W pass is queued in a
pipeline ``WeightGradStore``, and its DDP wrapper with per-weight buffers for zero-bubble weights).

Sources (repo, commit, path, function):
- momo609/mindspeed 7e624cf19f9a26b2ae216f8450fa4298110df8ca
  mindspeed/core/tensor_parallel/coc_feature/coc_parallel_linears_sequence_parallel.py
  COCRowSeqParallelFunction.backward, with
  mindspeed/core/tensor_parallel/coc_feature/matmul_soc_friendly.py get_aligned_mm_inputs /
  process_with_k_aligned as context (two variants: classes 1 and 2)
- momo609/mindspeed 7e624cf19f9a26b2ae216f8450fa4298110df8ca
  mindspeed/core/transformer/moe/moe_feature/fb_overlap/modules/weight_grad_store.py
  WeightGradStore.put / .overlap_matmul (class 4)
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  transformer_engine/pytorch/ops/basic/grouped_linear.py GroupedLinear._fuser_backward_split_quantize
  (two variants: classes 1 and 5)
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  transformer_engine/pytorch/ops/basic/grouped_linear.py GroupedLinear.__init__ /
  ._apply_delay_wgrad_param_hooks / .need_backward_dw / .backward_dw (class 6)
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  transformer_engine/pytorch/ops/fused/backward_grouped_mlp.py _compute_grad_params
  (three variants: classes 2, 3 and 7)
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  transformer_engine/pytorch/ops/fused/backward_linear_scale.py BackwardLinearScale.fuser_backward (class 7)
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  examples/pytorch/quantized_model_init/main.py main (class 8)
- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e55446283435720bcd095900dac8545d3
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward
  (two variants: classes 3 and 5)
- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e55446283435720bcd095900dac8545d3
  megatron/core/distributed/distributed_data_parallel.py DistributedDataParallel.__init__ /
  ._make_param_hook (two variants: classes 4 and 8)
- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e55446283435720bcd095900dac8545d3
  megatron/core/weight_grad_store.py WeightGradStore.put / .flush / .pop (class 6)

Conventions: twins are the real code shortened (real names and idioms; docstrings, nvtx ranges,
FP8 quantizer usage updates, single-grouped-weight and bias branches, sequence-parallel
communication, NPU CoC scheduling details, logging and unrelated branches dropped). No repository
history of these files was available here, so no variant reverts a known fix.
Adapted where the real code lacks the main_grad feature a class is about, or gets it wrong, and
said so here (a twin must be correct under CONTRACT.md):
- mindspeed's ``COCRowSeqParallelFunction.backward`` rebinds ``weight`` (``ctx.weight``, the
  Parameter) to the result of ``get_aligned_mm_inputs``, which for a k-aligned, m/n-unaligned
  shape is ``weight.t().contiguous().t()``: a fresh tensor onto which only ``main_grad`` is copied.
  The wgrad still lands in the right buffer, but ``hasattr(weight, 'grad_added_to_main_grad')`` and
  ``zero_out_wgrad`` are then read from the copy: the Parameter is never flagged and gets no dummy.
  The twin binds the aligned copy to ``mm_weight`` for the GEMMs and keeps the bookkeeping on
  ``weight``; the class-2 variant's bug is the code as it stands at the head.
- ptrendx's ``BackwardLinearScale.fuser_backward`` gates its dummy-grad bookkeeping on the local
  ``accumulate_into_main_grad`` after ``get_accumulate_flag_in_param`` has switched it off for
  ``overwrite_main_grad`` (TE PR #2936's seed bug); the twin gates it on the op-level
  ``linear_op._accumulate_into_main_grad``.
- ptrendx's FP8 example copies ``.grad`` into ``main_grad`` with ``copy_`` (after zeroing it at the
  start of the step, one microbatch); the twin adds it (the same numbers, no overwrite), and guards
  the per-step loops with ``hasattr(param, "main_grad")``.
- Cuiym715's split-backward linear always returns an ``empty`` dummy; the twin returns a zeroed one
  when ``zero_out_wgrad`` is set (that Megatron predates the attribute; CONTRACT.md requires it).
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


# --- momo609/mindspeed 7e624cf1
# mindspeed/core/tensor_parallel/coc_feature/coc_parallel_linears_sequence_parallel.py
# COCRowSeqParallelFunction.backward (adapted: the aligned copy is bound to mm_weight, see the docstring)
_MS_COC_ROW_BWD = """
from functools import reduce

import torch
from megatron.training import get_args

from mindspeed.ops.npu_matmul_add import npu_matmul_add_fp16, npu_matmul_add_fp32
from .coc_utils import (COCParallel, CommunicationType, get_output_shape, get_parallel_num,
                        is_grad_needed, reshape_to_2D, shuffle_as_coc_reduce_scatter)
from .matmul_soc_friendly import get_aligned_mm_inputs
from .min_comm_cfg import min_comm_config
from .rewrite_parallel_linears_sequence_parallel import RewriteRowSeqParallelFunction


class COCRowSeqParallelFunction(torch.autograd.Function):
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
            grad_output, mm_weight = get_aligned_mm_inputs(grad_output, weight, sp_coef=min_comm_config.tp_world_size, parallel_num=parallel_num)

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
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=total_input.dtype,
                                                  device=torch.cuda.current_device(), requires_grad=False)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=total_input.dtype,
                                                  device=torch.cuda.current_device(), requires_grad=False)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            if is_grad_bias_needed and ctx.use_bias:
                grad_bias = grad_output.sum(dim=0) if grad_output.is_contiguous() else grad_output.t().sum(dim=1)

        return grad_input, grad_weight, grad_bias
"""

# --- momo609/mindspeed 7e624cf1
# mindspeed/core/transformer/moe/moe_feature/fb_overlap/modules/weight_grad_store.py
# WeightGradStore.put / .overlap_matmul (all-gather overlap and the dense fused-kernel branch dropped)
_MS_FB_WEIGHT_GRAD_STORE = """
import torch
from megatron.training import get_args

from mindspeed.ops.gmm import GMMFunction
from mindspeed.ops.npu_groupmatmul_add import npu_groupmatmul_add_fp32


class WeightGradStore:
    cache = []
    is_decoupleBlock = False

    @classmethod
    def put(cls, total_input, grad_output, weight, sequence_parallel, in_row=False):
        cls.cache.append((total_input, grad_output, weight, sequence_parallel, in_row))

    @classmethod
    def overlap_matmul(cls, grad_store_cache):
        total_input, grad_output, weight, sequence_parallel, in_row = grad_store_cache
        args = get_args()
        if hasattr(weight, 'gmm_weight'):
            inputs, group_list, group_list_type = total_input
            if get_args().gemm_gradient_accumulation_fusion and not getattr(weight, 'is_hot_experts', False):
                npu_groupmatmul_add_fp32(inputs, grad_output, group_list, weight.main_grad)
            else:
                if args.fp8 and args.use_gmm_fp8:
                    from mindspeed.core.transformer.moe.grouped_matmul_util import get_gmm_op_cls
                    grad_weight = get_gmm_op_cls().op_dw(inputs, grad_output, group_list, group_list_type)[0]
                else:
                    grad_weight = GMMFunction.builder.load().npu_gmm([inputs.t()], [grad_output], [], group_list, 2, 0)[0]
                if not getattr(weight, 'is_hot_experts', False):
                    weight.main_grad.data.add_(grad_weight.view(-1, weight.shape[-1]))
            inputs.untyped_storage().resize_(0)
            grad_output.untyped_storage().resize_(0)
            if getattr(weight, 'is_hot_experts', False):
                weight.grad = grad_weight.view(-1, weight.shape[-1])
        else:
            if len(grad_output.shape) > 2:
                grad_output = grad_output.contiguous()
                sb = grad_output.shape[0] * grad_output.shape[1]
                grad_output = grad_output.view(sb, grad_output.shape[2])
                total_input = total_input.view(sb, total_input.shape[2])
            grad_weight = grad_output.t().matmul(total_input)
            weight.main_grad.data.add_(grad_weight)
            total_input.untyped_storage().resize_(0)
            grad_output.untyped_storage().resize_(0)
"""

# --- ptrendx/TransformerEngine c74e5aa3 transformer_engine/pytorch/ops/basic/grouped_linear.py
# GroupedLinear._fuser_backward_split_quantize (discrete weights, no bias, no quantized compute)
_PX_OP_GROUPED_BWD = """
import functools

import torch

from transformer_engine.pytorch.cpp_extensions import general_grouped_gemm
from transformer_engine.pytorch.module.base import _2X_ACC_DGRAD, _2X_ACC_WGRAD
from transformer_engine.pytorch.ops._common import (
    get_accumulate_flag_in_param,
    get_dummy_wgrads_for_params,
    get_main_grad_from_param,
    maybe_dequantize,
)
from transformer_engine.pytorch.ops.op import BasicOperation
from transformer_engine.pytorch.utils import clear_tensor_data


class GroupedLinear(BasicOperation):
    def _get_weight_tensors(self):
        return [getattr(self, f"weight{idx}") for idx in range(self.num_groups)]

    def _fuser_backward_split_quantize(self, *, ctx, grad_output):
        num_groups = self.num_groups
        weights = self._get_weight_tensors()
        device = weights[0].device

        saved_tensors = ctx.saved_tensors
        split_sizes = saved_tensors[0]
        saved_tensors = saved_tensors[3:]
        xs, saved_tensors = saved_tensors[:num_groups], saved_tensors[num_groups:]
        ws, saved_tensors = saved_tensors[:num_groups], saved_tensors[num_groups:]

        split_sizes_int = [int(s) for s in split_sizes.tolist()]
        dy = maybe_dequantize(grad_output, ctx.dtype)
        dys = torch.split(dy, split_sizes_int)

        # Initialize grad weight buffers.
        accumulate_into_main_grad = self._accumulate_into_main_grad
        grad_weights = [None] * num_groups
        if ctx.weight_requires_grad:
            weight_shape = (self.out_features, self.in_features)
            if accumulate_into_main_grad:
                grad_weights = [get_main_grad_from_param(w, op_label="GroupedLinear") for w in weights]
                accumulate_into_main_grad = get_accumulate_flag_in_param(weights[0])
            else:
                grad_weights = [torch.empty(weight_shape, dtype=ctx.dtype, device=device) for _ in range(num_groups)]
        final_weight_grads = list(grad_weights)

        grad_input = None
        if ctx.input_requires_grad:
            in_shape = list(grad_output.size())[:-1] + [self.in_features]
            grad_input = torch.empty(in_shape, dtype=ctx.dtype, device=device)
            general_grouped_gemm(ws, dys, [grad_input], [None] * num_groups, ctx.dtype, layout="NN",
                                 m_splits=split_sizes_int, use_split_accumulator=_2X_ACC_DGRAD, single_output=True)

        delay_wgrad = (
            ctx.weight_requires_grad
            and self.wgrad_store is not None
            and self.wgrad_store.delay_wgrad_compute()
        )
        if ctx.weight_requires_grad:
            grouped_gemm_wgrad = functools.partial(
                general_grouped_gemm, quantization_params=[None] * num_groups, out_dtype=ctx.dtype,
                layout="NT", m_splits=split_sizes_int, use_split_accumulator=_2X_ACC_WGRAD,
                accumulate=accumulate_into_main_grad,
            )
            if delay_wgrad:
                self.wgrad_store.put([xs, dys, grad_weights], grouped_gemm_wgrad)
            else:
                grouped_gemm_wgrad(xs, dys, grad_weights)
        if not delay_wgrad:
            clear_tensor_data(*xs)

        # Megatron-LM wgrad fusion: regardless of overwrite vs. accumulate, signal that
        # ``main_grad`` already carries the wgrad and replace ``.grad`` with a dummy.
        if ctx.weight_requires_grad and self._accumulate_into_main_grad:
            final_weight_grads = get_dummy_wgrads_for_params(weights)
        elif ctx.weight_requires_grad and delay_wgrad:
            final_weight_grads = [None] * num_groups

        return grad_input, [final_weight_grads], [(None,)]
"""

# --- ptrendx/TransformerEngine c74e5aa3 transformer_engine/pytorch/ops/basic/grouped_linear.py
# GroupedLinear.__init__ (weights and wgrad store only) / .backward_dw (discrete weights)
_PX_OP_GROUPED_DW = """
import torch

from transformer_engine.pytorch.module._common import WeightGradStore
from transformer_engine.pytorch.ops.op import BasicOperation
from transformer_engine.pytorch.utils import clear_tensor_data


class GroupedLinear(BasicOperation):
    def __init__(self, num_groups, in_features, out_features, *, device=None, dtype=None,
                 accumulate_into_main_grad=False, delay_wgrad_compute=False):
        super().__init__()
        self.num_groups = num_groups
        self.in_features = in_features
        self.out_features = out_features
        self.wgrad_store = WeightGradStore(delay_wgrad_compute)
        self.wgrad_accumulation_and_reduce_hooks = []
        for group_idx in range(self.num_groups):
            weight_tensor = torch.empty(out_features, in_features, device=device, dtype=dtype)
            self.register_parameter(f"weight{group_idx}", torch.nn.Parameter(weight_tensor))
        # Whether to accumulate weight gradient into main_grad
        self._accumulate_into_main_grad: bool = accumulate_into_main_grad
        self._apply_delay_wgrad_param_hooks()

    def _apply_delay_wgrad_param_hooks(self) -> None:
        if not self.wgrad_store.delay_wgrad_compute():
            return
        for group_idx in range(self.num_groups):
            getattr(self, f"weight{group_idx}").skip_backward_post_hook = True

    def register_wgrad_accumulation_and_reduce_hooks(self, wgrad_accumulation_and_reduce_hook):
        self.wgrad_accumulation_and_reduce_hooks.append(wgrad_accumulation_and_reduce_hook)

    def _trigger_wgrad_accumulation_and_reduce_hooks(self) -> None:
        for hook in self.wgrad_accumulation_and_reduce_hooks:
            hook()

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
"""

# --- ptrendx/TransformerEngine c74e5aa3 transformer_engine/pytorch/ops/fused/backward_grouped_mlp.py
# _compute_grad_params (discrete weights; the cuDNN wgrad kernel and single grouped weight dropped)
_PX_GROUPED_MLP_GRAD_PARAMS = """
import functools

import torch

from transformer_engine.pytorch.cpp_extensions import general_grouped_gemm_for_grouped_tensor
from transformer_engine.pytorch.module.base import _2X_ACC_WGRAD
from transformer_engine.pytorch.ops._common import (
    get_accumulate_flag_in_param,
    get_dummy_wgrads_for_params,
    get_main_grad_from_param,
    maybe_dequantize,
)


def _compute_grad_params(fc_op, ctx, num_groups, weight_shape, grouped_x, grouped_dy, dtype, device,
                         bias_grads, label=""):
    \"\"\"Compute weight gradients and build grad_params for a GroupedLinear layer.\"\"\"

    # Allocate grad buffers, determine accumulate flag.
    accumulate_into_main_grad = False
    wgrad_output = None
    op_label = f"Grouped MLP fused backward ({label})" if label else "Grouped MLP fused backward"
    weights = fc_op._get_weight_tensors()
    w_list = [None] * num_groups
    if ctx.weight_requires_grad:
        if fc_op._accumulate_into_main_grad:
            w_list = [get_main_grad_from_param(w, op_label=op_label) for w in weights]
            accumulate_into_main_grad = get_accumulate_flag_in_param(weights[0])
        else:
            w_list = [torch.empty(weight_shape, dtype=dtype, device=device) for _ in range(num_groups)]
        wgrad_output = w_list

    if ctx.weight_requires_grad:
        # Launch or defer the GEMM
        delay_wgrad = fc_op.wgrad_store is not None and fc_op.wgrad_store.delay_wgrad_compute()
        gemm_fn = functools.partial(
            general_grouped_gemm_for_grouped_tensor,
            layout="NT",
            accumulate=accumulate_into_main_grad,
            use_split_accumulator=_2X_ACC_WGRAD,
        )
        if delay_wgrad:
            fc_op.wgrad_store.put([grouped_x, grouped_dy, wgrad_output], gemm_fn)
        else:
            gemm_fn(grouped_x, grouped_dy, wgrad_output)

        # Need to return dummy wgrads for Megatron-LM wgrad fusion if grad is already added
        if fc_op._accumulate_into_main_grad:
            w_list = get_dummy_wgrads_for_params(weights)
        elif delay_wgrad:
            w_list = [None] * num_groups

    # Assemble grad_params in parameter registration order.
    if not fc_op.has_bias:
        return w_list
    bias_list = bias_grads if bias_grads is not None else [None] * num_groups
    return w_list + bias_list
"""

# --- ptrendx/TransformerEngine c74e5aa3 transformer_engine/pytorch/ops/fused/backward_linear_scale.py
# BackwardLinearScale.fuser_backward (adapted: bookkeeping on the op-level flag, see the docstring)
_PX_BACKWARD_LINEAR_SCALE = """
from __future__ import annotations

import torch

from transformer_engine.pytorch.ops._common import (
    get_accumulate_flag_in_param,
    get_dummy_wgrads_for_params,
    get_main_grad_from_param,
)
from transformer_engine.pytorch.ops.basic import BasicLinear, ConstantScale
from transformer_engine.pytorch.ops.op import FusedOperation
from transformer_engine.pytorch.utils import clear_tensor_data


class BackwardLinearScale(FusedOperation):
    def __init__(self, *, scale: ConstantScale, linear: BasicLinear) -> None:
        super().__init__((linear, scale))

    def fuser_backward(self, basic_op_ctxs, grad_output, *, basic_op_grad_extra_outputs):
        # Get basic operations
        linear_op = self.basic_ops[0]
        linear_op_ctx = basic_op_ctxs[0]
        scale_op = self.basic_ops[1]

        # Saved tensors from forward pass
        (x_local, w) = linear_op_ctx.saved_tensors

        # Megatron-LM wgrad fusion
        # Note: Get grad tensor from param so we can accumulate directly into it.
        accumulate_into_main_grad = linear_op._accumulate_into_main_grad
        grad_weight = None
        if linear_op_ctx.weight_requires_grad and accumulate_into_main_grad:
            weight_param = linear_op.weight
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
            input_requires_grad=linear_op_ctx.input_requires_grad,
            grad_input_alpha=scale_op.scale,
            weight_requires_grad=linear_op_ctx.weight_requires_grad,
            grad_weight_alpha=scale_op.scale,
            dtype=linear_op_ctx.dtype,
            grad_weight=grad_weight,
            accumulate_into_grad_weight=accumulate_into_main_grad,
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
        if linear_op_ctx.weight_requires_grad and linear_op._accumulate_into_main_grad:
            grad_weight = get_dummy_wgrads_for_params([linear_op.weight])[0]

        return grad_input, [(grad_weight,), ()], [(), ()]
"""

# --- ptrendx/TransformerEngine c74e5aa3 examples/pytorch/quantized_model_init/main.py main
# (assertions and printing dropped; adapted: .grad added, not copied, see the docstring)
_PX_QUANTIZED_INIT_EXAMPLE = """
import torch
import transformer_engine.pytorch as te
from transformer_engine.pytorch.quantized_tensor import QuantizedTensor

HIDDEN_SIZE = 256
FFN_HIDDEN_SIZE = 1024
NUM_ATTENTION_HEADS = 8
SEQ_LEN = 32
BATCH_SIZE = 2
NUM_STEPS = 5
DTYPE = torch.bfloat16


def main():
    # Inside quantized_model_init, TE modules store only the FP8 copy of each weight.
    with te.quantized_model_init(enabled=True):
        model = te.TransformerLayer(
            HIDDEN_SIZE,
            FFN_HIDDEN_SIZE,
            NUM_ATTENTION_HEADS,
            fuse_wgrad_accumulation=True,
            fuse_qkv_params=True,  # required for fuse_wgrad_accumulation
            params_dtype=DTYPE,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        )
    quantized_count = sum(1 for param in model.parameters() if isinstance(param, QuantizedTensor))
    assert quantized_count > 0, "No QuantizedTensor parameters found"

    # fuse_wgrad_accumulation causes weight-gradient GEMMs to write directly
    # into ``param.main_grad`` in FP32 (via Tensor Core accumulation).
    for param in model.parameters():
        param.main_grad = torch.zeros(param.shape, dtype=torch.float32, device=param.device)

    optimizer = te.optimizers.FusedAdam(
        model.parameters(),
        lr=1e-3,
        master_weights=True,
        master_weight_dtype=torch.float32,
        use_decoupled_grad=True,
    )

    x = torch.randn(SEQ_LEN, BATCH_SIZE, HIDDEN_SIZE, dtype=DTYPE, device="cuda")
    target = torch.randn(SEQ_LEN, BATCH_SIZE, HIDDEN_SIZE, dtype=DTYPE, device="cuda")
    for step in range(NUM_STEPS):
        optimizer.zero_grad(set_to_none=True)
        for param in model.parameters():
            if hasattr(param, "main_grad"):
                param.main_grad.zero_()

        with te.autocast(enabled=True):
            output = model(x)
        loss = torch.nn.functional.mse_loss(output, target)
        loss.backward()

        # Weights: backward already accumulated into main_grad. Others: autograd set .grad.
        for param in model.parameters():
            if param.grad is not None and hasattr(param, "main_grad"):
                param.main_grad.add_(param.grad)
                param.grad = None
        for param in model.parameters():
            if hasattr(param, "main_grad"):
                param.decoupled_grad = param.main_grad
        optimizer.step()
"""

# --- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.backward (sequence parallel dropped;
# adapted: zeroed dummy under zero_out_wgrad, see the docstring)
_ZB_LINEAR_BWD = """
import functools

import fused_weight_gradient_mlp_cuda
import torch

from megatron import get_args
from megatron.core.parallel_state import get_tensor_model_parallel_group


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        use_bias = ctx.use_bias

        def pre_process(_input_):
            return _input_, None

        not_split_bw = not get_args().enable_zero_bubble
        if not_split_bw:
            pre_processed_results = pre_process(input)
        grad_input = grad_output.matmul(weight)

        def post_process(_pre_processed_results_):
            _total_input_, _handle_ = _pre_processed_results_
            return _total_input_.view(_total_input_.shape[0] * _total_input_.shape[1], _total_input_.shape[2])

        def execute_w_pass(_input_, _grad_output_, _weight_main_grad_, wgrad_gemm_accum_func=None):
            _total_input_ = post_process(pre_process(_input_))
            wgrad_gemm_accum_func(_total_input_, _grad_output_, _weight_main_grad_)

        if not_split_bw:
            total_input = post_process(pre_processed_results)
        grad_output = grad_output.contiguous()
        grad_output = grad_output.view(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])

        if ctx.async_grad_allreduce:
            handle = torch.distributed.all_reduce(grad_input, group=get_tensor_model_parallel_group(), async_op=True)

        if ctx.gradient_accumulation_fusion:
            if get_args().enable_zero_bubble:
                from megatron.core.weight_grad_store import WeightGradStore
                if weight.main_grad.dtype == torch.float32:
                    WeightGradStore.put(input, grad_output, weight, functools.partial(
                        execute_w_pass, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32))
                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                    WeightGradStore.put(input, grad_output, weight, functools.partial(
                        execute_w_pass, wgrad_gemm_accum_func=fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16))
                else:
                    raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
            else:
                if weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                else:
                    raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

            if hasattr(weight, 'grad_added_to_main_grad'):
                make = torch.zeros if getattr(weight, 'zero_out_wgrad', False) else torch.empty
                grad_weight = make(weight.main_grad.shape, dtype=input.dtype,
                                   device=torch.cuda.current_device(), requires_grad=False)
                weight.grad_added_to_main_grad = True
            else:
                grad_weight = None
        else:
            grad_weight = grad_output.t().matmul(total_input)
        grad_bias = grad_output.sum(dim=0) if use_bias else None

        if ctx.async_grad_allreduce:
            handle.wait()
        return grad_input, grad_weight, grad_bias, None, None, None, None
"""

# --- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e
# megatron/core/distributed/distributed_data_parallel.py DistributedDataParallel
# (__init__ buffers and hooks, _make_param_hook; the MoE expert path dropped)
_ZB_DDP = """
import torch

from megatron import get_args
from megatron.core.distributed.grad_buffer import GradBuffer
from megatron.core.transformer.module import MegatronModule


class DistributedDataParallel(MegatronModule):
    def __init__(self, config, module, data_parallel_group, accumulate_allreduce_grads_in_fp32,
                 overlap_grad_reduce, use_distributed_optimizer, bucket_size=40000000):
        super().__init__(config=config)
        self.module = module
        self.overlap_grad_reduce = overlap_grad_reduce
        self.use_distributed_optimizer = use_distributed_optimizer
        self.grad_buffers = {}
        self.param_to_grad_buffer = {}
        self.weight_grad_buffers = {}

        grad_dtype_to_params = {}
        param_to_name = {}
        weight_for_zero_bubble = set()
        if get_args().enable_zero_bubble and self.overlap_grad_reduce:
            from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
            for name, sub_module in self.module.named_modules():
                if isinstance(sub_module, (ColumnParallelLinear, RowParallelLinear)):
                    weight_for_zero_bubble.add(sub_module.weight)

        for name, param in self.module.named_parameters():
            if param.requires_grad and getattr(param, 'allreduce', True):
                param.grad_added_to_main_grad = False
                param_to_name[param] = name
                dtype = torch.float if accumulate_allreduce_grads_in_fp32 else param.dtype
                if param in weight_for_zero_bubble:
                    continue
                params = grad_dtype_to_params.get(dtype, [])
                params.append(param)
                grad_dtype_to_params[dtype] = params

        for dtype, params in grad_dtype_to_params.items():
            self.grad_buffers[dtype] = GradBuffer(dtype, params, data_parallel_group, bucket_size, param_to_name,
                                                  self.overlap_grad_reduce, self.use_distributed_optimizer)
            for param in params:
                self.param_to_grad_buffer[param] = self.grad_buffers[dtype]

        for name, param in self.module.named_parameters():
            if not param.requires_grad or not getattr(param, 'allreduce', True):
                continue
            if param not in weight_for_zero_bubble:
                continue
            dtype = torch.float if accumulate_allreduce_grads_in_fp32 else param.dtype
            self.weight_grad_buffers[param] = self.param_to_grad_buffer[param] = GradBuffer(
                dtype, [param], data_parallel_group, bucket_size, param_to_name,
                self.overlap_grad_reduce, self.use_distributed_optimizer)

        self.grad_accs = []
        for param in self.module.parameters():
            if param.requires_grad:
                param_tmp = param.expand_as(param)
                grad_acc = param_tmp.grad_fn.next_functions[0][0]
                grad_acc.register_hook(self._make_param_hook(param, self.param_to_grad_buffer))
                self.grad_accs.append(grad_acc)

    def _make_param_hook(self, param, param_to_grad_buffer):
        def param_hook(*unused):
            if param.requires_grad:
                if self.overlap_grad_reduce:
                    assert param.grad is not None, 'param.grad being None is not safe when overlap_grad_reduce is True'
                if param.grad is not None and not param.grad_added_to_main_grad:
                    param.main_grad.add_(param.grad.data)
                param.grad = None
                if self.overlap_grad_reduce:
                    param_to_grad_buffer[param].register_grad_ready(param)

        return param_hook
"""

# --- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e megatron/core/weight_grad_store.py
# WeightGradStore.put / .flush / .pop / .is_empty
_ZB_WEIGHT_GRAD_STORE = """
import queue


class WeightGradStore:

    cache = []
    weight_grad_queue = [queue.Queue(), queue.Queue()]

    @classmethod
    def put(cls, total_input, grad_output, weight, func):
        # func(total_input, grad_output, weight.main_grad)
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
                func(total_input, grad_output, weight.main_grad)
        else:
            raise Exception("Pop empty queue.")

    @classmethod
    def is_empty(cls, chunk=0):
        return cls.weight_grad_queue[chunk].empty()
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    # mm_weight is the NPU-aligned copy the GEMMs run on (only main_grad is copied onto it);
    # asking it for grad_added_to_main_grad finds nothing whenever a copy was made, so the
    # Parameter, whose main_grad the wgrad was just added into, gets neither the flag nor a dummy.
    Variant(
        1,
        "mindspeed_coc_row_grad_added_checked_on_aligned_copy",
        _swap(
            _MS_COC_ROW_BWD,
            "                if hasattr(weight, 'grad_added_to_main_grad'):\n",
            "                if hasattr(mm_weight, 'grad_added_to_main_grad'):  # bug\n",
        ),
        _MS_COC_ROW_BWD,
    ),
    # ws are the weights saved for the GEMMs (quantized copies under FP8): they carry no
    # grad_added_to_main_grad, so no Parameter is flagged and every weight gets a None gradient
    # although the grouped GEMM wrote its main_grad.
    Variant(
        1,
        "te_ptrendx_op_grouped_linear_dummies_for_saved_gemm_weights",
        _swap(
            _PX_OP_GROUPED_BWD,
            "            final_weight_grads = get_dummy_wgrads_for_params(weights)\n",
            "            final_weight_grads = get_dummy_wgrads_for_params(ws)  # bug\n",
        ),
        _PX_OP_GROUPED_BWD,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    # The code as it stands at the head: ``weight`` itself is rebound to the aligned copy, so the
    # flag test, zero_out_wgrad and grad_added_to_main_grad = True all land on a tensor that is
    # dropped when backward returns (the Parameter gets no dummy and stays unflagged).
    Variant(
        2,
        "mindspeed_coc_row_weight_rebound_to_aligned_copy",
        _swap(
            _MS_COC_ROW_BWD,
            "            grad_output, mm_weight = get_aligned_mm_inputs(grad_output, weight, sp_coef=min_comm_config.tp_world_size, parallel_num=parallel_num)\n",
            "            grad_output, weight = get_aligned_mm_inputs(grad_output, weight, sp_coef=min_comm_config.tp_world_size, parallel_num=parallel_num)  # bug\n",
        ),
        _MS_COC_ROW_BWD,
    ),
    # With natively FP8 weights, maybe_dequantize hands back fresh high-precision copies: they
    # have no main_grad (the fused path fails) and no grad_added_to_main_grad (no dummies).
    Variant(
        2,
        "te_ptrendx_grouped_mlp_weights_replaced_by_dequantized_copies",
        _swap(
            _PX_GROUPED_MLP_GRAD_PARAMS,
            "    weights = fc_op._get_weight_tensors()\n",
            "    weights = [maybe_dequantize(w, dtype) for w in fc_op._get_weight_tensors()]  # bug\n",
        ),
        _PX_GROUPED_MLP_GRAD_PARAMS,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    # Without gradient-accumulation fusion nothing writes main_grad and the real wgrad is
    # returned; flagging the weight makes DDP's hook drop that wgrad.
    Variant(
        3,
        "zero_bubble_linear_unfused_wgrad_flagged_as_added",
        _swap(
            _ZB_LINEAR_BWD,
            "            grad_weight = grad_output.t().matmul(total_input)\n",
            "            grad_weight = grad_output.t().matmul(total_input)\n"
            "            weight.grad_added_to_main_grad = hasattr(weight, 'grad_added_to_main_grad')  # bug\n",
        ),
        _ZB_LINEAR_BWD,
    ),
    # Only the deferred path gets dummies: the immediate GEMM writes main_grad and then hands the
    # main_grad buffers themselves back as .grad with no flag, so DDP adds main_grad into itself.
    Variant(
        3,
        "te_ptrendx_grouped_mlp_dummies_only_when_wgrad_delayed",
        _swap(
            _PX_GROUPED_MLP_GRAD_PARAMS,
            "        if fc_op._accumulate_into_main_grad:\n            w_list = get_dummy_wgrads_for_params(weights)\n",
            "        if fc_op._accumulate_into_main_grad and delay_wgrad:  # bug\n            w_list = get_dummy_wgrads_for_params(weights)\n",
        ),
        _PX_GROUPED_MLP_GRAD_PARAMS,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    # The deferred grouped-matmul wgrad replaces the expert weights' main_grad (copy_) instead of
    # adding to it: every earlier microbatch is lost, and nothing asks whether overwriting was wanted.
    Variant(
        4,
        "mindspeed_fb_weight_grad_store_gmm_wgrad_copied_over_main_grad",
        _swap(
            _MS_FB_WEIGHT_GRAD_STORE,
            "                    weight.main_grad.data.add_(grad_weight.view(-1, weight.shape[-1]))\n",
            "                    weight.main_grad.data.copy_(grad_weight.view(-1, weight.shape[-1]))  # bug\n",
        ),
        _MS_FB_WEIGHT_GRAD_STORE,
    ),
    # The DDP hook stores .grad into main_grad by slice assignment: with gradient accumulation
    # over microbatches only the last one survives.
    Variant(
        4,
        "zero_bubble_ddp_hook_slice_assigns_grad_into_main_grad",
        _swap(
            _ZB_DDP,
            "                    param.main_grad.add_(param.grad.data)\n",
            "                    param.main_grad[...] = param.grad.data  # bug\n",
        ),
        _ZB_DDP,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    # In zero-bubble mode the W pass is queued and the weight gets None instead of a dummy, and no
    # flag: its AccumulateGrad hook never fires (the bucket is never marked ready, or DDP asserts on
    # the missing .grad) while the deferred W pass still writes main_grad.
    Variant(
        5,
        "zero_bubble_linear_split_backward_returns_no_dummy",
        _swap(
            _ZB_LINEAR_BWD,
            "            if hasattr(weight, 'grad_added_to_main_grad'):\n",
            "            if hasattr(weight, 'grad_added_to_main_grad') and not get_args().enable_zero_bubble:  # bug\n",
        ),
        _ZB_LINEAR_BWD,
    ),
    # Delayed wgrad takes precedence over the main_grad bookkeeping: delayed fused weights are
    # never flagged, and backward_dw later fires the reduce hooks on main_grads that the flag says
    # nothing was added to.
    Variant(
        5,
        "te_ptrendx_op_grouped_linear_delayed_branch_skips_flags",
        _swap(
            _PX_OP_GROUPED_BWD,
            "        if ctx.weight_requires_grad and self._accumulate_into_main_grad:\n"
            "            final_weight_grads = get_dummy_wgrads_for_params(weights)\n"
            "        elif ctx.weight_requires_grad and delay_wgrad:\n"
            "            final_weight_grads = [None] * num_groups\n",
            "        if ctx.weight_requires_grad and delay_wgrad:  # bug\n"
            "            final_weight_grads = [None] * num_groups  # bug\n"
            "        elif ctx.weight_requires_grad and self._accumulate_into_main_grad:  # bug\n"
            "            final_weight_grads = get_dummy_wgrads_for_params(weights)  # bug\n",
        ),
        _PX_OP_GROUPED_BWD,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    # backward_dw takes the stored tensors and GEMM off the queue without running it: the delayed
    # wgrad is never computed, yet the reduce hooks fire (or .grad is set from empty buffers).
    Variant(
        6,
        "te_ptrendx_op_grouped_linear_backward_dw_dequeues_without_gemm",
        _swap(
            _PX_OP_GROUPED_DW,
            "        _, tensor_list = self.wgrad_store.pop()\n",
            "        tensor_list, _ = self.wgrad_store.context.get()  # bug\n",
        ),
        _PX_OP_GROUPED_DW,
    ),
    # The pipeline schedule's W step pops a microbatch's stored weight-gradient tasks but never
    # runs them: the deferred wgrad GEMMs are dropped and main_grad misses those microbatches.
    Variant(
        6,
        "zero_bubble_weight_grad_store_pop_drops_w_pass",
        _swap(
            _ZB_WEIGHT_GRAD_STORE,
            "            stored_grads = cls.weight_grad_queue[chunk].get()\n"
            "            for total_input, grad_output, weight, func in stored_grads:\n"
            "                func(total_input, grad_output, weight.main_grad)\n",
            "            stored_grads = cls.weight_grad_queue[chunk].get()  # bug\n",
        ),
        _ZB_WEIGHT_GRAD_STORE,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    # The dummy is chosen on the local flag that overwrite_main_grad switched off: in overwrite mode
    # the main_grad buffers themselves go back as .grad and nothing is flagged.
    Variant(
        7,
        "te_ptrendx_grouped_mlp_dummy_in_conditional_on_local_flag",
        _swap(
            _PX_GROUPED_MLP_GRAD_PARAMS,
            "            w_list = get_dummy_wgrads_for_params(weights)\n",
            "            w_list = get_dummy_wgrads_for_params(weights) if accumulate_into_main_grad else w_list  # bug\n",
        ),
        _PX_GROUPED_MLP_GRAD_PARAMS,
    ),
    # The returned gradient is chosen in the return expression on the local flag: in overwrite mode
    # main_grad.detach() is returned as the weight's gradient with no flag set.
    Variant(
        7,
        "te_ptrendx_backward_linear_scale_return_picks_dummy_on_local_flag",
        _swap(
            _PX_BACKWARD_LINEAR_SCALE,
            "        if linear_op_ctx.weight_requires_grad and linear_op._accumulate_into_main_grad:\n"
            "            grad_weight = get_dummy_wgrads_for_params([linear_op.weight])[0]\n"
            "\n"
            "        return grad_input, [(grad_weight,), ()], [(), ()]\n",
            "        return grad_input, [(get_dummy_wgrads_for_params([linear_op.weight])[0] if accumulate_into_main_grad else grad_weight,), ()], [(), ()]  # bug\n",
        ),
        _PX_BACKWARD_LINEAR_SCALE,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    # main_grad is allocated only for the unquantized parameters: the FP8 weights, the very ones
    # whose fused wgrad GEMMs write main_grad, have none when backward runs.
    Variant(
        8,
        "te_ptrendx_fp8_example_main_grad_only_for_unquantized_params",
        _swap(
            _PX_QUANTIZED_INIT_EXAMPLE,
            "    for param in model.parameters():\n"
            "        param.main_grad = torch.zeros(param.shape, dtype=torch.float32, device=param.device)\n",
            "    for param in model.parameters():\n"
            "        if not isinstance(param, QuantizedTensor):  # bug\n"
            "            param.main_grad = torch.zeros(param.shape, dtype=torch.float32, device=param.device)  # bug\n",
        ),
        _PX_QUANTIZED_INIT_EXAMPLE,
    ),
    # The per-weight buffers are built for the wrong set: the zero-bubble Column/RowParallelLinear
    # weights, whose fused W pass writes weight.main_grad, are left out of every grad buffer and
    # never get a main_grad.
    Variant(
        8,
        "zero_bubble_ddp_zero_bubble_weights_left_without_main_grad",
        _swap(
            _ZB_DDP,
            "            if param not in weight_for_zero_bubble:\n                continue\n",
            "            if param in weight_for_zero_bubble:  # bug\n                continue\n",
        ),
        _ZB_DDP,
    ),
)
