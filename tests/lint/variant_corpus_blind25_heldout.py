"""The twenty-fifth blind corpus (H-blind25), held-out half: one main_grad bookkeeping variant per
class of issue #19, grounded in the same three repositories as the development half
(variant_corpus_blind25.py): xieck13 TransformerEngine (the ``deepgemm`` branch's DeepGEMM-backed
``LinearDeepGemm`` and ``GroupedLinearDeepGemm``), xpan413 FSMoE (the hand-written, pipelined expert
backward of its ``MoELayer``) and xuwchen Wan2.2 (the ``te_utils.py`` that swaps ``nn.Linear`` for
TE ``Linear`` with ``fuse_wgrad_accumulation`` and installs ``main_grad``/``get_main_grad`` after
Megatron-FSDP wrapping).

Sources (repo, commit, path, function):
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f (head of branch ``deepgemm``)
  transformer_engine/pytorch/module/linear_deepgemm.py _LinearDeepGemmFunction.forward / .backward
  (class 2)
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f
  transformer_engine/pytorch/module/grouped_linear_deepgemm.py _GroupedLinearDeepGemm.forward /
  .backward (three variants: classes 1, 4 and 7)
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f
  transformer_engine/pytorch/module/grouped_linear_deepgemm.py GroupedLinearDeepGemm.__init__ /
  .forward and _GroupedLinearDeepGemm.backward, with transformer_engine/pytorch/module/base.py
  TransformerEngineBaseModule.backward_dw as the delayed-wgrad idiom (two variants: classes 5 and 6)
- xpan413/FSMoE 4d4cf36943d8eaca1017376f2e3e25a80335c6a7
  megatron/core/transformer/moe/moe_layer.py _HandcraftBackward, MoELayer.do_bp_experts /
  ._handcraft_backward / .forward, with megatron/core/tensor_parallel/layers.py's dummy-grad idiom
  (class 3)
- xuwchen/Wan2.2 1d34fff2dc163695e0639db375a8083a9ef40c78 te_utils.py replace_linear_with_te /
  setup_main_grad_for_te_linear (class 8)

Conventions and adaptations: as in the development half (the DeepGEMM and FSMoE twins are the same
texts, with the same adaptations: TE's bookkeeping, ``get_main_grad`` fetch and
``overwrite_main_grad`` handling added to the DeepGEMM autograd functions, the wgrad deferred through
``WeightGradStore`` with a ``backward_dw`` in TE's base idiom, FSMoE's expert weights passed through
``_HandcraftBackward`` for the flag and Megatron's dummy). In addition:
- Wan2.2's ``te_utils.py`` allocates ``main_grad`` in the parameter dtype; the twin allocates it in
  fp32, the buffer CONTRACT.md describes (nothing else changed).
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


# --- xieck13/TransformerEngine 28332ead transformer_engine/pytorch/module/linear_deepgemm.py
# _LinearDeepGemmFunction.forward / .backward (adapted: FSDP fetch, overwrite, bookkeeping; see variant_corpus_blind25.py)
_XK_LINEAR = """
import deep_gemm
import torch
from transformer_engine_torch import DType as TE_DType

from ..cpp_extensions.deepgemm import deepgemm_fp8_gemm
from ..tensor.float8_deepgemm_tensor import FP8DeepGemmQTensor, FP8DeepGemmQuantizer
from .base import get_dummy_wgrad, get_workspace


def _quantize(tensor, columnwise):
    quantizer = FP8DeepGemmQuantizer(
        TE_DType.kFloat8E4M3, rowwise=True, columnwise=columnwise, use_deepgemm_layout=True
    )
    tensor_fp8 = quantizer.make_empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    quantizer.update_quantized(tensor, tensor_fp8)
    return tensor_fp8


class _LinearDeepGemmFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        input,
        weight,
        bias,
        quantizer_input,
        quantizer_weight,
        use_deepgemm,
        dtype,
        accumulate_into_main_grad=False,
    ):
        if isinstance(input, FP8DeepGemmQTensor):
            quantized_input = input
        else:
            quantized_input = quantizer_input.make_empty(input.shape, dtype=input.dtype, device=input.device)
            quantizer_input.update_quantized(input, quantized_input)

        if isinstance(weight, FP8DeepGemmQTensor):
            quantized_weight = weight
        else:
            quantized_weight = quantizer_weight.make_empty(weight.shape, dtype=weight.dtype, device=weight.device)
            quantizer_weight.update_quantized(weight, quantized_weight)

        workspace = get_workspace()
        output, _ = deepgemm_fp8_gemm(
            quantized_input, quantized_weight, workspace, layout="nt", bias=bias, out_dtype=dtype
        )

        # Save for backward
        ctx.save_for_backward(input, weight, bias)  # Save original tensors, not quantized
        ctx.quantizer_input = quantizer_input
        ctx.quantizer_weight = quantizer_weight
        ctx.use_deepgemm = use_deepgemm
        ctx.dtype = dtype
        ctx.accumulate_into_main_grad = accumulate_into_main_grad

        return output

    @staticmethod
    def backward(ctx, grad_output):
        input_tensor, weight_tensor, bias = ctx.saved_tensors

        grad_input = grad_weight = grad_bias = None

        if ctx.needs_input_grad[0]:
            # dgrad: grad_input = grad_output @ weight, NT layout against the transposed weight
            grad_output_fp8 = _quantize(grad_output, columnwise=False)
            weight_transposed = weight_tensor.t().contiguous()
            weight_fp8 = _quantize(weight_transposed, columnwise=True)
            grad_input = torch.empty(input_tensor.shape, dtype=ctx.dtype, device=input_tensor.device)
            deep_gemm.fp8_gemm_nt(
                (grad_output_fp8.rowwise_data, grad_output_fp8.rowwise_scale_inv),
                (weight_fp8.columnwise_data, weight_fp8.columnwise_scale_inv),
                grad_input,
                c=None,
                recipe=None,
            )

        if ctx.needs_input_grad[1]:
            # Determine if we should accumulate into main_grad (Megatron-LM)
            accumulate_into_main_grad = ctx.accumulate_into_main_grad
            main_grad = None
            if accumulate_into_main_grad:
                if hasattr(weight_tensor, "__fsdp_param__"):
                    weight_tensor.main_grad = weight_tensor.get_main_grad()
                if getattr(weight_tensor, "main_grad", None) is None:
                    raise RuntimeError(
                        "LinearDeepGemm is configured with accumulate_into_main_grad=True, "
                        "but weight parameter does not have main_grad attribute"
                    )
                main_grad = weight_tensor.main_grad
                if main_grad.requires_grad:
                    main_grad = main_grad.detach()

            # wgrad: grad_weight = grad_output.T @ input (NT layout)
            input_fp8 = _quantize(input_tensor.t().contiguous(), columnwise=True)
            grad_output_fp8 = _quantize(grad_output.t().contiguous(), columnwise=False)
            use_accumulation = main_grad is not None
            grad_weight_out = torch.empty(weight_tensor.shape, dtype=ctx.dtype, device=weight_tensor.device)
            deep_gemm.fp8_gemm_nt(
                (grad_output_fp8.rowwise_data, grad_output_fp8.rowwise_scale_inv),
                (input_fp8.columnwise_data, input_fp8.columnwise_scale_inv),
                grad_weight_out,
                c=None,  # Start with basic case, no accumulation
                recipe=None,
            )

            if use_accumulation:
                # Accumulate into main_grad in fp32 for precision
                accumulate_into_main_grad = not getattr(weight_tensor, "overwrite_main_grad", False)
                if accumulate_into_main_grad:
                    main_grad.add_(grad_weight_out.to(torch.float32))
                else:
                    main_grad.copy_(grad_weight_out.to(torch.float32))
            grad_weight = grad_weight_out

        if ctx.needs_input_grad[2] and bias is not None:
            grad_bias = grad_output.sum(dim=0)

        def handle_custom_ddp_from_mcore(weight, wgrad):
            # Handle custom DDP from mcore.
            if ctx.accumulate_into_main_grad and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
                wgrad = get_dummy_wgrad(
                    list(weight.main_grad.shape),
                    weight.dtype,
                    zero=getattr(weight, "zero_out_wgrad", False),
                )
            elif ctx.accumulate_into_main_grad:
                wgrad = None
            return wgrad

        if ctx.needs_input_grad[1]:
            grad_weight = handle_custom_ddp_from_mcore(weight_tensor, grad_weight)

        return grad_input, grad_weight, grad_bias, None, None, None, None, None
"""


# --- xieck13/TransformerEngine 28332ead transformer_engine/pytorch/module/grouped_linear_deepgemm.py
# _GroupedLinearDeepGemm.forward / .backward (no bias, no delayed wgrad; adapted: FSDP fetch, the
# wgrad GEMM written into main_grad with c=main_grad (accumulate) or c=None (overwrite), bookkeeping)
_XK_GROUPED = """
import deep_gemm
import torch
from transformer_engine_torch import DType as TE_DType

from ..tensor.float8_deepgemm_tensor import FP8DeepGemmQuantizer
from ..utils import cast_if_needed
from .base import get_dummy_wgrad


def _quantize(tensor, columnwise):
    quantizer = FP8DeepGemmQuantizer(
        TE_DType.kFloat8E4M3, rowwise=True, columnwise=columnwise, use_deepgemm_layout=True
    )
    tensor_fp8 = quantizer.make_empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    quantizer.update_quantized(tensor, tensor_fp8)
    return tensor_fp8


class _GroupedLinearDeepGemm(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        inp,
        m_splits,
        use_bias,
        is_first_microbatch,
        fp8,
        fp8_calibration,
        wgrad_store,
        input_quantizers,
        weight_quantizers,
        output_quantizers,
        grad_output_quantizers,
        fuse_wgrad_accumulation,
        cpu_offloading,
        sequence_parallel,
        activation_dtype,
        is_grad_enabled,
        use_deepgemm,
        accumulate_into_main_grad,
        module,
        *weights_and_biases,
    ):
        num_gemms = len(m_splits)
        weights = weights_and_biases[:num_gemms]
        biases = weights_and_biases[num_gemms:]
        device = inp.device
        inp_view = inp.reshape(-1, inp.shape[-1])

        # Store for backward pass
        ctx.save_for_backward(inp, *weights, *biases)
        ctx.m_splits = m_splits
        ctx.num_gemms = num_gemms
        ctx.use_bias = use_bias
        ctx.activation_dtype = activation_dtype
        ctx.accumulate_into_main_grad = accumulate_into_main_grad
        ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation

        input_parts = torch.split(inp_view, m_splits)
        outputs = []
        for i, (input_part, weight) in enumerate(zip(input_parts, weights)):
            quantized_input = input_quantizers[i].make_empty(input_part.shape, dtype=input_part.dtype, device=device)
            input_quantizers[i].update_quantized(input_part, quantized_input)
            quantized_weight = weight_quantizers[i].make_empty(weight.shape, dtype=weight.dtype, device=device)
            weight_quantizers[i].update_quantized(weight, quantized_weight)
            output = torch.empty(input_part.shape[0], weight.shape[0], dtype=activation_dtype, device=device)
            deep_gemm.fp8_gemm_nt(
                (quantized_input.rowwise_data, quantized_input.rowwise_scale_inv),
                (quantized_weight.columnwise_data, quantized_weight.columnwise_scale_inv),
                output,
                c=None,
                recipe=None,
            )
            outputs.append(output)

        out = torch.cat(outputs, dim=0)
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        inp, *weights_and_biases = ctx.saved_tensors
        num_gemms = ctx.num_gemms
        weights = weights_and_biases[:num_gemms]

        grad_output_view = grad_output.contiguous().view(-1, grad_output.shape[-1])
        inp_view = inp.reshape(-1, inp.shape[-1])
        grad_outputs = torch.split(grad_output_view, ctx.m_splits)
        input_parts = torch.split(inp_view, ctx.m_splits)

        grad_input_parts = []
        grad_weights = []
        accumulate_into_main_grad = ctx.accumulate_into_main_grad

        for i, (grad_out, input_part, weight) in enumerate(zip(grad_outputs, input_parts, weights)):
            # dgrad: grad_input = grad_output @ weight (using NT layout)
            grad_output_fp8 = _quantize(grad_out, columnwise=False)
            # Transpose weight for NT layout
            weight_transposed = weight.t().contiguous()
            weight_fp8 = _quantize(weight_transposed, columnwise=True)
            grad_input_part = torch.empty(input_part.shape, dtype=ctx.activation_dtype, device=input_part.device)
            deep_gemm.fp8_gemm_nt(
                (grad_output_fp8.rowwise_data, grad_output_fp8.rowwise_scale_inv),
                (weight_fp8.columnwise_data, weight_fp8.columnwise_scale_inv),
                grad_input_part,
                c=None,
                recipe=None,
            )
            grad_input_parts.append(grad_input_part)

            # wgrad using DeepGEMM 1D1D with fp32 accumulation
            main_grad = None
            if ctx.accumulate_into_main_grad:
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                main_grad = weight.main_grad.detach()
            input_fp8 = _quantize(input_part.t().contiguous(), columnwise=True)
            grad_output_fp8_wgrad = _quantize(grad_out.t().contiguous(), columnwise=False)

            if main_grad is not None:
                accumulate_into_main_grad = not getattr(weight, "overwrite_main_grad", False)
                deep_gemm.fp8_gemm_nt(
                    (grad_output_fp8_wgrad.rowwise_data, grad_output_fp8_wgrad.rowwise_scale_inv),
                    (input_fp8.columnwise_data, input_fp8.columnwise_scale_inv),
                    main_grad,
                    c=main_grad if accumulate_into_main_grad else None,
                    recipe=None,
                )
                grad_weights.append(None)
            else:
                grad_weight_out = torch.empty(weight.shape, dtype=ctx.activation_dtype, device=weight.device)
                deep_gemm.fp8_gemm_nt(
                    (grad_output_fp8_wgrad.rowwise_data, grad_output_fp8_wgrad.rowwise_scale_inv),
                    (input_fp8.columnwise_data, input_fp8.columnwise_scale_inv),
                    grad_weight_out,
                    c=None,
                    recipe=None,
                )
                grad_weights.append(grad_weight_out)

        def handle_custom_ddp_from_mcore(weight, wgrad):
            # Handle custom DDP from mcore.
            if ctx.accumulate_into_main_grad and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
                wgrad = get_dummy_wgrad(
                    list(weight.main_grad.shape),
                    weight.dtype,
                    zero=getattr(weight, "zero_out_wgrad", False),
                )
            elif ctx.accumulate_into_main_grad:
                wgrad = None
            return wgrad

        if ctx.accumulate_into_main_grad:
            grad_weights = [handle_custom_ddp_from_mcore(w, g) for w, g in zip(weights, grad_weights)]

        grad_input = torch.cat(grad_input_parts, dim=0).view(inp.shape)
        grad_biases = [None] * num_gemms
        return (grad_input, None, None, None, None, None, None, None, None, None, None,
                None, None, None, None, None, None, None, None, *grad_weights, *grad_biases)
"""


# --- xieck13/TransformerEngine 28332ead transformer_engine/pytorch/module/grouped_linear_deepgemm.py
# GroupedLinearDeepGemm.__init__ / .forward and _GroupedLinearDeepGemm.forward / .backward, with
# TransformerEngineBaseModule.backward_dw (base.py) as the idiom (arguments shortened, no bias;
# adapted: the wgrad deferred through the store, backward_dw added; see variant_corpus_blind25.py)
_XK_GROUPED_DELAYED = """
import deep_gemm
import torch
import torch.nn as nn
from transformer_engine_torch import DType as TE_DType

from ..tensor.float8_deepgemm_tensor import FP8DeepGemmQuantizer
from ._common import WeightGradStore
from .base import TransformerEngineBaseModule, get_dummy_wgrad


def _quantize(tensor, columnwise):
    quantizer = FP8DeepGemmQuantizer(
        TE_DType.kFloat8E4M3, rowwise=True, columnwise=columnwise, use_deepgemm_layout=True
    )
    tensor_fp8 = quantizer.make_empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    quantizer.update_quantized(tensor, tensor_fp8)
    return tensor_fp8


def _grouped_wgrad(grad_output_fp8s, input_fp8s, wgrad_list, accumulate):
    for grad_output_fp8, input_fp8, wgrad in zip(grad_output_fp8s, input_fp8s, wgrad_list):
        deep_gemm.fp8_gemm_nt(
            (grad_output_fp8.rowwise_data, grad_output_fp8.rowwise_scale_inv),
            (input_fp8.columnwise_data, input_fp8.columnwise_scale_inv),
            wgrad,
            c=wgrad if accumulate else None,
            recipe=None,
        )
    return wgrad_list


class _GroupedLinearDeepGemm(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        inp,
        m_splits,
        wgrad_store,
        input_quantizers,
        weight_quantizers,
        activation_dtype,
        accumulate_into_main_grad,
        *weights,
    ):
        num_gemms = len(m_splits)
        device = inp.device
        ctx.save_for_backward(inp, *weights)
        ctx.m_splits = m_splits
        ctx.num_gemms = num_gemms
        ctx.activation_dtype = activation_dtype
        ctx.accumulate_into_main_grad = accumulate_into_main_grad
        ctx.wgrad_store = wgrad_store

        input_parts = torch.split(inp.reshape(-1, inp.shape[-1]), m_splits)
        outputs = []
        for i, (input_part, weight) in enumerate(zip(input_parts, weights)):
            quantized_input = input_quantizers[i].make_empty(input_part.shape, dtype=input_part.dtype, device=device)
            input_quantizers[i].update_quantized(input_part, quantized_input)
            quantized_weight = weight_quantizers[i].make_empty(weight.shape, dtype=weight.dtype, device=device)
            weight_quantizers[i].update_quantized(weight, quantized_weight)
            output = torch.empty(input_part.shape[0], weight.shape[0], dtype=activation_dtype, device=device)
            deep_gemm.fp8_gemm_nt(
                (quantized_input.rowwise_data, quantized_input.rowwise_scale_inv),
                (quantized_weight.columnwise_data, quantized_weight.columnwise_scale_inv),
                output,
                c=None,
                recipe=None,
            )
            outputs.append(output)
        out = torch.cat(outputs, dim=0)
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        inp, *weights = ctx.saved_tensors
        num_gemms = ctx.num_gemms
        grad_outputs = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.m_splits)
        input_parts = torch.split(inp.reshape(-1, inp.shape[-1]), ctx.m_splits)

        grad_input_parts = []
        grad_output_fp8s = []
        input_fp8s = []
        for grad_out, input_part, weight in zip(grad_outputs, input_parts, weights):
            # dgrad: grad_input = grad_output @ weight (using NT layout)
            grad_output_fp8 = _quantize(grad_out, columnwise=False)
            weight_fp8 = _quantize(weight.t().contiguous(), columnwise=True)
            grad_input_part = torch.empty(input_part.shape, dtype=ctx.activation_dtype, device=input_part.device)
            deep_gemm.fp8_gemm_nt(
                (grad_output_fp8.rowwise_data, grad_output_fp8.rowwise_scale_inv),
                (weight_fp8.columnwise_data, weight_fp8.columnwise_scale_inv),
                grad_input_part,
                c=None,
                recipe=None,
            )
            grad_input_parts.append(grad_input_part)
            grad_output_fp8s.append(_quantize(grad_out.t().contiguous(), columnwise=False))
            input_fp8s.append(_quantize(input_part.t().contiguous(), columnwise=True))

        if ctx.accumulate_into_main_grad:
            for w in weights:
                if hasattr(w, "__fsdp_param__"):
                    w.main_grad = w.get_main_grad()
            wgrad_list = [w.main_grad for w in weights]
            accumulate = not getattr(weights[0], "overwrite_main_grad", False)
        else:
            wgrad_list = [torch.empty(w.shape, dtype=ctx.activation_dtype, device=w.device) for w in weights]
            accumulate = False

        delay_wgrad = ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute()
        if delay_wgrad:
            ctx.wgrad_store.put([grad_output_fp8s, input_fp8s, wgrad_list, accumulate], _grouped_wgrad)
            grad_weights = [None] * num_gemms
        else:
            grad_weights = _grouped_wgrad(grad_output_fp8s, input_fp8s, wgrad_list, accumulate)

        def handle_custom_ddp_from_mcore(weight, wgrad):
            # Handle custom DDP from mcore.
            if ctx.accumulate_into_main_grad and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
                wgrad = get_dummy_wgrad(
                    list(weight.main_grad.shape),
                    weight.dtype,
                    zero=getattr(weight, "zero_out_wgrad", False),
                )
            elif ctx.accumulate_into_main_grad:
                wgrad = None
            return wgrad

        grad_weights = [handle_custom_ddp_from_mcore(w, g) for w, g in zip(weights, grad_weights)]

        grad_input = torch.cat(grad_input_parts, dim=0).view(inp.shape)
        return (grad_input, None, None, None, None, None, None, *grad_weights)


class GroupedLinearDeepGemm(TransformerEngineBaseModule):
    def __init__(
        self,
        num_gemms,
        in_features,
        out_features,
        device="cuda",
        params_dtype=None,
        block_scaling_dim=2,
        delay_wgrad_compute=False,
        accumulate_into_main_grad=False,
        **kwargs,
    ):
        super().__init__()
        params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.num_gemms = num_gemms
        self.in_features = in_features
        self.out_features = out_features
        self.accumulate_into_main_grad = accumulate_into_main_grad
        self.device = torch.device(device)

        self.wgrad_store = WeightGradStore(delay_wgrad_compute)

        self.input_quantizers = []
        self.weight_quantizers = []
        for i in range(self.num_gemms):
            self.input_quantizers.append(
                FP8DeepGemmQuantizer(
                    fp8_dtype=TE_DType.kFloat8E4M3,
                    rowwise=True,
                    columnwise=False,
                    block_scaling_dim=block_scaling_dim,
                    use_deepgemm_layout=True,
                )
            )
            self.weight_quantizers.append(
                FP8DeepGemmQuantizer(
                    fp8_dtype=TE_DType.kFloat8E4M3,
                    rowwise=True,
                    columnwise=True,
                    block_scaling_dim=block_scaling_dim,
                    use_deepgemm_layout=True,
                )
            )
            weight = nn.Parameter(
                torch.empty(self.out_features, self.in_features, device=self.device, dtype=params_dtype)
            )
            setattr(self, f"weight{i}", weight)
        self.activation_dtype = params_dtype

    def forward(self, inp, m_splits, is_first_microbatch=None):
        assert len(m_splits) == self.num_gemms, "Number of splits should match number of GEMMs."
        weight_tensors = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
        return _GroupedLinearDeepGemm.apply(
            inp,
            m_splits,
            self.wgrad_store,
            self.input_quantizers,
            self.weight_quantizers,
            self.activation_dtype,
            self.accumulate_into_main_grad,
            *weight_tensors,
        )

    def backward_dw(self):
        if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
            return
        with torch.cuda.nvtx.range("_GroupedLinearDeepGemm_wgrad"):
            wgrad_list, _ = self.wgrad_store.pop()
            if not self.accumulate_into_main_grad:
                for i in range(self.num_gemms):
                    weight = getattr(self, f"weight{i}")
                    weight.grad = wgrad_list[i].to(weight.dtype)
            del wgrad_list
            for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                wgrad_accumulation_and_reduce_hook()
"""


# --- xpan413/FSMoE 4d4cf369 megatron/core/transformer/moe/moe_layer.py
# _HandcraftBackward, MoELayer.do_bp_experts / ._handcraft_backward / .forward (callbacks, TP
# combine buffers and recompute dropped; adapted: expert weights passed through _HandcraftBackward,
# flag and Megatron's dummy for each; see variant_corpus_blind25.py)
_FS_MOE_LAYER = """
import torch

from megatron.core import parallel_state
from megatron.core.transformer.moe.moe_utils import sort_chunks_by_idxs


class _HandcraftBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, output, moe, *expert_weights):
        ctx.moe = moe
        ctx.expert_weights = expert_weights
        return output

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = ctx.moe._handcraft_backward(grad_output)
        grad_weights = []
        for weight in ctx.expert_weights:
            if hasattr(weight, "grad_added_to_main_grad"):
                # When overlap_grad_reduce is True, need to ensure that backward hooks
                # are all run on the main backprop thread to prevent deadlocks. Setup
                # dummy grad_weight tensor to prevent backward hooks from being run
                # in a background thread.
                if getattr(weight, "zero_out_wgrad", False):
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
            else:
                grad_weight = None
            grad_weights.append(grad_weight)
        return (grad_input, None, None, *grad_weights)


class MoELayer(BaseMoELayer):
    def do_bp_experts(self, batch: dict) -> None:
        batch["event"].wait()
        if self.num_local_experts > 1:
            batch["data"] = sort_chunks_by_idxs(
                batch["data"],
                batch["num_global_tokens_per_local_expert_cpu"].ravel(),
                self.sort_input_by_local_experts,
            )
        tokens_per_expert = batch["tokens_per_expert"].tolist()
        tokens_list = torch.split(batch["data"], tokens_per_expert)
        batch_size = tokens_list[0].shape[0]
        output_local_list = []
        for expert, tokens in zip(self.experts.local_experts, tokens_list):
            length = expert.linear_fc2._input_buffer.numel() // self.bp_pipeline_degree
            input = torch.narrow(expert.linear_fc2._input_buffer, 0, batch["idx"] * length, length)
            output = tokens.matmul(expert.linear_fc2.weight)
            grad_weight = tokens.t().matmul(input.view(batch_size, -1))
            expert.linear_fc2.weight.main_grad += grad_weight
            output[output < 0] = 0
            output_local_list.append(output)

        output2_local_list = []
        for expert, tokens in zip(self.experts.local_experts, output_local_list):
            length = expert.linear_fc1._input_buffer.numel() // self.bp_pipeline_degree
            input = torch.narrow(expert.linear_fc1._input_buffer, 0, batch["idx"] * length, length)
            output = tokens.matmul(expert.linear_fc1.weight)
            grad_weight = tokens.t().matmul(input.view(batch_size, -1))
            expert.linear_fc1.weight.main_grad += grad_weight
            output2_local_list.append(output)
        batch["data"] = torch.cat(output2_local_list, dim=0)
        if self.num_local_experts > 1:
            batch["data"] = sort_chunks_by_idxs(
                batch["data"],
                batch["num_global_tokens_per_local_expert_cpu"].T.ravel(),
                self.restore_output_by_local_experts,
            )
        batch["event"].record()

    def _handcraft_backward(self, grad_input):
        batch = {"data": grad_input}
        hidden_dim = batch["data"].shape[-1]
        batch["data"] = batch["data"].view(self.config.num_moe_experts, -1, hidden_dim)
        pipelined_data = torch.tensor_split(batch["data"], self.bp_pipeline_degree, 1)
        pipelined_tokens_per_expert = torch.full(
            (self.num_local_experts,),
            batch["data"].shape[1] * self.tp_size * self.ep_size // self.bp_pipeline_degree,
            dtype=torch.long,
        )
        pipelined_num_global_tokens_per_local_expert_cpu = torch.full(
            (self.config.num_moe_experts * self.tp_size,),
            batch["data"].shape[1] // self.bp_pipeline_degree,
            dtype=torch.long,
        )

        micro_batch = [dict() for _ in range(self.bp_pipeline_degree)]
        for idx, (data, event) in enumerate(zip(pipelined_data, self.comm_event_lst)):
            _micro_shape = data.shape
            micro_batch[idx]["data"] = data.reshape(-1, _micro_shape[-1])
            micro_batch[idx]["tokens_per_expert"] = pipelined_tokens_per_expert
            micro_batch[idx]["num_global_tokens_per_local_expert_cpu"] = pipelined_num_global_tokens_per_local_expert_cpu
            micro_batch[idx]["event"] = event
            micro_batch[idx]["idx"] = idx
            event.record()

        for _batch in micro_batch:
            self.do_dispatch(_batch)
        for _batch in micro_batch:
            self.do_bp_experts(_batch)
            self.do_combine(_batch, is_all_to_all=False)
        for _batch in micro_batch:
            self.do_combine(_batch, is_reduce_scatter=False)

        output_lst = []
        for _batch in micro_batch:
            _batch["event"].wait()
            output_lst.append(_batch["data"].view(_micro_shape))
        return torch.cat(output_lst, dim=1).reshape(-1, _micro_shape[-1])

    def forward(self, hidden_states: torch.Tensor):
        batch = {"original_data": hidden_states}
        batch["data"] = batch["original_data"].view(-1, hidden_states.shape[-1])
        self.do_router(batch)
        self.do_order(batch)
        batch["grad_data"] = batch["data"]
        with torch.no_grad():
            pipelined_data = torch.tensor_split(
                batch["data"].view(*batch["indices"].shape, -1), self.pipeline_degree, 1
            )
            micro_batch = [dict() for _ in range(self.pipeline_degree)]
            for idx, (data, event) in enumerate(zip(pipelined_data, self.comm_event_lst)):
                _micro_shape = data.shape
                micro_batch[idx]["data"] = data.reshape(-1, _micro_shape[-1])
                micro_batch[idx]["event"] = event
                event.record()
            for _batch in micro_batch:
                self.do_dispatch(_batch)
            for _batch in micro_batch:
                self.do_experts(_batch)
                self.do_combine(_batch, is_all_to_all=False)
            for _batch in micro_batch:
                self.do_combine(_batch, is_reduce_scatter=False)
            output_lst = []
            for _batch in micro_batch:
                _batch["event"].wait()
                output_lst.append(_batch["data"].view(_micro_shape))
            batch["data"] = torch.cat(output_lst, dim=1).reshape(-1, _micro_shape[-1])
        batch["data"] = batch["data"].detach()
        batch["data"].requires_grad = True
        expert_weights = [
            weight
            for expert in self.experts.local_experts
            for weight in (expert.linear_fc1.weight, expert.linear_fc2.weight)
        ]
        batch["data"] = _HandcraftBackward.apply(batch["grad_data"], batch["data"], self, *expert_weights)
        self.do_iorder(batch)
        hidden_states = batch["data"].reshape_as(batch["original_data"])
        return hidden_states, None
"""


# --- xuwchen/Wan2.2 1d34fff2 te_utils.py replace_linear_with_te / setup_main_grad_for_te_linear
# (printing, the alignment report and get_te_linear dropped; adapted: main_grad buffers in fp32)
_WAN_TE_UTILS = """
import torch
import torch.nn as nn

# TransformerEngine should be installed system-wide
try:
    import transformer_engine.pytorch as te

    TE_AVAILABLE = True
except ImportError as e:
    print(f"Warning: TransformerEngine not available: {e}")
    TE_AVAILABLE = False


def replace_linear_with_te(
    model: nn.Module,
    fuse_wgrad_accumulation: bool = True,
    skip_modules: list = None,
    alignment: int = 16,
) -> nn.Module:
    if not TE_AVAILABLE:
        return model

    skip_modules = skip_modules or []

    def should_skip(name: str) -> bool:
        return any(skip in name.lower() for skip in skip_modules)

    def is_aligned(in_features: int, out_features: int) -> bool:
        return (in_features % alignment == 0) and (out_features % alignment == 0)

    def replace_module(parent: nn.Module, name: str, module: nn.Module, full_name: str):
        if isinstance(module, nn.Linear):
            if not is_aligned(module.in_features, module.out_features):
                return False

            # Create TE Linear with same configuration
            te_linear = te.Linear(
                in_features=module.in_features,
                out_features=module.out_features,
                bias=module.bias is not None,
                fuse_wgrad_accumulation=fuse_wgrad_accumulation,
            )

            # Copy weights
            with torch.no_grad():
                te_linear.weight.copy_(module.weight)
                if module.bias is not None:
                    te_linear.bias.copy_(module.bias)

            # Move to same device/dtype
            te_linear = te_linear.to(
                device=module.weight.device,
                dtype=module.weight.dtype,
            )

            # Create main_grad attribute for fuse_wgrad_accumulation
            # This is required by TE Linear when fuse_wgrad_accumulation=True
            if fuse_wgrad_accumulation:
                te_linear.weight.main_grad = torch.zeros_like(te_linear.weight, dtype=torch.float32)

            setattr(parent, name, te_linear)
            return True
        return False

    def recursive_replace(module: nn.Module, prefix: str = ""):
        for name, child in list(module.named_children()):
            full_name = f"{prefix}.{name}" if prefix else name
            if should_skip(full_name):
                continue
            if isinstance(child, nn.Linear):
                replace_module(module, name, child, full_name)
            else:
                recursive_replace(child, full_name)

    recursive_replace(model)
    return model


def setup_main_grad_for_te_linear(model: nn.Module) -> int:
    if not TE_AVAILABLE:
        return 0

    count = 0

    for name, module in model.named_modules():
        if isinstance(module, te.Linear):
            if getattr(module, 'fuse_wgrad_accumulation', False):
                weight = module.weight

                # Create a contiguous main_grad buffer
                if not hasattr(weight, 'main_grad') or weight.main_grad is None:
                    weight.main_grad = torch.zeros(
                        weight.shape,
                        dtype=torch.float32,
                        device=weight.device,
                    ).contiguous()

                # Set __fsdp_param__ = True to trigger TE's torch.matmul path
                weight.__fsdp_param__ = True

                # Create get_main_grad method that returns the main_grad buffer
                # TE will call this in backward to get the output buffer for wgrad
                def make_getter(w):
                    return lambda: w.main_grad
                weight.get_main_grad = make_getter(weight)

                count += 1

    print(f"Configured {count} TE Linear layers with manual FSDP-compatible main_grad")
    return count
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    # overwrite_main_grad is read from the transposed copy made for the dgrad GEMM, which never
    # carries it: under Megatron-FSDP's overwrite mode the wgrad GEMM accumulates onto stale values.
    Variant(
        1,
        "deepgemm_grouped_overwrite_flag_read_from_transposed_weight",
        _swap(
            _XK_GROUPED,
            '                accumulate_into_main_grad = not getattr(weight, "overwrite_main_grad", False)\n',
            '                accumulate_into_main_grad = not getattr(weight_transposed, "overwrite_main_grad", False)  # bug\n',
        ),
        _XK_GROUPED,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    # The mcore helper flags the weight and then hands main_grad itself back as its .grad.
    Variant(
        2,
        "deepgemm_linear_mcore_helper_returns_main_grad",
        _swap(
            _XK_LINEAR,
            "                wgrad = get_dummy_wgrad(\n"
            "                    list(weight.main_grad.shape),\n"
            "                    weight.dtype,\n"
            '                    zero=getattr(weight, "zero_out_wgrad", False),\n'
            "                )\n",
            "                wgrad = weight.main_grad  # bug\n",
        ),
        _XK_LINEAR,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    # Every expert parameter goes through _HandcraftBackward, biases included: they are flagged as
    # already added although the hand-written backward writes only the fc1/fc2 weights' main_grad,
    # so their gradients are dropped.
    Variant(
        3,
        "fsmoe_handcraft_backward_flags_all_expert_parameters",
        _swap(
            _FS_MOE_LAYER,
            "        expert_weights = [\n"
            "            weight\n"
            "            for expert in self.experts.local_experts\n"
            "            for weight in (expert.linear_fc1.weight, expert.linear_fc2.weight)\n"
            "        ]\n",
            "        expert_weights = list(self.experts.parameters())  # bug\n",
        ),
        _FS_MOE_LAYER,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    # The wgrad GEMM writes into main_grad with DeepGEMM's c=None, the author's "basic case": it
    # always overwrites, and overwrite_main_grad is no longer read.
    Variant(
        4,
        "deepgemm_grouped_wgrad_gemm_into_main_grad_without_c",
        _swap(
            _XK_GROUPED,
            '                accumulate_into_main_grad = not getattr(weight, "overwrite_main_grad", False)\n'
            "                deep_gemm.fp8_gemm_nt(\n"
            "                    (grad_output_fp8_wgrad.rowwise_data, grad_output_fp8_wgrad.rowwise_scale_inv),\n"
            "                    (input_fp8.columnwise_data, input_fp8.columnwise_scale_inv),\n"
            "                    main_grad,\n"
            "                    c=main_grad if accumulate_into_main_grad else None,\n",
            "                deep_gemm.fp8_gemm_nt(  # bug\n"
            "                    (grad_output_fp8_wgrad.rowwise_data, grad_output_fp8_wgrad.rowwise_scale_inv),\n"
            "                    (input_fp8.columnwise_data, input_fp8.columnwise_scale_inv),\n"
            "                    main_grad,\n"
            "                    c=None,  # Start with basic case, no accumulation  # bug\n",
        ),
        _XK_GROUPED,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    # The delayed branch returns as soon as the wgrad is queued, before the Megatron bookkeeping:
    # the weights get None and no flag, and backward_dw fires the reduce hooks on them.
    Variant(
        5,
        "deepgemm_grouped_delayed_branch_returns_before_bookkeeping",
        _swap(
            _XK_GROUPED_DELAYED,
            "            ctx.wgrad_store.put([grad_output_fp8s, input_fp8s, wgrad_list, accumulate], _grouped_wgrad)\n"
            "            grad_weights = [None] * num_gemms\n",
            "            ctx.wgrad_store.put([grad_output_fp8s, input_fp8s, wgrad_list, accumulate], _grouped_wgrad)\n"
            "            grad_input = torch.cat(grad_input_parts, dim=0).view(inp.shape)  # bug\n"
            "            return (grad_input, None, None, None, None, None, None, *([None] * num_gemms))  # bug\n",
        ),
        _XK_GROUPED_DELAYED,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    # The module takes delay_wgrad_compute but builds its store without it (as the head code's
    # LayerNormLinearDeepGemm does): backward never defers and backward_dw returns at once, so the
    # W pass and its reduce hooks the schedule expects from backward_dw never happen.
    Variant(
        6,
        "deepgemm_grouped_wgrad_store_built_without_delay_flag",
        _swap(
            _XK_GROUPED_DELAYED,
            "        self.wgrad_store = WeightGradStore(delay_wgrad_compute)\n",
            "        self.wgrad_store = WeightGradStore()  # bug\n",
        ),
        _XK_GROUPED_DELAYED,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    # The dummies are chosen inside the list comprehension on the local flag that
    # overwrite_main_grad switched off: in overwrite mode no weight is flagged or given a dummy.
    Variant(
        7,
        "deepgemm_grouped_mcore_list_picks_dummy_on_local_flag",
        _swap(
            _XK_GROUPED,
            "            grad_weights = [handle_custom_ddp_from_mcore(w, g) for w, g in zip(weights, grad_weights)]\n",
            "            grad_weights = [handle_custom_ddp_from_mcore(w, g) if accumulate_into_main_grad else g for w, g in zip(weights, grad_weights)]  # bug\n",
        ),
        _XK_GROUPED,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    # Only a missing main_grad is allocated: on the FSDP-wrapped weights main_grad is present but
    # None, so get_main_grad() hands TE's fused wgrad GEMM no buffer.
    Variant(
        8,
        "wan_te_utils_main_grad_none_not_reallocated",
        _swap(
            _WAN_TE_UTILS,
            "                if not hasattr(weight, 'main_grad') or weight.main_grad is None:\n",
            "                if not hasattr(weight, 'main_grad'):  # bug\n",
        ),
        _WAN_TE_UTILS,
    ),
)
