"""The seventh blind corpus, development part (H-blind7): realistic variants, each grounded in
a real function read from a public repository (Transformer Engine, Megatron-LM, MindSpeed,
MindSpeed-LLM, Primus, Megatron-Bridge, ROCm's TE, HYGON's Megatron-LM fork), shortened; the
twin is the real code and the bug one plausible regression of its class. Written by someone
who read neither the linter nor its tests. Blind with the rules at abc398d and at 15020db: 3 of
24 caught, 3 twins reported (each a line judged true at the head it comes from:
``twin_findings``). The last variant of each class is held out of the repository while the
rules are changed for these 16. After the round: 14 of 16 here (the two misses say why, in
``unseen``), 1 of the 8 held out. Same format as variant_corpus.py.
"""

# ruff: noqa: E501  (the variants keep the long lines of the real code they come from)

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    Variant(
        1,
        "blind7-te-grouped-fwd-weakref-to-fp8-workspace",
        """
        class _GroupedLinear(torch.autograd.Function):
            '''GroupedLinear semi-top level module
            Calls custom cuda extensions.
            '''

            @staticmethod
            def forward(
                ctx,
                inp: torch.Tensor,
                m_splits: List[int],
                non_tensor_args: Tuple,
                *weights_and_biases,
            ) -> torch.Tensor:
                # pylint: disable=missing-function-docstring
                (
                    is_first_microbatch,
                    fp8,
                    input_quantizers,
                    weight_quantizers,
                    fuse_wgrad_accumulation,
                    cpu_offloading,
                    activation_dtype,
                    is_grad_enabled,
                    wgrad_store,
                    skip_fp8_weight_update,
                    cache_weight,
                    weight_workspaces,
                ) = non_tensor_args
                num_gemms = len(m_splits)
                weights = weights_and_biases[:num_gemms]
                biases = weights_and_biases[num_gemms:]
                device = inp.device
                in_features = weights[0].shape[-1]

                inp_view = inp.reshape(-1, in_features)
                inputmats, _ = _split_quantization._split_quantize(
                    inp_view,
                    m_splits,
                    input_quantizers,
                    activation_dtype,
                    with_quantized_output=fp8,
                    disable_bulk_allocation=cpu_offloading,
                )

                # Initialize weights
                weights_fp8: list
                new_workspaces = [None] * num_gemms
                if fp8:
                    weights_fp8 = []
                    update_ws = is_first_microbatch is None or is_first_microbatch
                    for i in range(num_gemms):
                        weight_fp8, new_workspaces[i] = quantize_weight(
                            tensor=weights[i],
                            quantizer=weight_quantizers[i],
                            workspace=weight_workspaces[i] if weight_workspaces else None,
                            update_workspace=update_ws,
                            skip_update_flag=skip_fp8_weight_update,
                            workspace_dtype=activation_dtype,
                            cache=cache_weight,
                        )
                        weights_fp8.append(weight_fp8)
                else:
                    weights_fp8 = [cast_if_needed(weight, activation_dtype) for weight in weights]

                out = torch.empty(
                    (sum(m_splits), weights_fp8[0].size(0)), dtype=activation_dtype, device=device
                )
                general_grouped_gemm(
                    weights_fp8,
                    inputmats,
                    [out],
                    None,
                    activation_dtype,
                    single_output=True,
                    m_splits=m_splits,
                    bias=biases,
                    use_bias=biases[0] is not None,
                )

                if is_grad_enabled:
                    tensors_to_save, tensor_objects = prepare_for_saving(
                        *inputmats,
                        *weights_fp8,
                        *biases,
                    )
                    ctx.save_for_backward(*tensors_to_save)
                    ctx.tensor_objects = tensor_objects

                    ctx.weights_requires_grad = weights[0].requires_grad
                    if fuse_wgrad_accumulation and ctx.weights_requires_grad:
                        # Keep weakrefs to weights to preserve attributes like main_grad
                        # when we need to modify the weight python objects
                        ctx.origin_weight_refs = [weakref.ref(w) for w in weights_fp8]  # bug
                        ctx.origin_weights_overwrite_main_grad = getattr(
                            weights[0], "overwrite_main_grad", False
                        )
                        if hasattr(weights[0], "__fsdp_param__"):
                            # MCore FSDP creates main_grad lazily before backward
                            ctx.main_grad_funcs = [weights[i].get_main_grad for i in range(num_gemms)]
                        else:
                            ctx.main_grad_funcs = [
                                lambda j=i: weights[j].main_grad for i in range(num_gemms)
                            ]
                    ctx.device = device
                    ctx.m_splits = m_splits
                    ctx.num_gemms = num_gemms
                    ctx.activation_dtype = activation_dtype
                    ctx.fp8 = fp8
                    ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                    ctx.cpu_offloading = cpu_offloading
                    ctx.is_first_microbatch = is_first_microbatch
                    ctx.wgrad_store = wgrad_store

                return out.view(-1, *inp.shape[1:-1], out.shape[-1]), new_workspaces
        """,
        """
        class _GroupedLinear(torch.autograd.Function):
            '''GroupedLinear semi-top level module
            Calls custom cuda extensions.
            '''

            @staticmethod
            def forward(
                ctx,
                inp: torch.Tensor,
                m_splits: List[int],
                non_tensor_args: Tuple,
                *weights_and_biases,
            ) -> torch.Tensor:
                # pylint: disable=missing-function-docstring
                (
                    is_first_microbatch,
                    fp8,
                    input_quantizers,
                    weight_quantizers,
                    fuse_wgrad_accumulation,
                    cpu_offloading,
                    activation_dtype,
                    is_grad_enabled,
                    wgrad_store,
                    skip_fp8_weight_update,
                    cache_weight,
                    weight_workspaces,
                ) = non_tensor_args
                num_gemms = len(m_splits)
                weights = weights_and_biases[:num_gemms]
                biases = weights_and_biases[num_gemms:]
                device = inp.device
                in_features = weights[0].shape[-1]

                inp_view = inp.reshape(-1, in_features)
                inputmats, _ = _split_quantization._split_quantize(
                    inp_view,
                    m_splits,
                    input_quantizers,
                    activation_dtype,
                    with_quantized_output=fp8,
                    disable_bulk_allocation=cpu_offloading,
                )

                # Initialize weights
                weights_fp8: list
                new_workspaces = [None] * num_gemms
                if fp8:
                    weights_fp8 = []
                    update_ws = is_first_microbatch is None or is_first_microbatch
                    for i in range(num_gemms):
                        weight_fp8, new_workspaces[i] = quantize_weight(
                            tensor=weights[i],
                            quantizer=weight_quantizers[i],
                            workspace=weight_workspaces[i] if weight_workspaces else None,
                            update_workspace=update_ws,
                            skip_update_flag=skip_fp8_weight_update,
                            workspace_dtype=activation_dtype,
                            cache=cache_weight,
                        )
                        weights_fp8.append(weight_fp8)
                else:
                    weights_fp8 = [cast_if_needed(weight, activation_dtype) for weight in weights]

                out = torch.empty(
                    (sum(m_splits), weights_fp8[0].size(0)), dtype=activation_dtype, device=device
                )
                general_grouped_gemm(
                    weights_fp8,
                    inputmats,
                    [out],
                    None,
                    activation_dtype,
                    single_output=True,
                    m_splits=m_splits,
                    bias=biases,
                    use_bias=biases[0] is not None,
                )

                if is_grad_enabled:
                    tensors_to_save, tensor_objects = prepare_for_saving(
                        *inputmats,
                        *weights_fp8,
                        *biases,
                    )
                    ctx.save_for_backward(*tensors_to_save)
                    ctx.tensor_objects = tensor_objects

                    ctx.weights_requires_grad = weights[0].requires_grad
                    if fuse_wgrad_accumulation and ctx.weights_requires_grad:
                        # Keep weakrefs to weights to preserve attributes like main_grad
                        # when we need to modify the weight python objects
                        ctx.origin_weight_refs = [weakref.ref(w) for w in weights]
                        ctx.origin_weights_overwrite_main_grad = getattr(
                            weights[0], "overwrite_main_grad", False
                        )
                        if hasattr(weights[0], "__fsdp_param__"):
                            # MCore FSDP creates main_grad lazily before backward
                            ctx.main_grad_funcs = [weights[i].get_main_grad for i in range(num_gemms)]
                        else:
                            ctx.main_grad_funcs = [
                                lambda j=i: weights[j].main_grad for i in range(num_gemms)
                            ]
                    ctx.device = device
                    ctx.m_splits = m_splits
                    ctx.num_gemms = num_gemms
                    ctx.activation_dtype = activation_dtype
                    ctx.fp8 = fp8
                    ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                    ctx.cpu_offloading = cpu_offloading
                    ctx.is_first_microbatch = is_first_microbatch
                    ctx.wgrad_store = wgrad_store

                return out.view(-1, *inp.shape[1:-1], out.shape[-1]), new_workspaces
        """,
    ),
    Variant(
        1,
        "blind7-mindspeed-gmm-add-into-saved-weight",
        """
        class BaseGMMFunction(torch.autograd.Function):
            @classmethod
            def gmm_apply(cls, x, weight, bias, tokens_per_expert, weight_param):
                # Accept tokens_per_expert and normalize it into group_list.
                if isinstance(tokens_per_expert, list):
                    tokens_per_expert = torch.tensor(tokens_per_expert, device='npu', dtype=torch.int64)
                group_list = torch.cumsum(tokens_per_expert, dim=0)
                return cls.apply(x, weight, bias, group_list, weight_param)

            @classmethod
            def forward(cls, ctx, x, weight, bias, group_list, weight_param, group_list_type=0):
                if isinstance(group_list, torch.Tensor):
                    if group_list.device.type == 'cpu':
                        group_list = group_list.npu()
                else:
                    group_list = torch.tensor(group_list, device='npu', dtype=torch.int64)
                output = cls.op_forward(ctx, x, weight, group_list, group_list_type, bias=bias)
                ctx.save_for_backward(x, weight, group_list)
                ctx.weight_param = weight_param
                ctx.group_list_type = group_list_type
                return output[0]

            @classmethod
            def backward(cls, ctx, grad_outputs):
                x, weight, group_list = ctx.saved_tensors
                weight_param = ctx.weight_param
                group_list_type = ctx.group_list_type
                dx = cls.op_dx(ctx, grad_outputs, weight, group_list, group_list_type)[0]
                if get_args().gemm_gradient_accumulation_fusion:
                    grad_weights = cls.op_gmm_add(x, weight, grad_outputs, group_list, weight_param)
                else:
                    grad_weights = cls.op_dw(ctx, x, grad_outputs, group_list, group_list_type)[0]
                return dx, grad_weights, None, None, None, None

            @classmethod
            def op_gmm_add(cls, x, weight, grad, group_list, weight_param):
                cls.gmm_add_impl(x, grad, group_list, weight, weight.shape)  # bug
                if hasattr(weight_param, 'grad_added_to_main_grad'):
                    if getattr(weight, 'zero_out_wgrad', False):
                        grad_weights = torch.zeros(
                            weight.shape,
                            dtype=x.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    else:
                        grad_weights = torch.empty(
                            weight.shape,
                            dtype=x.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    weight_param.grad_added_to_main_grad = True
                else:
                    grad_weights = None
                return grad_weights

            @classmethod
            def gmm_add_impl(cls, x, grad, group_list, weight_param, weight_shape):
                npu_groupmatmul_add_fp32(x, grad, group_list, weight_param.main_grad)
        """,
        """
        class BaseGMMFunction(torch.autograd.Function):
            @classmethod
            def gmm_apply(cls, x, weight, bias, tokens_per_expert, weight_param):
                # Accept tokens_per_expert and normalize it into group_list.
                if isinstance(tokens_per_expert, list):
                    tokens_per_expert = torch.tensor(tokens_per_expert, device='npu', dtype=torch.int64)
                group_list = torch.cumsum(tokens_per_expert, dim=0)
                return cls.apply(x, weight, bias, group_list, weight_param)

            @classmethod
            def forward(cls, ctx, x, weight, bias, group_list, weight_param, group_list_type=0):
                if isinstance(group_list, torch.Tensor):
                    if group_list.device.type == 'cpu':
                        group_list = group_list.npu()
                else:
                    group_list = torch.tensor(group_list, device='npu', dtype=torch.int64)
                output = cls.op_forward(ctx, x, weight, group_list, group_list_type, bias=bias)
                ctx.save_for_backward(x, weight, group_list)
                ctx.weight_param = weight_param
                ctx.group_list_type = group_list_type
                return output[0]

            @classmethod
            def backward(cls, ctx, grad_outputs):
                x, weight, group_list = ctx.saved_tensors
                weight_param = ctx.weight_param
                group_list_type = ctx.group_list_type
                dx = cls.op_dx(ctx, grad_outputs, weight, group_list, group_list_type)[0]
                if get_args().gemm_gradient_accumulation_fusion:
                    grad_weights = cls.op_gmm_add(x, weight, grad_outputs, group_list, weight_param)
                else:
                    grad_weights = cls.op_dw(ctx, x, grad_outputs, group_list, group_list_type)[0]
                return dx, grad_weights, None, None, None, None

            @classmethod
            def op_gmm_add(cls, x, weight, grad, group_list, weight_param):
                cls.gmm_add_impl(x, grad, group_list, weight_param, weight.shape)
                if hasattr(weight_param, 'grad_added_to_main_grad'):
                    if getattr(weight, 'zero_out_wgrad', False):
                        grad_weights = torch.zeros(
                            weight.shape,
                            dtype=x.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    else:
                        grad_weights = torch.empty(
                            weight.shape,
                            dtype=x.dtype,
                            device=torch.cuda.current_device(),
                            requires_grad=False,
                        )
                    weight_param.grad_added_to_main_grad = True
                else:
                    grad_weights = None
                return grad_weights

            @classmethod
            def gmm_add_impl(cls, x, grad, group_list, weight_param, weight_shape):
                npu_groupmatmul_add_fp32(x, grad, group_list, weight_param.main_grad)
        """,
    ),
    Variant(
        2,
        "blind7-mindspeed-ctx-weight-detached-copy",
        """
        from functools import wraps


        def linear_forward_main_grad_wrapper(forward_func):
            @wraps(forward_func)
            def linear_forward_main_grad(ctx,
                                         inputs,
                                         weight,
                                         bias,
                                         gradient_accumulation_fusion,
                                         allreduce_dgrad,
                                         sequence_parallel,
                                         grad_output_buffer,
                                         wgrad_deferral_limit,
                                         ):
                output = forward_func(ctx,
                                      inputs,
                                      weight,
                                      bias,
                                      gradient_accumulation_fusion,
                                      allreduce_dgrad,
                                      sequence_parallel,
                                      grad_output_buffer,
                                      wgrad_deferral_limit,
                                      )
                ctx.weight = weight.detach()  # bug
                return output

            return linear_forward_main_grad


        def linear_backward_main_grad_wrapper(backward_func):
            @wraps(backward_func)
            def linear_backward_main_grad(ctx, grad_output):
                class NewCtx:
                    pass
                new_ctx = NewCtx()
                inputs, _ = ctx.saved_tensors
                for key in dir(ctx):
                    if key == 'saved_tensors':
                        setattr(new_ctx, 'saved_tensors', (inputs, ctx.weight))
                    elif key.startswith('__') or key == 'saved_variables':
                        continue
                    else:
                        try:
                            getattr(ctx, key)
                        except AttributeError:
                            continue
                        setattr(new_ctx, key, getattr(ctx, key))
                return backward_func(new_ctx, grad_output)

            return linear_backward_main_grad
        """,
        """
        from functools import wraps


        def linear_forward_main_grad_wrapper(forward_func):
            @wraps(forward_func)
            def linear_forward_main_grad(ctx,
                                         inputs,
                                         weight,
                                         bias,
                                         gradient_accumulation_fusion,
                                         allreduce_dgrad,
                                         sequence_parallel,
                                         grad_output_buffer,
                                         wgrad_deferral_limit,
                                         ):
                output = forward_func(ctx,
                                      inputs,
                                      weight,
                                      bias,
                                      gradient_accumulation_fusion,
                                      allreduce_dgrad,
                                      sequence_parallel,
                                      grad_output_buffer,
                                      wgrad_deferral_limit,
                                      )
                ctx.weight = weight
                return output

            return linear_forward_main_grad


        def linear_backward_main_grad_wrapper(backward_func):
            @wraps(backward_func)
            def linear_backward_main_grad(ctx, grad_output):
                class NewCtx:
                    pass
                new_ctx = NewCtx()
                inputs, _ = ctx.saved_tensors
                for key in dir(ctx):
                    if key == 'saved_tensors':
                        setattr(new_ctx, 'saved_tensors', (inputs, ctx.weight))
                    elif key.startswith('__') or key == 'saved_variables':
                        continue
                    else:
                        try:
                            getattr(ctx, key)
                        except AttributeError:
                            continue
                        setattr(new_ctx, key, getattr(ctx, key))
                return backward_func(new_ctx, grad_output)

            return linear_backward_main_grad
        """,
    ),
    Variant(
        2,
        "blind7-megatron-fused-ops-rewrap-grouped-weight",
        """
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self) -> torch.nn.Module:
                '''Construct fused module for FC1, activation, and FC2.'''

                assert HAVE_TE, "_make_fused_ops requires Transformer Engine."

                def register_grouped_linear_params(
                    op: torch.nn.Module,
                    linear: torch.nn.Module,
                    single_grouped_weight: bool,
                    single_grouped_bias: bool,
                ) -> None:
                    '''Register real GroupedLinear params on a meta TE op shell.'''
                    if single_grouped_weight:
                        op.register_parameter("weight", torch.nn.Parameter(linear.get_parameter("weight").data))  # bug
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

                # Container for fusible ops
                ops = te.pytorch.ops.Sequential()

                fc1_single_grouped_weight = self.linear_fc1.single_grouped_weight
                fc1_weight_dtype = (
                    self.linear_fc1.weight.dtype
                    if fc1_single_grouped_weight
                    else self.linear_fc1.weight0.dtype
                )
                fc2_single_grouped_weight = self.linear_fc2.single_grouped_weight
                fc2_weight_dtype = (
                    self.linear_fc2.weight.dtype
                    if fc2_single_grouped_weight
                    else self.linear_fc2.weight0.dtype
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
                register_grouped_linear_params(
                    op, self.linear_fc1, fc1_single_grouped_weight, self.linear_fc1.single_grouped_bias
                )
                ops.append(op)

                ops.append(
                    te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size)
                )

                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc2.num_gemms,
                    self.linear_fc2.in_features,
                    self.linear_fc2.out_features,
                    bias=self.linear_fc2.use_bias,
                    device="meta",
                    dtype=fc2_weight_dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                    single_grouped_weight=fc2_single_grouped_weight,
                    single_grouped_bias=self.linear_fc2.single_grouped_bias,
                    delay_wgrad_compute=self.linear_fc2.delay_wgrad_compute,
                )
                register_grouped_linear_params(
                    op, self.linear_fc2, fc2_single_grouped_weight, self.linear_fc2.single_grouped_bias
                )
                ops.append(op)

                # Emulate submodule pre-forward hooks
                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())

                return ops
        """,
        """
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self) -> torch.nn.Module:
                '''Construct fused module for FC1, activation, and FC2.'''

                assert HAVE_TE, "_make_fused_ops requires Transformer Engine."

                def register_grouped_linear_params(
                    op: torch.nn.Module,
                    linear: torch.nn.Module,
                    single_grouped_weight: bool,
                    single_grouped_bias: bool,
                ) -> None:
                    '''Register real GroupedLinear params on a meta TE op shell.'''
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

                # Container for fusible ops
                ops = te.pytorch.ops.Sequential()

                fc1_single_grouped_weight = self.linear_fc1.single_grouped_weight
                fc1_weight_dtype = (
                    self.linear_fc1.weight.dtype
                    if fc1_single_grouped_weight
                    else self.linear_fc1.weight0.dtype
                )
                fc2_single_grouped_weight = self.linear_fc2.single_grouped_weight
                fc2_weight_dtype = (
                    self.linear_fc2.weight.dtype
                    if fc2_single_grouped_weight
                    else self.linear_fc2.weight0.dtype
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
                register_grouped_linear_params(
                    op, self.linear_fc1, fc1_single_grouped_weight, self.linear_fc1.single_grouped_bias
                )
                ops.append(op)

                ops.append(
                    te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size)
                )

                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc2.num_gemms,
                    self.linear_fc2.in_features,
                    self.linear_fc2.out_features,
                    bias=self.linear_fc2.use_bias,
                    device="meta",
                    dtype=fc2_weight_dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                    single_grouped_weight=fc2_single_grouped_weight,
                    single_grouped_bias=self.linear_fc2.single_grouped_bias,
                    delay_wgrad_compute=self.linear_fc2.delay_wgrad_compute,
                )
                register_grouped_linear_params(
                    op, self.linear_fc2, fc2_single_grouped_weight, self.linear_fc2.single_grouped_bias
                )
                ops.append(op)

                # Emulate submodule pre-forward hooks
                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())

                return ops
        """,
    ),
    Variant(
        3,
        "blind7-primus-bridge-fuse-flag-from-config",
        """
        def _bridge_weight_grad(
            x: torch.Tensor,
            weight: torch.nn.Parameter,
            weight_buffer: PrimusTurboQuantizedTensorPair,
            fuse_wgrad_accum: bool = False,
        ):
            '''Bridge quantized weight gradient to the original weight's ``main_grad``.

            With ``fuse_wgrad_accum`` the gemm's own beta=1 epilogue accumulates into
            ``weight.main_grad`` instead, so the add here is skipped and only the flag and the
            dummy wgrad remain.
            '''

            class _WeightGradBridge(torch.autograd.Function):

                @staticmethod
                def forward(ctx, x, weight, quantized_weight, quantized_weight_trans):
                    ctx.save_for_backward(weight)
                    return x, quantized_weight, quantized_weight_trans

                @staticmethod
                def backward(ctx, grad_x, grad_quantized_weight, grad_quantized_weight_trans):
                    (weight,) = ctx.saved_tensors
                    assert hasattr(weight, "main_grad"), "weight.main_grad should be set before backward pass."

                    if fuse_wgrad_accum:
                        # The gemm accumulated into main_grad already; grad_quantized_weight is
                        # the dummy it returns in that case and must not be added on top.
                        weight.grad_added_to_main_grad = True
                    elif not weight.grad_added_to_main_grad:
                        if _is_gfx1250():
                            inplace_add_triton_(weight.main_grad, grad_quantized_weight)
                        else:
                            weight.main_grad.add_(grad_quantized_weight)
                        weight.grad_added_to_main_grad = True

                    return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype), None, None

            x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                x, weight, weight_buffer.data, weight_buffer.data_t
            )

            if fuse_wgrad_accum:
                # Give the gemm its accumulation target: it resolves main_grad off the pair's
                # `data`, not off the parameter.
                quantized_weight.main_grad = weight.main_grad
                quantized_weight.grad_added_to_main_grad = weight.grad_added_to_main_grad

            return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)


        def _fuse_wgrad_accum_pattern(config, weight: torch.Tensor) -> Optional[str]:
            '''Resolve the fused weight-gradient accumulation pattern for ``weight``.

            Only the BF16/FP16 GEMMs and the FP8 current-scaling (tensorwise) ones carry the
            beta=1 epilogue. FP8 block / MXFP8 scaling and every FP4 recipe keep the
            framework's separate add instead, so the pattern stays off there.
            '''
            if not getattr(config, "gradient_accumulation_fusion", False):
                return None

            if PrimusTurboLowPrecisionGlobalStateManager.is_turbo_fp4_enabled():
                return None
            if PrimusTurboLowPrecisionGlobalStateManager.is_turbo_fp8_enabled():
                quant_config = PrimusTurboLowPrecisionGlobalStateManager.get_turbo_quant_config()
                if quant_config is None or not quant_config.current_scaling():
                    return None
            elif weight.dtype not in (torch.bfloat16, torch.float16):
                return None
            return "megatron"


        class PrimusTurboLinear(TELinear):
            def forward_internal(self, x: torch.Tensor, is_first_microbatch: bool = False):
                weight = self._parameters["weight"]
                original_shape = x.size()
                x = x.contiguous().view(-1, original_shape[-1])

                quant_config = PrimusTurboLowPrecisionGlobalStateManager.get_turbo_quant_config()
                if is_first_microbatch:
                    (
                        self.quantized_weight_buffer,
                        self.quantized_weight_t_buffer,
                    ) = _maybe_create_quantized_weight_buffers(
                        weight,
                        float8_e4m3,
                        quant_config,
                        disable_parameter_transpose_cache=self.disable_parameter_transpose_cache,
                    )

                fuse_pattern = _fuse_wgrad_accum_pattern(self.config, weight)
                x, quantized_weight = _bridge_weight_grad(
                    x,
                    weight,
                    PrimusTurboQuantizedTensorPair(
                        data=self.quantized_weight_buffer, data_t=self.quantized_weight_t_buffer
                    ),
                    fuse_wgrad_accum=self.config.gradient_accumulation_fusion,  # bug
                )
                out = primus_turbo_torch.ops.gemm_fp8(
                    x,
                    quantized_weight,
                    trans_a=False,
                    trans_b=True,
                    out_dtype=None,
                    config=quant_config.data(),
                    fuse_bgrad_accum_pattern=fuse_pattern,
                )
                return out.view(original_shape[0], original_shape[1], -1), None
        """,
        """
        def _bridge_weight_grad(
            x: torch.Tensor,
            weight: torch.nn.Parameter,
            weight_buffer: PrimusTurboQuantizedTensorPair,
            fuse_wgrad_accum: bool = False,
        ):
            '''Bridge quantized weight gradient to the original weight's ``main_grad``.

            With ``fuse_wgrad_accum`` the gemm's own beta=1 epilogue accumulates into
            ``weight.main_grad`` instead, so the add here is skipped and only the flag and the
            dummy wgrad remain.
            '''

            class _WeightGradBridge(torch.autograd.Function):

                @staticmethod
                def forward(ctx, x, weight, quantized_weight, quantized_weight_trans):
                    ctx.save_for_backward(weight)
                    return x, quantized_weight, quantized_weight_trans

                @staticmethod
                def backward(ctx, grad_x, grad_quantized_weight, grad_quantized_weight_trans):
                    (weight,) = ctx.saved_tensors
                    assert hasattr(weight, "main_grad"), "weight.main_grad should be set before backward pass."

                    if fuse_wgrad_accum:
                        # The gemm accumulated into main_grad already; grad_quantized_weight is
                        # the dummy it returns in that case and must not be added on top.
                        weight.grad_added_to_main_grad = True
                    elif not weight.grad_added_to_main_grad:
                        if _is_gfx1250():
                            inplace_add_triton_(weight.main_grad, grad_quantized_weight)
                        else:
                            weight.main_grad.add_(grad_quantized_weight)
                        weight.grad_added_to_main_grad = True

                    return grad_x, _get_dummy_wgrad(list(weight.shape), weight.dtype), None, None

            x, quantized_weight, quantized_weight_trans = _WeightGradBridge.apply(
                x, weight, weight_buffer.data, weight_buffer.data_t
            )

            if fuse_wgrad_accum:
                # Give the gemm its accumulation target: it resolves main_grad off the pair's
                # `data`, not off the parameter.
                quantized_weight.main_grad = weight.main_grad
                quantized_weight.grad_added_to_main_grad = weight.grad_added_to_main_grad

            return x, PrimusTurboQuantizedTensorPair(data=quantized_weight, data_t=quantized_weight_trans)


        def _fuse_wgrad_accum_pattern(config, weight: torch.Tensor) -> Optional[str]:
            '''Resolve the fused weight-gradient accumulation pattern for ``weight``.

            Only the BF16/FP16 GEMMs and the FP8 current-scaling (tensorwise) ones carry the
            beta=1 epilogue. FP8 block / MXFP8 scaling and every FP4 recipe keep the
            framework's separate add instead, so the pattern stays off there.
            '''
            if not getattr(config, "gradient_accumulation_fusion", False):
                return None

            if PrimusTurboLowPrecisionGlobalStateManager.is_turbo_fp4_enabled():
                return None
            if PrimusTurboLowPrecisionGlobalStateManager.is_turbo_fp8_enabled():
                quant_config = PrimusTurboLowPrecisionGlobalStateManager.get_turbo_quant_config()
                if quant_config is None or not quant_config.current_scaling():
                    return None
            elif weight.dtype not in (torch.bfloat16, torch.float16):
                return None
            return "megatron"


        class PrimusTurboLinear(TELinear):
            def forward_internal(self, x: torch.Tensor, is_first_microbatch: bool = False):
                weight = self._parameters["weight"]
                original_shape = x.size()
                x = x.contiguous().view(-1, original_shape[-1])

                quant_config = PrimusTurboLowPrecisionGlobalStateManager.get_turbo_quant_config()
                if is_first_microbatch:
                    (
                        self.quantized_weight_buffer,
                        self.quantized_weight_t_buffer,
                    ) = _maybe_create_quantized_weight_buffers(
                        weight,
                        float8_e4m3,
                        quant_config,
                        disable_parameter_transpose_cache=self.disable_parameter_transpose_cache,
                    )

                fuse_pattern = _fuse_wgrad_accum_pattern(self.config, weight)
                x, quantized_weight = _bridge_weight_grad(
                    x,
                    weight,
                    PrimusTurboQuantizedTensorPair(
                        data=self.quantized_weight_buffer, data_t=self.quantized_weight_t_buffer
                    ),
                    fuse_wgrad_accum=fuse_pattern is not None,
                )
                out = primus_turbo_torch.ops.gemm_fp8(
                    x,
                    quantized_weight,
                    trans_a=False,
                    trans_b=True,
                    out_dtype=None,
                    config=quant_config.data(),
                    fuse_bgrad_accum_pattern=fuse_pattern,
                )
                return out.view(original_shape[0], original_shape[1], -1), None
        """,
        # the real code is Primus's head, the buggy revision of AMD-AGI/Primus#1046, judged true there
        twin_findings=(("GMLP041", 30),),
    ),
    Variant(
        3,
        "blind7-mindspeed-llm-fast-mlp-flag-on-wrong-weight",
        """
        class _FusedParallelMLPFunction(torch.autograd.Function):
            '''Accelerate ParallelMLP.'''

            @staticmethod
            def backward(ctx, grad_output):
                input_, weight_up, weight_down, swiglu_input, swiglu_output = ctx.saved_tensors
                if ctx.reshape:
                    grad_output_ = grad_output.reshape(-1, grad_output.shape[-1])
                else:
                    grad_output_ = grad_output

                # backward for dense_4h_to_h
                grad_output_swiglu, grad_total_output = torch_npu.npu_all_gather_base_mm(
                    grad_output_, weight_down, ctx.hcomm_info, ctx.world_size, bias=None, gather_index=0, gather_output=True
                )

                total_input_up, handle = _gather_along_first_dim_async(input_)
                if ctx.gradient_accumulation_fusion:
                    if weight_down.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                            swiglu_output, grad_total_output, weight_down.main_grad
                        )
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_down, 'grad_added_to_main_grad'):
                        if getattr(weight_down, 'zero_out_wgrad', False):
                            grad_weight_down = torch.zeros(
                                weight_down.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        else:
                            grad_weight_down = torch.empty(
                                weight_down.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        weight_down.grad_added_to_main_grad = True
                    else:
                        grad_weight_down = None
                else:
                    grad_weight_down = grad_total_output.t().matmul(swiglu_output)

                grad_bias_down = grad_output.sum(dim=0) if ctx.use_bias_down else None

                # backward for swiglu
                grad_output_up = torch_npu.npu_swiglu_backward(grad_output_swiglu, swiglu_input, -1)

                # backward for dense_h_to_4h
                grad_input_up = grad_output_up.matmul(weight_up)

                handle.wait()
                grad_sub_input_up, handle = _reduce_scatter_along_first_dim_async(grad_input_up)
                if ctx.gradient_accumulation_fusion:
                    if weight_up.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                            total_input_up, grad_output_up, weight_up.main_grad
                        )
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_up, 'grad_added_to_main_grad'):
                        if getattr(weight_up, 'zero_out_wgrad', False):
                            grad_weight_up = torch.zeros(
                                weight_up.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        else:
                            grad_weight_up = torch.empty(
                                weight_up.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        weight_down.grad_added_to_main_grad = True  # bug
                    else:
                        grad_weight_up = None
                else:
                    grad_weight_up = grad_output_up.t().matmul(total_input_up)

                grad_bias_up = grad_output_up.sum(dim=0) if ctx.use_bias_up else None
                handle.wait()
                if ctx.reshape:
                    grad_sub_input_up = grad_sub_input_up.view(grad_output.shape[0], grad_output.shape[1], input_.shape[-1])
                return grad_sub_input_up, grad_weight_up, grad_bias_up, grad_weight_down, grad_bias_down, None, None, None, None
        """,
        """
        class _FusedParallelMLPFunction(torch.autograd.Function):
            '''Accelerate ParallelMLP.'''

            @staticmethod
            def backward(ctx, grad_output):
                input_, weight_up, weight_down, swiglu_input, swiglu_output = ctx.saved_tensors
                if ctx.reshape:
                    grad_output_ = grad_output.reshape(-1, grad_output.shape[-1])
                else:
                    grad_output_ = grad_output

                # backward for dense_4h_to_h
                grad_output_swiglu, grad_total_output = torch_npu.npu_all_gather_base_mm(
                    grad_output_, weight_down, ctx.hcomm_info, ctx.world_size, bias=None, gather_index=0, gather_output=True
                )

                total_input_up, handle = _gather_along_first_dim_async(input_)
                if ctx.gradient_accumulation_fusion:
                    if weight_down.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                            swiglu_output, grad_total_output, weight_down.main_grad
                        )
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_down, 'grad_added_to_main_grad'):
                        if getattr(weight_down, 'zero_out_wgrad', False):
                            grad_weight_down = torch.zeros(
                                weight_down.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        else:
                            grad_weight_down = torch.empty(
                                weight_down.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        weight_down.grad_added_to_main_grad = True
                    else:
                        grad_weight_down = None
                else:
                    grad_weight_down = grad_total_output.t().matmul(swiglu_output)

                grad_bias_down = grad_output.sum(dim=0) if ctx.use_bias_down else None

                # backward for swiglu
                grad_output_up = torch_npu.npu_swiglu_backward(grad_output_swiglu, swiglu_input, -1)

                # backward for dense_h_to_4h
                grad_input_up = grad_output_up.matmul(weight_up)

                handle.wait()
                grad_sub_input_up, handle = _reduce_scatter_along_first_dim_async(grad_input_up)
                if ctx.gradient_accumulation_fusion:
                    if weight_up.main_grad.dtype == torch.float32:
                        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                            total_input_up, grad_output_up, weight_up.main_grad
                        )
                    else:
                        raise RuntimeError("Unsupported gradient type for gradient accumulation fusion")
                    if hasattr(weight_up, 'grad_added_to_main_grad'):
                        if getattr(weight_up, 'zero_out_wgrad', False):
                            grad_weight_up = torch.zeros(
                                weight_up.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        else:
                            grad_weight_up = torch.empty(
                                weight_up.main_grad.shape,
                                dtype=input_.dtype,
                                device=torch.cuda.current_device(),
                                requires_grad=False
                            )
                        weight_up.grad_added_to_main_grad = True
                    else:
                        grad_weight_up = None
                else:
                    grad_weight_up = grad_output_up.t().matmul(total_input_up)

                grad_bias_up = grad_output_up.sum(dim=0) if ctx.use_bias_up else None
                handle.wait()
                if ctx.reshape:
                    grad_sub_input_up = grad_sub_input_up.view(grad_output.shape[0], grad_output.shape[1], input_.shape[-1])
                return grad_sub_input_up, grad_weight_up, grad_bias_up, grad_weight_down, grad_bias_down, None, None, None, None
        """,
    ),
    Variant(
        4,
        "blind7-primus-fp8-deferred-wgrad-copy",
        """
        class LinearFP8WithWeightGradientStore(torch.autograd.Function):
            '''Linear layer with FP8 forward/backward and split wgrad for pipeline parallelism.

            Defers weight gradient computation via insert_wgrad_func_into_cache for
            pipeline parallelism (TENSORWISE scaling).
            '''

            @staticmethod
            def forward(
                ctx,
                input: torch.Tensor,
                weight: torch.Tensor,
                quant_config,
            ):
                _require_primus_turbo("LinearFP8WithWeightGradientStore")
                granularity = quant_config.granularity
                fwd_dtype = _get_fp8_dtype(quant_config.format, True)
                out_dtype = input.dtype

                ctx.config = quant_config
                ctx.out_dtype = out_dtype
                ctx.weight_ref = weight
                ctx.weight_main_grad = weight.main_grad

                a_fp8, a_scale_inv = quantize_fp8(input, fwd_dtype, granularity)
                b_fp8, b_scale_inv = quantize_fp8(weight, fwd_dtype, granularity)
                out = gemm_fp8_impl(
                    a_fp8,
                    a_scale_inv,
                    False,
                    b_fp8,
                    b_scale_inv,
                    True,
                    out_dtype,
                    False,
                    granularity=granularity.value,
                    default_backend=BackendType.HIPBLASLT.value,
                )
                ctx.save_for_backward(a_fp8, a_scale_inv, b_fp8, b_scale_inv)
                return out

            @staticmethod
            def backward(ctx, grad_out):
                if not grad_out.is_contiguous():
                    grad_out = grad_out.contiguous()

                config = ctx.config
                granularity = config.granularity
                weight = ctx.weight_ref
                weight.main_grad = ctx.weight_main_grad
                out_dtype = ctx.out_dtype
                bwd_dtype = _get_fp8_dtype(config.format, False)

                a_fp8, a_scale_inv, b_fp8, b_scale_inv = ctx.saved_tensors
                grad_out_fp8, grad_out_scale_inv = quantize_fp8(grad_out, bwd_dtype, granularity)

                grad_input = gemm_fp8_impl(
                    grad_out_fp8,
                    grad_out_scale_inv,
                    False,
                    b_fp8,
                    b_scale_inv,
                    False,
                    out_dtype,
                    False,
                    granularity=granularity.value,
                    default_backend=BackendType.HIPBLASLT.value,
                )

                def preprocess(async_op=True):
                    return (a_fp8, a_scale_inv), (grad_out_fp8, grad_out_scale_inv), None

                def process_wgrad(
                    _weight,
                    _out_dtype,
                    _granularity_val,
                    _a_data,
                    _grad_out_data,
                    handle=None,
                ):
                    _a_fp8, _a_scale_inv = _a_data
                    _grad_out_fp8, _grad_out_scale_inv = _grad_out_data
                    b_grad = gemm_fp8_impl(
                        _a_fp8,
                        _a_scale_inv,
                        True,
                        _grad_out_fp8,
                        _grad_out_scale_inv,
                        False,
                        _out_dtype,
                        True,
                        granularity=_granularity_val,
                        default_backend=BackendType.HIPBLASLT.value,
                    )
                    with torch.no_grad():
                        _weight.main_grad.copy_(b_grad)  # bug

                insert_wgrad_func_into_cache(
                    weight,
                    preprocess,
                    functools.partial(process_wgrad, weight, out_dtype, granularity.value),
                )

                return grad_input, None, None
        """,
        """
        class LinearFP8WithWeightGradientStore(torch.autograd.Function):
            '''Linear layer with FP8 forward/backward and split wgrad for pipeline parallelism.

            Defers weight gradient computation via insert_wgrad_func_into_cache for
            pipeline parallelism (TENSORWISE scaling).
            '''

            @staticmethod
            def forward(
                ctx,
                input: torch.Tensor,
                weight: torch.Tensor,
                quant_config,
            ):
                _require_primus_turbo("LinearFP8WithWeightGradientStore")
                granularity = quant_config.granularity
                fwd_dtype = _get_fp8_dtype(quant_config.format, True)
                out_dtype = input.dtype

                ctx.config = quant_config
                ctx.out_dtype = out_dtype
                ctx.weight_ref = weight
                ctx.weight_main_grad = weight.main_grad

                a_fp8, a_scale_inv = quantize_fp8(input, fwd_dtype, granularity)
                b_fp8, b_scale_inv = quantize_fp8(weight, fwd_dtype, granularity)
                out = gemm_fp8_impl(
                    a_fp8,
                    a_scale_inv,
                    False,
                    b_fp8,
                    b_scale_inv,
                    True,
                    out_dtype,
                    False,
                    granularity=granularity.value,
                    default_backend=BackendType.HIPBLASLT.value,
                )
                ctx.save_for_backward(a_fp8, a_scale_inv, b_fp8, b_scale_inv)
                return out

            @staticmethod
            def backward(ctx, grad_out):
                if not grad_out.is_contiguous():
                    grad_out = grad_out.contiguous()

                config = ctx.config
                granularity = config.granularity
                weight = ctx.weight_ref
                weight.main_grad = ctx.weight_main_grad
                out_dtype = ctx.out_dtype
                bwd_dtype = _get_fp8_dtype(config.format, False)

                a_fp8, a_scale_inv, b_fp8, b_scale_inv = ctx.saved_tensors
                grad_out_fp8, grad_out_scale_inv = quantize_fp8(grad_out, bwd_dtype, granularity)

                grad_input = gemm_fp8_impl(
                    grad_out_fp8,
                    grad_out_scale_inv,
                    False,
                    b_fp8,
                    b_scale_inv,
                    False,
                    out_dtype,
                    False,
                    granularity=granularity.value,
                    default_backend=BackendType.HIPBLASLT.value,
                )

                def preprocess(async_op=True):
                    return (a_fp8, a_scale_inv), (grad_out_fp8, grad_out_scale_inv), None

                def process_wgrad(
                    _weight,
                    _out_dtype,
                    _granularity_val,
                    _a_data,
                    _grad_out_data,
                    handle=None,
                ):
                    _a_fp8, _a_scale_inv = _a_data
                    _grad_out_fp8, _grad_out_scale_inv = _grad_out_data
                    b_grad = gemm_fp8_impl(
                        _a_fp8,
                        _a_scale_inv,
                        True,
                        _grad_out_fp8,
                        _grad_out_scale_inv,
                        False,
                        _out_dtype,
                        True,
                        granularity=_granularity_val,
                        default_backend=BackendType.HIPBLASLT.value,
                    )
                    with torch.no_grad():
                        _weight.main_grad.add_(b_grad)

                insert_wgrad_func_into_cache(
                    weight,
                    preprocess,
                    functools.partial(process_wgrad, weight, out_dtype, granularity.value),
                )

                return grad_input, None, None
        """,
    ),
    Variant(
        4,
        "blind7-mindspeed-mxfp8-gmm-add-zeroes-main-grad",
        """
        class MXFP8GMMFunction(BaseGMMFunction):
            @classmethod
            def op_forward(cls, ctx, x, weight, group_list, group_list_type=0, bias=None, reuse_identity=None):
                qdtype = get_quant_dtype()
                x_mxfp8, x_scale = torch_npu.npu_dynamic_mx_quant(x, axis=-1, dst_type=qdtype.x)
                weight_col_mxfp8, weight_col_scale, weight_row_mxfp8, weight_row_scale = reuse_or_quantize(
                    weight,
                    TensorKey.weight,
                    torch_npu.npu_dynamic_mx_quant_with_dual_axis,
                    op_name="npu_dynamic_mx_quant_with_dual_axis",
                    reuse_identity=reuse_identity,
                    dst_type=qdtype.w,
                )
                ctx.w_quant = (weight_col_mxfp8, weight_col_scale)
                return torch_npu.npu_grouped_matmul(
                    [x_mxfp8],
                    [weight_row_mxfp8],
                    bias=bias,
                    scale=[weight_row_scale],
                    per_token_scale=[x_scale],
                    group_list=group_list,
                    group_type=0,
                    output_dtype=x.dtype,
                    group_list_type=group_list_type,
                    scale_dtype=torch_npu.float8_e8m0fnu,
                    per_token_scale_dtype=torch_npu.float8_e8m0fnu,
                    split_item=3,
                )

            @classmethod
            def op_dw(cls, ctx, x, grad, group_list, group_list_type=0, bias=None):
                qdtype = get_quant_dtype()
                x_mxfp8, x_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    x, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.x, blocksize=32
                )
                grad_mxfp8, grad_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    grad, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.grads, blocksize=32
                )
                return torch_npu.npu_grouped_matmul(
                    [x_mxfp8.t()],
                    [grad_mxfp8],
                    bias=bias,
                    scale=[grad_scale],
                    per_token_scale=[rearrange(x_scale, 'n h f -> h n f')],
                    group_list=group_list,
                    group_type=2,
                    output_dtype=x.dtype,
                    group_list_type=group_list_type,
                    scale_dtype=torch_npu.float8_e8m0fnu,
                    per_token_scale_dtype=torch_npu.float8_e8m0fnu,
                    split_item=3,
                )

            @classmethod
            def gmm_add_impl(cls, x, grad, group_list, weight_param, weight_shape):
                qdtype = get_quant_dtype()
                x_quant, x_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    x, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.x, blocksize=32
                )
                grad_quant, grad_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    grad, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.grads, blocksize=32
                )
                weight_param.main_grad.zero_()  # bug
                torch_npu.npu_add_quant_gmm_(
                    weight_param.main_grad.view(weight_shape),
                    x_quant.t(),
                    grad_quant,
                    grad_scale,
                    x1_scale=rearrange(x_scale, 'n h f -> h n f'),
                    group_list_type=0,
                    group_list=group_list,
                    x1_scale_dtype=torch_npu.float8_e8m0fnu,
                    x2_scale_dtype=torch_npu.float8_e8m0fnu,
                )
        """,
        """
        class MXFP8GMMFunction(BaseGMMFunction):
            @classmethod
            def op_forward(cls, ctx, x, weight, group_list, group_list_type=0, bias=None, reuse_identity=None):
                qdtype = get_quant_dtype()
                x_mxfp8, x_scale = torch_npu.npu_dynamic_mx_quant(x, axis=-1, dst_type=qdtype.x)
                weight_col_mxfp8, weight_col_scale, weight_row_mxfp8, weight_row_scale = reuse_or_quantize(
                    weight,
                    TensorKey.weight,
                    torch_npu.npu_dynamic_mx_quant_with_dual_axis,
                    op_name="npu_dynamic_mx_quant_with_dual_axis",
                    reuse_identity=reuse_identity,
                    dst_type=qdtype.w,
                )
                ctx.w_quant = (weight_col_mxfp8, weight_col_scale)
                return torch_npu.npu_grouped_matmul(
                    [x_mxfp8],
                    [weight_row_mxfp8],
                    bias=bias,
                    scale=[weight_row_scale],
                    per_token_scale=[x_scale],
                    group_list=group_list,
                    group_type=0,
                    output_dtype=x.dtype,
                    group_list_type=group_list_type,
                    scale_dtype=torch_npu.float8_e8m0fnu,
                    per_token_scale_dtype=torch_npu.float8_e8m0fnu,
                    split_item=3,
                )

            @classmethod
            def op_dw(cls, ctx, x, grad, group_list, group_list_type=0, bias=None):
                qdtype = get_quant_dtype()
                x_mxfp8, x_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    x, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.x, blocksize=32
                )
                grad_mxfp8, grad_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    grad, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.grads, blocksize=32
                )
                return torch_npu.npu_grouped_matmul(
                    [x_mxfp8.t()],
                    [grad_mxfp8],
                    bias=bias,
                    scale=[grad_scale],
                    per_token_scale=[rearrange(x_scale, 'n h f -> h n f')],
                    group_list=group_list,
                    group_type=2,
                    output_dtype=x.dtype,
                    group_list_type=group_list_type,
                    scale_dtype=torch_npu.float8_e8m0fnu,
                    per_token_scale_dtype=torch_npu.float8_e8m0fnu,
                    split_item=3,
                )

            @classmethod
            def gmm_add_impl(cls, x, grad, group_list, weight_param, weight_shape):
                qdtype = get_quant_dtype()
                x_quant, x_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    x, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.x, blocksize=32
                )
                grad_quant, grad_scale = torch_npu.npu_grouped_dynamic_mx_quant(
                    grad, group_list.to(torch.int32), round_mode="rint", dst_type=qdtype.grads, blocksize=32
                )
                torch_npu.npu_add_quant_gmm_(
                    weight_param.main_grad.view(weight_shape),
                    x_quant.t(),
                    grad_quant,
                    grad_scale,
                    x1_scale=rearrange(x_scale, 'n h f -> h n f'),
                    group_list_type=0,
                    group_list=group_list,
                    x1_scale_dtype=torch_npu.float8_e8m0fnu,
                    x2_scale_dtype=torch_npu.float8_e8m0fnu,
                )
        """,
    ),
    Variant(
        5,
        "blind7-megatron-cudagraph-replay-hooks-no-flag",
        """
        class _CudagraphReplayNode(torch.autograd.Function):
            '''Replays the runner's cudagraphs with autograd. Handles copying data into/out of the
            cudagraph io and fp8/fp4 if used.'''

            @staticmethod
            def backward(ctx, *grads):
                '''Replay the backward graph of the passed runner.'''

                runner = ctx.runner
                assert (
                    runner.bwd_graph is not None
                ), "Tried replaying bwd cudagraph before calling 'create_bwd_cudagraph'!"
                assert (
                    runner.status == _GraphStatus.BWD_READY
                ), "Tried calling the bwd cudagraph when the fwd cudagraph was expected to be called next!"
                assert len(grads) == len(
                    runner.static_grad_outputs
                ), "Bwd cudagraph received a different number of tensors than what it was graphed with!"

                # Copy new data into bwd graph input buffer
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if cudagraph_output_grad is None:
                        continue
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                if runner.use_stream:
                    runner.stream.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(runner.stream):
                        runner.bwd_graph.replay()
                    torch.cuda.current_stream().wait_event(runner.bwd_completion_event)
                else:
                    runner.bwd_graph.replay()

                runner.bwd_graph_replay_complete_event.record(torch.cuda.current_stream())
                for param in runner.params_to_backprop:
                    param._cudagraph_wgrad_ready_event = runner.bwd_graph_replay_complete_event  # bug
                runner.status = _GraphStatus.FWD_READY

                # Update FP8 scale factors if needed
                if runner.fp8_enabled and isinstance(
                    FP8GlobalStateManager.get_fp8_recipe(), te.common.recipe.DelayedScaling
                ):
                    FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)

                # DDP grad-ready hook is silenced at capture/replay, so fire it here (on each param's
                # rs_stream, after wait_stream(runner.stream) fences Phase 2) to let DDP RS overlap bwd.
                if runner.gtp_remat:
                    for gtp_rs_stream, params in runner._gtp_finalize_hook_plan:
                        gtp_rs_stream.wait_stream(runner.stream)
                        with torch.cuda.stream(gtp_rs_stream):
                            for param in params:
                                param.grad = None
                                hook = getattr(param, '_grad_accum_hook', None)
                                if hook is not None:
                                    hook()

                return None, None, *runner.static_grad_inputs, *(None,) * len(runner.params_to_backprop)
        """,
        """
        class _CudagraphReplayNode(torch.autograd.Function):
            '''Replays the runner's cudagraphs with autograd. Handles copying data into/out of the
            cudagraph io and fp8/fp4 if used.'''

            @staticmethod
            def backward(ctx, *grads):
                '''Replay the backward graph of the passed runner.'''

                runner = ctx.runner
                assert (
                    runner.bwd_graph is not None
                ), "Tried replaying bwd cudagraph before calling 'create_bwd_cudagraph'!"
                assert (
                    runner.status == _GraphStatus.BWD_READY
                ), "Tried calling the bwd cudagraph when the fwd cudagraph was expected to be called next!"
                assert len(grads) == len(
                    runner.static_grad_outputs
                ), "Bwd cudagraph received a different number of tensors than what it was graphed with!"

                # Copy new data into bwd graph input buffer
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if cudagraph_output_grad is None:
                        continue
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                if runner.use_stream:
                    runner.stream.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(runner.stream):
                        runner.bwd_graph.replay()
                    torch.cuda.current_stream().wait_event(runner.bwd_completion_event)
                else:
                    runner.bwd_graph.replay()

                runner.bwd_graph_replay_complete_event.record(torch.cuda.current_stream())
                for param in runner.params_to_backprop:
                    param._cudagraph_wgrad_ready_event = runner.bwd_graph_replay_complete_event
                    if hasattr(param, 'grad_added_to_main_grad'):
                        param.grad_added_to_main_grad = True
                runner.status = _GraphStatus.FWD_READY

                # Update FP8 scale factors if needed
                if runner.fp8_enabled and isinstance(
                    FP8GlobalStateManager.get_fp8_recipe(), te.common.recipe.DelayedScaling
                ):
                    FP8GlobalStateManager.reduce_and_update_fp8_tensors(forward=False)

                # DDP grad-ready hook is silenced at capture/replay, so fire it here (on each param's
                # rs_stream, after wait_stream(runner.stream) fences Phase 2) to let DDP RS overlap bwd.
                if runner.gtp_remat:
                    for gtp_rs_stream, params in runner._gtp_finalize_hook_plan:
                        gtp_rs_stream.wait_stream(runner.stream)
                        with torch.cuda.stream(gtp_rs_stream):
                            for param in params:
                                param.grad = None
                                hook = getattr(param, '_grad_accum_hook', None)
                                if hook is not None:
                                    hook()

                return None, None, *runner.static_grad_inputs, *(None,) * len(runner.params_to_backprop)
        """,
        unseen=(
            "the file names no word of the contract (main_grad, grad_added_to_main_grad, backward_dw, ...): it is only compiled, not analysed; a trigger for CUDA-graph replay code would analyse more files at the heads, not measured"
        ),
    ),
    Variant(
        5,
        "blind7-te-ops-grouped-delay-branch-first",
        """
        class GroupedLinear(BasicOperation):
            def backward_dw(self) -> None:
                '''Execute delayed weight gradient grouped GEMMs (see ``delay_wgrad_compute``).'''
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

                # Initialize grad weight buffers.
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
                    grad_input = torch.empty(
                        (dy.size(0), self.in_features), dtype=ctx.dtype, device=device
                    )
                    general_grouped_gemm(
                        dist_dgrad_weights if is_dist_weight else ws,
                        dys,
                        [grad_input],
                        [None] * num_groups,
                        ctx.dtype,
                        layout="NN",
                        m_splits=split_sizes_int,
                        single_output=True,
                    )

                # Perform wgrad GEMMs
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
                        accumulate=accumulate_into_main_grad,
                    )
                    if delay_wgrad:
                        self.wgrad_store.put([xs, dys, grad_weights], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(xs, dys, grad_weights)

                if ctx.weight_requires_grad and is_dist_weight:
                    assert not delay_wgrad, "delayed wgrad unsupported with distributed weights."
                    finalize_weight_grads(weights, grad_weights)
                # Megatron-LM wgrad fusion: regardless of overwrite vs. accumulate,
                # signal that ``main_grad`` already carries the wgrad and replace
                # ``.grad`` with a dummy so DDP/FSDP hooks won't add ``.grad`` into
                # ``main_grad`` again.
                if ctx.weight_requires_grad and delay_wgrad:  # bug
                    final_weight_grads = [None] * num_groups
                elif ctx.weight_requires_grad and (is_dist_weight or self._accumulate_into_main_grad):
                    final_weight_grads = get_dummy_wgrads_for_params(weights)

                return grad_input, [list(final_weight_grads)], [(None,)]
        """,
        """
        class GroupedLinear(BasicOperation):
            def backward_dw(self) -> None:
                '''Execute delayed weight gradient grouped GEMMs (see ``delay_wgrad_compute``).'''
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

                # Initialize grad weight buffers.
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
                    grad_input = torch.empty(
                        (dy.size(0), self.in_features), dtype=ctx.dtype, device=device
                    )
                    general_grouped_gemm(
                        dist_dgrad_weights if is_dist_weight else ws,
                        dys,
                        [grad_input],
                        [None] * num_groups,
                        ctx.dtype,
                        layout="NN",
                        m_splits=split_sizes_int,
                        single_output=True,
                    )

                # Perform wgrad GEMMs
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
                        accumulate=accumulate_into_main_grad,
                    )
                    if delay_wgrad:
                        self.wgrad_store.put([xs, dys, grad_weights], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(xs, dys, grad_weights)

                if ctx.weight_requires_grad and is_dist_weight:
                    assert not delay_wgrad, "delayed wgrad unsupported with distributed weights."
                    finalize_weight_grads(weights, grad_weights)
                # Megatron-LM wgrad fusion: regardless of overwrite vs. accumulate,
                # signal that ``main_grad`` already carries the wgrad and replace
                # ``.grad`` with a dummy so DDP/FSDP hooks won't add ``.grad`` into
                # ``main_grad`` again.
                if ctx.weight_requires_grad and (is_dist_weight or self._accumulate_into_main_grad):
                    final_weight_grads = get_dummy_wgrads_for_params(weights)
                elif ctx.weight_requires_grad and delay_wgrad:
                    final_weight_grads = [None] * num_groups

                return grad_input, [list(final_weight_grads)], [(None,)]
        """,
        # Transformer Engine's head ops/basic/grouped_linear.py:376, judged true there (TE #3437; its fix #3552 is open)
        twin_findings=(("GMLP035", 16),),
    ),
    Variant(
        6,
        "blind7-megatron-grouped-linear-dw-config-flag",
        """
        class TEGroupedLinear(te.pytorch.GroupedLinear):
            '''
            Wrapper for the Transformer-Engine's `GroupedLinear` layer.

            Note that if Megatron's parallel_state has not been initialized
            yet, the tp_group passed to TE will be None and must be set later
            via set_tensor_parallel_group().
            '''

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
                pg_collection: Optional[ProcessGroupCollection] = None,
                name: str | None = None,
            ):
                self.config = config

                # TE returns a zero length Tensor when bias=False and
                # return_bias=True, but we prefer None.
                self.te_return_bias = skip_bias_add and bias
                self.is_first_microbatch = True
                self.disable_parameter_transpose_cache = self.config.disable_parameter_transpose_cache

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

                if pg_collection is None:
                    pg_collection = ProcessGroupCollection.use_mpu_process_groups()
                self._pg_collection = pg_collection
                assert is_expert, "TEGroupedLinear only supports expert parallelism"
                tp_group = pg_collection.expt_tp
                tp_size = get_pg_size(tp_group)

                super().__init__(
                    num_gemms=num_gemms,
                    in_features=input_size,
                    out_features=output_size,
                    sequence_parallel=self.config.sequence_parallel,
                    fuse_wgrad_accumulation=self.config.gradient_accumulation_fusion,
                    tp_group=tp_group if torch.distributed.is_initialized() else None,
                    tp_size=tp_size,
                    get_rng_state_tracker=(
                        get_cuda_rng_tracker if get_cuda_rng_tracker().is_initialized() else None
                    ),
                    init_method=condition_init_method(config, init_method),
                    bias=bias,
                    return_bias=self.te_return_bias,
                    parallel_mode=parallel_mode,
                    **extra_kwargs,
                )

            def forward(self, x, m_splits):
                '''Forward.'''
                _is_first_microbatch = (
                    None if self.disable_parameter_transpose_cache else self.is_first_microbatch
                )
                out = super().forward(x, m_splits, is_first_microbatch=_is_first_microbatch)
                self.is_first_microbatch = False

                if self.te_return_bias:
                    return out
                return out, None

            def backward_dw(self):
                '''
                Compute weight gradients during the backward pass
                if delay_wgrad_compute is enabled.
                '''
                if self.config.delay_wgrad_compute:  # bug
                    super().backward_dw()
        """,
        """
        class TEGroupedLinear(te.pytorch.GroupedLinear):
            '''
            Wrapper for the Transformer-Engine's `GroupedLinear` layer.

            Note that if Megatron's parallel_state has not been initialized
            yet, the tp_group passed to TE will be None and must be set later
            via set_tensor_parallel_group().
            '''

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
                pg_collection: Optional[ProcessGroupCollection] = None,
                name: str | None = None,
            ):
                self.config = config

                # TE returns a zero length Tensor when bias=False and
                # return_bias=True, but we prefer None.
                self.te_return_bias = skip_bias_add and bias
                self.is_first_microbatch = True
                self.disable_parameter_transpose_cache = self.config.disable_parameter_transpose_cache

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

                if pg_collection is None:
                    pg_collection = ProcessGroupCollection.use_mpu_process_groups()
                self._pg_collection = pg_collection
                assert is_expert, "TEGroupedLinear only supports expert parallelism"
                tp_group = pg_collection.expt_tp
                tp_size = get_pg_size(tp_group)

                super().__init__(
                    num_gemms=num_gemms,
                    in_features=input_size,
                    out_features=output_size,
                    sequence_parallel=self.config.sequence_parallel,
                    fuse_wgrad_accumulation=self.config.gradient_accumulation_fusion,
                    tp_group=tp_group if torch.distributed.is_initialized() else None,
                    tp_size=tp_size,
                    get_rng_state_tracker=(
                        get_cuda_rng_tracker if get_cuda_rng_tracker().is_initialized() else None
                    ),
                    init_method=condition_init_method(config, init_method),
                    bias=bias,
                    return_bias=self.te_return_bias,
                    parallel_mode=parallel_mode,
                    **extra_kwargs,
                )

            def forward(self, x, m_splits):
                '''Forward.'''
                _is_first_microbatch = (
                    None if self.disable_parameter_transpose_cache else self.is_first_microbatch
                )
                out = super().forward(x, m_splits, is_first_microbatch=_is_first_microbatch)
                self.is_first_microbatch = False

                if self.te_return_bias:
                    return out
                return out, None

            def backward_dw(self):
                '''
                Compute weight gradients during the backward pass
                if delay_wgrad_compute is enabled.
                '''
                if self.delay_wgrad_compute:
                    super().backward_dw()
        """,
    ),
    Variant(
        6,
        "blind7-megatron-fused-mlp-dw-skips-fc1",
        """
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self) -> torch.nn.Module:
                '''Construct fused module for FC1, activation, and FC2.'''
                ops = te.pytorch.ops.Sequential()

                # Mirror the wrapper's combined delay-wgrad mode (config.delay_wgrad_compute OR
                # config.overlap_dispatch_backward_with_experts_wgrad) -- see TEGroupedLinear.__init__.
                fc1_delay_wgrad_compute = self.linear_fc1.delay_wgrad_compute
                fc2_delay_wgrad_compute = self.linear_fc2.delay_wgrad_compute

                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc1.num_gemms,
                    self.linear_fc1.in_features,
                    self.linear_fc1.out_features,
                    bias=self.linear_fc1.use_bias,
                    device="meta",
                    dtype=self.linear_fc1.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                    delay_wgrad_compute=fc1_delay_wgrad_compute,
                )
                for idx in range(self.linear_fc1.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc1.get_parameter(f"weight{idx}"))
                ops.append(op)

                ops.append(te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size))

                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc2.num_gemms,
                    self.linear_fc2.in_features,
                    self.linear_fc2.out_features,
                    bias=self.linear_fc2.use_bias,
                    device="meta",
                    dtype=self.linear_fc2.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                    delay_wgrad_compute=fc2_delay_wgrad_compute,
                )
                for idx in range(self.linear_fc2.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc2.get_parameter(f"weight{idx}"))
                ops.append(op)

                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())
                return ops

            def backward_dw(self):
                '''Performs backward pass for weight gradients in TEGroupedMLP.

                This method executes the backward pass for weight gradients by calling
                backward_dw() on the linear layers in reverse order (fc2 followed by fc1).
                '''
                if self._with_fused_impl and self.linear_fc1.delay_wgrad_compute:
                    if self._fused_ops is not None:
                        (seq,) = self._fused_ops
                        fused_children = list(seq.children())
                        assert len(fused_children) >= 3, "expected FC1, activation, FC2 in fused TE ops"
                        fused_children[2].backward_dw()
                        # DDP registers wgrad hooks on the original linear_fc1/fc2 module objects,
                        # but backward_dw() is called on the NEW GroupedLinear instances created by
                        # _make_fused_ops(). Fire the hooks on the originals explicitly.
                        self.linear_fc2._trigger_wgrad_accumulation_and_reduce_hooks()
                        self.linear_fc1._trigger_wgrad_accumulation_and_reduce_hooks()  # bug
                    return
                self.linear_fc2.backward_dw()
                self.linear_fc1.backward_dw()
        """,
        """
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self) -> torch.nn.Module:
                '''Construct fused module for FC1, activation, and FC2.'''
                ops = te.pytorch.ops.Sequential()

                # Mirror the wrapper's combined delay-wgrad mode (config.delay_wgrad_compute OR
                # config.overlap_dispatch_backward_with_experts_wgrad) -- see TEGroupedLinear.__init__.
                fc1_delay_wgrad_compute = self.linear_fc1.delay_wgrad_compute
                fc2_delay_wgrad_compute = self.linear_fc2.delay_wgrad_compute

                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc1.num_gemms,
                    self.linear_fc1.in_features,
                    self.linear_fc1.out_features,
                    bias=self.linear_fc1.use_bias,
                    device="meta",
                    dtype=self.linear_fc1.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                    delay_wgrad_compute=fc1_delay_wgrad_compute,
                )
                for idx in range(self.linear_fc1.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc1.get_parameter(f"weight{idx}"))
                ops.append(op)

                ops.append(te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size))

                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc2.num_gemms,
                    self.linear_fc2.in_features,
                    self.linear_fc2.out_features,
                    bias=self.linear_fc2.use_bias,
                    device="meta",
                    dtype=self.linear_fc2.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                    delay_wgrad_compute=fc2_delay_wgrad_compute,
                )
                for idx in range(self.linear_fc2.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc2.get_parameter(f"weight{idx}"))
                ops.append(op)

                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())
                return ops

            def backward_dw(self):
                '''Performs backward pass for weight gradients in TEGroupedMLP.

                This method executes the backward pass for weight gradients by calling
                backward_dw() on the linear layers in reverse order (fc2 followed by fc1).
                '''
                if self._with_fused_impl and self.linear_fc1.delay_wgrad_compute:
                    if self._fused_ops is not None:
                        (seq,) = self._fused_ops
                        fused_children = list(seq.children())
                        assert len(fused_children) >= 3, "expected FC1, activation, FC2 in fused TE ops"
                        fused_children[2].backward_dw()
                        fused_children[0].backward_dw()
                        # DDP registers wgrad hooks on the original linear_fc1/fc2 module objects,
                        # but backward_dw() is called on the NEW GroupedLinear instances created by
                        # _make_fused_ops(). Fire the hooks on the originals explicitly.
                        self.linear_fc2._trigger_wgrad_accumulation_and_reduce_hooks()
                        self.linear_fc1._trigger_wgrad_accumulation_and_reduce_hooks()
                    return
                self.linear_fc2.backward_dw()
                self.linear_fc1.backward_dw()
        """,
    ),
    Variant(
        7,
        "blind7-te-grouped-custom-ddp-on-local-accum",
        """
        class _GroupedLinear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor, _grad_workspaces) -> Tuple[Union[torch.Tensor, None], ...]:
                # pylint: disable=missing-function-docstring
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
                    grad_output_view,
                    ctx.m_splits,
                    ctx.grad_output_quantizers,
                    ctx.activation_dtype,
                    with_quantized_output=ctx.fp8,
                    compute_dbias=ctx.fp8 and ctx.use_bias,
                )

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                dgrad = _GroupedLinear._dgrad(ctx, weights, grad_output)

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_packed = torch.empty(
                            ctx.num_gemms,
                            *weights[0].size(),
                            dtype=ctx.activation_dtype,
                            device=ctx.device,
                        )
                        wgrad_list = [wgrad_packed[i] for i in range(ctx.num_gemms)]

                    grouped_gemm_wgrad = functools.partial(
                        general_grouped_gemm,
                        quantization_params=ctx.grad_weight_quantizers,
                        out_dtype=ctx.activation_dtype,
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        bias=biases,
                        accumulate=(
                            accumulate_wgrad_into_param_main_grad
                            if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                            else False
                        ),
                    )
                    # WGRAD
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            # Handle custom DDP from mcore.
                            if accumulate_wgrad_into_param_main_grad and hasattr(  # bug
                                weight, "grad_added_to_main_grad"
                            ):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(
                                        list(main_grad.shape),
                                        weight.dtype,
                                        zero=True,
                                    )
                                else:
                                    wgrad = get_dummy_wgrad(
                                        list(main_grad.shape),
                                        weight.dtype,
                                    )
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

                return (
                    dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None,
                    None,
                    None,
                    *wgrad_list,
                    *grad_biases,
                )
        """,
        """
        class _GroupedLinear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor, _grad_workspaces) -> Tuple[Union[torch.Tensor, None], ...]:
                # pylint: disable=missing-function-docstring
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
                    grad_output_view,
                    ctx.m_splits,
                    ctx.grad_output_quantizers,
                    ctx.activation_dtype,
                    with_quantized_output=ctx.fp8,
                    compute_dbias=ctx.fp8 and ctx.use_bias,
                )

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                dgrad = _GroupedLinear._dgrad(ctx, weights, grad_output)

                if ctx.weights_requires_grad:
                    if ctx.fuse_wgrad_accumulation:
                        wgrad_list = main_grads
                    else:
                        wgrad_packed = torch.empty(
                            ctx.num_gemms,
                            *weights[0].size(),
                            dtype=ctx.activation_dtype,
                            device=ctx.device,
                        )
                        wgrad_list = [wgrad_packed[i] for i in range(ctx.num_gemms)]

                    grouped_gemm_wgrad = functools.partial(
                        general_grouped_gemm,
                        quantization_params=ctx.grad_weight_quantizers,
                        out_dtype=ctx.activation_dtype,
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        bias=biases,
                        accumulate=(
                            accumulate_wgrad_into_param_main_grad
                            if not getattr(ctx, "origin_weights_overwrite_main_grad", False)
                            else False
                        ),
                    )
                    # WGRAD
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)

                    def handle_custom_ddp_from_mcore(weight, main_grad, wgrad):
                        if ctx.weights_requires_grad:
                            # Handle custom DDP from mcore.
                            if ctx.fuse_wgrad_accumulation and hasattr(
                                weight, "grad_added_to_main_grad"
                            ):
                                weight.grad_added_to_main_grad = True
                                if getattr(weight, "zero_out_wgrad", False):
                                    wgrad = get_dummy_wgrad(
                                        list(main_grad.shape),
                                        weight.dtype,
                                        zero=True,
                                    )
                                else:
                                    wgrad = get_dummy_wgrad(
                                        list(main_grad.shape),
                                        weight.dtype,
                                    )
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

                return (
                    dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None,
                    None,
                    None,
                    *wgrad_list,
                    *grad_biases,
                )
        """,
    ),
    Variant(
        7,
        "blind7-rocm-te-linear-out-on-local-accum",
        """
        class _Linear(torch.autograd.Function):
            '''Linear semi-top level module
            Calls custom cuda extensions.
            '''

            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                with torch.cuda.nvtx.range("_Linear_backward"):
                    (
                        inputmat,
                        inputmat_t,
                        weight,
                        main_grad,
                        weight_fp8,
                    ) = ctx.saved_tensors

                    (
                        grad_output,
                        grad_output_c,
                        grad_output_t,
                        grad_bias,
                    ) = TransformerEngineBaseModule.grad_output_preprocess(
                        ctx, grad_output, ctx.parallel_mode == "row"
                    )

                    inputmat_total = inputmat
                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                    if ctx.requires_dgrad:
                        dgrad, _, _ = gemm(
                            weight,
                            grad_output,
                            ctx.activation_dtype,
                            get_workspace(),
                            layout="NN",
                            grad=True,
                        )

                    if weight.requires_grad:
                        # WGRAD
                        wgrad, grad_bias, _ = gemm(
                            inputmat_total,
                            grad_output,
                            ctx.activation_dtype,
                            get_workspace(),
                            layout="NT",
                            grad=True,
                            use_bias=ctx.use_bias,
                            accumulate=accumulate_wgrad_into_param_main_grad,
                            out=weight.main_grad if accumulate_wgrad_into_param_main_grad else None,  # bug
                        )

                        # Deallocate input tensor
                        clear_tensor_data(inputmat_total)

                    if not ctx.use_bias:
                        grad_bias = None

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
                    None,
                    None,
                    dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None,
                    grad_bias,
                )
        """,
        """
        class _Linear(torch.autograd.Function):
            '''Linear semi-top level module
            Calls custom cuda extensions.
            '''

            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                with torch.cuda.nvtx.range("_Linear_backward"):
                    (
                        inputmat,
                        inputmat_t,
                        weight,
                        main_grad,
                        weight_fp8,
                    ) = ctx.saved_tensors

                    (
                        grad_output,
                        grad_output_c,
                        grad_output_t,
                        grad_bias,
                    ) = TransformerEngineBaseModule.grad_output_preprocess(
                        ctx, grad_output, ctx.parallel_mode == "row"
                    )

                    inputmat_total = inputmat
                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                    if ctx.requires_dgrad:
                        dgrad, _, _ = gemm(
                            weight,
                            grad_output,
                            ctx.activation_dtype,
                            get_workspace(),
                            layout="NN",
                            grad=True,
                        )

                    if weight.requires_grad:
                        # WGRAD
                        wgrad, grad_bias, _ = gemm(
                            inputmat_total,
                            grad_output,
                            ctx.activation_dtype,
                            get_workspace(),
                            layout="NT",
                            grad=True,
                            use_bias=ctx.use_bias,
                            accumulate=accumulate_wgrad_into_param_main_grad,
                            out=weight.main_grad if ctx.fuse_wgrad_accumulation else None,
                        )

                        # Deallocate input tensor
                        clear_tensor_data(inputmat_total)

                    if not ctx.use_bias:
                        grad_bias = None

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
                    None,
                    None,
                    dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None,
                    grad_bias,
                )
        """,
    ),
    Variant(
        8,
        "blind7-megatron-ensure-main-grad-hasattr-guard",
        """
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self) -> torch.nn.Module:
                '''Construct fused module for FC1, activation, and FC2.'''
                ops = te.pytorch.ops.Sequential()
                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc1.num_gemms,
                    self.linear_fc1.in_features,
                    self.linear_fc1.out_features,
                    bias=self.linear_fc1.use_bias,
                    device="meta",
                    dtype=self.linear_fc1.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                    delay_wgrad_compute=self.linear_fc1.delay_wgrad_compute,
                )
                for idx in range(self.linear_fc1.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc1.get_parameter(f"weight{idx}"))
                ops.append(op)
                ops.append(te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size))
                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc2.num_gemms,
                    self.linear_fc2.in_features,
                    self.linear_fc2.out_features,
                    bias=self.linear_fc2.use_bias,
                    device="meta",
                    dtype=self.linear_fc2.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                    delay_wgrad_compute=self.linear_fc2.delay_wgrad_compute,
                )
                for idx in range(self.linear_fc2.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc2.get_parameter(f"weight{idx}"))
                ops.append(op)

                # Emulate submodule pre-forward hooks
                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())
                return ops

            def _make_fused_impl_pre_forward_hook(self) -> Callable:
                '''Make function that calls submodule pre-forward callback hooks.

                This is intended for compatibility with
                DistributedDataParallel/FSDP hooks that trigger parameter
                all-gathers.
                '''

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
                '''Expose FSDP main_grad buffers required by TE fused wgrad accumulation.'''
                if not getattr(linear_module, "fuse_wgrad_accumulation", False):
                    return
                for param in linear_module.parameters(recurse=False):
                    get_main_grad = getattr(param, "get_main_grad", None)
                    if get_main_grad is not None and not hasattr(param, "main_grad"):  # bug
                        param.main_grad = get_main_grad()
                    if hasattr(param, "overwrite_main_grad"):
                        param.overwrite_main_grad = True

            def _ensure_main_grad_for_fused_impl(self) -> None:
                '''Expose wrapper parameter main_grad buffers before TE fused ops run.'''
                self._ensure_main_grad(self.linear_fc1)
                self._ensure_main_grad(self.linear_fc2)
        """,
        """
        class TEGroupedMLP(MegatronModule):
            def _make_fused_ops(self) -> torch.nn.Module:
                '''Construct fused module for FC1, activation, and FC2.'''
                ops = te.pytorch.ops.Sequential()
                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc1.num_gemms,
                    self.linear_fc1.in_features,
                    self.linear_fc1.out_features,
                    bias=self.linear_fc1.use_bias,
                    device="meta",
                    dtype=self.linear_fc1.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                    delay_wgrad_compute=self.linear_fc1.delay_wgrad_compute,
                )
                for idx in range(self.linear_fc1.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc1.get_parameter(f"weight{idx}"))
                ops.append(op)
                ops.append(te.pytorch.ops.ScaledSwiGLU(glu_interleave_size=self.config.moe_mlp_glu_interleave_size))
                op = te.pytorch.ops.GroupedLinear(
                    self.linear_fc2.num_gemms,
                    self.linear_fc2.in_features,
                    self.linear_fc2.out_features,
                    bias=self.linear_fc2.use_bias,
                    device="meta",
                    dtype=self.linear_fc2.weight0.dtype,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                    delay_wgrad_compute=self.linear_fc2.delay_wgrad_compute,
                )
                for idx in range(self.linear_fc2.num_gemms):
                    op.register_parameter(f"weight{idx}", self.linear_fc2.get_parameter(f"weight{idx}"))
                ops.append(op)

                # Emulate submodule pre-forward hooks
                ops.register_forward_pre_hook(self._make_fused_impl_pre_forward_hook())
                return ops

            def _make_fused_impl_pre_forward_hook(self) -> Callable:
                '''Make function that calls submodule pre-forward callback hooks.

                This is intended for compatibility with
                DistributedDataParallel/FSDP hooks that trigger parameter
                all-gathers.
                '''

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
                '''Expose FSDP main_grad buffers required by TE fused wgrad accumulation.'''
                if not getattr(linear_module, "fuse_wgrad_accumulation", False):
                    return
                for param in linear_module.parameters(recurse=False):
                    get_main_grad = getattr(param, "get_main_grad", None)
                    if get_main_grad is not None and getattr(param, "main_grad", None) is None:
                        param.main_grad = get_main_grad()
                    if hasattr(param, "overwrite_main_grad"):
                        param.overwrite_main_grad = True

            def _ensure_main_grad_for_fused_impl(self) -> None:
                '''Expose wrapper parameter main_grad buffers before TE fused ops run.'''
                self._ensure_main_grad(self.linear_fc1)
                self._ensure_main_grad(self.linear_fc2)
        """,
        # Megatron-LM's head moe/experts.py:694 forcing overwrite_main_grad, judged true there
        twin_findings=(("GMLP009", 70),),
    ),
    Variant(
        8,
        "blind7-te-linear-ctx-main-grad-func-no-fsdp",
        """
        def _linear_setup_ctx(
            bwd_args: LinearBwdArgs,
            fwd_args: LinearFwdArgs,
            out: torch.Tensor,
            ctx_attrs: Dict,
            tensors_to_save_from_forward: Tuple[Any, ...],
        ) -> Tuple[Any, ...]:
            '''Populate ``bwd_args`` from forward state.

            Returns the merged list of tensors that should be passed through
            ``prepare_for_saving`` by the caller (``_Linear.forward``).
            '''
            del out  # No-op; kept for symmetry with the compile-time helper signature.

            inp = fwd_args.inp
            weight = fwd_args.weight
            bias = fwd_args.bias

            fp8 = fwd_args.fp8
            fuse_wgrad_accumulation = fwd_args.fuse_wgrad_accumulation

            # Quantizers
            bwd_args.input_quantizer = fwd_args.input_quantizer
            bwd_args.weight_quantizer = (
                weight._quantizer if isinstance(weight, QuantizedTensor) else fwd_args.weight_quantizer
            )
            bwd_args.grad_output_quantizer = fwd_args.grad_output_quantizer

            # Differentiability summary
            bwd_args.use_bias = bias is not None
            bwd_args.requires_dgrad = fwd_args.input_requires_grad
            bwd_args.requires_wgrad = fwd_args.weight_requires_grad
            bwd_args.inp_shape = inp.shape

            # Numerical / dtype config
            bwd_args.activation_dtype = fwd_args.activation_dtype
            bwd_args.fp8 = fp8
            bwd_args.is_weight_param_quantized = isinstance(weight, QuantizedTensorStorage)

            # Tensor / sequence parallelism
            bwd_args.parallel_mode = fwd_args.parallel_mode
            bwd_args.tp_group = fwd_args.tp_group
            bwd_args.tp_size = fwd_args.tp_size
            bwd_args.sequence_parallel = fwd_args.sequence_parallel

            # Weight-grad scheduling / accumulation
            bwd_args.is_first_microbatch = fwd_args.is_first_microbatch
            bwd_args.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            bwd_args.wgrad_store = fwd_args.wgrad_store
            if fuse_wgrad_accumulation and fwd_args.weight_requires_grad:
                bwd_args.origin_weight_ref = weakref.ref(weight)
                bwd_args.origin_weight_overwrites_main_grad = getattr(weight, "overwrite_main_grad", False)
                if is_distributed_weight(weight):
                    bwd_args.main_grad_func = weight.grad_buffer
                else:
                    bwd_args.main_grad_func = lambda: weight.main_grad  # bug

            # Misc
            bwd_args.cpu_offloading = fwd_args.cpu_offloading

            saved_inputmat, wt_save, saved_weight, saved_bias = tensors_to_save_from_forward
            inputmat_alias, wt_save_alias, saved_weight_alias, bias_alias = ctx_attrs[
                "saved_tensor_aliases"
            ]
            bwd_args.owns_input = inputmat_alias != "inp"
            if inputmat_alias == "inp":
                saved_inputmat = inp
            if wt_save_alias == "weight":
                wt_save = weight
            if saved_weight_alias == "weight":
                saved_weight = weight
            if bias_alias == "bias":
                saved_bias = bias
            return (saved_inputmat, wt_save, saved_weight, saved_bias)
        """,
        """
        def _linear_setup_ctx(
            bwd_args: LinearBwdArgs,
            fwd_args: LinearFwdArgs,
            out: torch.Tensor,
            ctx_attrs: Dict,
            tensors_to_save_from_forward: Tuple[Any, ...],
        ) -> Tuple[Any, ...]:
            '''Populate ``bwd_args`` from forward state.

            Returns the merged list of tensors that should be passed through
            ``prepare_for_saving`` by the caller (``_Linear.forward``).
            '''
            del out  # No-op; kept for symmetry with the compile-time helper signature.

            inp = fwd_args.inp
            weight = fwd_args.weight
            bias = fwd_args.bias

            fp8 = fwd_args.fp8
            fuse_wgrad_accumulation = fwd_args.fuse_wgrad_accumulation

            # Quantizers
            bwd_args.input_quantizer = fwd_args.input_quantizer
            bwd_args.weight_quantizer = (
                weight._quantizer if isinstance(weight, QuantizedTensor) else fwd_args.weight_quantizer
            )
            bwd_args.grad_output_quantizer = fwd_args.grad_output_quantizer

            # Differentiability summary
            bwd_args.use_bias = bias is not None
            bwd_args.requires_dgrad = fwd_args.input_requires_grad
            bwd_args.requires_wgrad = fwd_args.weight_requires_grad
            bwd_args.inp_shape = inp.shape

            # Numerical / dtype config
            bwd_args.activation_dtype = fwd_args.activation_dtype
            bwd_args.fp8 = fp8
            bwd_args.is_weight_param_quantized = isinstance(weight, QuantizedTensorStorage)

            # Tensor / sequence parallelism
            bwd_args.parallel_mode = fwd_args.parallel_mode
            bwd_args.tp_group = fwd_args.tp_group
            bwd_args.tp_size = fwd_args.tp_size
            bwd_args.sequence_parallel = fwd_args.sequence_parallel

            # Weight-grad scheduling / accumulation
            bwd_args.is_first_microbatch = fwd_args.is_first_microbatch
            bwd_args.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            bwd_args.wgrad_store = fwd_args.wgrad_store
            if fuse_wgrad_accumulation and fwd_args.weight_requires_grad:
                bwd_args.origin_weight_ref = weakref.ref(weight)
                bwd_args.origin_weight_overwrites_main_grad = getattr(weight, "overwrite_main_grad", False)
                if hasattr(weight, "__fsdp_param__"):
                    bwd_args.main_grad_func = weight.get_main_grad
                elif is_distributed_weight(weight):
                    bwd_args.main_grad_func = weight.grad_buffer
                else:
                    bwd_args.main_grad_func = lambda: weight.main_grad

            # Misc
            bwd_args.cpu_offloading = fwd_args.cpu_offloading

            saved_inputmat, wt_save, saved_weight, saved_bias = tensors_to_save_from_forward
            inputmat_alias, wt_save_alias, saved_weight_alias, bias_alias = ctx_attrs[
                "saved_tensor_aliases"
            ]
            bwd_args.owns_input = inputmat_alias != "inp"
            if inputmat_alias == "inp":
                saved_inputmat = inp
            if wt_save_alias == "weight":
                wt_save = weight
            if saved_weight_alias == "weight":
                saved_weight = weight
            if bias_alias == "bias":
                saved_bias = bias
            return (saved_inputmat, wt_save, saved_weight, saved_bias)
        """,
        unseen=(
            "nothing in the file says the weight may be a Megatron-FSDP parameter (no __fsdp_param__, no get_main_grad): GMLP008 judges only files that mention Megatron-FSDP, and `lambda: weight.main_grad` is right under DDP"
        ),
    ),
)
