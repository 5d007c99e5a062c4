"""The twenty-third blind corpus (H-blind23), development half: main_grad bookkeeping variants
of the eight classes of issue #19, two per class, grounded in code from repositories no earlier
blind corpus used: flagos-ai TransformerEngine-FL (BAAI's multi-backend fork of Transformer
Engine: the grouped linear module, its delayed wgrad, the op-fuser BasicLinear), moguizhizi
MindSpeed-MM (a snapshot that vendors MindSpeed's NPU grouped-matmul MoE code: ``GMMFunction``,
the all-gather overlapped grouped MLP whose backward writes ``original_weight.main_grad`` while
its GEMMs run on reshaped views, the pipeline ``WeightGradStore``), yemokoo Megatron-LM (a
Megatron-LM fork: CUDA-graph replay and the custom FSDP's gradient hook) and GeodesicResearch
geodesic-megatron (a Megatron-Bridge fork: the op-fuser LoRA wrapper that builds ``te.ops.Linear``
with ``accumulate_into_main_grad`` on the wrapped module's parameters).

Sources (repo, commit, path, function):
- flagos-ai/TransformerEngine-FL fd5f657a04d2f9239fbfbe7fe491e65d701c30a8
  transformer_engine/pytorch/module/grouped_linear.py _GroupedLinear.backward
  (three variants: classes 1, 2 and 7)
- flagos-ai/TransformerEngine-FL fd5f657a04d2f9239fbfbe7fe491e65d701c30a8
  transformer_engine/pytorch/ops/basic/basic_linear.py BasicLinear.op_backward (class 7)
- flagos-ai/TransformerEngine-FL fd5f657a04d2f9239fbfbe7fe491e65d701c30a8
  transformer_engine/pytorch/module/grouped_linear.py GroupedLinear.__init__ / .backward_dw (class 6)
- flagos-ai/TransformerEngine-FL fd5f657a04d2f9239fbfbe7fe491e65d701c30a8
  transformer_engine/pytorch/module/base.py TransformerEngineBaseModule.backward_dw /
  .register_wgrad_accumulation_and_reduce_hooks, and
  transformer_engine/pytorch/module/linear.py Linear.__init__ / ._get_weight_tensors (class 6)
- moguizhizi/MindSpeed-MM d1ec89ea12bc055621f75009bdce1892a6a2c791
  mindspeed/ops/gmm.py GMMFunction.forward / .backward (two variants: classes 1 and 3)
- moguizhizi/MindSpeed-MM d1ec89ea12bc055621f75009bdce1892a6a2c791
  mindspeed/core/transformer/moe/grouped_mlp_with_comp_and_comm_overlap_allgather.py
  GroupedMlpWithCompAndCommOverlapAllGather.backward (class 3)
- moguizhizi/MindSpeed-MM d1ec89ea12bc055621f75009bdce1892a6a2c791
  mindspeed/core/weight_grad_store.py WeightGradStore.overlap_matmul (class 4)
- yemokoo/Megatron-LM f504c8221e0cc32fa9d94650a270cea71caafc62
  megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py
  FullyShardedDataParallel.__init__ / ._register_fsdp_hooks (_make_param_hook) / .zero_grad_buffer (class 4)
- yemokoo/Megatron-LM f504c8221e0cc32fa9d94650a270cea71caafc62
  megatron/core/transformer/cuda_graphs.py _CudagraphReplayNode.backward,
  _CudaGraphRunner.get_input_grads (two variants: class 5)
- GeodesicResearch/geodesic-megatron df06386a224d5f61ef1e7b67b0ee17b943940322
  src/megatron/bridge/peft/lora_layers.py TEFusedLoRALinear._make_fused_branches /
  ._make_lora_branch / .forward (three variants: classes 2, 8 and 8)

Conventions: twins are the real code shortened (real names and idioms; docstrings, nvtx ranges,
FP8 quantizer usage updates, userbuffers, NPU communication overlap, logging and unrelated
branches dropped). No repository history of these files was available here, so no variant
reverts a known fix.
Adapted where the real code lacks the main_grad feature a class is about, or gets it wrong, and
said so here (a twin must be correct under CONTRACT.md):
- TE-FL ``_GroupedLinear.backward`` reads ``overwrite_main_grad`` from ``weights[0]``, which after
  ``restore_from_saved`` is the (possibly FP8-quantized) weight the GEMMs use, not the Parameter
  (``origin_weights``) that Megatron-FSDP marks; with FP8 the flag is lost and overwrite mode
  accumulates. The twin reads it from ``origin_weights[0]`` and hoists it into the local flag
  ``accumulate_wgrad_into_param_main_grad`` that the wgrad GEMM's ``accumulate`` takes; the
  ``is_first_microbatch`` downgrade, the FP8 recipe details and ``save_original_input`` are dropped.
- TE-FL ``BasicLinear.op_backward`` gates its dummy-grad bookkeeping on the local
  ``accumulate_into_main_grad`` after ``overwrite_main_grad`` has switched it off: the seed bug of
  TE PR #2936, here in BasicLinear. The twin gates it on the op-level
  ``self._accumulate_into_main_grad`` (early return otherwise).
- MindSpeed's grouped-matmul backward functions read ``zero_out_wgrad`` from ``weight`` /
  ``weights2`` / ``weights1``: the reshaped views the GEMMs use, which carry no attributes, while
  the flag and main_grad are on ``original_weight*``. The twins read ``zero_out_wgrad`` from the
  original weight.
- yemokoo's custom FSDP hook also copies a dummy ``.grad`` into main_grad when
  ``zero_out_wgrad`` is set; in ZeRO-2/3 (copy) mode that wipes a fused wgrad. The twin adds
  ``.grad`` only when ``grad_added_to_main_grad`` is False.
- geodesic-megatron's ``TEFusedLoRALinear`` builds ``te.ops.Linear(accumulate_into_main_grad=...)``
  on the wrapped module's and the adapter's parameters but never exposes Megatron-FSDP's
  main_grad to them (Megatron-LM #5209's shape). The twin adds ``_expose_main_grads()``, called
  in ``forward`` before the fused branches run, that fetches ``param.get_main_grad()`` where
  ``param.main_grad`` is None (FSDP resets it to None at every grad reduce).
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


# --- flagos-ai/TransformerEngine-FL fd5f657a transformer_engine/pytorch/module/grouped_linear.py
# _GroupedLinear.backward (adapted: overwrite_main_grad read from the Parameter, see the docstring)
_FL_GROUPED_BWD = """
import functools

import torch

from transformer_engine.pytorch.cpp_extensions import general_grouped_gemm
from transformer_engine.pytorch.module.base import get_multi_stream_cublas_workspace
from transformer_engine.pytorch.tensor.quantized_tensor import restore_from_saved
from transformer_engine.pytorch.utils import cast_if_needed, clear_tensor_data


class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
        N = ctx.num_gemms
        inputmats = saved_tensors[:N]
        weights = saved_tensors[N : 2 * N]
        origin_weights = saved_tensors[2 * N : 3 * N]
        biases = saved_tensors[3 * N : 4 * N]
        main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]

        if ctx.cpu_offloading:
            if ctx.grad_added_to_main_grad:
                for i, weight in enumerate(ctx.weight_objects):
                    origin_weights[i] = ctx.weight_objects[i]
                    ctx.weight_objects[i] = None

            if ctx.fuse_wgrad_accumulation:
                for i in range(N):
                    origin_weights[i].main_grad = main_grads[i]

        grad_output_view = grad_output.contiguous().view(-1, grad_output.shape[-1])
        grad_output = torch.split(cast_if_needed(grad_output_view, ctx.activation_dtype), ctx.m_splits)
        grad_biases = [None] * N

        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
        if getattr(origin_weights[0], "overwrite_main_grad", False):
            accumulate_wgrad_into_param_main_grad = False

        if ctx.requires_dgrad:
            dgrad = torch.empty(
                (sum(ctx.m_splits), ctx.weights_shape_1),
                dtype=ctx.activation_dtype,
                device=ctx.device,
            )
            general_grouped_gemm(
                weights,
                grad_output,
                [dgrad],
                ctx.activation_dtype,
                get_multi_stream_cublas_workspace(),
                single_output=True,
                layout="NN",
                m_splits=ctx.m_splits,
                grad=True,
            )

        if ctx.weights_requires_grad:
            if ctx.fuse_wgrad_accumulation:
                wgrad_list = main_grads
            else:
                wgrad_list = [
                    torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device)
                    for w in weights
                ]

            grouped_gemm_wgrad = functools.partial(
                general_grouped_gemm,
                out_dtype=ctx.activation_dtype,
                workspaces=get_multi_stream_cublas_workspace(),
                layout="NT",
                grad=True,
                m_splits=ctx.m_splits,
                use_bias=ctx.use_bias if grad_biases[0] is None else None,
                bias=biases,
                accumulate=accumulate_wgrad_into_param_main_grad,
            )
            # WGRAD
            if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
            else:
                _, grad_biases_, _ = grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                for i in range(ctx.num_gemms):
                    if grad_biases[i] is None:
                        grad_biases[i] = grad_biases_[i]
                del grad_biases_
                clear_tensor_data(*inputmats)

            def handle_custom_ddp_from_mcore(weight, wgrad):
                if ctx.weights_requires_grad:
                    # Handle custom DDP from mcore.
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        if getattr(weight, "zero_out_wgrad", False):
                            wgrad = torch.zeros(
                                weight.main_grad.shape,
                                dtype=weight.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                        else:
                            wgrad = torch.empty(
                                weight.main_grad.shape,
                                dtype=weight.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False,
                            )
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                else:
                    wgrad = None
                return wgrad

            wgrad_list = [
                handle_custom_ddp_from_mcore(weight, wgrad)
                for weight, wgrad in zip(origin_weights, wgrad_list)
            ]
        else:
            wgrad_list = [None] * ctx.num_gemms

        if not ctx.use_bias or (
            ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute() and not ctx.fp8
        ):
            grad_biases = [None] * ctx.num_gemms

        return (
            dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None,
            *([None] * 18),
            *wgrad_list,
            *grad_biases,
        )
"""

# --- flagos-ai/TransformerEngine-FL fd5f657a transformer_engine/pytorch/ops/basic/basic_linear.py
# BasicLinear.op_backward (adapted: bookkeeping on the op-level flag, see the docstring)
_FL_BASIC_LINEAR = """
import torch

from transformer_engine.pytorch.module.base import get_dummy_wgrad
from transformer_engine.pytorch.ops.op import BasicOperation
from transformer_engine.pytorch.utils import clear_tensor_data


class BasicLinear(BasicOperation):
    def __init__(self, in_features, out_features, *, accumulate_into_main_grad=False, **kwargs):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        # Whether to accumulate weight gradient into main_grad
        self._accumulate_into_main_grad: bool = accumulate_into_main_grad

    def op_backward(self, ctx, grad_output):
        # Saved tensors from forward pass
        (x_local, w) = ctx.saved_tensors

        # Megatron-LM wgrad fusion
        # Note: Get grad tensor from param so we can accumulate
        # directly into it.
        accumulate_into_main_grad = self._accumulate_into_main_grad
        grad_weight = None
        if ctx.weight_requires_grad and accumulate_into_main_grad:
            weight_param = self.weight
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
        if not (ctx.weight_requires_grad and self._accumulate_into_main_grad):
            return grad_input, [grad_weight]
        grad_weight = None
        weight_param = self.weight
        if hasattr(weight_param, "grad_added_to_main_grad"):
            weight_param.grad_added_to_main_grad = True
            grad_weight = get_dummy_wgrad(
                list(weight_param.size()),
                weight_param.dtype,
                zero=getattr(weight_param, "zero_out_wgrad", False),
            )
        return grad_input, [grad_weight]
"""

# --- flagos-ai/TransformerEngine-FL fd5f657a transformer_engine/pytorch/module/grouped_linear.py
# GroupedLinear.__init__ (wgrad store part) / .backward_dw
_FL_GROUPED_LINEAR_DW = """
import torch

from transformer_engine.pytorch.module._common import WeightGradStore
from transformer_engine.pytorch.module.base import TransformerEngineBaseModule


class GroupedLinear(TransformerEngineBaseModule):
    def __init__(
        self,
        num_gemms,
        in_features,
        out_features,
        bias=True,
        fuse_wgrad_accumulation=False,
        delay_wgrad_compute=False,
        **kwargs,
    ):
        super().__init__()
        self.num_gemms = num_gemms
        self.in_features = in_features
        self.out_features = out_features
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        self.use_bias = bias
        self.wgrad_store = WeightGradStore(delay_wgrad_compute)
        self.reset_parameters(defer_init=kwargs.get("device") == "meta")

        if self.wgrad_store.delay_wgrad_compute():
            for name, param in self.named_parameters():
                for i in range(self.num_gemms):
                    if name in (f"weight{i}", f"bias{i}"):
                        param.skip_backward_post_hook = True

    def backward_dw(self):
        if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
            return
        with torch.cuda.nvtx.range("_GroupedLinear_wgrad"):
            (_, grad_biases_, _), tensor_list = self.wgrad_store.pop()
            wgrad_list = tensor_list[2]
            weight_params = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
            bias_params = [getattr(self, f"bias{i}") for i in range(self.num_gemms)]
            if not self.fuse_wgrad_accumulation:
                for i in range(self.num_gemms):
                    weight_params[i].grad = wgrad_list[i].to(weight_params[i].dtype)
            if self.use_bias:
                for i in range(self.num_gemms):
                    if bias_params[i].grad is None:
                        bias_params[i].grad = grad_biases_[i].to(bias_params[i].dtype)
            del grad_biases_
            del wgrad_list
            del tensor_list
            for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                wgrad_accumulation_and_reduce_hook()
"""

# --- flagos-ai/TransformerEngine-FL fd5f657a transformer_engine/pytorch/module/base.py
# TransformerEngineBaseModule.backward_dw and transformer_engine/pytorch/module/linear.py Linear
_FL_BASE_AND_LINEAR = """
from typing import List

import torch

from transformer_engine.pytorch.module._common import WeightGradStore, noop_cat
from transformer_engine.pytorch.tensor.quantized_tensor import QuantizedTensor


class TransformerEngineBaseModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wgrad_store = None
        self.wgrad_accumulation_and_reduce_hooks = []

    def register_wgrad_accumulation_and_reduce_hooks(self, wgrad_accumulation_and_reduce_hook):
        self.wgrad_accumulation_and_reduce_hooks.append(wgrad_accumulation_and_reduce_hook)

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


class Linear(TransformerEngineBaseModule):
    def __init__(
        self,
        in_features,
        out_features,
        fuse_wgrad_accumulation=False,
        bias=True,
        ub_bulk_wgrad=False,
        delay_wgrad_compute=False,
        **kwargs,
    ):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        self.use_bias = bias
        self.wgrad_store = WeightGradStore(delay_wgrad_compute, ub_bulk_wgrad)
        self.weight_names = ["weight"]
        self.bias_names = ["bias"]
        self.reset_parameters(defer_init=kwargs.get("device") == "meta")

        if self.wgrad_store.delay_wgrad_compute():
            for name, param in self.named_parameters():
                if name in self.weight_names or name in self.bias_names:
                    param.skip_backward_post_hook = True

    def _get_weight_tensors(self) -> List[torch.Tensor]:
        unfused_weights = [getattr(self, name) for name in self.weight_names]
        if any(isinstance(w, QuantizedTensor) for w in unfused_weights):
            if not self.fp8:
                unfused_weights = [w.dequantize() for w in unfused_weights]
        return unfused_weights
"""

# --- moguizhizi/MindSpeed-MM d1ec89ea mindspeed/ops/gmm.py GMMFunction.forward / .backward
# (adapted: zero_out_wgrad read from original_weight, see the docstring)
_MS_GMM = """
import torch

from mindspeed.op_builder import GMMOpBuilder, GMMV2OpBuilder
from mindspeed.ops.npu_groupmatmul_add import npu_groupmatmul_add_fp32


class GMMFunction(torch.autograd.Function):
    builder = GMMOpBuilder()
    builder2 = GMMV2OpBuilder()

    @staticmethod
    def forward(ctx, original_weight, x, weight, bias, group_args):
        group_list, group_type, gemm_fusion, group_list_type, group_list_data_type = group_args
        bias = [] if bias is None else [bias]
        if group_list_type == 0:
            outputs = GMMFunction.builder.load().npu_gmm([x], [weight], bias, group_list, group_type, group_list_type)
        elif group_list_type == 1:
            outputs = GMMFunction.builder2.load().npu_gmm([x], [weight], bias, group_list, group_type, group_list_type)
        ctx.save_for_backward(x, weight, original_weight)
        ctx.group_list = group_list
        ctx.gemm_fusion = gemm_fusion
        ctx.group_list_type = group_list_type
        return outputs[0]

    @staticmethod
    def backward(ctx, grad_outputs):
        x, weight, original_weight = ctx.saved_tensors
        group_list = ctx.group_list

        if ctx.gemm_fusion:
            if ctx.group_list_type == 0:
                dx, _, dbias = GMMFunction.builder.load().npu_gmm_backward_fusion(
                    [grad_outputs], [weight], group_list, ctx.group_list_type
                )
                npu_groupmatmul_add_fp32(x, grad_outputs, group_list, original_weight.main_grad)
            elif ctx.group_list_type == 1:
                dx, _, dbias = GMMFunction.builder2.load().npu_gmm_backward_fusion(
                    [grad_outputs], [weight], group_list, ctx.group_list_type
                )
                group_list_v2 = torch.cumsum(group_list, dim=0)
                npu_groupmatmul_add_fp32(x, grad_outputs, group_list_v2, original_weight.main_grad)

            dbias = None if len(dbias) == 0 else dbias[0]

            if hasattr(original_weight, 'grad_added_to_main_grad'):
                if getattr(original_weight, 'zero_out_wgrad', False):
                    grad_weight = torch.zeros(
                        weight.shape,
                        dtype=x.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
                else:
                    grad_weight = torch.empty(
                        weight.shape,
                        dtype=x.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
                original_weight.grad_added_to_main_grad = True
            else:
                grad_weight = None

            return None, dx[0], grad_weight, dbias, None
        else:
            if ctx.group_list_type == 0:
                dx, dw, dbias = GMMFunction.builder.load().npu_gmm_backward(
                    [grad_outputs], [x], [weight], group_list, ctx.group_list_type
                )
            elif ctx.group_list_type == 1:
                dx, dw, dbias = GMMFunction.builder2.load().npu_gmm_backward(
                    [grad_outputs], [x], [weight], group_list, ctx.group_list_type
                )
            dbias = None if len(dbias) == 0 else dbias[0]

            return None, dx[0], dw[0], dbias, None
"""

# --- moguizhizi/MindSpeed-MM d1ec89ea
# mindspeed/core/transformer/moe/grouped_mlp_with_comp_and_comm_overlap_allgather.py
# GroupedMlpWithCompAndCommOverlapAllGather.backward (token re-gather and reduce-scatter dropped;
# adapted: zero_out_wgrad read from the original weights, see the docstring)
_MS_GMLP_ALLGATHER = """
import torch
from einops import rearrange
from megatron.training import get_args

from mindspeed.core.transformer.moe.moe_utils import get_gemm_backward_need_tensors
from mindspeed.ops.npu_groupmatmul_add import npu_groupmatmul_add_fp32
from .moe_layer_overlap_all2all import gmm_op


class GroupedMlpWithCompAndCommOverlapAllGather(torch.autograd.Function):
    @staticmethod
    def backward(ctx, *grad_outs):
        grad_outs = grad_outs[0]
        act_inputs, act_graph, weights1, weights2, original_weight1, original_weight2, group_list = ctx.saved_tensors
        mm1_inputs = get_gemm_backward_need_tensors()

        # grad of mm2
        if ctx.use_gmm:
            weights2 = rearrange(weights2, 'n h f -> n f h')
            grad_mm2_inputs = gmm_op(grad_outs, weights2, [], group_list, 0)[0]
        else:
            grad_mm2_inputs = torch.matmul(grad_outs, weights2.t())
        mm2_inputs = act_graph

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
        act_graph.backward(grad_mm2_inputs)
        mm1_outs_grad = act_inputs.grad

        if ctx.use_gmm:
            weights1 = rearrange(weights1, 'n h f -> n f h')
            mm1_inputs_grad = gmm_op(act_inputs.grad, weights1, [], group_list, 0)[0]
        else:
            mm1_inputs_grad = torch.matmul(act_inputs.grad, weights1.t())

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

        mm1_outs_grad.untyped_storage().resize_(0)
        return mm1_inputs_grad, mm1_weights_grad, grad_weights2, None
"""

# --- moguizhizi/MindSpeed-MM d1ec89ea mindspeed/core/weight_grad_store.py
# WeightGradStore.put / .overlap_matmul (NPU swap and all-gather overlap dropped)
_MS_WEIGHT_GRAD_STORE = """
import torch
from megatron.training import get_args


class WeightGradStore:
    cache = []
    grad_overlap_count = 0
    interval_per_layers_count = 0

    @classmethod
    def put(cls, total_input, grad_output, weight, sequence_parallel, in_row=False, pipe_experts=False):
        cls.interval_per_layers_count += 1
        cls.cache.append((total_input, grad_output, weight, sequence_parallel, in_row, pipe_experts))

    @classmethod
    def overlap_matmul(cls, grad_store_cache):
        total_input, grad_output, weight, sequence_parallel, in_row, pipe_experts = grad_store_cache
        grad_output = grad_output.contiguous()
        sb = grad_output.shape[0] * grad_output.shape[1]
        # Convert the tensor shapes to 2D for execution compatibility
        grad_output = grad_output.view(sb, grad_output.shape[2])
        total_input = total_input.view(sb, total_input.shape[2])
        if get_args().gradient_accumulation_fusion:
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
        else:
            grad_weight = grad_output.t().matmul(total_input)
            weight.main_grad.data.add_(grad_weight)
        cls.grad_overlap_count += 1
"""

# --- yemokoo/Megatron-LM f504c822 megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py
# FullyShardedDataParallel (the gradient hook; adapted: see the docstring)
_YM_FSDP_PARAM_HOOK = """
import torch

from megatron.core.distributed.data_parallel_base import _BaseDataParallel


class FullyShardedDataParallel(_BaseDataParallel):
    def __init__(self, config, ddp_config, module, fsdp_unit_modules=None, disable_bucketing=False, device=None):
        super().__init__(config=config, module=module)
        self.module = module
        self.ddp_config = ddp_config
        self.is_delay_grad_reduce = self.ddp_config.data_parallel_sharding_strategy in [
            "no_shard",
            "optim",
        ]
        self._init_fsdp_param_and_grad_buffer()
        self._register_fsdp_hooks(self.module)

    def _register_fsdp_hooks(self, root_module):
        def _make_param_hook(param: torch.nn.Parameter):
            wait_previous_grad_reduce = not self.is_delay_grad_reduce

            def param_hook(*unused):
                if param.requires_grad:
                    if self.ddp_config.overlap_grad_reduce:
                        assert (
                            param.grad is not None
                        ), 'param.grad being None is not safe when overlap_grad_reduce is True'

                    if param.grad is not None and not param.grad_added_to_main_grad:
                        if self.is_delay_grad_reduce:
                            param.main_grad.add_(param.grad.data)
                        else:
                            param.main_grad.copy_(param.grad.data)
                    param.grad = None

                    if self.ddp_config.overlap_grad_reduce and (
                        not self.is_delay_grad_reduce or self.is_last_microbatch
                    ):
                        gr_pipeline = self.grad_reduce_pipeline
                        bucket_id = self.param_and_grad_buffer.param_to_param_group[param]
                        gr_pipeline.place_bucket(bucket_id)
                        go_rs = gr_pipeline.mark_item_ready(param, async_rs=True)
                        if go_rs and wait_previous_grad_reduce:
                            gr_pipeline.wait_for_previous_grad_reduce(
                                recommeded_queue_capacity=self.suggested_RS_queue_capacity
                            )

            return param_hook

        # Register backward gradient accumulation hook for each parameter.
        self.grad_accs = []
        for param in root_module.parameters():
            if param.requires_grad:
                # Expand so we get access to grad_fn.
                param_tmp = param.expand_as(param)
                # Get the gradient accumulator function.
                grad_acc = param_tmp.grad_fn.next_functions[0][0]
                grad_acc.register_hook(_make_param_hook(param))
                self.grad_accs.append(grad_acc)

    def zero_grad_buffer(self):
        for param in self.module.parameters():
            if param.requires_grad:
                param.grad_added_to_main_grad = False
        self.param_and_grad_buffer.zero_grad()
"""

# --- yemokoo/Megatron-LM f504c822 megatron/core/transformer/cuda_graphs.py
# _CudagraphReplayNode.backward, _CudaGraphRunner.get_input_grads
_YM_CUDAGRAPH_REPLAY = """
import torch

from megatron.core.transformer.cuda_graphs import _GraphStatus
from transformer_engine.pytorch.fp8 import FP8GlobalStateManager


class _CudagraphReplayNode(torch.autograd.Function):
    @staticmethod
    def backward(ctx, *grads):
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

        # Update FP8 scale factors if needed
        if runner.fp8_enabled and ctx.is_first_fp8_module:
            FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)

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


class _CudaGraphRunner(torch.nn.Module):
    def get_input_grads(self):
        # The captured wgrads of fused-accumulation weights are None (create_bwd_graph):
        # they were accumulated into main_grad, so return dummy wgrads.
        if not self.fuse_wgrad_accumulation:
            return self.static_grad_inputs
        else:
            num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
            dgrads = self.static_grad_inputs[:num_dgrads]
            wgrads = self.static_grad_inputs[num_dgrads:]

            wgrads_with_placeholders = []
            for idx, param in enumerate(self.base_module.parameters()):
                if getattr(param, "grad_added_to_main_grad", False):
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
            return tuple(dgrads + wgrads_with_placeholders)
"""

# --- GeodesicResearch/geodesic-megatron df06386a src/megatron/bridge/peft/lora_layers.py
# TEFusedLoRALinear (main branch, hooks emulation and dropout dropped; adapted: Megatron-FSDP
# main_grad exposed before the fused branches run, see the docstring)
_GM_FUSED_LORA = """
from typing import Optional

import torch
import torch.nn as nn
import transformer_engine.pytorch as te

from megatron.bridge.peft.lora_layers import LinearAdapter, LoRALinear, TELinearAdapter


class TEFusedLoRALinear(LoRALinear):
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
        # wgrad accumulation fusion
        accumulate_into_main_grad = False
        if isinstance(self.to_wrap, (te.Linear, te.LayerNormLinear)):
            accumulate_into_main_grad = self.to_wrap.fuse_wgrad_accumulation
        kwargs["accumulate_into_main_grad"] = accumulate_into_main_grad

        main_branch = self._make_main_branch(**kwargs)
        lora_branch = self._make_lora_branch(**kwargs)
        return main_branch, lora_branch

    def _make_lora_branch(
        self,
        *,
        in_features,
        out_features,
        tensor_parallel_mode,
        tensor_parallel_group,
        sequence_parallel,
        accumulate_into_main_grad,
    ) -> te.ops.Sequential:
        if isinstance(self.adapter, (LinearAdapter, TELinearAdapter)):
            linear_in_weight = self.adapter.linear_in.weight
            linear_out_weight = self.adapter.linear_out.weight
            lora_dim = linear_out_weight.size(1)
            scale = self.adapter.scale
        else:
            raise ValueError(f"Unsupported class for LoRA adapter ({self.adapter.__class__.__name__})")

        lora_branch = te.ops.Sequential()

        # LoRA A linear op
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

        # LoRA B linear op
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
        # Add with main branch
        lora_branch.append(te.ops.AddExtraInput(in_place=True))
        return lora_branch

    def _expose_main_grads(self) -> None:
        # Megatron-FSDP resets main_grad to None at every grad reduce: fetch it before the
        # fused ops write into it.
        main_branch, lora_branch = self._fused_branches
        for param in (*main_branch.parameters(), *lora_branch.parameters()):
            if not param.requires_grad:
                continue
            if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
                param.main_grad = param.get_main_grad()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        # If adapter is disabled, fall back to base forward
        if not self._adapter_enabled:
            return super().forward(x)

        # Construct fused impl if needed
        if self._fused_branches is None:
            self._fused_branches = self._make_fused_branches()
        self._expose_main_grads()
        main_branch, lora_branch = self._fused_branches

        # Apply fused impl
        linear_output, linear_input = main_branch(x)
        with te.fp8_autocast(enabled=False):
            out = lora_branch(linear_input, linear_output)
        return out, None
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    # overwrite_main_grad is set by Megatron-FSDP on the Parameter (origin_weights); weights[0]
    # is the weight the GEMMs run on, with FP8 a quantized copy that carries no such attribute:
    # overwrite mode then accumulates into main_grad and stale gradients survive.
    Variant(
        1,
        "te_fl_grouped_linear_overwrite_flag_read_from_quantized_weight",
        _swap(
            _FL_GROUPED_BWD,
            '        if getattr(origin_weights[0], "overwrite_main_grad", False):\n',
            '        if getattr(weights[0], "overwrite_main_grad", False):  # bug\n',
        ),
        _FL_GROUPED_BWD,
    ),
    # ``weight`` is the [E, h, f] view the grouped matmul runs on; it has no
    # grad_added_to_main_grad, so the fused path writes original_weight.main_grad but returns
    # no dummy and never sets the flag: the view's None gradient never reaches the Parameter's
    # AccumulateGrad, DDP's hook never fires and the bucket never completes.
    Variant(
        1,
        "mindspeed_mm_gmm_bookkeeping_checked_on_weight_view",
        _swap(
            _MS_GMM,
            "            if hasattr(original_weight, 'grad_added_to_main_grad'):\n",
            "            if hasattr(weight, 'grad_added_to_main_grad'):  # bug\n",
        ),
        _MS_GMM,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    # With CPU offloading the saved weight comes back as a plain tensor; wrapping it in a fresh
    # Parameter gives a main_grad but loses grad_added_to_main_grad, overwrite_main_grad and
    # zero_out_wgrad: the real Parameter is never flagged, no dummy is returned, and overwrite
    # mode accumulates.
    Variant(
        2,
        "te_fl_grouped_linear_offloaded_weight_rewrapped_in_fresh_parameter",
        _swap(
            _FL_GROUPED_BWD,
            "                    origin_weights[i] = ctx.weight_objects[i]\n",
            "                    origin_weights[i] = torch.nn.Parameter(origin_weights[i], origin_weights[i].requires_grad)  # bug\n",
        ),
        _FL_GROUPED_BWD,
    ),
    # The LoRA A op gets a new Parameter detached from the adapter's: it has no main_grad and no
    # DDP hook, and its gradient never reaches the adapter weight the optimizer steps.
    Variant(
        2,
        "geodesic_fused_lora_a_op_weight_rebound_to_detached_parameter",
        _swap(
            _GM_FUSED_LORA,
            "        op.weight = linear_in_weight\n",
            "        op.weight = nn.Parameter(linear_in_weight.detach().clone())  # bug\n",
        ),
        _GM_FUSED_LORA,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    # The unfused path returns the real dw and writes no main_grad; marking the weight as added
    # makes DDP's hook skip adding that dw: the expert gradient is lost.
    Variant(
        3,
        "mindspeed_mm_gmm_unfused_path_marks_grad_added",
        _swap(
            _MS_GMM,
            "            dbias = None if len(dbias) == 0 else dbias[0]\n\n            return None, dx[0], dw[0], dbias, None\n",
            "            dbias = None if len(dbias) == 0 else dbias[0]\n"
            "            original_weight.grad_added_to_main_grad = True  # bug\n\n"
            "            return None, dx[0], dw[0], dbias, None\n",
        ),
        _MS_GMM,
    ),
    # fc2's wgrad is added into original_weight2.main_grad and also returned as a real gradient
    # without the flag: DDP's hook adds it a second time.
    Variant(
        3,
        "mindspeed_mm_allgather_gmlp_fc2_written_and_returned",
        _swap(
            _MS_GMLP_ALLGATHER,
            "                if hasattr(original_weight2, 'grad_added_to_main_grad'):\n"
            "                    if getattr(original_weight2, 'zero_out_wgrad', False):\n"
            "                        grad_weights2 = torch.zeros(\n"
            "                            weights2.transpose(-1, -2).shape,\n"
            "                            dtype=mm2_inputs.dtype,\n"
            "                            device=torch.cuda.current_device(),\n"
            "                            requires_grad=False,\n"
            "                        )\n"
            "                    else:\n"
            "                        grad_weights2 = torch.empty(\n"
            "                            weights2.transpose(-1, -2).shape,\n"
            "                            dtype=mm2_inputs.dtype,\n"
            "                            device=torch.cuda.current_device(),\n"
            "                            requires_grad=False,\n"
            "                        )\n"
            "                    original_weight2.grad_added_to_main_grad = True\n"
            "                else:\n"
            "                    grad_weights2 = None\n",
            "                grad_weights2 = gmm_op(mm2_inputs.t(), grad_outs, [], group_list, 2)[0]  # bug\n",
        ),
        _MS_GMLP_ALLGATHER,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    # The hook copies .grad into main_grad whatever the sharding strategy: with no_shard/optim
    # the reduce is delayed to the last microbatch, so every earlier microbatch is overwritten.
    Variant(
        4,
        "megatron_yemokoo_custom_fsdp_hook_copies_grad_whatever_strategy",
        _swap(
            _YM_FSDP_PARAM_HOOK,
            "                        if self.is_delay_grad_reduce:\n"
            "                            param.main_grad.add_(param.grad.data)\n"
            "                        else:\n"
            "                            param.main_grad.copy_(param.grad.data)\n",
            "                        param.main_grad.copy_(param.grad.data)  # bug\n",
        ),
        _YM_FSDP_PARAM_HOOK,
    ),
    # The deferred wgrad GEMM writes its product over main_grad (matmul out=) instead of adding
    # it: earlier microbatches' gradients are lost, and nothing here asks whether overwriting
    # was requested.
    Variant(
        4,
        "mindspeed_mm_weight_grad_store_matmul_out_main_grad",
        _swap(
            _MS_WEIGHT_GRAD_STORE,
            "            grad_weight = grad_output.t().matmul(total_input)\n"
            "            weight.main_grad.data.add_(grad_weight)\n",
            "            torch.matmul(grad_output.t(), total_input, out=weight.main_grad.data)  # bug\n",
        ),
        _MS_WEIGHT_GRAD_STORE,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    # Replaying the captured backward writes main_grad but runs no Python, so nothing sets
    # grad_added_to_main_grad: DDP's hooks, fired by the dummy wgrads, add the dummies into
    # main_grad.
    Variant(
        5,
        "megatron_yemokoo_cudagraph_replay_leaves_grad_added_unset",
        _swap(
            _YM_CUDAGRAPH_REPLAY,
            "        # If using gradient_accumulation_fusion, whenever `main_grad` is calculated\n"
            "        # the `grad_added_to_main_grad` attribute is expected to set. However when using\n"
            "        # cudagraphs this doesn't occur so we emulate this behavior here.\n"
            "        for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():\n"
            "            param.grad_added_to_main_grad = grad_added\n\n"
            "        if runner.is_first_layer:\n",
            "        if runner.is_first_layer:  # bug\n",
        ),
        _YM_CUDAGRAPH_REPLAY,
    ),
    # Weights whose wgrad the graph accumulated into main_grad get their captured None back:
    # no dummy, so AccumulateGrad never runs for them and DDP's overlap hook never fires (or
    # asserts .grad is not None).
    Variant(
        5,
        "megatron_yemokoo_cudagraph_input_grads_without_dummy_wgrads",
        _swap(
            _YM_CUDAGRAPH_REPLAY,
            '                if getattr(param, "grad_added_to_main_grad", False):\n'
            '                    if getattr(param, "zero_out_wgrad", False):\n'
            "                        wgrad = torch.zeros(\n"
            "                            param.main_grad.shape,\n"
            "                            dtype=param.dtype,\n"
            "                            device=torch.cuda.current_device(),\n"
            "                            requires_grad=False,\n"
            "                        )\n"
            "                    else:\n"
            "                        wgrad = torch.empty(\n"
            "                            param.main_grad.shape,\n"
            "                            dtype=param.dtype,\n"
            "                            device=torch.cuda.current_device(),\n"
            "                            requires_grad=False,\n"
            "                        )\n"
            "                else:\n"
            "                    wgrad = wgrads[idx]\n",
            "                wgrad = wgrads[idx]  # bug\n",
        ),
        _YM_CUDAGRAPH_REPLAY,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    # With fused accumulation the deferred grouped GEMM is the only thing that writes main_grad;
    # returning before popping it leaves main_grad unwritten (and the stored GEMM queued) while
    # the skipped backward post hooks never fire either.
    Variant(
        6,
        "te_fl_grouped_linear_backward_dw_skips_store_when_fused",
        _swap(
            _FL_GROUPED_LINEAR_DW,
            "        if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():\n"
            "            return\n",
            "        if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():\n"
            "            return\n"
            "        if self.fuse_wgrad_accumulation:  # bug\n"
            "            return  # bug\n",
        ),
        _FL_GROUPED_LINEAR_DW,
    ),
    # Linear takes delay_wgrad_compute (its store defers the wgrad GEMM) but overrides the base's
    # backward_dw with one that only fires the reduce hooks: the stored GEMM never runs, so
    # main_grad (or .grad) is never written before it is reduced.
    Variant(
        6,
        "te_fl_linear_backward_dw_override_only_fires_hooks",
        _swap(
            _FL_BASE_AND_LINEAR,
            "    def _get_weight_tensors(self) -> List[torch.Tensor]:\n",
            "    def backward_dw(self):  # bug\n"
            "        for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:  # bug\n"
            "            wgrad_accumulation_and_reduce_hook()  # bug\n\n"
            "    def _get_weight_tensors(self) -> List[torch.Tensor]:\n",
        ),
        _FL_BASE_AND_LINEAR,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    # The per-weight bookkeeping is applied only when the local flag is still on; overwrite_main_grad
    # switched it off, so in overwrite mode the main_grad buffers themselves are returned as .grad
    # and no flag is set: DDP adds main_grad into itself.
    Variant(
        7,
        "te_fl_grouped_linear_dummy_in_comprehension_on_local_flag",
        _swap(
            _FL_GROUPED_BWD,
            "                handle_custom_ddp_from_mcore(weight, wgrad)\n"
            "                for weight, wgrad in zip(origin_weights, wgrad_list)\n",
            "                handle_custom_ddp_from_mcore(weight, wgrad) if accumulate_wgrad_into_param_main_grad else wgrad  # bug\n"
            "                for weight, wgrad in zip(origin_weights, wgrad_list)\n",
        ),
        _FL_GROUPED_BWD,
    ),
    # The early return tests the local flag that overwrite_main_grad turned off: in overwrite mode
    # the op returns main_grad.detach() as the weight's gradient and never sets
    # grad_added_to_main_grad (TE PR #2936's shape, as a return).
    Variant(
        7,
        "te_fl_basic_linear_early_return_on_local_accumulate_flag",
        _swap(
            _FL_BASIC_LINEAR,
            "        if not (ctx.weight_requires_grad and self._accumulate_into_main_grad):\n",
            "        if not accumulate_into_main_grad:  # bug\n",
        ),
        _FL_BASIC_LINEAR,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    # The fused LoRA ops accumulate into main_grad, but nothing fetches Megatron-FSDP's buffer:
    # param.main_grad is None when they run.
    Variant(
        8,
        "geodesic_fused_lora_forward_never_exposes_main_grad",
        _swap(
            _GM_FUSED_LORA,
            "        self._expose_main_grads()\n        main_branch, lora_branch = self._fused_branches\n",
            "        main_branch, lora_branch = self._fused_branches  # bug\n",
        ),
        _GM_FUSED_LORA,
    ),
    # main_grad is fetched only when the branches are built; Megatron-FSDP resets it to None at
    # every grad reduce, so from the second step on the fused ops find None.
    Variant(
        8,
        "geodesic_fused_lora_main_grad_exposed_only_on_first_forward",
        _swap(
            _GM_FUSED_LORA,
            "            self._fused_branches = self._make_fused_branches()\n        self._expose_main_grads()\n",
            "            self._fused_branches = self._make_fused_branches()\n"
            "            self._expose_main_grads()  # bug\n",
        ),
        _GM_FUSED_LORA,
    ),
)
