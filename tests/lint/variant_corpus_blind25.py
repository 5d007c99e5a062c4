"""The twenty-fifth blind corpus (H-blind25), development half: main_grad bookkeeping variants
of the eight classes of issue #19, two per class, grounded in code from repositories no earlier
blind corpus used: xieck13 TransformerEngine (a Transformer Engine fork whose ``deepgemm`` branch
adds DeepGEMM-backed modules written from scratch: ``LinearDeepGemm``, ``LayerNormLinearDeepGemm``
and ``GroupedLinearDeepGemm``, whose autograd functions run the wgrad as a DeepGEMM FP8 GEMM and add
it into ``main_grad`` in software, plus the branch's own test scripts), xpan413 FSMoE (a research
MoE training system on Megatron-LM whose ``MoELayer`` runs the whole expert backward by hand,
pipelined over micro-batches, outside autograd, adding the expert wgrads straight into
``main_grad``), and xuwchen Wan2.2 (a Wan2.2 video-diffusion fork trained with Megatron-FSDP,
whose ``te_utils.py`` swaps ``nn.Linear`` for TE ``Linear`` with ``fuse_wgrad_accumulation`` and
installs ``main_grad``/``get_main_grad`` on the TE weights after wrapping).

Sources (repo, commit, path, function):
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f (head of branch ``deepgemm``)
  transformer_engine/pytorch/module/linear_deepgemm.py _LinearDeepGemmFunction.forward / .backward
  (four variants: classes 1, 3, 4 and 7)
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f
  transformer_engine/pytorch/module/layernorm_linear_deepgemm.py _LayerNormLinearDeepGemm.forward /
  .backward, _layernorm_backward_simple (two variants: classes 3 and 7)
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f
  transformer_engine/pytorch/module/grouped_linear_deepgemm.py _GroupedLinearDeepGemm.forward /
  .backward (class 2)
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f
  transformer_engine/pytorch/module/grouped_linear_deepgemm.py GroupedLinearDeepGemm.__init__ /
  .forward and _GroupedLinearDeepGemm.backward, with transformer_engine/pytorch/module/base.py
  TransformerEngineBaseModule.backward_dw as the delayed-wgrad idiom (four variants: classes 5 and 6)
- xieck13/TransformerEngine 28332ead026ca186d3c134001ff35dc0010bc37f
  test_grouped_linear_wgrad_accuracy.py test_wgrad_accuracy_and_nan (class 8)
- xpan413/FSMoE 4d4cf36943d8eaca1017376f2e3e25a80335c6a7
  megatron/core/transformer/moe/moe_layer.py _HandcraftBackward, MoELayer.do_bp_experts /
  ._handcraft_backward / .forward, with megatron/core/tensor_parallel/layers.py
  LinearWithGradAccumulationAndAsyncCommunication.backward as the dummy-grad idiom (three variants:
  classes 1, 2 and 4)
- xuwchen/Wan2.2 1d34fff2dc163695e0639db375a8083a9ef40c78 pretrain_t2v.py main (class 8)

Conventions: twins are the real code shortened (real names and idioms; docstrings, DEBUG prints,
DeepGEMM dimension checks, logging, recompute, the router/dispatcher and unrelated
branches dropped; the DeepGEMM modules' repeated ``FP8DeepGemmQuantizer`` make_empty /
update_quantized blocks are folded into one helper ``_quantize``, and the forward argument lists of
``_LayerNormLinearDeepGemm`` and of the delayed-wgrad ``_GroupedLinearDeepGemm`` are shortened to
the arguments the variants use). No repository history of these files was available here, so no
variant reverts a known fix.
Adapted where the real code lacks the main_grad feature a class is about, or gets it wrong, and
said so here (a twin must be correct under CONTRACT.md):
- The DeepGEMM autograd functions add the wgrad into ``main_grad`` and return ``None`` for the
  weight, with no ``grad_added_to_main_grad`` and no dummy (TE #2097's shape), ignore
  ``overwrite_main_grad`` and Megatron-FSDP's ``get_main_grad``, and fall back silently when the
  weight has no ``main_grad``. The linear twins keep the real wgrad GEMM into a scratch
  ``grad_weight_out`` and the software fp32 add; the grouped twins run the wgrad GEMM straight into
  ``main_grad`` instead (DeepGEMM adds ``c`` into ``d``: ``c=main_grad`` accumulates in place,
  ``c=None`` overwrites). All add what TE's own modules in the same fork do: the
  ``__fsdp_param__``/``get_main_grad()`` fetch, the local ``accumulate_into_main_grad`` downgraded
  by ``overwrite_main_grad`` choosing ``add_`` or ``copy_`` (``c``, in the grouped twins; TE's
  ``get_accumulate_flag_in_param`` idiom), a clear error for a missing ``main_grad`` (raised in
  ``LinearDeepGemm``, an attribute error elsewhere), and the bookkeeping as TE's
  ``grouped_linear.py`` writes it (``handle_custom_ddp_from_mcore``: flag and ``get_dummy_wgrad``
  dummy, zeroed under ``zero_out_wgrad``), gated on the op-level setting.
- ``LayerNormLinearDeepGemm`` hard-codes ``fuse_wgrad_accumulation=False`` yet its backward adds into
  ``main_grad`` whenever the weight has one; the twin stores ``ctx.fuse_wgrad_accumulation`` and
  gates the fetch and the bookkeeping on it (the class-3 variant puts the real gate back).
- ``GroupedLinearDeepGemm`` takes ``delay_wgrad_compute`` and builds ``WeightGradStore(...)`` but its
  backward never defers and it has no ``backward_dw``. The delayed-wgrad twin defers the wgrad
  GEMMs through the store (DeepGEMM's ``c`` argument accumulating in place into ``main_grad``,
  ``c=None`` overwriting), and its ``backward_dw`` follows TE's base ``backward_dw``: pop (which
  runs the GEMMs), hand ``.grad`` over when not fused, fire the wgrad-accumulation-and-reduce hooks.
- FSMoE's expert forward runs under ``no_grad`` and its ``_HandcraftBackward`` returns nothing for
  the expert weights: ``main_grad`` is added into with no flag and no dummy, and the DDP hooks of
  the expert weights never fire. The twin passes the expert weights through ``_HandcraftBackward``
  and, after the hand-written backward has added into their ``main_grad``, sets the flag and returns
  Megatron's dummy (``layers.py``'s idiom) for each of them. Accumulate mode only, as FSMoE's DDP.
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
# _LinearDeepGemmFunction.forward / .backward (adapted: FSDP fetch, overwrite, bookkeeping; see the docstring)
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

# --- xieck13/TransformerEngine 28332ead transformer_engine/pytorch/module/layernorm_linear_deepgemm.py
# _LayerNormLinearDeepGemm.forward / .backward (forward arguments shortened; adapted: op-level gate,
# FSDP fetch, overwrite, bookkeeping; see the docstring)
_XK_LAYERNORM_LINEAR = """
import deep_gemm
import torch
from transformer_engine_torch import DType as TE_DType

from ..cpp_extensions.deepgemm import deepgemm_fp8_gemm
from ..tensor.float8_deepgemm_tensor import FP8DeepGemmQuantizer
from .base import get_dummy_wgrad, get_workspace


def _quantize(tensor, columnwise):
    quantizer = FP8DeepGemmQuantizer(
        TE_DType.kFloat8E4M3, rowwise=True, columnwise=columnwise, use_deepgemm_layout=True
    )
    tensor_fp8 = quantizer.make_empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    quantizer.update_quantized(tensor, tensor_fp8)
    return tensor_fp8


def _layernorm_backward_simple(grad_output, input, weight, bias, eps, zero_centered_gamma):
    input_shape = input.shape
    input = input.view(-1, input_shape[-1])
    grad_output = grad_output.view(-1, grad_output.shape[-1])
    mean = input.mean(dim=-1, keepdim=True)
    var = input.var(dim=-1, keepdim=True, unbiased=False)
    std = torch.sqrt(var + eps)
    normalized = (input - mean) / std
    grad_weight = (grad_output * normalized).sum(dim=0)
    grad_bias = grad_output.sum(dim=0) if bias is not None else None
    grad_normalized = grad_output * weight
    grad_input = grad_normalized / std
    return grad_input.view(input_shape), grad_weight, grad_bias


class _LayerNormLinearDeepGemm(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        inp,
        ln_weight,
        ln_bias,
        weight,
        bias,
        eps,
        fuse_wgrad_accumulation,
        input_quantizer,
        weight_quantizer,
        activation_dtype,
        normalization,
        zero_centered_gamma,
    ):
        if normalization == "LayerNorm":
            ln_out = torch.layer_norm(inp, ln_weight.shape, ln_weight, ln_bias, eps)
        else:
            raise ValueError(f"Unsupported normalization: {normalization}")

        # Store for backward pass
        ctx.save_for_backward(inp, ln_weight, ln_bias, weight, bias, ln_out)
        ctx.eps = eps
        ctx.normalization = normalization
        ctx.zero_centered_gamma = zero_centered_gamma
        ctx.activation_dtype = activation_dtype
        ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation

        inp_shape = inp.shape
        if ln_out.dim() > 2:
            ln_out = ln_out.view((-1, ln_out.shape[-1]))
        quantized_ln_out = input_quantizer.make_empty(ln_out.shape, dtype=ln_out.dtype, device=ln_out.device)
        input_quantizer.update_quantized(ln_out, quantized_ln_out)
        quantized_weight = weight_quantizer.make_empty(weight.shape, dtype=weight.dtype, device=weight.device)
        weight_quantizer.update_quantized(weight, quantized_weight)
        output, _ = deepgemm_fp8_gemm(
            quantized_ln_out, quantized_weight, get_workspace(), layout="nt", bias=bias, out_dtype=activation_dtype
        )
        return output.view(inp_shape[:-1] + (output.shape[-1],))

    @staticmethod
    def backward(ctx, grad_output, grad_ln_output=None):
        inp, ln_weight, ln_bias, weight, bias, ln_out = ctx.saved_tensors

        grad_output_shape = grad_output.shape
        grad_output = grad_output.view((-1, grad_output.shape[-1]))
        ln_out = ln_out.view((-1, ln_out.shape[-1]))

        grad_input = grad_weight = grad_bias = grad_ln_weight = grad_ln_bias = None
        accumulate_into_main_grad = False

        if ctx.needs_input_grad[0]:
            grad_output_fp8 = _quantize(grad_output, columnwise=False)
            weight_fp8 = _quantize(weight.t().contiguous(), columnwise=True)
            dgrad_gemm_out = torch.empty(ln_out.shape, dtype=ctx.activation_dtype, device=ln_out.device)
            deep_gemm.fp8_gemm_nt(
                (grad_output_fp8.rowwise_data, grad_output_fp8.rowwise_scale_inv),
                (weight_fp8.columnwise_data, weight_fp8.columnwise_scale_inv),
                dgrad_gemm_out,
                c=None,
                recipe=None,
            )
            grad_input, grad_ln_weight, grad_ln_bias = _layernorm_backward_simple(
                dgrad_gemm_out, inp, ln_weight, ln_bias, ctx.eps, ctx.zero_centered_gamma
            )
            grad_input = grad_input.view(grad_output_shape[:-1] + (grad_input.shape[-1],))

        if ctx.needs_input_grad[3]:
            # Determine if we should accumulate into main_grad (Megatron-LM)
            main_grad = None
            if ctx.fuse_wgrad_accumulation:
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                main_grad = weight.main_grad.detach()
                accumulate_into_main_grad = not getattr(weight, "overwrite_main_grad", False)

            # wgrad: grad_weight = grad_output.T @ ln_out (NT layout)
            grad_output_fp8_wgrad = _quantize(grad_output.t().contiguous(), columnwise=False)
            ln_out_fp8 = _quantize(ln_out.t().contiguous(), columnwise=True)
            use_accumulation = main_grad is not None
            grad_weight_out = torch.empty(weight.shape, dtype=ctx.activation_dtype, device=weight.device)
            deep_gemm.fp8_gemm_nt(
                (grad_output_fp8_wgrad.rowwise_data, grad_output_fp8_wgrad.rowwise_scale_inv),
                (ln_out_fp8.columnwise_data, ln_out_fp8.columnwise_scale_inv),
                grad_weight_out,
                c=None,
                recipe=None,
            )
            if use_accumulation:
                # Accumulate into main_grad in fp32 for precision
                if accumulate_into_main_grad:
                    main_grad.add_(grad_weight_out.to(torch.float32))
                else:
                    main_grad.copy_(grad_weight_out.to(torch.float32))
            grad_weight = grad_weight_out

        if ctx.needs_input_grad[4] and bias is not None:
            grad_bias = grad_output.sum(dim=0)

        def handle_custom_ddp_from_mcore(weight, wgrad):
            # Handle custom DDP from mcore.
            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
                wgrad = get_dummy_wgrad(
                    list(weight.main_grad.shape),
                    weight.dtype,
                    zero=getattr(weight, "zero_out_wgrad", False),
                )
            elif ctx.fuse_wgrad_accumulation:
                wgrad = None
            return wgrad

        if ctx.needs_input_grad[3]:
            grad_weight = handle_custom_ddp_from_mcore(weight, grad_weight)

        return (grad_input, grad_ln_weight, grad_ln_bias, grad_weight, grad_bias,
                None, None, None, None, None, None, None)
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
# adapted: the wgrad deferred through the store, backward_dw added; see the docstring)
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

# --- xieck13/TransformerEngine 28332ead test_grouped_linear_wgrad_accuracy.py
# test_wgrad_accuracy_and_nan (tests 1 and 3; printing, the bf16 reference model and bias copies dropped)
_XK_WGRAD_ACCURACY_TEST = """
import torch

from transformer_engine.pytorch.module.grouped_linear_deepgemm import GroupedLinearDeepGemm


def test_wgrad_accuracy_and_nan():
    num_gemms = 2
    total_batch = 256
    in_features = 256
    out_features = 512
    m_splits = [128, 128]
    device = "cuda"

    torch.manual_seed(42)
    input_tensor = torch.randn(total_batch, in_features, device=device, dtype=torch.bfloat16, requires_grad=True)

    grouped_linear_deepgemm = GroupedLinearDeepGemm(
        num_gemms=num_gemms,
        in_features=in_features,
        out_features=out_features,
        bias=True,
        accumulate_into_main_grad=False,
        device=device,
        params_dtype=torch.bfloat16,
    )
    output = grouped_linear_deepgemm(input_tensor, m_splits)
    loss = output.sum()
    loss.backward()

    # Test 3: main_grad accumulation accuracy
    grouped_linear_main_grad = GroupedLinearDeepGemm(
        num_gemms=num_gemms,
        in_features=in_features,
        out_features=out_features,
        bias=True,
        accumulate_into_main_grad=True,
        device=device,
        params_dtype=torch.bfloat16,
    )

    # Copy weights for consistency
    with torch.no_grad():
        for i in range(num_gemms):
            src_weight = getattr(grouped_linear_deepgemm, f"weight{i}")
            dst_weight = getattr(grouped_linear_main_grad, f"weight{i}")
            dst_weight.copy_(src_weight)

    # Set up main_grad
    for i in range(num_gemms):
        weight = getattr(grouped_linear_main_grad, f"weight{i}")
        weight.main_grad = torch.zeros_like(weight, dtype=torch.float32)

    # Forward and backward
    input_copy3 = input_tensor.clone().detach().requires_grad_(True)
    output_main_grad = grouped_linear_main_grad(input_copy3, m_splits)
    loss_main_grad = output_main_grad.sum()
    loss_main_grad.backward()

    nan_found = False
    for i in range(num_gemms):
        weight = getattr(grouped_linear_main_grad, f"weight{i}")
        regular_weight = getattr(grouped_linear_deepgemm, f"weight{i}")
        if hasattr(weight, "main_grad") and weight.main_grad is not None:
            main_grad = weight.main_grad
            if torch.isnan(main_grad).any():
                nan_found = True
            elif regular_weight.grad is not None:
                grad_diff = torch.abs(main_grad - regular_weight.grad.to(torch.float32)).max().item()
                print(f"weight{i} main_grad vs regular_grad difference: {grad_diff:.8f}")
    return not nan_found
"""

# --- xpan413/FSMoE 4d4cf369 megatron/core/transformer/moe/moe_layer.py
# _HandcraftBackward, MoELayer.do_bp_experts / ._handcraft_backward / .forward (callbacks, TP
# combine buffers and recompute dropped; adapted: expert weights passed through _HandcraftBackward,
# flag and Megatron's dummy for each; see the docstring)
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

# --- xuwchen/Wan2.2 1d34fff2 pretrain_t2v.py main (frozen-model eval/requires_grad lines, seeding,
# logging and the checkpoint directory dropped)
_WAN_PRETRAIN_MAIN = """
import os
from itertools import cycle

import torch
from megatron.core.distributed.fsdp.src.megatron_fsdp.fully_shard import fully_shard
from torch.optim import AdamW
from torch.utils.data import DataLoader, DistributedSampler

from wan.configs import WAN_CONFIGS
from wan.modules.model import WanAttentionBlock, WanModel
from wan.modules.t5 import T5EncoderModel
from wan.modules.vae2_2 import Wan2_2_VAE

DP_SHARD = "dp_shard"
DP_OUTER = "dp_outer"
CP = "cp"
DP_SHARD_CP = "dp_shard_cp"
TP = "tp"
HSDP = "hsdp"


def main():
    args = parse_args()
    rank, world_size, local_rank = setup_distributed()
    device = torch.device(f"cuda:{local_rank}")

    dtype_map = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    param_dtype = dtype_map[args.param_dtype]
    config = WAN_CONFIGS["ti2v-5B"]

    device_mesh = build_device_mesh(args, world_size)
    use_hsdp = args.dp_outer_size > 1

    # Load frozen models
    text_encoder = T5EncoderModel(
        text_len=config.text_len, dtype=config.t5_dtype, device=device,
        checkpoint_path=os.path.join(args.checkpoint_dir, config.t5_checkpoint),
        tokenizer_path=os.path.join(args.checkpoint_dir, config.t5_tokenizer),
    )
    vae = Wan2_2_VAE(vae_pth=os.path.join(args.checkpoint_dir, config.vae_checkpoint), device=device)

    # Load trainable model
    init_device = torch.device("meta") if args.init_on_meta_device else device
    with torch.device(init_device):
        model = WanModel.from_pretrained(args.checkpoint_dir)

    if not args.init_on_meta_device:
        model = model.to(device=device, dtype=param_dtype)

    # Replace nn.Linear with TE Linear for gradient_accumulation_fusion
    if args.use_te_linear:
        from te_utils import is_te_available, replace_linear_with_te

        if is_te_available():
            model = replace_linear_with_te(model, fuse_wgrad_accumulation=args.te_fuse_wgrad, alignment=8)

    model.train()
    model.requires_grad_(True)

    # Optimizer + FSDP
    optimizer = AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)

    model, optimizer = fully_shard(
        module=model,
        optimizer=optimizer,
        device_mesh=device_mesh,
        dp_shard_dim=DP_SHARD_CP,
        dp_outer_dim=DP_OUTER if use_hsdp else None,
        tp_dim=TP,
        hybrid_fsdp_group=device_mesh[HSDP].get_group() if use_hsdp else None,
        fsdp_unit_modules=[WanAttentionBlock],
        zero_dp_strategy=args.zero_dp_strategy,
        outer_dp_sharding_strategy=args.outer_dp_strategy if use_hsdp else "no_shard",
        preserve_fp32_weights=args.preserve_fp32_weights,
        grad_reduce_in_fp32=args.grad_reduce_in_fp32,
        init_model_with_meta_device=args.init_on_meta_device,
        sync_model_each_microbatch=False,
        overlap_grad_reduce=args.overlap_grad_reduce,
        overlap_param_gather=args.overlap_param_gather,
    )

    # Set up TE Linear gradient accumulation (FSDP-compatible)
    if args.use_te_linear and args.te_fuse_wgrad:
        from te_utils import setup_main_grad_for_te_linear

        setup_main_grad_for_te_linear(model)

    dataset = MockDataset(args.num_samples, args.frame_num, tuple(args.resolution))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True) if world_size > 1 else None
    dataloader = DataLoader(
        dataset, batch_size=args.batch_size, shuffle=(sampler is None),
        sampler=sampler, num_workers=args.num_workers, collate_fn=collate_fn,
        pin_memory=True, drop_last=True,
    )
    data_iter = cycle(iter(dataloader))

    scheduler = get_cosine_scheduler(optimizer, args.warmup_steps, args.max_steps)
    criterion = FlowMatchingLoss(num_timesteps=config.num_train_timesteps)
    train(model, text_encoder, vae, data_iter, optimizer, scheduler, criterion,
          args, rank, device, param_dtype, config)
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    # The forward saves the FP8 copy instead of the Parameter (against the line's own comment):
    # backward fetches main_grad, reads overwrite_main_grad and sets grad_added_to_main_grad on the
    # quantized stand-in, which carries none of them.
    Variant(
        1,
        "deepgemm_linear_saves_quantized_weight_for_main_grad",
        _swap(
            _XK_LINEAR,
            "        ctx.save_for_backward(input, weight, bias)  # Save original tensors, not quantized\n",
            "        ctx.save_for_backward(input, quantized_weight, bias)  # bug\n",
        ),
        _XK_LINEAR,
    ),
    # The expert weights are kept on ctx as detached copies: after the hand-written backward has
    # added into the Parameters' main_grad, the flag test and the dummies are taken from the
    # stand-ins, so no expert Parameter is flagged and each gets None.
    Variant(
        1,
        "fsmoe_handcraft_backward_flags_detached_expert_weights",
        _swap(
            _FS_MOE_LAYER,
            "        ctx.expert_weights = expert_weights\n",
            "        ctx.expert_weights = tuple(w.detach() for w in expert_weights)  # bug\n",
        ),
        _FS_MOE_LAYER,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    # TE's "cast for native AMP" step rebinds the weights to activation-dtype copies before they are
    # saved: whenever the dtypes differ, backward finds no main_grad (or a stale one) on the copies
    # and flags them instead of the Parameters.
    Variant(
        2,
        "deepgemm_grouped_forward_saves_amp_cast_weight_copies",
        _swap(
            _XK_GROUPED,
            "        # Store for backward pass\n        ctx.save_for_backward(inp, *weights, *biases)\n",
            "        # Cast for native AMP\n"
            "        weights = [cast_if_needed(w, activation_dtype) for w in weights]  # bug\n"
            "        # Store for backward pass\n        ctx.save_for_backward(inp, *weights, *biases)\n",
        ),
        _XK_GROUPED,
    ),
    # After the flag is set the expert weight's main_grad itself goes back as its .grad: the DDP hook
    # adds main_grad into itself under zero_out_wgrad, and .grad aliases the buffer it reduces.
    Variant(
        2,
        "fsmoe_handcraft_backward_returns_main_grad_as_expert_grad",
        _swap(
            _FS_MOE_LAYER,
            '                if getattr(weight, "zero_out_wgrad", False):\n'
            "                    grad_weight = torch.zeros(\n"
            "                        weight.main_grad.shape,\n"
            "                        dtype=weight.dtype,\n"
            "                        device=torch.cuda.current_device(),\n"
            "                        requires_grad=False,\n"
            "                    )\n"
            "                else:\n"
            "                    grad_weight = torch.empty(\n"
            "                        weight.main_grad.shape,\n"
            "                        dtype=weight.dtype,\n"
            "                        device=torch.cuda.current_device(),\n"
            "                        requires_grad=False,\n"
            "                    )\n",
            "                grad_weight = weight.main_grad  # bug\n",
        ),
        _FS_MOE_LAYER,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    # The forward marks the weight as already accumulated whatever the op-level setting: with
    # accumulate_into_main_grad off nothing writes main_grad, and DDP's hook drops the real wgrad.
    Variant(
        3,
        "deepgemm_linear_forward_flags_grad_added_before_any_write",
        _swap(
            _XK_LINEAR,
            "        ctx.accumulate_into_main_grad = accumulate_into_main_grad\n",
            "        ctx.accumulate_into_main_grad = accumulate_into_main_grad\n"
            '        if hasattr(weight, "grad_added_to_main_grad"):  # bug\n'
            "            weight.grad_added_to_main_grad = True  # bug\n",
        ),
        _XK_LINEAR,
    ),
    # The real code's gate: main_grad is written whenever the weight has one, while the bookkeeping
    # follows fuse_wgrad_accumulation (which the module hard-codes to False): a main_grad write with
    # no flag and the real wgrad handed on, so DDP adds it a second time.
    Variant(
        3,
        "deepgemm_layernorm_linear_writes_main_grad_when_fusion_off",
        _swap(
            _XK_LAYERNORM_LINEAR,
            '            if ctx.fuse_wgrad_accumulation:\n                if hasattr(weight, "__fsdp_param__"):\n',
            "            if hasattr(weight, 'main_grad') and weight.main_grad is not None:  # bug\n"
            '                if hasattr(weight, "__fsdp_param__"):\n',
        ),
        _XK_LAYERNORM_LINEAR,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    # The fp32 software accumulation becomes a copy, and overwrite_main_grad is no longer read: in
    # accumulate mode every microbatch but the last is lost.
    Variant(
        4,
        "deepgemm_linear_main_grad_copied_without_overwrite_check",
        _swap(
            _XK_LINEAR,
            '                accumulate_into_main_grad = not getattr(weight_tensor, "overwrite_main_grad", False)\n'
            "                if accumulate_into_main_grad:\n"
            "                    main_grad.add_(grad_weight_out.to(torch.float32))\n"
            "                else:\n"
            "                    main_grad.copy_(grad_weight_out.to(torch.float32))\n",
            "                main_grad.copy_(grad_weight_out.to(torch.float32))  # bug\n",
        ),
        _XK_LINEAR,
    ),
    # The fc2 wgrad GEMM writes straight into main_grad with matmul(out=): each backward micro-batch
    # of the pipelined expert backward replaces the previous one's (and every earlier microbatch's)
    # contribution.
    Variant(
        4,
        "fsmoe_bp_experts_fc2_wgrad_matmul_out_main_grad",
        _swap(
            _FS_MOE_LAYER,
            "            grad_weight = tokens.t().matmul(input.view(batch_size, -1))\n"
            "            expert.linear_fc2.weight.main_grad += grad_weight\n",
            "            torch.matmul(tokens.t(), input.view(batch_size, -1), out=expert.linear_fc2.weight.main_grad)  # bug\n",
        ),
        _FS_MOE_LAYER,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    # The Megatron bookkeeping runs only for the immediate wgrad: delayed weights get None and no
    # flag, and backward_dw then fires the wgrad-accumulation-and-reduce hooks on them.
    Variant(
        5,
        "deepgemm_grouped_bookkeeping_skipped_when_wgrad_delayed",
        _swap(
            _XK_GROUPED_DELAYED,
            "        grad_weights = [handle_custom_ddp_from_mcore(w, g) for w, g in zip(weights, grad_weights)]\n",
            "        if not delay_wgrad:  # bug\n"
            "            grad_weights = [handle_custom_ddp_from_mcore(w, g) for w, g in zip(weights, grad_weights)]  # bug\n",
        ),
        _XK_GROUPED_DELAYED,
    ),
    # backward_dw computes the unfused delayed wgrads and drops them: the reduce hooks fire for
    # weights that carry neither a .grad nor grad_added_to_main_grad.
    Variant(
        5,
        "deepgemm_grouped_backward_dw_fires_hooks_without_setting_grad",
        _swap(
            _XK_GROUPED_DELAYED,
            "            if not self.accumulate_into_main_grad:\n"
            "                for i in range(self.num_gemms):\n"
            '                    weight = getattr(self, f"weight{i}")\n'
            "                    weight.grad = wgrad_list[i].to(weight.dtype)\n"
            "            del wgrad_list\n",
            "            del wgrad_list  # bug\n",
        ),
        _XK_GROUPED_DELAYED,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    # backward_dw pops the store only on the unfused path: with accumulate_into_main_grad the
    # deferred GEMMs never run, yet the hooks fire and reduce main_grads that never got this wgrad.
    Variant(
        6,
        "deepgemm_grouped_backward_dw_pops_only_for_unfused_path",
        _swap(
            _XK_GROUPED_DELAYED,
            "            wgrad_list, _ = self.wgrad_store.pop()\n"
            "            if not self.accumulate_into_main_grad:\n"
            "                for i in range(self.num_gemms):\n"
            '                    weight = getattr(self, f"weight{i}")\n'
            "                    weight.grad = wgrad_list[i].to(weight.dtype)\n"
            "            del wgrad_list\n",
            "            if not self.accumulate_into_main_grad:\n"
            "                wgrad_list, _ = self.wgrad_store.pop()  # bug\n"
            "                for i in range(self.num_gemms):\n"
            '                    weight = getattr(self, f"weight{i}")\n'
            "                    weight.grad = wgrad_list[i].to(weight.dtype)\n"
            "                del wgrad_list\n",
        ),
        _XK_GROUPED_DELAYED,
    ),
    # The module builds its WeightGradStore but hands the autograd function None (as the code at the
    # head does, whose function never looks at the store): backward never defers, and backward_dw
    # pops an empty queue instead of computing the weights.
    Variant(
        6,
        "deepgemm_grouped_forward_drops_module_wgrad_store",
        _swap(
            _XK_GROUPED_DELAYED,
            "            self.wgrad_store,\n",
            "            None,  # bug\n",
        ),
        _XK_GROUPED_DELAYED,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    # The dummy is chosen in a conditional expression on the local flag that overwrite_main_grad
    # switched off: in overwrite mode the real wgrad goes back unflagged and is added again.
    Variant(
        7,
        "deepgemm_linear_mcore_dummy_in_conditional_on_local_flag",
        _swap(
            _XK_LINEAR,
            "            grad_weight = handle_custom_ddp_from_mcore(weight_tensor, grad_weight)\n",
            "            grad_weight = handle_custom_ddp_from_mcore(weight_tensor, grad_weight) if accumulate_into_main_grad else grad_weight  # bug\n",
        ),
        _XK_LINEAR,
    ),
    # The returned weight gradient is picked in the return statement on the local flag: in overwrite
    # mode main_grad was overwritten and the real wgrad is handed on with no flag.
    Variant(
        7,
        "deepgemm_layernorm_linear_return_picks_dummy_on_local_flag",
        _swap(
            _XK_LAYERNORM_LINEAR,
            "        if ctx.needs_input_grad[3]:\n"
            "            grad_weight = handle_custom_ddp_from_mcore(weight, grad_weight)\n"
            "\n"
            "        return (grad_input, grad_ln_weight, grad_ln_bias, grad_weight, grad_bias,\n",
            "        return (grad_input, grad_ln_weight, grad_ln_bias,\n"
            "                handle_custom_ddp_from_mcore(weight, grad_weight) if accumulate_into_main_grad else grad_weight,  # bug\n"
            "                grad_bias,\n",
        ),
        _XK_LAYERNORM_LINEAR,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    # The main_grad/get_main_grad setup runs before Megatron-FSDP wraps the model, on the parameters
    # it then replaces: the TE Linears (fuse_wgrad_accumulation) run on wrapped weights with no
    # main_grad to write into.
    Variant(
        8,
        "wan_fsdp_te_main_grad_setup_before_fully_shard",
        _swap(
            _swap(
                _WAN_PRETRAIN_MAIN,
                "    )\n"
                "\n"
                "    # Set up TE Linear gradient accumulation (FSDP-compatible)\n"
                "    if args.use_te_linear and args.te_fuse_wgrad:\n"
                "        from te_utils import setup_main_grad_for_te_linear\n"
                "\n"
                "        setup_main_grad_for_te_linear(model)\n",
                "    )\n",
            ),
            "    # Optimizer + FSDP\n"
            "    optimizer = AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)\n",
            "    # Set up TE Linear gradient accumulation (FSDP-compatible)\n"
            "    if args.use_te_linear and args.te_fuse_wgrad:  # bug\n"
            "        from te_utils import setup_main_grad_for_te_linear  # bug\n"
            "\n"
            "        setup_main_grad_for_te_linear(model)  # bug\n"
            "\n"
            "    # Optimizer + FSDP\n"
            "    optimizer = AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)\n",
        ),
        _WAN_PRETRAIN_MAIN,
    ),
    # The main_grad buffers are attached to the module built without accumulate_into_main_grad (a
    # copy-paste from the weight-copy loop): the module that accumulates into main_grad runs its
    # backward with none.
    Variant(
        8,
        "deepgemm_wgrad_test_main_grad_set_on_unfused_module",
        _swap(
            _XK_WGRAD_ACCURACY_TEST,
            "    # Set up main_grad\n"
            "    for i in range(num_gemms):\n"
            '        weight = getattr(grouped_linear_main_grad, f"weight{i}")\n',
            "    # Set up main_grad\n"
            "    for i in range(num_gemms):\n"
            '        weight = getattr(grouped_linear_deepgemm, f"weight{i}")  # bug\n',
        ),
        _XK_WGRAD_ACCURACY_TEST,
    ),
)
