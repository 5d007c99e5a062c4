"""The twentieth blind corpus (H-blind20): main_grad bookkeeping variants of the eight classes
of issue #19, grounded in code from repositories no earlier blind corpus used: AMD-AGI
Primus-Turbo (the kernel library's GEMM / grouped-GEMM autograd Functions, whose
``fuse_bgrad_accum_pattern="megatron"`` path writes the weight gradient into ``b.main_grad``,
flags the weight in forward and hands autograd a cached dummy), mdy666 mdy_triton (its
``megatron_patchs``: DeepSeek-style FP8 re-implementations of Transformer Engine's Linear and
GroupedLinear for Megatron, with a ``CustomManger`` queue of deferred weight-gradient closures
and a zero-bubble schedule), radixark miles (Megatron model plugins for GLM-5's DSA attention
and Inkling's shared experts), IEIT-Yuan Yuan2.0-M32 (its Megatron copy: the legacy
``DistributedDataParallel`` with contiguous ``main_grad`` buffers and the fused-wgrad linear)
and inclusionAI AReaL (the Megatron-Bridge model factory).

Sources (repo, commit, path, function):
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/ops/gemm_fp8.py FP8GemmTensorFunction.forward / .backward
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/ops/grouped_gemm.py GroupedGemmFunc.forward / .backward
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/ops/gemm.py GemmFunction.forward / .backward, _bgrad_gemm_impl_wrapper
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/ops/utils.py _setup_fused_grad_accum / _get_dummy_wgrad, with
  ops/gemm.py _bgrad_gemm_impl_wrapper and GemmFunction
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/ops/grouped_gemm.py _bgrad_grouped_gemm_impl_wrapper,
  GroupedGemmFunc.backward
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/modules/grouped_linear.py GroupedLinear.__init__ / .forward
- mdy666/mdy_triton 0718faabe657b2f389e00beb31e8c66d1c122e2a
  triton_kernels/megatron_patchs/dpsk_grouped_linear.py _GroupedLinear.forward / .backward
  (three variants)
- mdy666/mdy_triton 0718faabe657b2f389e00beb31e8c66d1c122e2a
  triton_kernels/megatron_patchs/dpsk_linear.py _Linear.backward (two variants)
- mdy666/mdy_triton 0718faabe657b2f389e00beb31e8c66d1c122e2a
  triton_kernels/megatron_patchs/zb2p.py start_sync_grad, with manger.py
  CustomManger.weight_backward
- radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76
  miles_plugins/models/glm5/glm5.py DSAMLASelfAttention.__init__ / .backward_dw /
  ._backward_kv_proj / ._backward_q_proj / ._backward_output_proj
- radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76
  miles_plugins/models/inkling/layers.py InklingSharedExperts.__init__ / .forward
- IEIT-Yuan/Yuan2.0-M32 b403a2beb2746c0c923b4eb936fe1e2560c83b19
  megatron/model/distributed.py DistributedDataParallel.__init__ / ._make_param_hook /
  .zero_grad_buffer
- inclusionAI/AReaL 4aef98d8d818af55b43621aaadba047ae10f4e77
  areal/models/mcore/registry.py make_mcore_model (the megatron-bridge branch)

Conventions: twins are the real code shortened (real names and idioms; docstrings, FP8 amax
bookkeeping, userbuffer overlap, FSDP scatter/gather of activations, sequence-parallel
communication, NVTX ranges and unrelated branches dropped). Adapted where the real code lacks
the main_grad feature a class is about, or where the real code carries the very bug of the
class, and said so here:
- Primus-Turbo reads no ``overwrite_main_grad``: its fused path always accumulates (beta=1).
  The Primus-Turbo GroupedLinear module never passes ``fuse_bgrad_accum_pattern``; its twin takes
  a ``fuse_wgrad_accumulation`` switch and, as Megatron-LM #5209 does, fetches a Megatron-FSDP
  weight's buffer with ``get_main_grad()`` before the fused op runs.
- mdy_triton copies Transformer Engine 1.x, whose ``accumulate_wgrad_into_param_main_grad`` is
  downgraded to an overwrite on ``is_first_microbatch``: the twins accumulate whenever the fused
  path is on (the downgrade is what one bug puts back). Its ``_GroupedLinear.forward`` rebinds
  the weight list to ``cast_if_needed`` copies before saving them; the twin keeps the Parameters
  apart (``params``) and saves those for the main_grad bookkeeping, the copies for the dgrad GEMM.
  The CPU-offload re-wrap, the FP8 ``CustomManger`` kernels and the deferred ``_func`` queue are
  dropped from the ``dpsk_linear`` / ``dpsk_grouped_linear`` twins. One ``dpsk_linear`` twin and
  one ``dpsk_grouped_linear`` twin are given Megatron-FSDP's ``overwrite_main_grad`` (the wgrad
  GEMM's accumulate flag downgraded by it, aliasing and bookkeeping on the op-level
  ``fuse_wgrad_accumulation``), with the "Handle custom DDP from mcore" block moved into a helper.
- mdy_triton's ``start_sync_grad`` registers every parameter as grad-ready after the deferred
  wgrad closures have run, without folding a real ``.grad`` into ``main_grad`` first; the twin
  folds it (unless ``grad_added_to_main_grad``) as Megatron's DDP backward hook does. The twin's
  ``drain_weight_grads`` is zb2p_v2's final drain loop (``while CustomManger.wgrad_func: ...``)
  put in a function that ends by calling ``start_sync_grad``.
- miles' ``DSAMLASelfAttention.backward_dw`` flushes the MLA projections but not the indexer's
  TE linears (``wq_b``, ``wk``, ``weights_proj``, built with the same config and hence the same
  ``delay_wgrad_compute``); the twin flushes them on layers that own them. miles'
  ``InklingSharedExperts`` has no ``backward_dw`` although ``MoELayer.backward_dw`` calls
  ``shared_experts.backward_dw()``; the twin adds one over its expert MLPs.
- Yuan2.0-M32's legacy DDP hook predates ``grad_added_to_main_grad``; the twin gives it
  Megatron-core's check (and the reset in ``zero_grad_buffer``).
Bugs are written as ``_swap(twin, old, new)``: one passage of the twin replaced, the changed
line(s) carrying ``# bug`` (a dropped line marks the line that now stands in its place; a moved
line is marked where it now stands).
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/ops/gemm_fp8.py FP8GemmTensorFunction
# (shortened: the NT-layout transposes and the MX/row/block Functions dropped).
_PT_GEMM_FP8 = """
class FP8GemmTensorFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, a_t, b_t, trans_a, trans_b, out_dtype, config, fuse_bgrad_accum_pattern=None):
        use_nt_layout_gemm_in_bwd = _deter_use_nt_layout_gemm_in_bwd(trans_a, trans_b)
        fuse_bgrad_accum, main_grad = _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern)

        if isinstance(a, QuantizedTensor):
            quantized_a = a
            check_quantized_tensor(quantized_a, config)
        else:
            a_dtype = _get_fp8_dtype(config.format, True)
            quantized_a = QuantizedTensor.quantize(
                a, a_dtype, config.granularity, axis=-1, block_size=config.block_size
            )

        if isinstance(b, QuantizedTensor):
            quantized_b = b
            check_quantized_tensor(quantized_b, config)
        else:
            b_dtype = _get_fp8_dtype(config.format, True)
            quantized_b = QuantizedTensor.quantize(
                b, b_dtype, config.granularity, axis=-1, block_size=config.block_size
            )

        out = gemm_fp8_impl(
            quantized_a.qdata,
            quantized_a.scale_inv,
            trans_a,
            quantized_b.qdata,
            quantized_b.scale_inv,
            trans_b,
            out_dtype,
            False,
            granularity=config.granularity.value,
            default_backend=BackendType.HIPBLASLT.value,
        )

        ctx.save_for_backward(
            quantized_a.qdata, quantized_a.scale_inv, quantized_b.qdata, quantized_b.scale_inv
        )
        ctx.trans_a = trans_a
        ctx.trans_b = trans_b
        ctx.out_dtype = out_dtype
        ctx.config = config
        ctx.use_nt_layout_gemm_in_bwd = use_nt_layout_gemm_in_bwd
        ctx.fuse_bgrad_accum = fuse_bgrad_accum
        ctx.main_grad = main_grad
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if not grad_out.is_contiguous():
            grad_out = grad_out.contiguous()
        a_fp8, a_scale_inv, b_fp8, b_scale_inv = ctx.saved_tensors
        grad_out_dtype = _get_fp8_dtype(ctx.config.format, False)
        quantized_grad_out = QuantizedTensor.quantize(
            grad_out, grad_out_dtype, ctx.config.granularity, axis=-1
        )

        a_grad = gemm_fp8_impl(
            quantized_grad_out.qdata,
            quantized_grad_out.scale_inv,
            False,
            b_fp8,
            b_scale_inv,
            not ctx.trans_b,
            ctx.out_dtype,
            ctx.trans_a,
            granularity=ctx.config.granularity.value,
            default_backend=BackendType.HIPBLASLT.value,
        )
        b_grad = _bgrad_gemm_fp8_impl_wrapper(
            a_fp8,
            a_scale_inv,
            not ctx.trans_a,
            quantized_grad_out.qdata,
            quantized_grad_out.scale_inv,
            False,
            ctx.out_dtype,
            ctx.trans_b,
            granularity=ctx.config.granularity.value,
            default_backend=BackendType.HIPBLASLT.value,
            inplace_add_to_out=ctx.fuse_bgrad_accum,
            out=ctx.main_grad,
        )
        return a_grad, b_grad, None, None, None, None, None, None, None
"""

# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/ops/grouped_gemm.py GroupedGemmFunc
# (shortened: the work-stealing schedule options dropped).
_PT_GROUPED_GEMM_FUNC = """
class GroupedGemmFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, group_lens, group_offs, trans_b, num_cu, fuse_bgrad_accum_pattern=None):
        fuse_bgrad_accum, main_grad = _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern)
        if len(group_lens) == 1:
            assert b.size(0) == 1, f"Expected first dimension to be 1, got {b.size(0)}"
            b_2d = b.squeeze(0)
            out = gemm_impl(
                a, False, b_2d, trans_b, a.dtype, False, default_backend=BackendType.HIPBLASLT.value
            )
        else:
            out = grouped_gemm_impl(
                a,
                b,
                group_lens,
                group_offs,
                trans_a=False,
                trans_b=trans_b,
                num_cu=num_cu,
                default_backend=BackendType.TRITON.value,
                maybe_pre_sync=True,
            )
        ctx.save_for_backward(a, b, group_lens, group_offs)
        ctx.trans_a = False
        ctx.trans_b = trans_b
        ctx.num_cu = num_cu
        ctx.fuse_bgrad_accum = fuse_bgrad_accum
        ctx.main_grad = main_grad
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if not grad_out.is_contiguous():
            grad_out = grad_out.contiguous()

        a, b, group_lens, group_offs = ctx.saved_tensors
        if len(group_lens) == 1:
            assert b.size(0) == 1, f"Expected first dimension to be 1, got {b.size(0)}"
            b_2d = b.squeeze(0)
            grad_a = gemm_impl(
                grad_out, False, b_2d, not ctx.trans_b, a.dtype, ctx.trans_a,
                default_backend=BackendType.HIPBLASLT.value,
            )
            if ctx.fuse_bgrad_accum:
                # main_grad matches b's [1, ...] shape; the dense GEMM writes 2D, and
                # squeeze(0) is a view so the accumulation lands in the real buffer.
                gemm_accum_impl(
                    a, True, grad_out, False, b.dtype, ctx.trans_b,
                    out=ctx.main_grad.squeeze(0),
                    default_backend=BackendType.HIPBLASLT.value,
                )
                grad_b = _get_dummy_wgrad(b.shape, b.dtype)
            else:
                grad_b = gemm_impl(
                    a, True, grad_out, False, b.dtype, ctx.trans_b,
                    default_backend=BackendType.HIPBLASLT.value,
                ).view(b.size())
        else:
            grad_a = grouped_gemm_impl(
                grad_out,
                b,
                group_lens,
                group_offs,
                trans_a=False,
                trans_b=not ctx.trans_b,
                num_cu=ctx.num_cu,
                default_backend=BackendType.TRITON.value,
            )
            grad_b = _bgrad_grouped_gemm_impl_wrapper(
                a,
                grad_out,
                group_lens,
                group_offs,
                trans_a=not ctx.trans_a,
                trans_b=False,
                trans_c=ctx.trans_b,
                num_cu=ctx.num_cu,
                default_backend=BackendType.TRITON.value,
                inplace_add_to_out=ctx.fuse_bgrad_accum,
                out=ctx.main_grad,
            )
        return grad_a, grad_b, None, None, None, None, None
"""

# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/ops/gemm.py _bgrad_gemm_impl_wrapper,
# GemmFunction (shortened: the docstrings dropped).
_PT_GEMM_FUNC = """
def _bgrad_gemm_impl_wrapper(
    a, trans_a, b, trans_b, out_dtype, trans_c, default_backend, inplace_add_to_out=False, out=None
):
    inputs = (a, trans_a, b, trans_b, out_dtype, trans_c)

    if not inplace_add_to_out:
        return gemm_impl(*inputs, default_backend=default_backend)

    assert out is not None, "out should not be None when inplace_add_to_out is True"
    gemm_accum_impl(*inputs, out=out, default_backend=default_backend)

    return _get_dummy_wgrad(out.shape, out_dtype)


class GemmFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, trans_a, trans_b, out_dtype, fuse_bgrad_accum_pattern=None):
        assert a.dim() == 2 and b.dim() == 2, "Only 2D GEMM is supported"
        fuse_bgrad_accum, main_grad = _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern)
        out = gemm_impl(a, trans_a, b, trans_b, out_dtype, False, default_backend=BackendType.HIPBLASLT.value)
        if a.requires_grad or b.requires_grad:
            ctx.save_for_backward(a, b)
            ctx.trans_a = trans_a
            ctx.trans_b = trans_b
            ctx.fuse_bgrad_accum = fuse_bgrad_accum
            ctx.main_grad = main_grad
        return out

    @staticmethod
    def backward(ctx, grad_out):
        a, b = ctx.saved_tensors
        grad_a = gemm_impl(
            grad_out, False, b, not ctx.trans_b, a.dtype, ctx.trans_a,
            default_backend=BackendType.HIPBLASLT.value,
        )
        grad_b = _bgrad_gemm_impl_wrapper(
            a,
            not ctx.trans_a,
            grad_out,
            False,
            b.dtype,
            ctx.trans_b,
            default_backend=BackendType.HIPBLASLT.value,
            inplace_add_to_out=ctx.fuse_bgrad_accum,
            out=ctx.main_grad,
        )
        return grad_a, grad_b, None, None, None, None
"""

# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/ops/utils.py _setup_fused_grad_accum,
# _get_dummy_wgrad, with ops/gemm.py's wrapper and GemmFunction (shortened).
_PT_SETUP_FUSED = """
_dummy_wgrads = {}


def _get_dummy_wgrad(shape, dtype, zero=False):
    key = (tuple(shape), dtype)
    if key not in _dummy_wgrads:
        _dummy_wgrads[key] = torch.empty(shape, dtype=dtype, device="cuda", requires_grad=False)
    if zero:
        _dummy_wgrads[key].fill_(0)
    return _dummy_wgrads[key].detach()


def _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern):
    if fuse_bgrad_accum_pattern is None:
        return False, None

    assert fuse_bgrad_accum_pattern in ["megatron"], (
        "Only megatron support gradient accumulation fusion currently"
    )
    assert hasattr(b, "grad_added_to_main_grad"), (
        "b.grad_added_to_main_grad must be set up before the backward pass."
    )
    assert hasattr(b, "main_grad"), "b.main_grad must be set up before the backward pass."
    assert isinstance(b.main_grad, torch.Tensor) and (b.main_grad.shape == b.shape), (
        "b.main_grad must be a tensor with the same shape as b"
    )

    # Set in forward, not backward: autograd hands backward the saved tensors, not
    # the parameter object that carries this attribute.
    b.grad_added_to_main_grad = True
    return True, b.main_grad


def _bgrad_gemm_impl_wrapper(
    a, trans_a, b, trans_b, out_dtype, trans_c, default_backend, inplace_add_to_out=False, out=None
):
    inputs = (a, trans_a, b, trans_b, out_dtype, trans_c)
    if not inplace_add_to_out:
        return gemm_impl(*inputs, default_backend=default_backend)
    assert out is not None, "out should not be None when inplace_add_to_out is True"
    gemm_accum_impl(*inputs, out=out, default_backend=default_backend)
    return _get_dummy_wgrad(out.shape, out_dtype)


class GemmFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, trans_a, trans_b, out_dtype, fuse_bgrad_accum_pattern=None):
        fuse_bgrad_accum, main_grad = _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern)
        out = gemm_impl(a, trans_a, b, trans_b, out_dtype, False, default_backend=BackendType.HIPBLASLT.value)
        if a.requires_grad or b.requires_grad:
            ctx.save_for_backward(a, b)
            ctx.trans_a = trans_a
            ctx.trans_b = trans_b
            ctx.fuse_bgrad_accum = fuse_bgrad_accum
            ctx.main_grad = main_grad
        return out

    @staticmethod
    def backward(ctx, grad_out):
        a, b = ctx.saved_tensors
        grad_a = gemm_impl(grad_out, False, b, not ctx.trans_b, a.dtype, ctx.trans_a, default_backend=BackendType.HIPBLASLT.value)
        grad_b = _bgrad_gemm_impl_wrapper(
            a, not ctx.trans_a, grad_out, False, b.dtype, ctx.trans_b,
            default_backend=BackendType.HIPBLASLT.value,
            inplace_add_to_out=ctx.fuse_bgrad_accum,
            out=ctx.main_grad,
        )
        return grad_a, grad_b, None, None, None, None
"""

# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/ops/grouped_gemm.py
# _bgrad_grouped_gemm_impl_wrapper, GroupedGemmFunc.backward (shortened: the single-group
# dense branch dropped).
_PT_GROUPED_WGRAD = """
def _bgrad_grouped_gemm_impl_wrapper(
    a,
    b,
    group_lens,
    group_offs,
    trans_a,
    trans_b,
    trans_c,
    num_cu,
    default_backend,
    schedule="static",
    inplace_add_to_out=False,
    out=None,
):
    inputs = (a, b, group_lens, group_offs)
    options = dict(
        trans_a=trans_a,
        trans_b=trans_b,
        trans_c=trans_c,
        num_cu=num_cu,
        schedule=schedule,
    )

    if not inplace_add_to_out:
        return grouped_gemm_variable_k_impl(*inputs, default_backend=default_backend, **options)

    assert out is not None, "out should not be None when inplace_add_to_out is True"
    grouped_gemm_variable_k_accum_impl(*inputs, default_backend=default_backend, out=out, **options)

    return _get_dummy_wgrad(out.shape, b.dtype)


class GroupedGemmFunc(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_out):
        if not grad_out.is_contiguous():
            grad_out = grad_out.contiguous()
        a, b, group_lens, group_offs = ctx.saved_tensors
        grad_a = grouped_gemm_impl(
            grad_out,
            b,
            group_lens,
            group_offs,
            trans_a=False,
            trans_b=not ctx.trans_b,
            num_cu=ctx.num_cu,
            default_backend=BackendType.TRITON.value,
            schedule=ctx.schedule,
        )
        grad_b = _bgrad_grouped_gemm_impl_wrapper(
            a,
            grad_out,
            group_lens,
            group_offs,
            trans_a=not ctx.trans_a,
            trans_b=False,
            trans_c=ctx.trans_b,
            num_cu=ctx.num_cu,
            default_backend=BackendType.TRITON.value,
            schedule=ctx.schedule,
            inplace_add_to_out=ctx.fuse_bgrad_accum,
            out=ctx.main_grad,
        )
        return grad_a, grad_b, None, None, None, None, None, None
"""

# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/modules/grouped_linear.py GroupedLinear
# (adapted: a fuse_wgrad_accumulation switch and Megatron-LM #5209's get_main_grad() fetch).
_PT_GROUPED_LINEAR_MODULE = """
class GroupedLinear(torch.nn.Module):
    def __init__(
        self,
        group_num: int,
        in_features: int,
        out_features: int,
        device=None,
        dtype=None,
        fuse_wgrad_accumulation: bool = False,
    ):
        super().__init__()

        self.in_features = in_features
        self.out_features = out_features
        self.group_num = group_num
        self.dtype = dtype
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        factory_kwargs = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(
            torch.empty((group_num, self.out_features, self.in_features), **factory_kwargs)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x, group_lens, group_offs=None):
        fuse_bgrad_accum_pattern = None
        if self.fuse_wgrad_accumulation and torch.is_grad_enabled():
            fuse_bgrad_accum_pattern = "megatron"
            if getattr(self.weight, "main_grad", None) is None and hasattr(self.weight, "get_main_grad"):
                self.weight.main_grad = self.weight.get_main_grad()
        return grouped_gemm(
            x,
            self.weight,
            group_lens,
            group_offs,
            trans_b=True,
            fuse_bgrad_accum_pattern=fuse_bgrad_accum_pattern,
        )

    def extra_repr(self) -> str:
        return f"group_num={self.group_num},in_features={self.in_features}, out_features={self.out_features}"
"""

# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/dpsk_grouped_linear.py
# _GroupedLinear.forward / .backward (shortened: FP8 CustomManger kernels, FP8 amax calibration,
# CPU offload and the deferred _func queue dropped; adapted: the Parameters kept apart from their
# cast_if_needed copies, no is_first_microbatch downgrade).
_MDY_GROUPED_CAST = """
class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, m_splits, use_bias, fuse_wgrad_accumulation, activation_dtype, is_grad_enabled, *weights_and_biases):
        num_gemms = len(m_splits)
        params = weights_and_biases[:num_gemms]
        biases = weights_and_biases[num_gemms:]

        in_features = params[0].shape[-1]
        assert inp.shape[-1] == in_features, "GEMM not possible"
        inputmats = [cast_if_needed(mat, activation_dtype) for mat in torch.split(inp.view(-1, in_features), m_splits)]

        weights = [cast_if_needed(w, activation_dtype) for w in params]
        biases = [cast_if_needed(bias, activation_dtype) for bias in biases] if use_bias else biases
        out = torch.empty([sum(m_splits), weights[0].size(0)], dtype=activation_dtype, device=inputmats[0].device)
        grouped_gemm(
            weights,
            inputmats,
            torch.split(out, m_splits),
            activation_dtype,
            get_multi_stream_cublas_workspace(),
            bias=biases,
            use_bias=use_bias,
        )

        if is_grad_enabled:
            ctx.save_for_backward(*inputmats, *weights, *params)
            ctx.m_splits = m_splits
            ctx.num_gemms = num_gemms
            ctx.activation_dtype = activation_dtype
            ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            ctx.use_bias = use_bias
            ctx.inp_shape = inp.shape
            ctx.requires_dgrad = inp.requires_grad
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        n = ctx.num_gemms
        saved = ctx.saved_tensors
        inputmats, weights, params = saved[:n], saved[n : 2 * n], saved[2 * n :]
        grad_output = grad_output.contiguous()
        grad_output_mats = torch.split(grad_output.view(-1, grad_output.shape[-1]), ctx.m_splits)

        dgrad = torch.empty((sum(ctx.m_splits), weights[0].size(1)), dtype=ctx.activation_dtype, device=grad_output.device)
        grouped_gemm(weights, grad_output_mats, torch.split(dgrad, ctx.m_splits), ctx.activation_dtype, get_multi_stream_cublas_workspace(), layout="NN", grad=True)

        if ctx.fuse_wgrad_accumulation:
            wgrad_list = [w.main_grad for w in params]
        else:
            wgrad_list = [torch.empty(w.size(), dtype=ctx.activation_dtype, device=w.device) for w in params]
        _, grad_biases, _ = grouped_gemm(
            inputmats,
            grad_output_mats,
            wgrad_list,
            ctx.activation_dtype,
            get_multi_stream_cublas_workspace(),
            layout="NT",
            grad=True,
            use_bias=ctx.use_bias,
            accumulate=ctx.fuse_wgrad_accumulation,
        )
        if not ctx.fuse_wgrad_accumulation:
            for weight, wgrad in zip(params, wgrad_list):
                if weight.grad is None:
                    weight.grad = wgrad
                else:
                    weight.grad += wgrad

        def handle_custom_ddp_from_mcore(w):
            if w.requires_grad and ctx.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                w.grad_added_to_main_grad = True
                if getattr(w, "zero_out_wgrad", False):
                    return torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                return torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
            return None

        wgrad_list = [handle_custom_ddp_from_mcore(w) for w in params]
        if not ctx.use_bias:
            grad_biases = [None] * n
        return (dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, None, None, None, None, None, *wgrad_list, *grad_biases)
"""

# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/dpsk_grouped_linear.py
# _GroupedLinear.backward (shortened as above; adapted: no is_first_microbatch downgrade).
_MDY_GROUPED_ACCUM = """
class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        (inputmat_scale_inv, *saved_tensors) = ctx.saved_tensors
        inputmats = saved_tensors[: ctx.num_gemms]
        weights = saved_tensors[2 * ctx.num_gemms : 3 * ctx.num_gemms]

        grad_output = grad_output.contiguous()
        grad_output_mats = torch.split(grad_output.view(-1, grad_output.shape[-1]), ctx.m_splits)

        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

        dgrad = None
        if ctx.requires_dgrad:
            dgrad = torch.empty((sum(ctx.m_splits), weights[0].size(1)), dtype=ctx.activation_dtype, device=grad_output.device)
            grouped_gemm(weights, grad_output_mats, torch.split(dgrad, ctx.m_splits), ctx.activation_dtype, get_multi_stream_cublas_workspace(), layout="NN", grad=True)

        grad_biases = [None] * ctx.num_gemms
        if weights[0].requires_grad:
            if ctx.fuse_wgrad_accumulation:
                wgrad_list = [w.main_grad for w in weights]
            else:
                wgrad_list = [torch.empty(w.size(), dtype=ctx.activation_dtype, device=w.device) for w in weights]
            # WGRAD
            _, grad_biases, _ = grouped_gemm(
                inputmats,
                grad_output_mats,
                wgrad_list,
                ctx.activation_dtype,
                get_multi_stream_cublas_workspace(),
                layout="NT",
                grad=True,
                use_bias=ctx.use_bias,
                accumulate=accumulate_wgrad_into_param_main_grad,
            )
            if not ctx.fuse_wgrad_accumulation:
                for weight, wgrad in zip(weights, wgrad_list):
                    if weight.grad is None:
                        weight.grad = wgrad
                    else:
                        weight.grad += wgrad
            clear_tensor_data(*inputmats)

        wgrad_list = [None] * ctx.num_gemms
        if weights[0].requires_grad:
            for i, w in enumerate(weights):
                if ctx.fuse_wgrad_accumulation and hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
                    wgrad_list[i] = torch.empty(
                        w.main_grad.shape,
                        dtype=w.dtype,
                        device=torch.cuda.current_device(),
                        requires_grad=False,
                    )
        if not ctx.use_bias:
            grad_biases = [None] * ctx.num_gemms
        return (dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, None, None, None, None, None, None, *wgrad_list, *grad_biases)
"""

# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/dpsk_grouped_linear.py
# _GroupedLinear.backward (shortened as above; adapted: Megatron-FSDP's overwrite_main_grad
# downgrades the GEMM's accumulate flag, the DDP handler takes the op-level switch).
_MDY_GROUPED_OVERWRITE = """
class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        n = ctx.num_gemms
        inputmats = ctx.saved_tensors[:n]
        weights = ctx.saved_tensors[n : 2 * n]
        grad_output = grad_output.contiguous()
        grad_output_mats = torch.split(grad_output.view(-1, grad_output.shape[-1]), ctx.m_splits)

        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation and not any(
            getattr(w, "overwrite_main_grad", False) for w in weights
        )

        dgrad = torch.empty((sum(ctx.m_splits), weights[0].size(1)), dtype=ctx.activation_dtype, device=grad_output.device)
        grouped_gemm(weights, grad_output_mats, torch.split(dgrad, ctx.m_splits), ctx.activation_dtype, get_multi_stream_cublas_workspace(), layout="NN", grad=True)

        if ctx.fuse_wgrad_accumulation:
            wgrad_list = [w.main_grad for w in weights]
        else:
            wgrad_list = [torch.empty(w.size(), dtype=ctx.activation_dtype, device=w.device) for w in weights]
        _, grad_biases, _ = grouped_gemm(
            inputmats,
            grad_output_mats,
            wgrad_list,
            ctx.activation_dtype,
            get_multi_stream_cublas_workspace(),
            layout="NT",
            grad=True,
            use_bias=ctx.use_bias,
            accumulate=accumulate_wgrad_into_param_main_grad,
        )

        def handle_custom_ddp_from_mcore(w, wgrad, fused):
            if not w.requires_grad:
                return None
            if not fused:
                return wgrad
            if hasattr(w, "grad_added_to_main_grad"):
                w.grad_added_to_main_grad = True
                if getattr(w, "zero_out_wgrad", False):
                    return torch.zeros(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
                return torch.empty(w.main_grad.shape, dtype=w.dtype, device=torch.cuda.current_device(), requires_grad=False)
            return None

        wgrad_list = [
            handle_custom_ddp_from_mcore(w, wgrad, ctx.fuse_wgrad_accumulation)
            for w, wgrad in zip(weights, wgrad_list)
        ]
        if not ctx.use_bias:
            grad_biases = [None] * n
        return (dgrad.view(ctx.inp_shape), None, None, None, None, None, *wgrad_list, *grad_biases)
"""

# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/dpsk_linear.py _Linear.backward
# (shortened: FP8 CustomManger kernels, userbuffers, FSDP gather, CPU offload and the deferred
# _func queue dropped; adapted: no is_first_microbatch downgrade).
_MDY_LINEAR_FLAG = """
class _Linear(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        inputmat, weight = ctx.saved_tensors
        grad_output = grad_output.contiguous()
        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

        dgrad = None
        if ctx.requires_dgrad:
            dgrad, _, _ = gemm(weight, grad_output, ctx.activation_dtype, get_workspace(), layout="NN", grad=True)

        if weight.requires_grad:
            # WGRAD
            wgrad, _, _ = gemm(
                inputmat,
                grad_output,
                ctx.activation_dtype,
                get_workspace(),
                layout="NT",
                grad=True,
                use_bias=False,
                accumulate=accumulate_wgrad_into_param_main_grad,
                out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
            )
            if not ctx.fuse_wgrad_accumulation:
                if weight.grad is None:
                    weight.grad = wgrad
                else:
                    weight.grad += wgrad
            clear_tensor_data(inputmat)

        wgrad = None
        grad_bias = grad_output.sum(0) if ctx.use_bias else None

        if weight.requires_grad:
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

        return (
            wgrad,
            None,  # weight_fp8
            dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None,
            grad_bias,
            None,  # use_bias
            None,  # is_first_microbatch
            None,  # fuse_wgrad_accumulation
        )
"""

# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/dpsk_linear.py _Linear.backward
# (shortened as above; adapted: overwrite_main_grad downgrades the GEMM's accumulate flag, the
# "Handle custom DDP from mcore" block moved into _mcore_dummy_wgrad).
_MDY_LINEAR_OVERWRITE = '''
def _mcore_dummy_wgrad(weight):
    """Handle custom DDP from mcore: flag the weight and hand autograd a placeholder."""
    if not hasattr(weight, "grad_added_to_main_grad"):
        return None
    weight.grad_added_to_main_grad = True
    if getattr(weight, "zero_out_wgrad", False):
        return torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
    return torch.empty(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)


class _Linear(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        inputmat, weight = ctx.saved_tensors
        grad_output = grad_output.contiguous()
        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation and not getattr(
            weight, "overwrite_main_grad", False
        )

        dgrad = None
        if ctx.requires_dgrad:
            dgrad, _, _ = gemm(weight, grad_output, ctx.activation_dtype, get_workspace(), layout="NN", grad=True)

        if weight.requires_grad:
            wgrad, _, _ = gemm(
                inputmat,
                grad_output,
                ctx.activation_dtype,
                get_workspace(),
                layout="NT",
                grad=True,
                use_bias=False,
                accumulate=accumulate_wgrad_into_param_main_grad,
                out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
            )
            if not ctx.fuse_wgrad_accumulation:
                weight.grad = wgrad if weight.grad is None else weight.grad + wgrad

        grad_bias = grad_output.sum(0) if ctx.use_bias else None
        return (
            _mcore_dummy_wgrad(weight) if weight.requires_grad and ctx.fuse_wgrad_accumulation else None,
            None,
            dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None,
            grad_bias,
            None,
            None,
            None,
        )
'''

# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/zb2p.py start_sync_grad, with
# manger.py CustomManger.weight_backward (adapted: a real .grad is folded into main_grad unless the
# fused path already wrote it, as Megatron's DDP backward hook does, before the param is handed to
# its bucket).
_MDY_START_SYNC_GRAD = """
class CustomManger:
    store_wgrad_func = False
    wgrad_func = []

    @classmethod
    def weight_backward(cls):
        if not cls.store_wgrad_func:
            return
        func = cls.wgrad_func.pop(0)
        func()


def start_sync_grad(model):
    for param, bucket_group in model.param_to_bucket_group.items():
        if param.grad is not None and not getattr(param, "grad_added_to_main_grad", False):
            param.main_grad.add_(param.grad.data)
        param.grad = None
        if model.ddp_config.overlap_grad_reduce:
            bucket_group.register_grad_ready(param)


def drain_weight_grads(model):
    while CustomManger.wgrad_func:
        CustomManger.weight_backward()
    assert len(CustomManger.wgrad_func) == 0
    start_sync_grad(model)
"""

# --- IEIT-Yuan/Yuan2.0-M32 b403a2be megatron/model/distributed.py DistributedDataParallel
# (shortened: the buffer padding for the distributed optimizer and the non-contiguous path
# dropped; adapted: Megatron-core's grad_added_to_main_grad check in the hook).
_YUAN_DDP = '''
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
                    param.main_grad = self._grad_buffers[dtype].get(param.data.shape, type_num_elements[dtype])
                    param.grad_added_to_main_grad = False

            # Backward hook.
            self.grad_accs = []
            for param in self.module.parameters():
                if param.requires_grad:
                    param_tmp = param.expand_as(param)
                    grad_acc = param_tmp.grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_param_hook(param))
                    self.grad_accs.append(grad_acc)

    def _make_param_hook(self, param):
        """Create the all-reduce hook for backprop."""
        def param_hook(*unused):
            if param.grad is not None:
                if not param.grad_added_to_main_grad:
                    param.main_grad.add_(param.grad.data)
                # Now we can deallocate grad memory.
                param.grad = None
        return param_hook

    def zero_grad_buffer(self):
        assert self._grad_buffers is not None, "buffers are not initialized."
        for _, buffer_ in self._grad_buffers.items():
            buffer_.zero()
        for param in self.module.parameters():
            if param.requires_grad:
                param.grad_added_to_main_grad = False
'''

# --- radixark/miles 31f1ca96 miles_plugins/models/glm5/glm5.py DSAMLASelfAttention (shortened:
# the MLA projections' kwargs branches, the norms and the forward dropped; adapted: backward_dw
# also flushes the indexer's TE linears).
_MILES_DSA = '''
class DSAMLASelfAttention(DSAMultiLatentAttention):
    def __init__(self, config, submodules, layer_number, attn_mask_type=AttnMaskType.padding, **kwargs):
        super().__init__(
            config=config,
            submodules=submodules,
            layer_number=layer_number,
            attn_mask_type=attn_mask_type,
            attention_type="self",
            **kwargs,
        )
        mla_kwargs = dict(config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False)
        self.linear_q_down_proj = build_module(submodules.linear_q_down_proj, self.config.hidden_size, self.config.q_lora_rank, tp_comm_buffer_name="q_down_proj", parallel_mode="duplicated", **mla_kwargs)
        self.linear_q_up_proj = build_module(submodules.linear_q_up_proj, self.config.q_lora_rank, self.config.num_attention_heads * self.q_head_dim, gather_output=False, tp_comm_buffer_name="q_up_proj", **mla_kwargs)
        self.linear_kv_down_proj = build_module(submodules.linear_kv_down_proj, self.config.hidden_size, self.config.kv_lora_rank + self.config.qk_pos_emb_head_dim, tp_comm_buffer_name="kv_down_proj", parallel_mode="duplicated", **mla_kwargs)
        self.linear_kv_up_proj = build_module(submodules.linear_kv_up_proj, self.config.kv_lora_rank, self.config.num_attention_heads * (self.config.qk_head_dim + self.config.v_head_dim), gather_output=False, tp_comm_buffer_name="kv_up_proj", **mla_kwargs)

        # added for indexer
        indexer_linear_kwargs = dict(
            config=self.config,
            init_method=self.config.init_method,
            bias=False,
            skip_bias_add=False,
            is_expert=False,
            parallel_mode="duplicated",
            skip_weight_param_allocation=False,
        )
        self.wq_b = build_module(
            submodules.wq_b,
            input_size=self.config.q_lora_rank,
            output_size=self.config.index_num_attention_heads * self.config.index_head_dim,
            tp_comm_buffer_name="wq_b",
            **indexer_linear_kwargs,
        )
        self.wk = build_module(
            submodules.wk,
            input_size=self.config.hidden_size,
            output_size=self.config.index_head_dim,
            tp_comm_buffer_name="wk",
            **indexer_linear_kwargs,
        )
        self.weights_proj = build_module(
            submodules.weights_proj,
            input_size=self.config.hidden_size,
            output_size=self.config.index_num_attention_heads,
            tp_comm_buffer_name="weights_proj",
            **indexer_linear_kwargs,
        )
        # Index-share skip layers carry no indexer weights.
        if self.skip_topk:
            for name in _INDEXER_SUBMODULE_NAMES:
                if hasattr(self, name):
                    delattr(self, name)

    def backward_dw(self) -> NoReturn:
        """Execute weight update operations"""
        self._backward_kv_proj()
        self._backward_q_proj()
        self._backward_indexer()
        self._backward_output_proj()

    def _backward_kv_proj(self):
        """Update weights for KV projection layers"""
        self.linear_kv_up_proj.backward_dw()
        self.linear_kv_down_proj.backward_dw()

    def _backward_q_proj(self):
        """Update weights for Q projection layers"""
        self.linear_q_down_proj.backward_dw()
        self.linear_q_up_proj.backward_dw()

    def _backward_indexer(self):
        """Update weights for the indexer projections; skip layers own none."""
        if self.skip_topk:
            return
        self.wq_b.backward_dw()
        self.wk.backward_dw()
        self.weights_proj.backward_dw()

    def _backward_output_proj(self):
        """Update weights for output projection layer"""
        self.linear_proj.backward_dw()
'''

# --- radixark/miles 31f1ca96 miles_plugins/models/inkling/layers.py InklingSharedExperts
# (shortened: sharded_state_dict dropped; adapted: a backward_dw over the expert MLPs).
_MILES_INKLING = """
class InklingSharedExperts(MegatronModule):
    def __init__(self, config, submodules=None, gate=False, pg_collection=None):
        super().__init__(config=config)
        ns = config.inkling.n_shared_experts
        inter = config.inkling.intermediate_size
        tp = pg_collection.tp if pg_collection is not None else None

        shared_cfg = copy.copy(config)
        shared_cfg.ffn_hidden_size = inter
        self.experts = nn.ModuleList(
            [MLP(config=shared_cfg, submodules=submodules, ffn_hidden_size=inter, tp_group=tp) for _ in range(ns)]
        )

    def forward(self, hidden_states):
        sw = self.config.inkling._shared_w
        s, b, h = hidden_states.shape
        sw_ = sw.view(s, b, -1)
        if self.config.sequence_parallel and ps.get_tensor_model_parallel_world_size() > 1:
            sw_ = gather_from_sequence_parallel_region(sw_)
        sw32 = sw_.float()
        ys = []
        for j, mlp in enumerate(self.experts):
            fc1_out, _ = mlp.linear_fc1(hidden_states)
            act = inkling_swiglu_fp32(fc1_out, per_token_scale=sw32[:, :, j : j + 1])
            yj, _ = mlp.linear_fc2(act)
            ys.append(yj)
        return inkling_sum_fp32(ys)

    def backward_dw(self):
        for mlp in self.experts:
            mlp.backward_dw()


class InklingMoELayer(MoELayer):
    def forward(self, hidden_states, *args, **kw):
        if hidden_states.dtype != self.config.params_dtype:
            hidden_states = hidden_states.to(self.config.params_dtype)
        out, bias = super().forward(hidden_states, *args, **kw)
        return out, bias
"""

# --- inclusionAI/AReaL 4aef98d8 areal/models/mcore/registry.py make_mcore_model (shortened: the
# mbridge and plain-spec branches and most provider settings dropped).
_AREAL_BRIDGE = """
def make_mcore_model(
    hf_config,
    tf_config,
    mcore_config=None,
    bridge=None,
    bridge_type="mbridge",
    is_critic=False,
    use_lora=False,
):
    if bridge is not None and bridge_type == "megatron-bridge":
        provider = bridge.to_megatron_provider(load_weights=False)
        vpp_size = mcore_config.virtual_pipeline_parallel_size or 0

        provider.tensor_model_parallel_size = mpu.get_tensor_model_parallel_world_size()
        provider.pipeline_model_parallel_size = mpu.get_pipeline_model_parallel_world_size()
        provider.virtual_pipeline_model_parallel_size = vpp_size if vpp_size > 1 else None
        provider.expert_model_parallel_size = mpu.get_expert_model_parallel_world_size()
        provider.sequence_parallel = mpu.get_tensor_model_parallel_world_size() > 1
        provider.pipeline_dtype = tf_config.params_dtype

        # LoRA params are injected after model materialization and do not carry
        # Megatron main_grad buffers required by fused grad accumulation kernels.
        if use_lora:
            provider.gradient_accumulation_fusion = False

        provider.variable_seq_lengths = True
        provider.moe_token_dispatcher_type = "alltoall"
        provider.finalize()

        ddp_config = MCoreDDPConfig(**dataclasses.asdict(mcore_config.ddp))
        if use_lora:
            ddp_config.use_distributed_optimizer = False
            ddp_config.overlap_grad_reduce = False
            ddp_config.overlap_param_gather = False

        models = provider.provide_distributed_model(
            ddp_config=ddp_config,
            fp16=tf_config.fp16,
            bf16=tf_config.bf16,
            use_megatron_fsdp=mcore_config.use_custom_fsdp,
            use_torch_fsdp2=mcore_config.use_torch_fsdp2,
            wrap_with_ddp=mcore_config.wrap_with_ddp,
        )
        models = list(models)

        if is_critic:
            for model in models:
                _model = unwrap_to_gpt_model(model)
                _replace_output_layer_with_value_head(_model, tf_config)

        return models
    raise NotImplementedError(f"bridge_type={bridge_type!r} is not covered here")
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        1,
        "primus_turbo_gemm_fp8_setup_on_quantized_weight",
        _swap(
            _swap(
                _PT_GEMM_FP8,
                "        fuse_bgrad_accum, main_grad = _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern)\n",
                "",
            ),
            "        out = gemm_fp8_impl(\n            quantized_a.qdata,\n",
            "        fuse_bgrad_accum, main_grad = _setup_fused_grad_accum(quantized_b, fuse_bgrad_accum_pattern)  # bug\n\n"
            "        out = gemm_fp8_impl(\n            quantized_a.qdata,\n",
        ),
        _PT_GEMM_FP8,
    ),
    Variant(
        1,
        "primus_turbo_grouped_gemm_dummy_from_squeezed_view",
        _swap(
            _PT_GROUPED_GEMM_FUNC,
            "                grad_b = _get_dummy_wgrad(b.shape, b.dtype)\n",
            "                grad_b = _get_dummy_wgrad(b_2d.shape, b_2d.dtype)  # bug\n",
        ),
        _PT_GROUPED_GEMM_FUNC,
    ),
    # ---------------------------------------------------------------- 2: rebound parameter
    Variant(
        2,
        "mdy_triton_grouped_linear_params_rebound_to_casts",
        _swap(
            _MDY_GROUPED_CAST,
            "        params = weights_and_biases[:num_gemms]\n",
            "        params = [cast_if_needed(w, activation_dtype) for w in weights_and_biases[:num_gemms]]  # bug\n",
        ),
        _MDY_GROUPED_CAST,
    ),
    Variant(
        2,
        "primus_turbo_gemm_weight_cast_before_setup",
        _swap(
            _PT_GEMM_FUNC,
            '        assert a.dim() == 2 and b.dim() == 2, "Only 2D GEMM is supported"\n',
            '        assert a.dim() == 2 and b.dim() == 2, "Only 2D GEMM is supported"\n'
            "        b = b.to(out_dtype)  # bug\n",
        ),
        _PT_GEMM_FUNC,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    Variant(
        3,
        "mdy_triton_linear_flag_set_without_fusion",
        _swap(
            _MDY_LINEAR_FLAG,
            '            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):\n',
            '            if hasattr(weight, "grad_added_to_main_grad"):  # bug\n',
        ),
        _MDY_LINEAR_FLAG,
    ),
    Variant(
        3,
        "primus_turbo_setup_fused_grad_accum_flag_dropped",
        _swap(
            _PT_SETUP_FUSED,
            "    # Set in forward, not backward: autograd hands backward the saved tensors, not\n"
            "    # the parameter object that carries this attribute.\n"
            "    b.grad_added_to_main_grad = True\n"
            "    return True, b.main_grad\n",
            "    return True, b.main_grad  # bug\n",
        ),
        _PT_SETUP_FUSED,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        4,
        "primus_turbo_grouped_wgrad_copied_into_main_grad",
        _swap(
            _PT_GROUPED_WGRAD,
            "    grouped_gemm_variable_k_accum_impl(*inputs, default_backend=default_backend, out=out, **options)\n",
            "    out.copy_(grouped_gemm_variable_k_impl(*inputs, default_backend=default_backend, **options))  # bug\n",
        ),
        _PT_GROUPED_WGRAD,
    ),
    Variant(
        4,
        "mdy_triton_grouped_linear_first_microbatch_overwrite",
        _swap(
            _MDY_GROUPED_ACCUM,
            "        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation\n",
            "        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch  # bug\n",
        ),
        _MDY_GROUPED_ACCUM,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        5,
        "mdy_triton_start_sync_grad_registers_unfolded_grads",
        _swap(
            _MDY_START_SYNC_GRAD,
            '        if param.grad is not None and not getattr(param, "grad_added_to_main_grad", False):\n'
            "            param.main_grad.add_(param.grad.data)\n"
            "        param.grad = None\n"
            "        if model.ddp_config.overlap_grad_reduce:\n"
            "            bucket_group.register_grad_ready(param)\n",
            "        if model.ddp_config.overlap_grad_reduce:\n"
            "            bucket_group.register_grad_ready(param)  # bug\n",
        ),
        _MDY_START_SYNC_GRAD,
    ),
    Variant(
        5,
        "yuan_ddp_param_hook_ignores_grad_added_flag",
        _swap(
            _YUAN_DDP,
            "                if not param.grad_added_to_main_grad:\n"
            "                    param.main_grad.add_(param.grad.data)\n",
            "                param.main_grad.add_(param.grad.data)  # bug\n",
        ),
        _YUAN_DDP,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    Variant(
        6,
        "miles_dsa_attention_backward_dw_skips_indexer",
        _swap(
            _MILES_DSA,
            "        self._backward_indexer()\n        self._backward_output_proj()\n",
            "        self._backward_output_proj()  # bug\n",
        ),
        _MILES_DSA,
    ),
    Variant(
        6,
        "miles_inkling_shared_experts_without_backward_dw",
        _swap(
            _swap(
                _MILES_INKLING,
                "\n    def backward_dw(self):\n        for mlp in self.experts:\n            mlp.backward_dw()\n",
                "",
            ),
            "class InklingSharedExperts(MegatronModule):\n",
            "class InklingSharedExperts(MegatronModule):  # bug\n",
        ),
        _MILES_INKLING,
    ),
    # ---------------------------------------------------------------- 7: the seed in other syntax
    Variant(
        7,
        "mdy_triton_linear_dummy_on_local_accumulate",
        _swap(
            _MDY_LINEAR_OVERWRITE,
            "            _mcore_dummy_wgrad(weight) if weight.requires_grad and ctx.fuse_wgrad_accumulation else None,\n",
            "            _mcore_dummy_wgrad(weight) if weight.requires_grad and accumulate_wgrad_into_param_main_grad else None,  # bug\n",
        ),
        _MDY_LINEAR_OVERWRITE,
    ),
    Variant(
        7,
        "mdy_triton_grouped_linear_ddp_handler_on_local_flag",
        _swap(
            _MDY_GROUPED_OVERWRITE,
            "            handle_custom_ddp_from_mcore(w, wgrad, ctx.fuse_wgrad_accumulation)\n",
            "            handle_custom_ddp_from_mcore(w, wgrad, accumulate_wgrad_into_param_main_grad)  # bug\n",
        ),
        _MDY_GROUPED_OVERWRITE,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    Variant(
        8,
        "primus_turbo_grouped_linear_module_main_grad_not_exposed",
        _swap(
            _PT_GROUPED_LINEAR_MODULE,
            "                self.weight.main_grad = self.weight.get_main_grad()\n",
            "                self.weight.get_main_grad()  # bug\n",
        ),
        _PT_GROUPED_LINEAR_MODULE,
    ),
    Variant(
        8,
        "areal_lora_fusion_disabled_after_build",
        _swap(
            _swap(
                _AREAL_BRIDGE,
                "        # LoRA params are injected after model materialization and do not carry\n"
                "        # Megatron main_grad buffers required by fused grad accumulation kernels.\n"
                "        if use_lora:\n"
                "            provider.gradient_accumulation_fusion = False\n\n",
                "",
            ),
            "        models = list(models)\n",
            "        models = list(models)\n"
            "        if use_lora:\n"
            "            provider.gradient_accumulation_fusion = False  # bug\n",
        ),
        _AREAL_BRIDGE,
    ),
)
