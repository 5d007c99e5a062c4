"""Held-out variants of the twentieth blind corpus (H-blind20): one per class of issue #19,
written from other functions of the same repositories as ``variant_corpus_blind20`` (AMD-AGI
Primus-Turbo, mdy666 mdy_triton, radixark miles, IEIT-Yuan Yuan2.0-M32), to measure whether
rules tuned on the development variants still find the class.

Sources (repo, commit, path, function):
- mdy666/mdy_triton 0718faabe657b2f389e00beb31e8c66d1c122e2a
  triton_kernels/megatron_patchs/dpsk_layernorm_linear.py _LayerNormLinear.forward / .backward
  (two variants: the CPU-offload restore, and the deferred FP8 ``_func``)
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/ops/grouped_gemm.py grouped_gemm, GroupedGemmFunc.forward, with
  ops/utils.py _setup_fused_grad_accum
- IEIT-Yuan/Yuan2.0-M32 b403a2beb2746c0c923b4eb936fe1e2560c83b19
  megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.forward /
  .backward (two variants)
- radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76
  miles/backends/megatron_utils/multi_lora_optimizer.py reset_grad_metadata_keep_grads
- radixark/miles 31f1ca961a94cb860cec3b2dea34ec332bfa8f76
  miles_plugins/models/deepseek_v4/deepseek_v4.py DeepSeekV4Attention.__init__
- AMD-AGI/Primus-Turbo a6a16cdce46bd2235a248b41f501fb363c215b9b
  primus_turbo/pytorch/modules/linear.py Linear.__init__ / .forward

Conventions as in ``variant_corpus_blind20``: twins are the real code shortened; adapted where
the real code lacks the feature a class is about, or carries the bug itself:
- mdy_triton's ``_LayerNormLinear.backward`` restores a CPU-offloaded weight by wrapping the saved
  tensor in a fresh ``torch.nn.Parameter`` and re-attaching ``main_grad``, then flags that wrapper;
  the twin keeps the Parameter object on ``ctx`` in forward (``ctx.weight_object``) and restores it.
  Its deferred FP8 ``_func`` adds into ``main_grad`` whenever the weight has one; the twin does so
  only on the fused path. The is_first_microbatch downgrade and userbuffer overlap are dropped.
- Yuan2.0-M32's fused-wgrad linear returns ``None`` for the weight (its legacy DDP has no
  ``grad_added_to_main_grad``); the twins flag the weight and return a placeholder as
  Megatron-core does, one of them with Megatron-FSDP's ``overwrite_main_grad`` (the fp16 main_grad
  kernel and sequence-parallel communication dropped).
- miles' ``DeepSeekV4Attention`` replaces Megatron's attention in the TransformerLayer but has no
  ``backward_dw``; the twin adds one over its projections (the compressor and indexer are left out
  of the shortened twin).
- Primus-Turbo's Linear module never passes ``fuse_bgrad_accum_pattern``; the twin takes a
  ``fuse_wgrad_accumulation`` switch and exposes a Megatron-FSDP weight's buffer through a helper
  before the fused GEMM runs (Megatron-LM #5209).
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


# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/dpsk_layernorm_linear.py
# _LayerNormLinear (shortened; adapted: the offloaded weight restored from ctx.weight_object).
_MDY_LN_OFFLOAD = """
class _LayerNormLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, ln_weight, ln_bias, weight, bias, eps, fuse_wgrad_accumulation, cpu_offloading, activation_dtype, normalization, is_grad_enabled):
        in_features = ln_weight.numel()
        inputmat = cast_if_needed(inp.view((-1, in_features)), activation_dtype)
        ln_out, mu, rsigma = _apply_normalization(inputmat, None, ln_weight, ln_bias, eps, False, None, activation_dtype, normalization, 0, False)
        out, _, _ = gemm(cast_if_needed(weight, activation_dtype), ln_out, activation_dtype, get_workspace(), bias=bias, use_bias=bias is not None)

        if is_grad_enabled:
            ctx.save_for_backward(
                inputmat,
                ln_weight,
                mu,
                rsigma,
                weight,
                weight.main_grad if cpu_offloading and fuse_wgrad_accumulation else None,
                ln_out if weight.requires_grad else None,
            )
            if cpu_offloading and fuse_wgrad_accumulation:
                # Offloading hands backward a plain tensor: keep the Parameter, which
                # carries main_grad and the DDP flags.
                ctx.weight_object = weight
            ctx.activation_dtype = activation_dtype
            ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            ctx.cpu_offloading = cpu_offloading
            ctx.use_bias = bias is not None
            ctx.inp_shape = inp.shape
            ctx.normalization = normalization
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, *grad_outputs):
        (inputmat, ln_weight, mu, rsigma, weight, main_grad, ln_out) = ctx.saved_tensors
        if ctx.cpu_offloading and ctx.fuse_wgrad_accumulation:
            weight = ctx.weight_object
            weight.main_grad = main_grad

        grad_output = grad_outputs[0].contiguous()
        dgrad, _, _ = gemm(weight, grad_output, ctx.activation_dtype, get_workspace(), layout="NN", grad=True)

        grad_bias = None
        if weight.requires_grad:
            wgrad, grad_bias, _ = tex.gemm(
                ln_out,
                grad_output,
                ctx.activation_dtype,
                get_workspace(),
                layout="NT",
                grad=True,
                use_bias=ctx.use_bias,
                accumulate=ctx.fuse_wgrad_accumulation,
                out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
            )
            if not ctx.fuse_wgrad_accumulation:
                weight.grad = wgrad if weight.grad is None else weight.grad + wgrad

        if ctx.normalization == "RMSNorm":
            dgrad, dgamma = tex.rmsnorm_bwd(dgrad.view(inputmat.shape), inputmat, rsigma, ln_weight, ctx.bwd_ln_sm_margin, ctx.zero_centered_gamma)
            dbeta = None
        else:
            dgrad, dgamma, dbeta = tex.layernorm_bwd(dgrad.view(inputmat.shape), inputmat, mu, rsigma, ln_weight, ctx.bwd_ln_sm_margin, ctx.zero_centered_gamma)

        wgrad = None
        if weight.requires_grad and ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
            if getattr(weight, "zero_out_wgrad", False):
                wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
            else:
                wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
        return (dgrad.view(ctx.inp_shape), dgamma, dbeta, wgrad, grad_bias, None, None, None, None, None, None)
"""

# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/ops/grouped_gemm.py grouped_gemm,
# GroupedGemmFunc.forward, with ops/utils.py _setup_fused_grad_accum (shortened).
_PT_GROUPED_GEMM_API = """
def _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern):
    if fuse_bgrad_accum_pattern is None:
        return False, None
    assert fuse_bgrad_accum_pattern in ["megatron"], "Only megatron support gradient accumulation fusion currently"
    assert hasattr(b, "grad_added_to_main_grad"), "b.grad_added_to_main_grad must be set up before the backward pass."
    assert hasattr(b, "main_grad"), "b.main_grad must be set up before the backward pass."
    b.grad_added_to_main_grad = True
    return True, b.main_grad


class GroupedGemmFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, group_lens, group_offs, trans_b, num_cu, schedule="static", fuse_bgrad_accum_pattern=None):
        fuse_bgrad_accum, main_grad = _setup_fused_grad_accum(b, fuse_bgrad_accum_pattern)
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
            schedule=schedule,
        )
        ctx.save_for_backward(a, b, group_lens, group_offs)
        ctx.trans_a = False
        ctx.trans_b = trans_b
        ctx.num_cu = num_cu
        ctx.schedule = schedule
        ctx.fuse_bgrad_accum = fuse_bgrad_accum
        ctx.main_grad = main_grad
        return out


def grouped_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    group_lens: torch.Tensor,
    group_offs: torch.Tensor | None = None,
    trans_b: bool = False,
    num_cu: int | None = None,
    schedule: str = "static",
    fuse_bgrad_accum_pattern: Union[None, str] = None,
) -> torch.Tensor:
    if schedule == "work_steal" and num_cu is not None:
        raise ValueError(
            f'schedule="work_steal" requires num_cu=None, got num_cu={num_cu}. '
            'Pass num_cu=None, or use schedule="static".'
        )

    if group_offs is None:
        group_offs = group_offs_from_lens(group_lens)

    return GroupedGemmFunc.apply(
        a,
        b,
        group_lens,
        group_offs,
        trans_b,
        num_cu,
        schedule,
        fuse_bgrad_accum_pattern,
    )
"""

# --- IEIT-Yuan/Yuan2.0-M32 b403a2be megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication (shortened: sequence parallelism dropped;
# adapted: the weight is flagged and a placeholder returned for Megatron-core's DDP).
_YUAN_LINEAR = '''
class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    """See linear_with_grad_accumulation_and_async_allreduce"""

    @staticmethod
    @custom_fwd
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce, sequence_parallel):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.sequence_parallel = sequence_parallel
        output = torch.matmul(input, weight.t())
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        use_bias = ctx.use_bias
        total_input = input
        grad_input = grad_output.matmul(weight)

        grad_output = grad_output.contiguous()
        grad_output = grad_output.view(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])
        total_input = total_input.view(total_input.shape[0] * total_input.shape[1], total_input.shape[2])

        if ctx.async_grad_allreduce:
            handle = torch.distributed.all_reduce(grad_input, group=get_tensor_model_parallel_group(), async_op=True)

        if ctx.gradient_accumulation_fusion:
            if weight.main_grad.dtype == torch.float32:
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
            elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
            else:
                raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

            if hasattr(weight, "grad_added_to_main_grad"):
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

        return grad_input, grad_weight, grad_bias, None, None, None
'''

# --- mdy666/mdy_triton 0718faab triton_kernels/megatron_patchs/dpsk_layernorm_linear.py
# _LayerNormLinear.backward, the deferred _func (shortened; adapted: the FP8 path writes main_grad
# only on the fused path).
_MDY_LN_FUNC = """
class _LayerNormLinear(torch.autograd.Function):
    @staticmethod
    def backward(ctx, *grad_outputs):
        (inputmat, ln_weight, mu, rsigma, weight, ln_out) = ctx.saved_tensors
        grad_output = grad_outputs[0].contiguous()
        ln_out_total = ln_out

        qdyt, sdyt = None, None
        if ctx.manger_fp8:
            qdy, sdy, qdyt, sdyt = CustomManger.per_token_cast_to_fp8(grad_output, output_transpose=True)
            _, _, qwt, swt = CustomManger.get_fp8_weight(weight)
            dgrad = CustomManger.fp8_matmul(qdy, sdy, qwt, swt)
            dgrad = CustomManger.fix_tensor_shape(dgrad, grad_output.size(0))
            CustomManger.clear_tensor_data(qdy, sdy)
        else:
            dgrad, _, _ = gemm(weight, grad_output, ctx.activation_dtype, get_workspace(), layout="NN", grad=True)

        if weight.requires_grad:
            def _func(ln_out_total, grad_output, qdyt, sdyt, weight):
                if ctx.manger_fp8:
                    qxt, sxt = CustomManger.per_block_cast_to_fp8(ln_out_total, output_normal=False, output_transpose=True)
                    wgrad = CustomManger.fp8_matmul(qdyt, sdyt, qxt, sxt)
                    wgrad = CustomManger.fix_tensor_shape(wgrad, weight.data.size(0))
                    clear_tensor_data(qdyt, sdyt, qxt, sxt)

                    if ctx.fuse_wgrad_accumulation:
                        CustomManger.add_grad(weight.main_grad, wgrad)
                    elif weight.grad is None:
                        weight.grad = wgrad
                    else:
                        weight.grad += wgrad
                else:
                    # WGRAD
                    wgrad, _, _ = tex.gemm(
                        ln_out_total,
                        grad_output,
                        ctx.activation_dtype,
                        get_workspace(),
                        layout="NT",
                        grad=True,
                        use_bias=False,
                        accumulate=ctx.fuse_wgrad_accumulation,
                        out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
                    )
                    if not ctx.fuse_wgrad_accumulation:
                        weight.grad = wgrad if weight.grad is None else weight.grad + wgrad
                clear_tensor_data(ln_out_total)

            func = CustomManger.partial(
                _func,
                ln_out_total=ln_out_total,
                grad_output=grad_output if not ctx.manger_fp8 else None,
                qdyt=qdyt,
                sdyt=sdyt,
                weight=weight,
            )
            if CustomManger.store_wgrad_func:
                CustomManger.wgrad_func.append(func)
            else:
                func()

        dgrad, dgamma = tex.rmsnorm_bwd(dgrad.view(inputmat.shape), inputmat, rsigma, ln_weight, ctx.bwd_ln_sm_margin, ctx.zero_centered_gamma)

        wgrad = None
        if weight.requires_grad and ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
            wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
        return (dgrad.view(ctx.inp_shape), dgamma, None, wgrad, None, None, None, None, None, None, None)
"""

# --- radixark/miles 31f1ca96 miles/backends/megatron_utils/multi_lora_optimizer.py
# reset_grad_metadata_keep_grads, with its caller in miles/backends/megatron_utils/model.py.
_MILES_RESET = '''
def reset_grad_metadata_keep_grads(model_chunks) -> None:
    """Reset DDP per-iteration grad bookkeeping WITHOUT zeroing grad buffers, so per-adapter accumulation
    survives across train batches (replaces ``DistributedDataParallel.zero_grad_buffer``)."""
    for model_chunk in model_chunks:
        if getattr(model_chunk.config, "cuda_graph_impl", "none") != "transformer_engine":
            for param in model_chunk.params_with_grad:
                param.grad_added_to_main_grad = False
        for bucket_group in model_chunk.bucket_groups + model_chunk.expert_parallel_bucket_groups:
            bucket_group.reset()


def prepare_train_step(args, model, optimizer, disable_optimizer):
    if is_multi_lora_enabled(args):
        # Retain accumulated per-adapter gradients; reset only the per-iteration
        # DDP bookkeeping. Slot grads are zeroed selectively at step time.
        reset_grad_metadata_keep_grads(model)
    else:
        _zero_grads(model, optimizer, disable_optimizer)
'''

# --- radixark/miles 31f1ca96 miles_plugins/models/deepseek_v4/deepseek_v4.py DeepSeekV4Attention
# (shortened: the attention sink, compressor, indexer and forward dropped; adapted: backward_dw).
_MILES_DSV4 = """
class DeepSeekV4Attention(MegatronModule):
    def __init__(self, config, submodules=None, layer_number=1, attn_mask_type=None, attention_type=None, cp_comm_type=None, pg_collection=None):
        super().__init__(config=config)
        if pg_collection is None:
            pg_collection = ProcessGroupCollection.use_mpu_process_groups(required_pgs=["tp"])
        self.pg_collection = pg_collection
        self.tp_group = self.pg_collection.tp

        self.dim = config.hidden_size
        self.n_heads = config.num_attention_heads
        self.q_lora_rank = config.q_lora_rank
        self.o_lora_rank = config.dsv4_o_lora_rank
        self.head_dim = config.kv_lora_rank
        self.n_groups = config.dsv4_o_groups
        self.eps = config.layernorm_epsilon

        config_no_sp = copy.copy(config)
        config_no_sp.sequence_parallel = False

        self.wq_a = TELinear(
            self.dim,
            self.q_lora_rank,
            config=config,
            init_method=config.init_method,
            bias=False,
            skip_bias_add=False,
            skip_weight_param_allocation=False,
            parallel_mode="duplicated",
        )
        self.q_norm = TENorm(config_no_sp, self.q_lora_rank, eps=self.eps)
        self.wq_b = TEColumnParallelLinear(
            self.q_lora_rank,
            self.n_heads * self.head_dim,
            config=config_no_sp,
            init_method=config.init_method,
            bias=False,
            gather_output=False,
            skip_bias_add=False,
            is_expert=False,
            tp_group=self.tp_group,
        )
        self.wkv = TELinear(
            self.dim,
            self.head_dim,
            config=config,
            init_method=config.init_method,
            bias=False,
            skip_bias_add=False,
            skip_weight_param_allocation=False,
            parallel_mode="duplicated",
        )
        self.kv_norm = TENorm(config_no_sp, self.head_dim, eps=self.eps)

        for p in list(self.wq_a.parameters()) + list(self.wkv.parameters()):
            p.sequence_parallel = False

        self.wo_a = ColumnParallelLinear(
            self.n_heads * self.head_dim // self.n_groups,
            self.n_groups * self.o_lora_rank,
            config=config_no_sp,
            init_method=config.init_method,
            bias=False,
            gather_output=False,
        )
        self.wo_b = TERowParallelLinear(
            self.n_groups * self.o_lora_rank,
            self.dim,
            config=config_no_sp,
            init_method=config.init_method,
            bias=False,
            input_is_parallel=True,
            skip_bias_add=False,
            is_expert=False,
            tp_group=self.tp_group,
        )
        self.softmax_scale = self.head_dim**-0.5

    def backward_dw(self):
        for linear in (self.wq_a, self.wq_b, self.wkv, self.wo_a, self.wo_b):
            linear.backward_dw()
"""

# --- IEIT-Yuan/Yuan2.0-M32 b403a2be megatron/core/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.backward (shortened; adapted: Megatron-FSDP's
# overwrite_main_grad, the flag and placeholder set by _mcore_dummy_wgrad).
_YUAN_LINEAR_OVERWRITE = """
def _mcore_dummy_wgrad(weight, dtype):
    weight.grad_added_to_main_grad = True
    return torch.empty(weight.main_grad.shape, dtype=dtype, device=torch.cuda.current_device(), requires_grad=False)


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        use_bias = ctx.use_bias
        total_input = input
        grad_input = grad_output.matmul(weight)

        grad_output = grad_output.contiguous()
        grad_output = grad_output.view(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])
        total_input = total_input.view(total_input.shape[0] * total_input.shape[1], total_input.shape[2])

        if ctx.async_grad_allreduce:
            handle = torch.distributed.all_reduce(grad_input, group=get_tensor_model_parallel_group(), async_op=True)

        accumulate_into_main_grad = False
        if ctx.gradient_accumulation_fusion:
            accumulate_into_main_grad = not getattr(weight, "overwrite_main_grad", False)
            if accumulate_into_main_grad:
                fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
            else:
                weight.main_grad.copy_(grad_output.t().matmul(total_input))

        grad_weight = (
            _mcore_dummy_wgrad(weight, input.dtype)
            if ctx.gradient_accumulation_fusion
            else grad_output.t().matmul(total_input)
        )
        grad_bias = grad_output.sum(dim=0) if use_bias else None

        if ctx.async_grad_allreduce:
            handle.wait()

        return grad_input, grad_weight, grad_bias, None, None, None
"""

# --- AMD-AGI/Primus-Turbo a6a16cdc primus_turbo/pytorch/modules/linear.py Linear (adapted: a
# fuse_wgrad_accumulation switch and a helper that exposes Megatron-FSDP's main_grad).
_PT_LINEAR_MODULE = '''
def _expose_main_grad(param):
    """Megatron-FSDP leaves main_grad None until asked; the fused wgrad GEMM writes it directly."""
    if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
        param.main_grad = param.get_main_grad()


class Linear(torch.nn.Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, fuse_wgrad_accumulation=False):
        super().__init__()

        self.in_features = in_features
        self.out_features = out_features
        self.dtype = dtype
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        factory_kwargs = {"device": device, "dtype": dtype}

        self.weight = nn.Parameter(torch.empty((out_features, in_features), **factory_kwargs))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, **factory_kwargs))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flatten_shapes = x.shape[:-1]
        x_2d = x.reshape(-1, self.in_features)
        pattern = None
        if self.fuse_wgrad_accumulation and torch.is_grad_enabled():
            _expose_main_grad(self.weight)
            pattern = "megatron"
        out_2d = gemm(x_2d, self.weight, False, True, self.dtype, fuse_bgrad_accum_pattern=pattern)
        if self.bias is not None:
            out_2d = out_2d + self.bias
        return out_2d.view(*flatten_shapes, self.out_features)
'''


VARIANTS = (
    Variant(
        1,
        "mdy_triton_layernorm_linear_offload_rewrap_flags_stand_in",
        _swap(
            _MDY_LN_OFFLOAD,
            "            weight = ctx.weight_object\n",
            "            weight = torch.nn.Parameter(weight, weight.requires_grad)  # bug\n",
        ),
        _MDY_LN_OFFLOAD,
    ),
    Variant(
        2,
        "primus_turbo_grouped_gemm_contiguous_copy_of_weight",
        _swap(
            _PT_GROUPED_GEMM_API,
            "        group_offs = group_offs_from_lens(group_lens)\n",
            "        group_offs = group_offs_from_lens(group_lens)\n"
            "    b = b if b.is_contiguous() else b.contiguous()  # bug\n",
        ),
        _PT_GROUPED_GEMM_API,
    ),
    Variant(
        3,
        "yuan_linear_fused_wgrad_real_grad_handed_on",
        _swap(
            _YUAN_LINEAR,
            "                grad_weight = None\n",
            "                grad_weight = grad_output.t().matmul(total_input)  # bug\n",
        ),
        _YUAN_LINEAR,
    ),
    Variant(
        4,
        "mdy_triton_layernorm_linear_fp8_wgrad_slice_assigned",
        _swap(
            _MDY_LN_FUNC,
            "                        CustomManger.add_grad(weight.main_grad, wgrad)\n",
            "                        weight.main_grad[:] = wgrad  # bug\n",
        ),
        _MDY_LN_FUNC,
    ),
    Variant(
        5,
        "miles_multi_lora_reset_rearms_buckets_with_stale_flags",
        _swap(
            _MILES_RESET,
            '        if getattr(model_chunk.config, "cuda_graph_impl", "none") != "transformer_engine":\n'
            "            for param in model_chunk.params_with_grad:\n"
            "                param.grad_added_to_main_grad = False\n"
            "        for bucket_group in model_chunk.bucket_groups + model_chunk.expert_parallel_bucket_groups:\n",
            "        for bucket_group in model_chunk.bucket_groups + model_chunk.expert_parallel_bucket_groups:  # bug\n",
        ),
        _MILES_RESET,
    ),
    Variant(
        6,
        "miles_dsv4_attention_backward_dw_misses_wkv",
        _swap(
            _MILES_DSV4,
            "        for linear in (self.wq_a, self.wq_b, self.wkv, self.wo_a, self.wo_b):\n",
            "        for linear in (self.wq_a, self.wq_b, self.wo_a, self.wo_b):  # bug\n",
        ),
        _MILES_DSV4,
    ),
    Variant(
        7,
        "yuan_linear_overwrite_dummy_on_local_accumulate",
        _swap(
            _YUAN_LINEAR_OVERWRITE,
            "            if ctx.gradient_accumulation_fusion\n            else grad_output",
            "            if accumulate_into_main_grad  # bug\n            else grad_output",
        ),
        _YUAN_LINEAR_OVERWRITE,
    ),
    Variant(
        8,
        "primus_turbo_linear_module_hasattr_main_grad",
        _swap(
            _PT_LINEAR_MODULE,
            '    if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):\n',
            '    if not hasattr(param, "main_grad") and hasattr(param, "get_main_grad"):  # bug\n',
        ),
        _PT_LINEAR_MODULE,
    ),
)
