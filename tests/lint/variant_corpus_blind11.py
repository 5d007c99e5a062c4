"""The eleventh blind corpus (H-blind11): 16 variants, the first two per class 1..8 of issue #19 (the third
of each class is in variant_corpus_blind11_heldout.py), written by someone who read neither the linter nor
its tests (only CONTRACT.md, the two seed reports and issue #19's class list).

Every variant is grounded in a real function that does main_grad / weight-gradient bookkeeping, read
from a repository snapshot in /work/.mirror; the twin is that code shortened (real names, control flow
and idioms kept), the bug the same code with one regression of the variant's class, marked ``# bug``.
Where the snapshot's HEAD appears to ship a bug of the class already, the bug is the shipped code and the
twin the corrected code (said in the comment above the variant). Sources (snapshot HEAD):

- NVIDIA/TransformerEngine d0067d0: transformer_engine/pytorch/ops/basic/grouped_linear.py
  (GroupedLinear._fuser_backward_split_quantize, GroupedLinear.backward_dw),
  transformer_engine/pytorch/module/grouped_linear.py (_GroupedLinear.backward,
  _GroupedLinear._backward_grouped_tensor), transformer_engine/pytorch/ops/fused/grouped_mlp.py
  (_compute_grad_params)
- NVIDIA/Megatron-LM d98e8a6: megatron/core/extensions/transformer_engine.py
  (_make_te_ops_basic_linear_from_mcore_te_linear, TEGroupedLinear.backward_dw),
  megatron/core/transformer/moe/experts.py (register_grouped_linear_params, _ensure_main_grad),
  megatron/core/transformer/moe/shared_experts.py (_make_fused_grouped_swiglu_ops),
  megatron/core/tensor_parallel/generalized_tensor_parallelism.py (GTPShardedParam.wgrad_reduce_scatter,
  GTPShardedParam._wait_reduce_scatter), megatron/core/ssm/gated_delta_net/common.py (backward_dw)
- FlagOpen/FlagScale da4935e: hardware/Hygon_BW1000/Megatron-LM/diff.patch
  (dcu_megatron/core/tensor_parallel/layers.py, AGLinear.backward)
- alibaba/Megatron-LLaMA 25306de: megatron/core/tensor_parallel/layers.py
  (LinearWithGradAccumulationAndAsyncCommunication.backward)
- microsoft/Megatron-DeepSpeed f4157be: megatron/model/distributed.py (DistributedDataParallel._make_param_hook)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/ops/basic/grouped_linear.py, GroupedLinear._fuser_backward_split_quantize.
    # With distributed (GTP) weights the dgrad GEMM runs on the all-gathered stand-ins from _backward_weight_setup; the regression hands those
    # stand-ins to get_dummy_wgrads_for_params, so grad_added_to_main_grad is set on temporaries while the Parameters whose main_grad the
    # reduce-scatter filled keep the flag False (the DDP hook adds the dummy into main_grad).
    Variant(
        1,
        "blind11-te-opsgl-dummy-on-materialized-weights",
        bug="""
            def _fuser_backward_split_quantize(self, *, ctx, grad_output):
                num_groups = self.num_groups
                weights, is_dist_weight, dist_dgrad_weights = self._backward_weight_setup()
                device = weights[0].device
                saved_tensors = ctx.saved_tensors
                split_sizes = saved_tensors[0]
                saved_tensors = saved_tensors[5:]
                xs, saved_tensors = saved_tensors[:num_groups], saved_tensors[num_groups:]
                ws, saved_tensors = saved_tensors[:num_groups], saved_tensors[num_groups:]
                split_sizes_int = [int(s) for s in split_sizes.tolist()]
                dy = maybe_dequantize(grad_output, ctx.dtype)
                dys = torch.split(dy, split_sizes_int)

                # Distributed weights reduce their own grads (finalize); never accumulate into main_grad.
                accumulate_into_main_grad = self._accumulate_into_main_grad and not is_dist_weight
                grad_weights = [None] * num_groups
                final_weight_grads = [None] * num_groups
                if ctx.weight_requires_grad:
                    weight_shape = (self.out_features, self.in_features)
                    if accumulate_into_main_grad:
                        grad_weights = [
                            get_main_grad_from_param(w, op_label="GroupedLinear") for w in weights
                        ]
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weights[0])
                    else:
                        grad_weights_packed = torch.empty(
                            (num_groups, *weight_shape), dtype=ctx.dtype, device=device
                        )
                        grad_weights = [grad_weights_packed[i] for i in range(num_groups)]
                    final_weight_grads = list(grad_weights)

                grad_input = None
                if ctx.input_requires_grad:
                    in_shape = list(grad_output.size())[:-1] + [self.in_features]
                    grad_input = torch.empty(in_shape, dtype=ctx.dtype, device=device)
                    general_grouped_gemm(
                        dist_dgrad_weights if is_dist_weight else ws,
                        dys,
                        [grad_input],
                        [None] * num_groups,
                        ctx.dtype,
                        layout="NN",
                        m_splits=split_sizes_int,
                        use_split_accumulator=_2X_ACC_DGRAD,
                        single_output=True,
                    )

                if ctx.weight_requires_grad:
                    general_grouped_gemm(
                        xs,
                        dys,
                        grad_weights,
                        [None] * num_groups,
                        ctx.dtype,
                        layout="NT",
                        m_splits=split_sizes_int,
                        use_split_accumulator=_2X_ACC_WGRAD,
                        accumulate=accumulate_into_main_grad,
                    )
                clear_tensor_data(*xs)

                if ctx.weight_requires_grad and is_dist_weight:
                    finalize_weight_grads(weights, grad_weights)
                # Megatron-LM wgrad fusion: signal that main_grad already carries the wgrad.
                if ctx.weight_requires_grad and (is_dist_weight or self._accumulate_into_main_grad):
                    final_weight_grads = get_dummy_wgrads_for_params(
                        dist_dgrad_weights if is_dist_weight else weights  # bug
                    )
                return grad_input, [final_weight_grads], [(None,)]
        """,
        twin="""
            def _fuser_backward_split_quantize(self, *, ctx, grad_output):
                num_groups = self.num_groups
                weights, is_dist_weight, dist_dgrad_weights = self._backward_weight_setup()
                device = weights[0].device
                saved_tensors = ctx.saved_tensors
                split_sizes = saved_tensors[0]
                saved_tensors = saved_tensors[5:]
                xs, saved_tensors = saved_tensors[:num_groups], saved_tensors[num_groups:]
                ws, saved_tensors = saved_tensors[:num_groups], saved_tensors[num_groups:]
                split_sizes_int = [int(s) for s in split_sizes.tolist()]
                dy = maybe_dequantize(grad_output, ctx.dtype)
                dys = torch.split(dy, split_sizes_int)

                # Distributed weights reduce their own grads (finalize); never accumulate into main_grad.
                accumulate_into_main_grad = self._accumulate_into_main_grad and not is_dist_weight
                grad_weights = [None] * num_groups
                final_weight_grads = [None] * num_groups
                if ctx.weight_requires_grad:
                    weight_shape = (self.out_features, self.in_features)
                    if accumulate_into_main_grad:
                        grad_weights = [
                            get_main_grad_from_param(w, op_label="GroupedLinear") for w in weights
                        ]
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weights[0])
                    else:
                        grad_weights_packed = torch.empty(
                            (num_groups, *weight_shape), dtype=ctx.dtype, device=device
                        )
                        grad_weights = [grad_weights_packed[i] for i in range(num_groups)]
                    final_weight_grads = list(grad_weights)

                grad_input = None
                if ctx.input_requires_grad:
                    in_shape = list(grad_output.size())[:-1] + [self.in_features]
                    grad_input = torch.empty(in_shape, dtype=ctx.dtype, device=device)
                    general_grouped_gemm(
                        dist_dgrad_weights if is_dist_weight else ws,
                        dys,
                        [grad_input],
                        [None] * num_groups,
                        ctx.dtype,
                        layout="NN",
                        m_splits=split_sizes_int,
                        use_split_accumulator=_2X_ACC_DGRAD,
                        single_output=True,
                    )

                if ctx.weight_requires_grad:
                    general_grouped_gemm(
                        xs,
                        dys,
                        grad_weights,
                        [None] * num_groups,
                        ctx.dtype,
                        layout="NT",
                        m_splits=split_sizes_int,
                        use_split_accumulator=_2X_ACC_WGRAD,
                        accumulate=accumulate_into_main_grad,
                    )
                clear_tensor_data(*xs)

                if ctx.weight_requires_grad and is_dist_weight:
                    finalize_weight_grads(weights, grad_weights)
                # Megatron-LM wgrad fusion: signal that main_grad already carries the wgrad.
                if ctx.weight_requires_grad and (is_dist_weight or self._accumulate_into_main_grad):
                    final_weight_grads = get_dummy_wgrads_for_params(weights)
                return grad_input, [final_weight_grads], [(None,)]
        """,
    ),
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/module/grouped_linear.py, _GroupedLinear.backward.
    # The wgrad GEMM writes origin_weights' main_grad (restored from weakrefs), but the regression zips the weights restored from ctx
    # (the quantized / workspace copies) into handle_custom_ddp_from_mcore, so grad_added_to_main_grad is set on those stand-ins and the
    # Parameters' flags stay False: the DDP hook adds the returned dummy into main_grad.
    Variant(
        1,
        "blind11-te-gl-ddp-bookkeeping-on-saved-weights",
        bug="""
            @staticmethod
            def backward(ctx, grad_output, _grad_workspaces):
                saved_tensors = restore_from_func_ctx(ctx)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                biases = saved_tensors[3 * N : 4 * N]

                # Restore from weakrefs to get original weight python objects
                # (preserves attributes like main_grad, grad_added_to_main_grad, etc.)
                origin_weights = [None] * N
                main_grads = [None] * N
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref() if ref is not None else None for ref in origin_weight_refs]
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad

                grad_output_view = grad_output.contiguous().view(-1, grad_output.shape[-1])
                grad_output, grad_biases = _split_quantization._split_quantize(
                    grad_output_view, ctx.m_splits, ctx.grad_output_quantizers, ctx.activation_dtype,
                    with_quantized_output=ctx.fp8 or ctx.debug, compute_dbias=(ctx.fp8 or ctx.debug) and ctx.use_bias,
                )
                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_packed = torch.empty(
                            ctx.num_gemms, *weights[0].size(), dtype=ctx.activation_dtype, device=ctx.device
                        )
                        wgrad_list = [wgrad_packed[i] for i in range(ctx.num_gemms)]
                    grouped_gemm_wgrad = functools.partial(
                        general_grouped_gemm, quantization_params=ctx.grad_weight_quantizers,
                        out_dtype=ctx.activation_dtype, layout="NT", grad=True, m_splits=ctx.m_splits,
                        bias=biases, use_split_accumulator=_2X_ACC_WGRAD,
                        accumulate=(
                            accumulate_wgrad_into_param_main_grad
                            if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                            else False
                        ),
                    )
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype, zero=True)
                                else:
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(weight, main_grad, wgrad)
                        for weight, main_grad, wgrad in zip(weights, main_grads, wgrad_list)  # bug
                    ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
                return (None, None, None, None, None, *wgrad_list, *grad_biases)
        """,
        twin="""
            @staticmethod
            def backward(ctx, grad_output, _grad_workspaces):
                saved_tensors = restore_from_func_ctx(ctx)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                biases = saved_tensors[3 * N : 4 * N]

                # Restore from weakrefs to get original weight python objects
                # (preserves attributes like main_grad, grad_added_to_main_grad, etc.)
                origin_weights = [None] * N
                main_grads = [None] * N
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref() if ref is not None else None for ref in origin_weight_refs]
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad

                grad_output_view = grad_output.contiguous().view(-1, grad_output.shape[-1])
                grad_output, grad_biases = _split_quantization._split_quantize(
                    grad_output_view, ctx.m_splits, ctx.grad_output_quantizers, ctx.activation_dtype,
                    with_quantized_output=ctx.fp8 or ctx.debug, compute_dbias=(ctx.fp8 or ctx.debug) and ctx.use_bias,
                )
                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_packed = torch.empty(
                            ctx.num_gemms, *weights[0].size(), dtype=ctx.activation_dtype, device=ctx.device
                        )
                        wgrad_list = [wgrad_packed[i] for i in range(ctx.num_gemms)]
                    grouped_gemm_wgrad = functools.partial(
                        general_grouped_gemm, quantization_params=ctx.grad_weight_quantizers,
                        out_dtype=ctx.activation_dtype, layout="NT", grad=True, m_splits=ctx.m_splits,
                        bias=biases, use_split_accumulator=_2X_ACC_WGRAD,
                        accumulate=(
                            accumulate_wgrad_into_param_main_grad
                            if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                            else False
                        ),
                    )
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype, zero=True)
                                else:
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(weight, main_grad, wgrad)
                        for weight, main_grad, wgrad in zip(origin_weights, main_grads, wgrad_list)
                    ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
                return (None, None, None, None, None, *wgrad_list, *grad_biases)
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/extensions/transformer_engine.py, _make_te_ops_basic_linear_from_mcore_te_linear.
    # The op must alias the wrapper's Parameter (which DDP/FSDP gave main_grad, grad_added_to_main_grad and hooks); the regression
    # re-wraps it in a fresh torch.nn.Parameter, so the op with accumulate_into_main_grad=True sees a weight without main_grad and the
    # real Parameter never receives its gradient.
    Variant(
        2,
        "blind11-mlm-te-ops-basic-linear-rewrapped-weight",
        bug="""
            def _make_te_ops_basic_linear_from_mcore_te_linear(
                module: torch.nn.Module,
                *,
                module_name: str,
                output_features: Optional[int] = None,
                tensor_parallel_mode: Optional[str] = None,
                tensor_parallel_group: Optional[torch.distributed.ProcessGroup] = None,
                sequence_parallel: Optional[bool] = None,
                rng_state_tracker_function: Optional[Callable] = None,
            ) -> te.pytorch.ops.BasicLinear:
                # Construct a TE BasicLinear op that aliases a Megatron TE linear wrapper.
                _validate_te_ops_adapter_module(
                    module,
                    module_name,
                    ("config.tp_comm_overlap", "fuse_wgrad_accumulation", "ub_name", "weight"),
                )

                weight = module.weight
                userbuffers_options = None
                if module.config.tp_comm_overlap and module.ub_name is not None:
                    userbuffers_options = {"comm_name": module.ub_name}
                if output_features is None:
                    output_features = weight.size(0)
                if sequence_parallel is None:
                    sequence_parallel = False

                op = te.pytorch.ops.BasicLinear(
                    weight.size(1),
                    output_features,
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode=tensor_parallel_mode,
                    tensor_parallel_group=tensor_parallel_group,
                    sequence_parallel=sequence_parallel,
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=module.fuse_wgrad_accumulation,
                    userbuffers_options=userbuffers_options,
                )
                op.weight = torch.nn.Parameter(weight.detach(), requires_grad=weight.requires_grad)  # bug
                return op
        """,
        twin="""
            def _make_te_ops_basic_linear_from_mcore_te_linear(
                module: torch.nn.Module,
                *,
                module_name: str,
                output_features: Optional[int] = None,
                tensor_parallel_mode: Optional[str] = None,
                tensor_parallel_group: Optional[torch.distributed.ProcessGroup] = None,
                sequence_parallel: Optional[bool] = None,
                rng_state_tracker_function: Optional[Callable] = None,
            ) -> te.pytorch.ops.BasicLinear:
                # Construct a TE BasicLinear op that aliases a Megatron TE linear wrapper.
                _validate_te_ops_adapter_module(
                    module,
                    module_name,
                    ("config.tp_comm_overlap", "fuse_wgrad_accumulation", "ub_name", "weight"),
                )

                weight = module.weight
                userbuffers_options = None
                if module.config.tp_comm_overlap and module.ub_name is not None:
                    userbuffers_options = {"comm_name": module.ub_name}
                if output_features is None:
                    output_features = weight.size(0)
                if sequence_parallel is None:
                    sequence_parallel = False

                op = te.pytorch.ops.BasicLinear(
                    weight.size(1),
                    output_features,
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode=tensor_parallel_mode,
                    tensor_parallel_group=tensor_parallel_group,
                    sequence_parallel=sequence_parallel,
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=module.fuse_wgrad_accumulation,
                    userbuffers_options=userbuffers_options,
                )
                op.weight = weight
                return op
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/transformer/moe/experts.py, TEGroupedMLP._make_fused_ops (register_grouped_linear_params).
    # Discrete expert weights are registered on the meta op shell as the shared DDP Parameters; the regression registers a new
    # Parameter built from .data, which has no main_grad / grad_added_to_main_grad, so the fused wgrad goes to a copy the optimizer never sees.
    Variant(
        2,
        "blind11-mlm-experts-register-fresh-expert-param",
        bug="""
            def _make_fused_ops(self) -> torch.nn.Module:
                def register_grouped_linear_params(
                    op: torch.nn.Module,
                    linear: torch.nn.Module,
                    single_grouped_weight: bool,
                    single_grouped_bias: bool,
                ) -> None:
                    # Register real GroupedLinear params on a meta TE op shell.
                    if single_grouped_weight:
                        op.register_parameter("weight", linear.get_parameter("weight"))
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"weight{idx}", None)
                    else:
                        op.register_parameter("weight", None)
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"weight{idx}", torch.nn.Parameter(linear.get_parameter(f"weight{idx}").data))  # bug

                    if not linear.use_bias:
                        return

                    if single_grouped_bias:
                        op.register_parameter("bias", linear.get_parameter("bias"))
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"bias{idx}", None)
                    else:
                        op.register_parameter("bias", None)
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"bias{idx}", linear.get_parameter(f"bias{idx}"))

                ops = te.pytorch.ops.Sequential()
                fc1_single_grouped_weight = self.linear_fc1.single_grouped_weight
                fc1_weight_dtype = (
                    self.linear_fc1.weight.dtype
                    if fc1_single_grouped_weight
                    else self.linear_fc1.weight0.dtype
                )
                # Create a parameterless op shell and then attach the existing GroupedLinear weights below.
                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc1.num_gemms,
                    self.linear_fc1.in_features,
                    self.linear_fc1.out_features,
                    bias=self.linear_fc1.use_bias,
                    device="meta",
                    dtype=fc1_weight_dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                    single_grouped_weight=fc1_single_grouped_weight,
                    single_grouped_bias=self.linear_fc1.single_grouped_bias,
                    delay_wgrad_compute=self.linear_fc1.delay_wgrad_compute,
                )
                # In single grouped mode, clear stale per-expert meta params so TE does not reset
                # the op and replace the shared DDP parameter with a fresh one lacking main_grad.
                register_grouped_linear_params(
                    op, self.linear_fc1, fc1_single_grouped_weight, self.linear_fc1.single_grouped_bias
                )
                ops.append(op)

                # Emulate submodule pre-forward hooks
                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())
                return ops
        """,
        twin="""
            def _make_fused_ops(self) -> torch.nn.Module:
                def register_grouped_linear_params(
                    op: torch.nn.Module,
                    linear: torch.nn.Module,
                    single_grouped_weight: bool,
                    single_grouped_bias: bool,
                ) -> None:
                    # Register real GroupedLinear params on a meta TE op shell.
                    if single_grouped_weight:
                        op.register_parameter("weight", linear.get_parameter("weight"))
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"weight{idx}", None)
                    else:
                        op.register_parameter("weight", None)
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"weight{idx}", linear.get_parameter(f"weight{idx}"))

                    if not linear.use_bias:
                        return

                    if single_grouped_bias:
                        op.register_parameter("bias", linear.get_parameter("bias"))
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"bias{idx}", None)
                    else:
                        op.register_parameter("bias", None)
                        for idx in range(linear.num_gemms):
                            op.register_parameter(f"bias{idx}", linear.get_parameter(f"bias{idx}"))

                ops = te.pytorch.ops.Sequential()
                fc1_single_grouped_weight = self.linear_fc1.single_grouped_weight
                fc1_weight_dtype = (
                    self.linear_fc1.weight.dtype
                    if fc1_single_grouped_weight
                    else self.linear_fc1.weight0.dtype
                )
                # Create a parameterless op shell and then attach the existing GroupedLinear weights below.
                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc1.num_gemms,
                    self.linear_fc1.in_features,
                    self.linear_fc1.out_features,
                    bias=self.linear_fc1.use_bias,
                    device="meta",
                    dtype=fc1_weight_dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                    single_grouped_weight=fc1_single_grouped_weight,
                    single_grouped_bias=self.linear_fc1.single_grouped_bias,
                    delay_wgrad_compute=self.linear_fc1.delay_wgrad_compute,
                )
                # In single grouped mode, clear stale per-expert meta params so TE does not reset
                # the op and replace the shared DDP parameter with a fresh one lacking main_grad.
                register_grouped_linear_params(
                    op, self.linear_fc1, fc1_single_grouped_weight, self.linear_fc1.single_grouped_bias
                )
                ops.append(op)

                # Emulate submodule pre-forward hooks
                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())
                return ops
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/tensor_parallel/generalized_tensor_parallelism.py, GTPShardedParam.wgrad_reduce_scatter.
    # On the async path the reduce-scatter is still in flight and main_grad.add_ happens later in the cascade; the regression calls
    # _handle_megatron_grad_accum there, setting grad_added_to_main_grad (and firing the DDP grad-ready hook) before anything wrote main_grad.
    Variant(
        3,
        "blind11-mlm-gtp-async-rs-flag-before-add",
        bug="""
            def wgrad_reduce_scatter(self, wgrad, nvtx_label=None):
                # Reduce-scatter wgrad(s): sync for the last weight, async+deferred for others.
                batched = isinstance(wgrad, (list, tuple))
                wgrads = list(wgrad) if batched else [wgrad]
                weights = self._weights

                if GTP_CONFIG.async_reduction and self._wgrad_rs_handle is not None:
                    self._wait_reduce_scatter(finalize_grad=True)
                    # Accounted for here, so the cascade below must not skip the next one.
                    self._already_finalized = False

                if GTP_CONFIG.async_reduction and self.prev_w is not None:
                    # Async RS (not last weight -- deferred finish).
                    _, rs_handle, release_bufs = self._reduce_scatter(
                        wgrads, async_op=True, nvtx_label=nvtx_label
                    )
                    self._wgrad_rs_handle = GTPShardHandle(rs_handle, weights, reduce_scatter=True)
                    # Cannot recycle yet: the async RS is still reading these on rs_stream.
                    self._wgrad_input_bufs = release_bufs
                    result = [self._handle_megatron_grad_accum(p) for p in weights]  # bug
                    ret = tuple(result) if batched else result[0]
                else:
                    # Sync reduce-scatter: the RS is complete on return.
                    wgrads, _, release_bufs = self._reduce_scatter(
                        wgrads, async_op=False, nvtx_label=nvtx_label
                    )
                    if len(weights) == 1:
                        weights[0].main_grad.add_(wgrads[0])
                    else:
                        torch._foreach_add_([p.main_grad for p in weights], wgrads)
                    result = [self._handle_megatron_grad_accum(p) for p in weights]
                    self._wgrad_input_bufs = release_bufs
                    self._release_wgrad_scratch()
                    ret = result if batched else result[0]

                # Wait for last reduce scatter if it was async
                if GTP_CONFIG.async_reduction and self.next_w is not None:
                    waited = self.next_w._wait_reduce_scatter()
                    if not waited:
                        pass
                    elif getattr(self.next_w, "_already_finalized", False):
                        self.next_w._already_finalized = False
                    else:
                        self.next_w.rs_event.wait()
                        cache = get_global_GTP_cache()
                        next_weights = self.next_w._weights
                        wgrads = [cache.get(w._rs_ticket) for w in next_weights]
                        if len(next_weights) == 1:
                            next_weights[0].main_grad.add_(wgrads[0])
                        else:
                            torch._foreach_add_([w.main_grad for w in next_weights], wgrads)
                        for w in next_weights:
                            self._handle_megatron_grad_accum(w)
                            cache.release(w._rs_ticket)

                return ret
        """,
        twin="""
            def wgrad_reduce_scatter(self, wgrad, nvtx_label=None):
                # Reduce-scatter wgrad(s): sync for the last weight, async+deferred for others.
                batched = isinstance(wgrad, (list, tuple))
                wgrads = list(wgrad) if batched else [wgrad]
                weights = self._weights

                if GTP_CONFIG.async_reduction and self._wgrad_rs_handle is not None:
                    self._wait_reduce_scatter(finalize_grad=True)
                    # Accounted for here, so the cascade below must not skip the next one.
                    self._already_finalized = False

                if GTP_CONFIG.async_reduction and self.prev_w is not None:
                    # Async RS (not last weight -- deferred finish).
                    _, rs_handle, release_bufs = self._reduce_scatter(
                        wgrads, async_op=True, nvtx_label=nvtx_label
                    )
                    self._wgrad_rs_handle = GTPShardHandle(rs_handle, weights, reduce_scatter=True)
                    # Cannot recycle yet: the async RS is still reading these on rs_stream.
                    self._wgrad_input_bufs = release_bufs
                    ret = tuple([None] * len(wgrads)) if batched else None
                else:
                    # Sync reduce-scatter: the RS is complete on return.
                    wgrads, _, release_bufs = self._reduce_scatter(
                        wgrads, async_op=False, nvtx_label=nvtx_label
                    )
                    if len(weights) == 1:
                        weights[0].main_grad.add_(wgrads[0])
                    else:
                        torch._foreach_add_([p.main_grad for p in weights], wgrads)
                    result = [self._handle_megatron_grad_accum(p) for p in weights]
                    self._wgrad_input_bufs = release_bufs
                    self._release_wgrad_scratch()
                    ret = result if batched else result[0]

                # Wait for last reduce scatter if it was async
                if GTP_CONFIG.async_reduction and self.next_w is not None:
                    waited = self.next_w._wait_reduce_scatter()
                    if not waited:
                        pass
                    elif getattr(self.next_w, "_already_finalized", False):
                        self.next_w._already_finalized = False
                    else:
                        self.next_w.rs_event.wait()
                        cache = get_global_GTP_cache()
                        next_weights = self.next_w._weights
                        wgrads = [cache.get(w._rs_ticket) for w in next_weights]
                        if len(next_weights) == 1:
                            next_weights[0].main_grad.add_(wgrads[0])
                        else:
                            torch._foreach_add_([w.main_grad for w in next_weights], wgrads)
                        for w in next_weights:
                            self._handle_megatron_grad_accum(w)
                            cache.release(w._rs_ticket)

                return ret
        """,
    ),
    # FlagOpen/FlagScale da4935e, hardware/Hygon_BW1000/Megatron-LM/diff.patch (dcu_megatron/core/tensor_parallel/layers.py), AGLinear.backward.
    # The converse: the fused GEMM has already accumulated into weight.main_grad, but for a weight without grad_added_to_main_grad the
    # regression returns the real wgrad instead of None, so the local-DDP hook (main_grad.add_(grad)) adds it a second time.
    Variant(
        3,
        "blind11-flagscale-aglinear-real-grad-after-fused-write",
        bug="""
            @staticmethod
            @custom_bwd
            def backward(ctx, grad_output):
                input, weight = ctx.saved_tensors
                use_bias = ctx.use_bias
                grad_output_buffer = ctx.grad_output_buffer
                wgrad_deferral_limit = ctx.wgrad_deferral_limit
                transpose_weight = ctx.transpose_weight
                bw_gemm_rs_op = ctx.bw_gemm_rs_op

                wgrad_compute = weight.requires_grad
                if grad_output_buffer is not None:
                    if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                        grad_output_buffer.append(grad_output)
                        wgrad_compute = False

                world_size = get_tensor_model_parallel_world_size()
                if wgrad_compute:
                    if ctx.sequence_parallel:
                        dim_size = list(input.size())
                        dim_size[0] = dim_size[0] * world_size
                        all_gather_buffer = get_global_memory_buffer().get_tensor(dim_size, input.dtype, "mpu")
                        handle = dist_all_gather_func(
                            all_gather_buffer, input, group=get_tensor_model_parallel_group(), async_op=True
                        )
                        total_input = all_gather_buffer
                    else:
                        total_input = input

                if ctx.sequence_parallel:
                    sequence_len, batch_size, _ = grad_output.size()
                    grad_input = bw_gemm_rs_op.forward(
                        grad_output.view(sequence_len * batch_size, -1),
                        weight if transpose_weight else weight.t().contiguous(),
                        bias=None, input_scale=None, weight_scale=None, output_scale=None, fast_accum=False,
                    )
                    torch.cuda.current_stream().synchronize()
                    grad_input = grad_input.view(sequence_len // world_size, batch_size, -1)
                else:
                    grad_input = grad_output.matmul(weight)

                if ctx.sequence_parallel and wgrad_compute:
                    handle.wait()
                if wgrad_compute:
                    grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)
                if not ctx.sequence_parallel and ctx.allreduce_dgrad:
                    handle = torch.distributed.all_reduce(
                        grad_input, group=get_tensor_model_parallel_group(), async_op=True
                    )

                if ctx.gradient_accumulation_fusion:
                    if wgrad_compute:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                        elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                        else:
                            raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

                    if hasattr(weight, "grad_added_to_main_grad"):
                        if getattr(weight, "zero_out_wgrad", False):
                            grad_weight = torch.zeros(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            grad_weight = torch.empty(weight.main_grad.shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        weight.grad_added_to_main_grad = True
                    else:
                        grad_weight = grad_output.t().matmul(total_input)  # bug
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                grad_bias = grad_output.sum(dim=0) if use_bias else None

                if not ctx.sequence_parallel and ctx.allreduce_dgrad:
                    handle.wait()
                return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None, None
        """,
        twin="""
            @staticmethod
            @custom_bwd
            def backward(ctx, grad_output):
                input, weight = ctx.saved_tensors
                use_bias = ctx.use_bias
                grad_output_buffer = ctx.grad_output_buffer
                wgrad_deferral_limit = ctx.wgrad_deferral_limit
                transpose_weight = ctx.transpose_weight
                bw_gemm_rs_op = ctx.bw_gemm_rs_op

                wgrad_compute = weight.requires_grad
                if grad_output_buffer is not None:
                    if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
                        grad_output_buffer.append(grad_output)
                        wgrad_compute = False

                world_size = get_tensor_model_parallel_world_size()
                if wgrad_compute:
                    if ctx.sequence_parallel:
                        dim_size = list(input.size())
                        dim_size[0] = dim_size[0] * world_size
                        all_gather_buffer = get_global_memory_buffer().get_tensor(dim_size, input.dtype, "mpu")
                        handle = dist_all_gather_func(
                            all_gather_buffer, input, group=get_tensor_model_parallel_group(), async_op=True
                        )
                        total_input = all_gather_buffer
                    else:
                        total_input = input

                if ctx.sequence_parallel:
                    sequence_len, batch_size, _ = grad_output.size()
                    grad_input = bw_gemm_rs_op.forward(
                        grad_output.view(sequence_len * batch_size, -1),
                        weight if transpose_weight else weight.t().contiguous(),
                        bias=None, input_scale=None, weight_scale=None, output_scale=None, fast_accum=False,
                    )
                    torch.cuda.current_stream().synchronize()
                    grad_input = grad_input.view(sequence_len // world_size, batch_size, -1)
                else:
                    grad_input = grad_output.matmul(weight)

                if ctx.sequence_parallel and wgrad_compute:
                    handle.wait()
                if wgrad_compute:
                    grad_output, total_input = prepare_input_tensors_for_wgrad_compute(grad_output, total_input)
                if not ctx.sequence_parallel and ctx.allreduce_dgrad:
                    handle = torch.distributed.all_reduce(
                        grad_input, group=get_tensor_model_parallel_group(), async_op=True
                    )

                if ctx.gradient_accumulation_fusion:
                    if wgrad_compute:
                        if weight.main_grad.dtype == torch.float32:
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, weight.main_grad)
                        elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, weight.main_grad)
                        else:
                            raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")

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
                grad_bias = grad_output.sum(dim=0) if use_bias else None

                if not ctx.sequence_parallel and ctx.allreduce_dgrad:
                    handle.wait()
                return grad_input, grad_weight, grad_bias, None, None, None, None, None, None, None, None
        """,
    ),
    # alibaba/Megatron-LLaMA 25306de, megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward.
    # For an fp16 main_grad the fused kernel accumulates; the regression swaps it for torch.matmul(..., out=grad), which replaces the
    # buffer's contents without reading overwrite_main_grad: with gradient accumulation only the last microbatch survives.
    Variant(
        4,
        "blind11-llama-fp16-wgrad-matmul-out",
        bug="""
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
                # Convert the tensor shapes to 2D for execution compatibility
                grad_output = grad_output.view(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])
                total_input = total_input.view(total_input.shape[0] * total_input.shape[1], total_input.shape[2])

                if ctx.async_grad_allreduce:
                    # Asynchronous all-reduce
                    handle = torch.distributed.all_reduce(
                        grad_input, group=get_tensor_model_parallel_group(), async_op=True
                    )

                if ctx.sequence_parallel:
                    assert not ctx.async_grad_allreduce
                    dim_size = list(input.size())
                    sub_grad_input = torch.empty(dim_size, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    # reduce_scatter
                    handle = torch.distributed._reduce_scatter_base(
                        sub_grad_input, grad_input, group=get_tensor_model_parallel_group(), async_op=True
                    )

                if ctx.gradient_accumulation_fusion:
                    if hasattr(weight, "main_grad"):
                        grad = weight.main_grad
                    else:
                        grad = weight.grad
                    if grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, grad)
                    elif grad.dtype == torch.float16:
                        torch.matmul(grad_output.t(), total_input, out=grad)  # bug
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                grad_bias = grad_output.sum(dim=0) if use_bias else None

                if ctx.sequence_parallel:
                    handle.wait()
                    return sub_grad_input, grad_weight, grad_bias, None, None, None

                if ctx.async_grad_allreduce:
                    handle.wait()

                return grad_input, grad_weight, grad_bias, None, None, None
        """,
        twin="""
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
                # Convert the tensor shapes to 2D for execution compatibility
                grad_output = grad_output.view(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])
                total_input = total_input.view(total_input.shape[0] * total_input.shape[1], total_input.shape[2])

                if ctx.async_grad_allreduce:
                    # Asynchronous all-reduce
                    handle = torch.distributed.all_reduce(
                        grad_input, group=get_tensor_model_parallel_group(), async_op=True
                    )

                if ctx.sequence_parallel:
                    assert not ctx.async_grad_allreduce
                    dim_size = list(input.size())
                    sub_grad_input = torch.empty(dim_size, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
                    # reduce_scatter
                    handle = torch.distributed._reduce_scatter_base(
                        sub_grad_input, grad_input, group=get_tensor_model_parallel_group(), async_op=True
                    )

                if ctx.gradient_accumulation_fusion:
                    if hasattr(weight, "main_grad"):
                        grad = weight.main_grad
                    else:
                        grad = weight.grad
                    if grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(total_input, grad_output, grad)
                    elif grad.dtype == torch.float16:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(total_input, grad_output, grad)
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    grad_weight = None
                else:
                    grad_weight = grad_output.t().matmul(total_input)
                grad_bias = grad_output.sum(dim=0) if use_bias else None

                if ctx.sequence_parallel:
                    handle.wait()
                    return sub_grad_input, grad_weight, grad_bias, None, None, None

                if ctx.async_grad_allreduce:
                    handle.wait()

                return grad_input, grad_weight, grad_bias, None, None, None
        """,
    ),
    # microsoft/Megatron-DeepSpeed f4157be, megatron/model/distributed.py, DistributedDataParallel._make_param_hook.
    # The local-DDP hook must add each microbatch's .grad into the contiguous main_grad buffer; the regression copy_()s it, overwriting
    # the buffer on every backward (no overwrite_main_grad or sharding strategy is consulted), so accumulation keeps only the last microbatch.
    Variant(
        4,
        "blind11-mds-param-hook-copy-into-main-grad",
        bug="""
            class DistributedDataParallel(DistributedDataParallelBase):

                def _register_grad_hooks(self):
                    # Backward hook.
                    # Accumalation function for the gradients. We need
                    # to store them so they don't go out of scope.
                    self.grad_accs = []
                    # Loop over all the parameters in the model.
                    for param in self.module.parameters():
                        if param.requires_grad:
                            # Expand so we get access to grad_fn.
                            param_tmp = param.expand_as(param)
                            # Get the gradient accumulator functtion.
                            grad_acc = param_tmp.grad_fn.next_functions[0][0]
                            grad_acc.register_hook(self._make_param_hook(param))
                            self.grad_accs.append(grad_acc)

                def _make_param_hook(self, param):
                    # Create the all-reduce hook for backprop.
                    # Hook used for back-prop.
                    def param_hook(*unused):
                        # Add the gradient to the buffer.
                        if param.grad is not None:
                            # The gradient function of linear layers is fused with GEMMs
                            param.main_grad.copy_(param.grad.data)  # bug
                            # Now we can deallocate grad memory.
                            param.grad = None
                    return param_hook

                def zero_grad_buffer(self):
                    # Set the grad buffer data to zero. Needs to be called at the
                    # begining of each iteration.
                    assert self._grad_buffers is not None, "buffers are not initialized."
                    for _, buffer_ in self._grad_buffers.items():
                        buffer_.zero()
        """,
        twin="""
            class DistributedDataParallel(DistributedDataParallelBase):

                def _register_grad_hooks(self):
                    # Backward hook.
                    # Accumalation function for the gradients. We need
                    # to store them so they don't go out of scope.
                    self.grad_accs = []
                    # Loop over all the parameters in the model.
                    for param in self.module.parameters():
                        if param.requires_grad:
                            # Expand so we get access to grad_fn.
                            param_tmp = param.expand_as(param)
                            # Get the gradient accumulator functtion.
                            grad_acc = param_tmp.grad_fn.next_functions[0][0]
                            grad_acc.register_hook(self._make_param_hook(param))
                            self.grad_accs.append(grad_acc)

                def _make_param_hook(self, param):
                    # Create the all-reduce hook for backprop.
                    # Hook used for back-prop.
                    def param_hook(*unused):
                        # Add the gradient to the buffer.
                        if param.grad is not None:
                            # The gradient function of linear layers is fused with GEMMs
                            param.main_grad.add_(param.grad.data)
                            # Now we can deallocate grad memory.
                            param.grad = None
                    return param_hook

                def zero_grad_buffer(self):
                    # Set the grad buffer data to zero. Needs to be called at the
                    # begining of each iteration.
                    assert self._grad_buffers is not None, "buffers are not initialized."
                    for _, buffer_ in self._grad_buffers.items():
                        buffer_.zero()
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/tensor_parallel/generalized_tensor_parallelism.py, GTPShardedParam._wait_reduce_scatter.
    # After the deferred main_grad.add_, the real code goes through _handle_megatron_grad_accum (flag + dummy + hook); the regression
    # calls the DDP grad-accum hook directly, so it fires with grad_added_to_main_grad still False and no dummy .grad.
    Variant(
        5,
        "blind11-mlm-gtp-finalize-raw-grad-accum-hook",
        bug="""
            def _wait_reduce_scatter(self, finalize_grad=False) -> bool:
                # Wait on this weight's in-flight wgrad reduce-scatter, optionally accumulating it.
                waited = False
                rs_stream = self._cached_rs_stream
                if rs_stream is None:
                    rs_stream = get_rs_stream(self.chain_id, self.group)
                    self._cached_rs_stream = rs_stream
                with torch.cuda.stream(rs_stream):
                    if self._wgrad_rs_handle is not None:
                        waited = True
                        self._wgrad_rs_handle.wait()
                        self._record_graph_wgrad_ring_slots_ready()
                        self._wgrad_rs_handle = None
                        self.rs_event.record()
                        if finalize_grad:
                            cache = get_global_GTP_cache()
                            for w in self._weights:
                                wgrad_rs = cache.get(w._rs_ticket)
                                w.main_grad.add_(wgrad_rs)
                                cache.release(w._rs_ticket)
                            # Fire grad-ready AFTER all adds (separate loop so a bucket-completing
                            # grad-ready can't dispatch the RS before a sibling's add).
                            for w in self._weights:
                                if getattr(w, "_grad_accum_hook", None) is not None:
                                    w._grad_accum_hook()  # bug
                            self._already_finalized = True
                self._release_wgrad_scratch()
                return waited
        """,
        twin="""
            def _wait_reduce_scatter(self, finalize_grad=False) -> bool:
                # Wait on this weight's in-flight wgrad reduce-scatter, optionally accumulating it.
                waited = False
                rs_stream = self._cached_rs_stream
                if rs_stream is None:
                    rs_stream = get_rs_stream(self.chain_id, self.group)
                    self._cached_rs_stream = rs_stream
                with torch.cuda.stream(rs_stream):
                    if self._wgrad_rs_handle is not None:
                        waited = True
                        self._wgrad_rs_handle.wait()
                        self._record_graph_wgrad_ring_slots_ready()
                        self._wgrad_rs_handle = None
                        self.rs_event.record()
                        if finalize_grad:
                            cache = get_global_GTP_cache()
                            for w in self._weights:
                                wgrad_rs = cache.get(w._rs_ticket)
                                w.main_grad.add_(wgrad_rs)
                                cache.release(w._rs_ticket)
                            # Fire grad-ready AFTER all adds (separate loop so a bucket-completing
                            # grad-ready can't dispatch the RS before a sibling's add).
                            for w in self._weights:
                                self._handle_megatron_grad_accum(w)
                            self._already_finalized = True
                self._release_wgrad_scratch()
                return waited
        """,
    ),
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/ops/basic/grouped_linear.py, GroupedLinear (fuser backward tail,
    # backward_dw, _trigger_wgrad_accumulation_and_reduce_hooks). The regression tests delay_wgrad first, so with delay + accumulate_into_main_grad
    # the op returns None grads and never sets grad_added_to_main_grad; backward_dw then fires the reduce hooks with neither flag nor dummy.
    Variant(
        5,
        "blind11-te-opsgl-delay-branch-before-dummy",
        bug="""
            class GroupedLinear(BasicOperation):

                def _trigger_wgrad_accumulation_and_reduce_hooks(self) -> None:
                    for hook in self.wgrad_accumulation_and_reduce_hooks:
                        hook()

                def need_backward_dw(self) -> bool:
                    return self.wgrad_store is not None and self.wgrad_store.delay_wgrad_compute()

                def backward_dw(self) -> None:
                    # Execute delayed weight gradient grouped GEMMs (see delay_wgrad_compute).
                    if not self.need_backward_dw():
                        return
                    if self.wgrad_store.context is None or self.wgrad_store.context.empty():
                        return
                    _, tensor_list = self.wgrad_store.pop()
                    grad_weights = tensor_list[2]
                    clear_tensor_data(*tensor_list[0])
                    if self._accumulate_into_main_grad:
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    for group_idx in range(self.num_groups):
                        w = getattr(self, f"weight{group_idx}")
                        w.grad = grad_weights[group_idx].to(w.dtype)
                    self._trigger_wgrad_accumulation_and_reduce_hooks()

                def _finish_wgrad(self, ctx, weights, xs, dys, grad_weights, split_sizes_int, is_dist_weight, accumulate_into_main_grad):
                    num_groups = self.num_groups
                    final_weight_grads = list(grad_weights)
                    delay_wgrad = (
                        ctx.weight_requires_grad
                        and self.wgrad_store is not None
                        and self.wgrad_store.delay_wgrad_compute()
                    )
                    if ctx.weight_requires_grad:
                        grouped_gemm_wgrad = functools.partial(
                            general_grouped_gemm,
                            quantization_params=[None] * num_groups,
                            out_dtype=ctx.dtype,
                            layout="NT",
                            m_splits=split_sizes_int,
                            use_split_accumulator=_2X_ACC_WGRAD,
                            accumulate=accumulate_into_main_grad,
                        )
                        if delay_wgrad:
                            self.wgrad_store.put([xs, dys, grad_weights], grouped_gemm_wgrad)
                        else:
                            grouped_gemm_wgrad(xs, dys, grad_weights)
                    if not delay_wgrad:
                        clear_tensor_data(*xs)
                    # Megatron-LM wgrad fusion: regardless of overwrite vs. accumulate,
                    # signal that main_grad already carries the wgrad and replace
                    # .grad with a dummy so DDP/FSDP hooks won't add .grad into main_grad again.
                    if ctx.weight_requires_grad and delay_wgrad:  # bug
                        final_weight_grads = [None] * num_groups
                    elif ctx.weight_requires_grad and (is_dist_weight or self._accumulate_into_main_grad):
                        final_weight_grads = get_dummy_wgrads_for_params(weights)
                    return final_weight_grads
        """,
        twin="""
            class GroupedLinear(BasicOperation):

                def _trigger_wgrad_accumulation_and_reduce_hooks(self) -> None:
                    for hook in self.wgrad_accumulation_and_reduce_hooks:
                        hook()

                def need_backward_dw(self) -> bool:
                    return self.wgrad_store is not None and self.wgrad_store.delay_wgrad_compute()

                def backward_dw(self) -> None:
                    # Execute delayed weight gradient grouped GEMMs (see delay_wgrad_compute).
                    if not self.need_backward_dw():
                        return
                    if self.wgrad_store.context is None or self.wgrad_store.context.empty():
                        return
                    _, tensor_list = self.wgrad_store.pop()
                    grad_weights = tensor_list[2]
                    clear_tensor_data(*tensor_list[0])
                    if self._accumulate_into_main_grad:
                        self._trigger_wgrad_accumulation_and_reduce_hooks()
                        return
                    for group_idx in range(self.num_groups):
                        w = getattr(self, f"weight{group_idx}")
                        w.grad = grad_weights[group_idx].to(w.dtype)
                    self._trigger_wgrad_accumulation_and_reduce_hooks()

                def _finish_wgrad(self, ctx, weights, xs, dys, grad_weights, split_sizes_int, is_dist_weight, accumulate_into_main_grad):
                    num_groups = self.num_groups
                    final_weight_grads = list(grad_weights)
                    delay_wgrad = (
                        ctx.weight_requires_grad
                        and self.wgrad_store is not None
                        and self.wgrad_store.delay_wgrad_compute()
                    )
                    if ctx.weight_requires_grad:
                        grouped_gemm_wgrad = functools.partial(
                            general_grouped_gemm,
                            quantization_params=[None] * num_groups,
                            out_dtype=ctx.dtype,
                            layout="NT",
                            m_splits=split_sizes_int,
                            use_split_accumulator=_2X_ACC_WGRAD,
                            accumulate=accumulate_into_main_grad,
                        )
                        if delay_wgrad:
                            self.wgrad_store.put([xs, dys, grad_weights], grouped_gemm_wgrad)
                        else:
                            grouped_gemm_wgrad(xs, dys, grad_weights)
                    if not delay_wgrad:
                        clear_tensor_data(*xs)
                    # Megatron-LM wgrad fusion: regardless of overwrite vs. accumulate,
                    # signal that main_grad already carries the wgrad and replace
                    # .grad with a dummy so DDP/FSDP hooks won't add .grad into main_grad again.
                    if ctx.weight_requires_grad and (is_dist_weight or self._accumulate_into_main_grad):
                        final_weight_grads = get_dummy_wgrads_for_params(weights)
                    elif ctx.weight_requires_grad and delay_wgrad:
                        final_weight_grads = [None] * num_groups
                    return final_weight_grads
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/extensions/transformer_engine.py, TEGroupedLinear.__init__ / backward_dw.
    # The TE base is built with delay_wgrad_compute when either config.delay_wgrad_compute or overlap_dispatch_backward_with_experts_wgrad
    # is on; the regression gates backward_dw on config.delay_wgrad_compute alone, so with the overlap option the base defers wgrad and
    # backward_dw never computes it.
    Variant(
        6,
        "blind11-mlm-tegroupedlinear-backward-dw-config-flag",
        bug="""
            class TEGroupedLinear(te.pytorch.GroupedLinear):

                def __init__(
                    self,
                    num_gemms: int,
                    input_size: int,
                    output_size: int,
                    *,
                    parallel_mode: Optional[str],
                    config: ModelParallelConfig,
                    init_method: Callable,
                    bias: bool,
                    skip_bias_add: bool,
                    is_expert: bool = False,
                    tp_comm_buffer_name: Optional[str] = None,
                ):
                    self.config = config
                    self.te_return_bias = skip_bias_add and bias
                    self.is_first_microbatch = True

                    extra_kwargs = _get_extra_te_kwargs(config)

                    self.delay_wgrad_compute = (
                        self.config.delay_wgrad_compute
                        or self.config.overlap_dispatch_backward_with_experts_wgrad
                    )
                    if self.delay_wgrad_compute:
                        if is_te_min_version("2.3.0"):
                            extra_kwargs["delay_wgrad_compute"] = True
                        else:
                            raise RuntimeError(
                                "Only TE with version >=2.3.0 supports delay_wgrad_compute now."
                            )

                    extra_kwargs["ub_name"] = tp_comm_buffer_name
                    super().__init__(
                        num_gemms=num_gemms,
                        in_features=input_size,
                        out_features=output_size,
                        sequence_parallel=self.config.sequence_parallel,
                        fuse_wgrad_accumulation=self.config.gradient_accumulation_fusion,
                        init_method=condition_init_method(config, init_method),
                        bias=bias,
                        return_bias=self.te_return_bias,
                        parallel_mode=parallel_mode,
                        **extra_kwargs,
                    )

                def backward_dw(self):
                    # Compute weight gradients during the backward pass
                    # if delay_wgrad_compute is enabled.
                    if self.config.delay_wgrad_compute:  # bug
                        super().backward_dw()
        """,
        twin="""
            class TEGroupedLinear(te.pytorch.GroupedLinear):

                def __init__(
                    self,
                    num_gemms: int,
                    input_size: int,
                    output_size: int,
                    *,
                    parallel_mode: Optional[str],
                    config: ModelParallelConfig,
                    init_method: Callable,
                    bias: bool,
                    skip_bias_add: bool,
                    is_expert: bool = False,
                    tp_comm_buffer_name: Optional[str] = None,
                ):
                    self.config = config
                    self.te_return_bias = skip_bias_add and bias
                    self.is_first_microbatch = True

                    extra_kwargs = _get_extra_te_kwargs(config)

                    self.delay_wgrad_compute = (
                        self.config.delay_wgrad_compute
                        or self.config.overlap_dispatch_backward_with_experts_wgrad
                    )
                    if self.delay_wgrad_compute:
                        if is_te_min_version("2.3.0"):
                            extra_kwargs["delay_wgrad_compute"] = True
                        else:
                            raise RuntimeError(
                                "Only TE with version >=2.3.0 supports delay_wgrad_compute now."
                            )

                    extra_kwargs["ub_name"] = tp_comm_buffer_name
                    super().__init__(
                        num_gemms=num_gemms,
                        in_features=input_size,
                        out_features=output_size,
                        sequence_parallel=self.config.sequence_parallel,
                        fuse_wgrad_accumulation=self.config.gradient_accumulation_fusion,
                        init_method=condition_init_method(config, init_method),
                        bias=bias,
                        return_bias=self.te_return_bias,
                        parallel_mode=parallel_mode,
                        **extra_kwargs,
                    )

                def backward_dw(self):
                    # Compute weight gradients during the backward pass
                    # if delay_wgrad_compute is enabled.
                    if self.delay_wgrad_compute:
                        super().backward_dw()
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/ssm/gated_delta_net/common.py, _GDNBase.backward_dw / _backward_out_proj.
    # Both projections are TE linears built with the layer config (delay_wgrad_compute); the copy-paste regression makes _backward_out_proj
    # call in_proj.backward_dw, so out_proj's delayed wgrad is never computed and its main_grad never written.
    Variant(
        6,
        "blind11-mlm-gdn-backward-dw-out-proj-copy-paste",
        bug="""
            class _GDNBase(MegatronModule):

                def __init__(self, config, submodules, layer_number=None, bias=False, name=None):
                    super().__init__(config)
                    self.in_proj = build_module(
                        submodules.in_proj,
                        self.hidden_size,
                        self.in_proj_dim,
                        config=self.config,
                        init_method=self.config.init_method,
                        gather_output=False,
                        bias=bias,
                        skip_bias_add=False,
                        is_expert=False,
                        tp_comm_buffer_name="fc1",
                        tp_group=self.pg_collection.tp,
                    )
                    self.out_proj = build_module(
                        submodules.out_proj,
                        self.v_dim,
                        self.hidden_size,
                        config=self.config,
                        init_method=self.config.output_layer_init_method,
                        bias=bias,
                        input_is_parallel=True,
                        skip_bias_add=True,
                        is_expert=False,
                        tp_comm_buffer_name="fc2",
                        tp_group=self.pg_collection.tp,
                    )

                def backward_dw(self):
                    # Execute weight gradient computation for all linear layers.
                    self._backward_in_proj()
                    self._backward_out_proj()

                def _backward_in_proj(self):
                    # Computes weight gradients of input projection layer.
                    self.in_proj.backward_dw()

                def _backward_out_proj(self):
                    # Computes weight gradients of output projection layer.
                    self.in_proj.backward_dw()  # bug
        """,
        twin="""
            class _GDNBase(MegatronModule):

                def __init__(self, config, submodules, layer_number=None, bias=False, name=None):
                    super().__init__(config)
                    self.in_proj = build_module(
                        submodules.in_proj,
                        self.hidden_size,
                        self.in_proj_dim,
                        config=self.config,
                        init_method=self.config.init_method,
                        gather_output=False,
                        bias=bias,
                        skip_bias_add=False,
                        is_expert=False,
                        tp_comm_buffer_name="fc1",
                        tp_group=self.pg_collection.tp,
                    )
                    self.out_proj = build_module(
                        submodules.out_proj,
                        self.v_dim,
                        self.hidden_size,
                        config=self.config,
                        init_method=self.config.output_layer_init_method,
                        bias=bias,
                        input_is_parallel=True,
                        skip_bias_add=True,
                        is_expert=False,
                        tp_comm_buffer_name="fc2",
                        tp_group=self.pg_collection.tp,
                    )

                def backward_dw(self):
                    # Execute weight gradient computation for all linear layers.
                    self._backward_in_proj()
                    self._backward_out_proj()

                def _backward_in_proj(self):
                    # Computes weight gradients of input projection layer.
                    self.in_proj.backward_dw()

                def _backward_out_proj(self):
                    # Computes weight gradients of output projection layer.
                    self.out_proj.backward_dw()
        """,
    ),
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/module/grouped_linear.py, _GroupedLinear._backward_grouped_tensor.
    # The seed shape in a comprehension's conditional expression: the dummy/flag path is chosen on the local `accumulate` (False under
    # overwrite_main_grad or on the first microbatch) instead of ctx.fuse_wgrad_accumulation, so main_grad itself is returned as .grad.
    Variant(
        7,
        "blind11-te-gl-grouped-tensor-dummy-on-local-accumulate",
        bug="""
            @staticmethod
            def _backward_grouped_tensor(ctx, grad_output):
                N = ctx.num_gemms
                saved_tensors = restore_from_func_ctx(ctx)
                grouped_x = saved_tensors[0]
                # grad_output split/quantized into a GroupedTensor (elided)
                grouped_dy = grad_output
                num_weight_args = 1 if ctx.single_grouped_weight else N
                origin_weights = [None] * num_weight_args
                main_grads = [None] * num_weight_args
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref() if ref is not None else None for ref in origin_weight_refs]
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_output = main_grads
                        wgrad_list = main_grads
                    else:
                        wgrad_packed = torch.empty(
                            N, ctx.weights_shape_0, ctx.weights_shape_1, dtype=ctx.activation_dtype, device=ctx.device
                        )
                        wgrad_output = [wgrad_packed[i] for i in range(N)]
                        wgrad_list = wgrad_output

                    accumulate = (
                        accumulate_wgrad_into_param_main_grad
                        if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                        else False
                    )

                    def grouped_gemm_wgrad(inputmats, grad_output_mats, grad_weights):
                        general_grouped_gemm_for_grouped_tensor(
                            inputmats, grad_output_mats, grad_weights, layout="NT",
                            use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate,
                        )
                        return None, [None] * N, None

                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([grouped_x, grouped_dy, wgrad_output], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(grouped_x, grouped_dy, wgrad_output)

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype, zero=True)
                                else:
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(weight, main_grad, wgrad) if accumulate else wgrad  # bug
                        for weight, main_grad, wgrad in zip(origin_weights, main_grads, wgrad_list)
                    ]
                else:
                    wgrad_list = [None] * num_weight_args
                return (None, None, None, None, None, *wgrad_list)
        """,
        twin="""
            @staticmethod
            def _backward_grouped_tensor(ctx, grad_output):
                N = ctx.num_gemms
                saved_tensors = restore_from_func_ctx(ctx)
                grouped_x = saved_tensors[0]
                # grad_output split/quantized into a GroupedTensor (elided)
                grouped_dy = grad_output
                num_weight_args = 1 if ctx.single_grouped_weight else N
                origin_weights = [None] * num_weight_args
                main_grads = [None] * num_weight_args
                if ctx.fuse_wgrad_accumulation and ctx.weights_requires_grad:
                    origin_weight_refs = ctx.origin_weight_refs
                    ctx.origin_weight_refs = None
                    origin_weights = [ref() if ref is not None else None for ref in origin_weight_refs]
                    main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                    for origin_weight, main_grad in zip(origin_weights, main_grads):
                        if main_grad is not None:
                            origin_weight.main_grad = main_grad

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_output = main_grads
                        wgrad_list = main_grads
                    else:
                        wgrad_packed = torch.empty(
                            N, ctx.weights_shape_0, ctx.weights_shape_1, dtype=ctx.activation_dtype, device=ctx.device
                        )
                        wgrad_output = [wgrad_packed[i] for i in range(N)]
                        wgrad_list = wgrad_output

                    accumulate = (
                        accumulate_wgrad_into_param_main_grad
                        if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                        else False
                    )

                    def grouped_gemm_wgrad(inputmats, grad_output_mats, grad_weights):
                        general_grouped_gemm_for_grouped_tensor(
                            inputmats, grad_output_mats, grad_weights, layout="NT",
                            use_split_accumulator=_2X_ACC_WGRAD, accumulate=accumulate,
                        )
                        return None, [None] * N, None

                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([grouped_x, grouped_dy, wgrad_output], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(grouped_x, grouped_dy, wgrad_output)

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype, zero=True)
                                else:
                                    wgrad = get_dummy_wgrad(list(main_grad.shape), weight.dtype)
                            elif ctx.fuse_wgrad_accumulation:
                                wgrad = None
                        else:
                            wgrad = None
                        return wgrad

                    wgrad_list = [
                        handle_custom_ddp_from_mcore(weight, main_grad, wgrad)
                        for weight, main_grad, wgrad in zip(origin_weights, main_grads, wgrad_list)
                    ]
                else:
                    wgrad_list = [None] * num_weight_args
                return (None, None, None, None, None, *wgrad_list)
        """,
    ),
    # NVIDIA/TransformerEngine d0067d0, transformer_engine/pytorch/ops/fused/grouped_mlp.py, _compute_grad_params.
    # The if/elif that returns dummy wgrads is folded into one conditional expression on the local accumulate_into_main_grad (turned off
    # by get_accumulate_flag_in_param under overwrite_main_grad) instead of fc_op._accumulate_into_main_grad: in overwrite mode main_grad
    # itself is handed back as .grad and grad_added_to_main_grad is never set.
    Variant(
        7,
        "blind11-te-fused-grouped-mlp-dummy-condexpr-local-flag",
        bug="""
            def _compute_grad_params(fc_op, ctx, num_groups, weight_shape, grouped_x, grouped_dy, dtype, device, bias_grads, bias_grad_packed, label=""):
                # Compute weight gradients and build grad_params for a GroupedLinear layer.
                accumulate_into_main_grad = False
                op_label = f"Grouped MLP fused backward ({label})" if label else "Grouped MLP fused backward"
                weights = fc_op._get_weight_tensors()
                is_dist_weight = is_distributed_weight(weights[0])
                w_list = [None] * num_groups
                if ctx.weight_requires_grad:
                    # Distributed weight: the GEMM produces full-sized wgrads but main_grad is sharded,
                    # so use a full-sized scratch buffer (the reduce-scatter below lands it in main_grad).
                    if fc_op._accumulate_into_main_grad and not is_dist_weight:
                        w_list = [get_main_grad_from_param(w, op_label=op_label) for w in weights]
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weights[0])
                    else:
                        wgrad_packed = torch.empty(num_groups, *weight_shape, dtype=dtype, device=device)
                        w_list = [wgrad_packed[i] for i in range(num_groups)]
                    wgrad_output = w_list

                if ctx.weight_requires_grad:
                    # Launch or defer the GEMM
                    delay_wgrad = fc_op.wgrad_store is not None and fc_op.wgrad_store.delay_wgrad_compute()
                    if is_dist_weight and delay_wgrad:
                        raise RuntimeError(
                            "distributed-weight fused grouped-MLP requires delay_wgrad_compute=False."
                        )
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
                        if is_dist_weight:
                            finalize_weight_grads(weights, w_list)

                    # Need to return dummy wgrads for Megatron-LM wgrad fusion if grad is already added
                    # (wgrad fusion, or the distributed-weight reduce-scatter above) so it doesn't double-add.
                    w_list = (
                        get_dummy_wgrads_for_params(weights)
                        if accumulate_into_main_grad or is_dist_weight  # bug
                        else ([None] * num_groups if delay_wgrad else w_list)
                    )

                # Assemble grad_params in parameter registration order.
                if not fc_op.has_bias:
                    return w_list
                if fc_op.single_grouped_bias:
                    return w_list + [bias_grad_packed]
                bias_list = bias_grads if bias_grads is not None else [None] * num_groups
                return w_list + bias_list
        """,
        twin="""
            def _compute_grad_params(fc_op, ctx, num_groups, weight_shape, grouped_x, grouped_dy, dtype, device, bias_grads, bias_grad_packed, label=""):
                # Compute weight gradients and build grad_params for a GroupedLinear layer.
                accumulate_into_main_grad = False
                op_label = f"Grouped MLP fused backward ({label})" if label else "Grouped MLP fused backward"
                weights = fc_op._get_weight_tensors()
                is_dist_weight = is_distributed_weight(weights[0])
                w_list = [None] * num_groups
                if ctx.weight_requires_grad:
                    # Distributed weight: the GEMM produces full-sized wgrads but main_grad is sharded,
                    # so use a full-sized scratch buffer (the reduce-scatter below lands it in main_grad).
                    if fc_op._accumulate_into_main_grad and not is_dist_weight:
                        w_list = [get_main_grad_from_param(w, op_label=op_label) for w in weights]
                        accumulate_into_main_grad = get_accumulate_flag_in_param(weights[0])
                    else:
                        wgrad_packed = torch.empty(num_groups, *weight_shape, dtype=dtype, device=device)
                        w_list = [wgrad_packed[i] for i in range(num_groups)]
                    wgrad_output = w_list

                if ctx.weight_requires_grad:
                    # Launch or defer the GEMM
                    delay_wgrad = fc_op.wgrad_store is not None and fc_op.wgrad_store.delay_wgrad_compute()
                    if is_dist_weight and delay_wgrad:
                        raise RuntimeError(
                            "distributed-weight fused grouped-MLP requires delay_wgrad_compute=False."
                        )
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
                        if is_dist_weight:
                            finalize_weight_grads(weights, w_list)

                    # Need to return dummy wgrads for Megatron-LM wgrad fusion if grad is already added
                    # (wgrad fusion, or the distributed-weight reduce-scatter above) so it doesn't double-add.
                    if fc_op._accumulate_into_main_grad or is_dist_weight:
                        w_list = get_dummy_wgrads_for_params(weights)
                    elif delay_wgrad:
                        w_list = [None] * num_groups

                # Assemble grad_params in parameter registration order.
                if not fc_op.has_bias:
                    return w_list
                if fc_op.single_grouped_bias:
                    return w_list + [bias_grad_packed]
                bias_list = bias_grads if bias_grads is not None else [None] * num_groups
                return w_list + bias_list
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/transformer/moe/shared_experts.py, FusedSharedExpertMLP._make_fused_grouped_swiglu_ops.
    # NOTE: the bug is (as far as I can tell) the code at this HEAD: TE GroupedLinear ops get accumulate_into_main_grad on the wrapper
    # weights, and the pre-forward hook only replays source hooks, never fetching get_main_grad() (Megatron-FSDP leaves main_grad None).
    # The twin adds the fetch the way experts.py's _ensure_main_grad does.
    Variant(
        8,
        "blind11-mlm-shared-experts-fused-swiglu-no-main-grad",
        bug="""
            def _make_fused_grouped_swiglu_ops(self) -> torch.nn.Module:
                # Construct the grouped-linear shared-expert MLP operations.
                ops = te.pytorch.ops.Sequential()
                tp_world_size = get_pg_size(self.tp_group)
                rng_state_tracker_function = None
                if get_cuda_rng_tracker().is_initialized():
                    rng_state_tracker_function = get_cuda_rng_tracker

                glu_interleave_size = self.config.moe_shared_expert_glu_interleave_size
                fc1_weight = self.linear_fc1.weight
                op = te.pytorch.ops.GroupedLinear(
                    num_groups=1,
                    in_features=fc1_weight.size(1),
                    out_features=fc1_weight.size(0) * tp_world_size,
                    device="meta",
                    dtype=fc1_weight.dtype,
                    bias=False,
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,  # bug
                )
                op.weight0 = fc1_weight
                op._glu_interleave_size = glu_interleave_size
                ops.append(op)

                activation_op = te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=glu_interleave_size)
                activation_op._grouped_mlp_unit_activation_scale = True
                ops.append(activation_op)

                fc2_weight = self.linear_fc2.weight
                op = te.pytorch.ops.GroupedLinear(
                    num_groups=1,
                    in_features=fc2_weight.size(1),
                    out_features=fc2_weight.size(0),
                    device="meta",
                    dtype=fc2_weight.dtype,
                    bias=False,
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,  # bug
                )
                op.weight0 = fc2_weight
                ops.append(op)

                def forward_pre_hook(_module, *_) -> None:
                    for source in (self.linear_fc1, self.linear_fc2):
                        for hook_id, hook in list(source._forward_pre_hooks.items()):
                            if hook_id in source._forward_pre_hooks_with_kwargs:
                                ret = hook(source, (), {})
                            else:
                                ret = hook(source, ())
                            if ret is not None:
                                raise RuntimeError(
                                    f"{self.__class__.__name__} cannot replay a pre-forward hook "
                                    f"on {source.__class__.__name__} that modifies inputs."
                                )

                ops.register_forward_pre_hook(forward_pre_hook)
                return ops
        """,
        twin="""
            def _make_fused_grouped_swiglu_ops(self) -> torch.nn.Module:
                # Construct the grouped-linear shared-expert MLP operations.
                ops = te.pytorch.ops.Sequential()
                tp_world_size = get_pg_size(self.tp_group)
                rng_state_tracker_function = None
                if get_cuda_rng_tracker().is_initialized():
                    rng_state_tracker_function = get_cuda_rng_tracker

                glu_interleave_size = self.config.moe_shared_expert_glu_interleave_size
                fc1_weight = self.linear_fc1.weight
                op = te.pytorch.ops.GroupedLinear(
                    num_groups=1,
                    in_features=fc1_weight.size(1),
                    out_features=fc1_weight.size(0) * tp_world_size,
                    device="meta",
                    dtype=fc1_weight.dtype,
                    bias=False,
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                )
                op.weight0 = fc1_weight
                op._glu_interleave_size = glu_interleave_size
                ops.append(op)

                activation_op = te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=glu_interleave_size)
                activation_op._grouped_mlp_unit_activation_scale = True
                ops.append(activation_op)

                fc2_weight = self.linear_fc2.weight
                op = te.pytorch.ops.GroupedLinear(
                    num_groups=1,
                    in_features=fc2_weight.size(1),
                    out_features=fc2_weight.size(0),
                    device="meta",
                    dtype=fc2_weight.dtype,
                    bias=False,
                    rng_state_tracker_function=rng_state_tracker_function,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                )
                op.weight0 = fc2_weight
                ops.append(op)

                def forward_pre_hook(_module, *_) -> None:
                    for source in (self.linear_fc1, self.linear_fc2):
                        for hook_id, hook in list(source._forward_pre_hooks.items()):
                            if hook_id in source._forward_pre_hooks_with_kwargs:
                                ret = hook(source, (), {})
                            else:
                                ret = hook(source, ())
                            if ret is not None:
                                raise RuntimeError(
                                    f"{self.__class__.__name__} cannot replay a pre-forward hook "
                                    f"on {source.__class__.__name__} that modifies inputs."
                                )
                        # Expose FSDP main_grad buffers required by TE fused wgrad accumulation.
                        if getattr(source, "fuse_wgrad_accumulation", False):
                            for param in source.parameters(recurse=False):
                                get_main_grad = getattr(param, "get_main_grad", None)
                                if get_main_grad is not None and getattr(param, "main_grad", None) is None:
                                    param.main_grad = get_main_grad()

                ops.register_forward_pre_hook(forward_pre_hook)
                return ops
        """,
    ),
    # NVIDIA/Megatron-LM d98e8a6, megatron/core/transformer/moe/experts.py, TEGroupedMLP._ensure_main_grad (and its pre-forward hook).
    # Megatron-FSDP keeps the main_grad attribute but resets it to None between steps; the regression only fetches get_main_grad() when
    # the attribute is missing, so from the second step on the fused TE ops run with main_grad None.
    Variant(
        8,
        "blind11-mlm-experts-ensure-main-grad-hasattr",
        bug="""
            class TEGroupedMLP(MegatronModule):

                def _make_fused_impl_pre_forward_hook(self) -> Callable:
                    # Make function that calls submodule pre-forward callback hooks.
                    def forward_pre_hook(module, *_) -> None:
                        for submodule in chain(self.linear_fc1.modules(), self.linear_fc2.modules()):
                            for hook in submodule._forward_pre_hooks.values():
                                # Assume that hook does not interact with input
                                ret = hook(submodule, None)
                                if ret is not None:
                                    raise RuntimeError(
                                        f"Applying a fused implementation for {self.__class__.__name__}, "
                                        f"but a {submodule.__class__.__name__} submodule "
                                        "has a pre-forward hook that modifies the input tensor."
                                    )
                        self._ensure_main_grad_for_fused_impl()

                    return forward_pre_hook

                @staticmethod
                def _ensure_main_grad(linear_module: torch.nn.Module) -> None:
                    # Expose FSDP main_grad buffers required by TE fused wgrad accumulation.
                    if not getattr(linear_module, "fuse_wgrad_accumulation", False):
                        return
                    for param in linear_module.parameters(recurse=False):
                        get_main_grad = getattr(param, "get_main_grad", None)
                        if get_main_grad is not None and not hasattr(param, "main_grad"):  # bug
                            param.main_grad = get_main_grad()
                        if hasattr(param, "overwrite_main_grad"):
                            param.overwrite_main_grad = True

                def _ensure_main_grad_for_fused_impl(self) -> None:
                    # Expose wrapper parameter main_grad buffers before TE fused ops run.
                    self._ensure_main_grad(self.linear_fc1)
                    self._ensure_main_grad(self.linear_fc2)
        """,
        twin="""
            class TEGroupedMLP(MegatronModule):

                def _make_fused_impl_pre_forward_hook(self) -> Callable:
                    # Make function that calls submodule pre-forward callback hooks.
                    def forward_pre_hook(module, *_) -> None:
                        for submodule in chain(self.linear_fc1.modules(), self.linear_fc2.modules()):
                            for hook in submodule._forward_pre_hooks.values():
                                # Assume that hook does not interact with input
                                ret = hook(submodule, None)
                                if ret is not None:
                                    raise RuntimeError(
                                        f"Applying a fused implementation for {self.__class__.__name__}, "
                                        f"but a {submodule.__class__.__name__} submodule "
                                        "has a pre-forward hook that modifies the input tensor."
                                    )
                        self._ensure_main_grad_for_fused_impl()

                    return forward_pre_hook

                @staticmethod
                def _ensure_main_grad(linear_module: torch.nn.Module) -> None:
                    # Expose FSDP main_grad buffers required by TE fused wgrad accumulation.
                    if not getattr(linear_module, "fuse_wgrad_accumulation", False):
                        return
                    for param in linear_module.parameters(recurse=False):
                        get_main_grad = getattr(param, "get_main_grad", None)
                        if get_main_grad is not None and getattr(param, "main_grad", None) is None:
                            param.main_grad = get_main_grad()
                        if hasattr(param, "overwrite_main_grad"):
                            param.overwrite_main_grad = True

                def _ensure_main_grad_for_fused_impl(self) -> None:
                    # Expose wrapper parameter main_grad buffers before TE fused ops run.
                    self._ensure_main_grad(self.linear_fc1)
                    self._ensure_main_grad(self.linear_fc2)
        """,
    ),
)
