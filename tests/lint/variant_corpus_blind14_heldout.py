"""The fourteenth blind corpus (H-blind14), held-out part: 8 variants, the third per class 1..8 of issue #19
(the first two of each class are in variant_corpus_blind14.py). Written by the same author under the same
rules: only CONTRACT.md, the two seed reports and issue #19's class list were read, never the linter or its
tests. Keep these out of rule development; measure on them only.

Every variant is grounded in a real function that does main_grad / weight-gradient bookkeeping, read from a
repository snapshot in /work/.mirror that no earlier corpus used; the twin is that code shortened (real
names, control flow and idioms kept), the bug the same code with one regression of the variant's class,
marked ``# bug``. Sources (snapshot HEAD):

- 021ai/TransformerEngine-FP8FlowMoe 4c097bf: transformer_engine/pytorch/module/grouped_linear.py
  (_GroupedLinear.forward / .backward), transformer_engine/pytorch/module/linear.py (_Linear.forward /
  .backward), transformer_engine/pytorch/module/base.py (TransformerEngineBaseModule.backward_dw),
  transformer_engine/pytorch/ops/basic/basic_linear.py (BasicLinear.op_backward)
- 021ai/Megatron-LM-FP8FlowMoe e68853f: megatron/core/transformer/multi_latent_attention.py
  (MLASelfAttention.__init__ / backward_dw)
- HabanaAI/Megatron-LM 13c28de: megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py
  (FullyShardedDataParallel._register_fsdp_hooks._grad_acc)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------------------------ 1: which object
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/grouped_linear.py,
    # _GroupedLinear.forward (weight preparation and ctx setup, shortened). The main_grad getters must close over
    # the module's Parameters (weights); the regression closes over weights_fp8, the per-GEMM quantized / cast
    # workspaces built a few lines above, so backward takes main_grad from the stand-ins.
    Variant(
        1,
        "blind14-tefp8-grouped-fwd-main-grad-getters-on-cast-weights",
        bug="""
        @staticmethod
        def forward(ctx, inp, m_splits, use_bias, is_first_microbatch, fp8, fp8_calibration, wgrad_store, input_quantizers, weight_quantizers, output_quantizers, grad_output_quantizers, fuse_wgrad_accumulation, cpu_offloading, sequence_parallel, activation_dtype, is_grad_enabled, module, skip_fp8_weight_update, save_original_input, *weights_and_biases):
            num_gemms = len(m_splits)
            weights = weights_and_biases[:num_gemms]
            biases = weights_and_biases[num_gemms:]
            device = inp.device
            inp_view = inp.reshape(-1, weights[0].size(-1))
            inputmats = torch.split(cast_if_needed(inp_view, activation_dtype), m_splits)

            # Initialize weights
            weights_fp8: list
            if fp8:
                weights_fp8 = []
                for i in range(num_gemms):
                    weight_fp8 = module.get_weight_workspace(
                        tensor=weights[i],
                        quantizer=weight_quantizers[i],
                        cache_name=(None if is_first_microbatch is None else f"weight{i}"),
                        update_workspace=is_first_microbatch is None or is_first_microbatch,
                        skip_update_flag=skip_fp8_weight_update,
                    )
                    weights_fp8.append(weight_fp8)
            else:
                weights_fp8 = [cast_if_needed(weight, activation_dtype) for weight in weights]

            out = torch.empty([sum(m_splits), weights_fp8[0].size(0)], dtype=activation_dtype, device=device)
            general_grouped_gemm(weights_fp8, inputmats, [out], activation_dtype, get_multi_stream_cublas_workspace(), single_output=True, m_splits=m_splits, bias=biases, use_bias=use_bias)

            if is_grad_enabled:
                tensors_to_save, tensor_objects = prepare_for_saving(*inputmats, *weights_fp8, *weights, *biases)
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
                            lambda j=i: weights_fp8[j].main_grad for i in range(num_gemms)  # bug
                        ]
                else:
                    ctx.main_grad_funcs = [lambda: None for i in range(num_gemms)]
                ctx.m_splits = m_splits
                ctx.num_gemms = num_gemms
                ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                ctx.wgrad_store = wgrad_store
            return out.view(-1, *inp.shape[1:-1], out.shape[-1])
        """,
        twin="""
        @staticmethod
        def forward(ctx, inp, m_splits, use_bias, is_first_microbatch, fp8, fp8_calibration, wgrad_store, input_quantizers, weight_quantizers, output_quantizers, grad_output_quantizers, fuse_wgrad_accumulation, cpu_offloading, sequence_parallel, activation_dtype, is_grad_enabled, module, skip_fp8_weight_update, save_original_input, *weights_and_biases):
            num_gemms = len(m_splits)
            weights = weights_and_biases[:num_gemms]
            biases = weights_and_biases[num_gemms:]
            device = inp.device
            inp_view = inp.reshape(-1, weights[0].size(-1))
            inputmats = torch.split(cast_if_needed(inp_view, activation_dtype), m_splits)

            # Initialize weights
            weights_fp8: list
            if fp8:
                weights_fp8 = []
                for i in range(num_gemms):
                    weight_fp8 = module.get_weight_workspace(
                        tensor=weights[i],
                        quantizer=weight_quantizers[i],
                        cache_name=(None if is_first_microbatch is None else f"weight{i}"),
                        update_workspace=is_first_microbatch is None or is_first_microbatch,
                        skip_update_flag=skip_fp8_weight_update,
                    )
                    weights_fp8.append(weight_fp8)
            else:
                weights_fp8 = [cast_if_needed(weight, activation_dtype) for weight in weights]

            out = torch.empty([sum(m_splits), weights_fp8[0].size(0)], dtype=activation_dtype, device=device)
            general_grouped_gemm(weights_fp8, inputmats, [out], activation_dtype, get_multi_stream_cublas_workspace(), single_output=True, m_splits=m_splits, bias=biases, use_bias=use_bias)

            if is_grad_enabled:
                tensors_to_save, tensor_objects = prepare_for_saving(*inputmats, *weights_fp8, *weights, *biases)
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
                ctx.m_splits = m_splits
                ctx.num_gemms = num_gemms
                ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                ctx.wgrad_store = wgrad_store
            return out.view(-1, *inp.shape[1:-1], out.shape[-1])
        """,
    ),
    # ------------------------------------------------------------------ 2: parameter rebound
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/linear.py, _Linear.backward
    # (CPU-offload restore and custom-DDP block). The real code gets the user's Parameter back from
    # ctx.weight_object (torch strips the wrapper from offloaded tensors). The regression re-wraps the restored
    # tensor in a fresh torch.nn.Parameter instead: main_grad is attached to the new object, which has no
    # grad_added_to_main_grad, so the real Parameter is never flagged and receives no dummy.
    Variant(
        2,
        "blind14-tefp8-linear-bwd-offload-rewraps-fresh-parameter",
        bug="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            ctx.tensor_objects = None

            # Since main_grad can be modified inplace, it should not be a part of saved_tensors
            main_grad = (
                ctx.main_grad_func()
                if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                else None
            )

            if ctx.cpu_offloading:
                if ctx.grad_added_to_main_grad:
                    weight = torch.nn.Parameter(weight, requires_grad=ctx.requires_wgrad)  # bug
                if ctx.requires_wgrad and ctx.fuse_wgrad_accumulation:
                    weight.main_grad = main_grad

            dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)
            wgrad = None
            if ctx.requires_wgrad:
                accumulate_wgrad_into_param_main_grad = (
                    ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    if ctx.is_first_microbatch is not None
                    else ctx.fuse_wgrad_accumulation
                )
                wgrad, _, *_ = general_gemm(
                    inputmat,
                    grad_output,
                    get_workspace(),
                    out_dtype=(main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                    accumulate=accumulate_wgrad_into_param_main_grad,
                    layout="NT",
                    out=main_grad if ctx.fuse_wgrad_accumulation else None,
                    grad=True,
                )

            if ctx.requires_wgrad:
                # Handle custom DDP from mcore.
                if (
                    ctx.fuse_wgrad_accumulation
                    and weight is not None
                    and hasattr(weight, "grad_added_to_main_grad")
                ):
                    weight.grad_added_to_main_grad = True
                    if getattr(weight, "zero_out_wgrad", False):
                        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
                    else:
                        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype)
                elif ctx.fuse_wgrad_accumulation:
                    wgrad = None
            else:
                wgrad = None
            return (wgrad, dgrad.view(ctx.inp_shape), None, None)
        """,
        twin="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            ctx.tensor_objects = None

            # Since main_grad can be modified inplace, it should not be a part of saved_tensors
            main_grad = (
                ctx.main_grad_func()
                if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                else None
            )

            if ctx.cpu_offloading:
                if ctx.grad_added_to_main_grad:
                    weight = ctx.weight_object
                if ctx.requires_wgrad and ctx.fuse_wgrad_accumulation:
                    weight.main_grad = main_grad

            dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)
            wgrad = None
            if ctx.requires_wgrad:
                accumulate_wgrad_into_param_main_grad = (
                    ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    if ctx.is_first_microbatch is not None
                    else ctx.fuse_wgrad_accumulation
                )
                wgrad, _, *_ = general_gemm(
                    inputmat,
                    grad_output,
                    get_workspace(),
                    out_dtype=(main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                    accumulate=accumulate_wgrad_into_param_main_grad,
                    layout="NT",
                    out=main_grad if ctx.fuse_wgrad_accumulation else None,
                    grad=True,
                )

            if ctx.requires_wgrad:
                # Handle custom DDP from mcore.
                if (
                    ctx.fuse_wgrad_accumulation
                    and weight is not None
                    and hasattr(weight, "grad_added_to_main_grad")
                ):
                    weight.grad_added_to_main_grad = True
                    if getattr(weight, "zero_out_wgrad", False):
                        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
                    else:
                        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype)
                elif ctx.fuse_wgrad_accumulation:
                    wgrad = None
            else:
                wgrad = None
            return (wgrad, dgrad.view(ctx.inp_shape), None, None)
        """,
    ),
    # ------------------------------------------------------------------ 3: flags without writes (converse)
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/ops/basic/basic_linear.py,
    # BasicLinear.op_backward (post-GEMM part). The GEMM accumulates into main_grad (grad_weight is
    # main_grad.detach()). The regression narrows the dummy to the zero_out_wgrad case ("only shared weights need
    # a dummy") and drops the reset to None: ordinary weights get their main_grad written, no
    # grad_added_to_main_grad, and main_grad itself handed on as .grad, which the DDP hook adds into main_grad.
    Variant(
        3,
        "blind14-tefp8-basiclinear-op-bwd-main-grad-written-no-flag",
        bug="""
        def op_backward(
            self,
            ctx: OperationContext,
            grad_output: torch.Tensor,
        ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:
            (x_local, w) = ctx.saved_tensors

            accumulate_into_main_grad = self._accumulate_into_main_grad
            grad_weight = None
            if ctx.weight_requires_grad and accumulate_into_main_grad:
                weight_param = self.weight
                if hasattr(weight_param, "__fsdp_param__"):
                    weight_param.main_grad = weight_param.get_main_grad()
                if not hasattr(weight_param, "main_grad"):
                    raise RuntimeError(
                        "BasicLinear op is configured with "
                        "accumulate_into_main_grad=True, "
                        "but weight parameter does not have main_grad attribute"
                    )
                grad_weight = weight_param.main_grad.detach()
            else:
                accumulate_into_main_grad = False

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
            )
            clear_tensor_data(x_local)

            # Megatron-LM wgrad fusion
            # Note: Return dummy tensor for grad weight if needed.
            if accumulate_into_main_grad:
                weight_param = self.weight
                if hasattr(weight_param, "grad_added_to_main_grad") and getattr(weight_param, "zero_out_wgrad", False):  # bug
                    weight_param.grad_added_to_main_grad = True
                    grad_weight = get_dummy_wgrad(
                        list(weight_param.size()),
                        weight_param.dtype,
                        zero=True,
                    )

            return grad_input, [grad_weight]
        """,
        twin="""
        def op_backward(
            self,
            ctx: OperationContext,
            grad_output: torch.Tensor,
        ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:
            (x_local, w) = ctx.saved_tensors

            accumulate_into_main_grad = self._accumulate_into_main_grad
            grad_weight = None
            if ctx.weight_requires_grad and accumulate_into_main_grad:
                weight_param = self.weight
                if hasattr(weight_param, "__fsdp_param__"):
                    weight_param.main_grad = weight_param.get_main_grad()
                if not hasattr(weight_param, "main_grad"):
                    raise RuntimeError(
                        "BasicLinear op is configured with "
                        "accumulate_into_main_grad=True, "
                        "but weight parameter does not have main_grad attribute"
                    )
                grad_weight = weight_param.main_grad.detach()
            else:
                accumulate_into_main_grad = False

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
            )
            clear_tensor_data(x_local)

            # Megatron-LM wgrad fusion
            # Note: Return dummy tensor for grad weight if needed.
            if accumulate_into_main_grad:
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
        """,
    ),
    # ------------------------------------------------------------------ 4: overwrite without asking
    # HabanaAI/Megatron-LM 13c28de, megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py,
    # FullyShardedDataParallel._register_fsdp_hooks (the nested _grad_acc, shortened). The real code copies
    # .grad into main_grad only for the "optim_grads" / "optim_grads_params" sharding strategies and adds it
    # otherwise. The regression collapses both branches into the copy ("the buffer is reduce-scattered every
    # step anyway") and no longer reads the strategy: with "no_shard" / "optim" and gradient accumulation only the
    # last microbatch's gradient survives.
    Variant(
        4,
        "blind14-habana-custom-fsdp-grad-acc-always-copies",
        bug="""
        class FullyShardedDataParallel(_BaseDataParallel):
            def _register_fsdp_hooks(self, root_module):
                def _grad_acc(param):
                    group_id = self.param_and_grad_buffer.param_to_param_group[param]
                    group = self.param_and_grad_buffer.parameter_groups[group_id]
                    if not group.requires_grad:
                        return

                    if not param.grad_added_to_main_grad:
                        # Get `main_grad` will allocate bucket, check that the currently
                        # used main_grad buffer does not exceed the scope of two FSDP Unit
                        # Modules, i.e., the buffer limit imposed by double-buffer allocator.
                        if self.ddp_config.fsdp_double_buffer:
                            self.grad_reduce_pipeline._enforce_double_buffer_limit([group_id])

                        if param.grad is not None:
                            param.main_grad.copy_(param.grad)  # bug
                            del param.grad
                        else:
                            param.main_grad.zero_()
                    # Reset the grad accumulate flag.
                    param.grad_added_to_main_grad = False

                def _post_backward(module, *unused):
                    if isinstance(module, tuple(fsdp_unit_modules)):
                        param_list = list(module.parameters())
                    else:
                        param_list = list(module.parameters(recurse=False))
                    for param in param_list:
                        _grad_acc(param)

                fsdp_unit_modules = self.fsdp_unit_modules
                for module in root_module.modules():
                    module.register_full_backward_hook(_post_backward)
        """,
        twin="""
        class FullyShardedDataParallel(_BaseDataParallel):
            def _register_fsdp_hooks(self, root_module):
                def _grad_acc(param):
                    group_id = self.param_and_grad_buffer.param_to_param_group[param]
                    group = self.param_and_grad_buffer.parameter_groups[group_id]
                    if not group.requires_grad:
                        return

                    overwrite_main_grad = self.ddp_config.data_parallel_sharding_strategy in [
                        "optim_grads",
                        "optim_grads_params",
                    ]
                    if overwrite_main_grad:
                        if not param.grad_added_to_main_grad:
                            # Get `main_grad` will allocate bucket, check that the currently
                            # used main_grad buffer does not exceed the scope of two FSDP Unit
                            # Modules, i.e., the buffer limit imposed by double-buffer allocator.
                            if self.ddp_config.fsdp_double_buffer:
                                self.grad_reduce_pipeline._enforce_double_buffer_limit([group_id])

                            if param.grad is not None:
                                param.main_grad.copy_(param.grad)
                                del param.grad
                            else:
                                param.main_grad.zero_()
                    else:
                        if not param.grad_added_to_main_grad:
                            if param.grad is not None:
                                param.main_grad.add_(param.grad)
                                del param.grad
                    # Reset the grad accumulate flag.
                    param.grad_added_to_main_grad = False

                def _post_backward(module, *unused):
                    if isinstance(module, tuple(fsdp_unit_modules)):
                        param_list = list(module.parameters())
                    else:
                        param_list = list(module.parameters(recurse=False))
                    for param in param_list:
                        _grad_acc(param)

                fsdp_unit_modules = self.fsdp_unit_modules
                for module in root_module.modules():
                    module.register_full_backward_hook(_post_backward)
        """,
    ),
    # ------------------------------------------------------------------ 5: hooks without bookkeeping
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/linear.py, _Linear.backward
    # (wgrad choice and custom-DDP block), and transformer_engine/pytorch/module/base.py,
    # TransformerEngineBaseModule.backward_dw. With delay_wgrad_compute the GEMM goes to the wgrad store and
    # backward_dw() later runs it and fires the registered wgrad-accumulation-and-reduce hooks. The regression
    # skips the custom-DDP block on the delayed path, so backward_dw() fires the hooks for a weight with neither
    # grad_added_to_main_grad set nor a dummy .grad.
    Variant(
        5,
        "blind14-tefp8-linear-delayed-wgrad-hooks-without-ddp-block",
        bug="""
        class _Linear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                main_grad = (
                    ctx.main_grad_func()
                    if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                    else None
                )
                dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)
                wgrad = None
                delayed = ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute()
                if ctx.requires_wgrad:
                    wgrad_gemm_kwargs = {
                        "workspace": get_workspace(),
                        "out_dtype": (main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                        "accumulate": ctx.fuse_wgrad_accumulation,
                        "layout": "NT",
                        "out": main_grad if ctx.fuse_wgrad_accumulation else None,
                        "grad": True,
                    }

                    def wgrad_gemm(x, dy):
                        dw, db, *_ = general_gemm(x, dy, **wgrad_gemm_kwargs)
                        return dw, db

                    if delayed:
                        ctx.wgrad_store.put([inputmat, grad_output], wgrad_gemm)
                    else:
                        wgrad, _ = wgrad_gemm(inputmat, grad_output)

                if ctx.requires_wgrad and not delayed:  # bug
                    # Handle custom DDP from mcore.
                    if (
                        ctx.fuse_wgrad_accumulation
                        and weight is not None
                        and hasattr(weight, "grad_added_to_main_grad")
                    ):
                        weight.grad_added_to_main_grad = True
                        wgrad = get_dummy_wgrad(
                            list(weight.main_grad.shape),
                            weight.dtype,
                            zero=getattr(weight, "zero_out_wgrad", False),
                        )
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                else:
                    wgrad = None
                return (wgrad, dgrad.view(ctx.inp_shape), None, None)


        class TransformerEngineBaseModule(torch.nn.Module):
            def backward_dw(self):
                if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
                    return
                with torch.cuda.nvtx.range(f"_{self.__class__.__name__}_wgrad"):
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        weight_tensor = noop_cat(self._get_weight_tensors())
                        weight_tensor.grad = wgrad.to(weight_tensor.dtype)
                    del wgrad
                    del bgrad
                    for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                        wgrad_accumulation_and_reduce_hook()
        """,
        twin="""
        class _Linear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                main_grad = (
                    ctx.main_grad_func()
                    if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                    else None
                )
                dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)
                wgrad = None
                delayed = ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute()
                if ctx.requires_wgrad:
                    wgrad_gemm_kwargs = {
                        "workspace": get_workspace(),
                        "out_dtype": (main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                        "accumulate": ctx.fuse_wgrad_accumulation,
                        "layout": "NT",
                        "out": main_grad if ctx.fuse_wgrad_accumulation else None,
                        "grad": True,
                    }

                    def wgrad_gemm(x, dy):
                        dw, db, *_ = general_gemm(x, dy, **wgrad_gemm_kwargs)
                        return dw, db

                    if delayed:
                        ctx.wgrad_store.put([inputmat, grad_output], wgrad_gemm)
                    else:
                        wgrad, _ = wgrad_gemm(inputmat, grad_output)

                if ctx.requires_wgrad:
                    # Handle custom DDP from mcore.
                    if (
                        ctx.fuse_wgrad_accumulation
                        and weight is not None
                        and hasattr(weight, "grad_added_to_main_grad")
                    ):
                        weight.grad_added_to_main_grad = True
                        wgrad = get_dummy_wgrad(
                            list(weight.main_grad.shape),
                            weight.dtype,
                            zero=getattr(weight, "zero_out_wgrad", False),
                        )
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                else:
                    wgrad = None
                return (wgrad, dgrad.view(ctx.inp_shape), None, None)


        class TransformerEngineBaseModule(torch.nn.Module):
            def backward_dw(self):
                if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
                    return
                with torch.cuda.nvtx.range(f"_{self.__class__.__name__}_wgrad"):
                    (wgrad, bgrad), _ = self.wgrad_store.pop()
                    if not self.fuse_wgrad_accumulation:
                        weight_tensor = noop_cat(self._get_weight_tensors())
                        weight_tensor.grad = wgrad.to(weight_tensor.dtype)
                    del wgrad
                    del bgrad
                    for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                        wgrad_accumulation_and_reduce_hook()
        """,
    ),
    # ------------------------------------------------------------------ 6: delayed wgrad across classes
    # 021ai/Megatron-LM-FP8FlowMoe e68853f, megatron/core/transformer/multi_latent_attention.py,
    # MLASelfAttention.__init__ (projection construction, shortened) and backward_dw with its helpers. The
    # q projections are TE linears built from config, so under delay_wgrad_compute they need backward_dw(). The
    # regression only runs the q part when there is no q LoRA ("the q_down / q_up wgrads are tiny"): with
    # q_lora_rank set, linear_q_down_proj and linear_q_up_proj never compute their weight gradients.
    Variant(
        6,
        "blind14-mlfp8-mla-backward-dw-skips-q-lora-projections",
        bug="""
        class MLASelfAttention(MultiLatentAttention):
            def __init__(self, config, submodules, layer_number, attn_mask_type=AttnMaskType.padding, cp_comm_type=None, pg_collection=None):
                super().__init__(config=config, submodules=submodules, layer_number=layer_number, attn_mask_type=attn_mask_type, attention_type="self", cp_comm_type=cp_comm_type, pg_collection=pg_collection)
                if self.config.q_lora_rank is None:
                    self.linear_q_proj = build_module(submodules.linear_q_proj, self.config.hidden_size, self.config.num_attention_heads * self.q_head_dim, config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_proj")
                else:
                    self.linear_q_down_proj = build_module(submodules.linear_q_down_proj, self.config.hidden_size, self.config.q_lora_rank, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")
                    self.linear_q_up_proj = build_module(submodules.linear_q_up_proj, self.config.q_lora_rank, self.config.num_attention_heads * self.q_head_dim, config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_up_proj")
                self.linear_kv_down_proj = build_module(submodules.linear_kv_down_proj, self.config.hidden_size, self.config.kv_lora_rank + self.config.qk_pos_emb_head_dim, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="kv_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")
                self.linear_kv_up_proj = build_module(submodules.linear_kv_up_proj, self.config.kv_lora_rank, self.config.num_attention_heads * (self.config.qk_head_dim + self.config.v_head_dim), config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="kv_up_proj")

            def backward_dw(self) -> NoReturn:
                self._backward_kv_proj()
                if self.config.q_lora_rank is None:  # bug
                    self._backward_q_proj()
                self._backward_output_proj()

            def _backward_kv_proj(self):
                self.linear_kv_up_proj.backward_dw()
                self.linear_kv_down_proj.backward_dw()

            def _backward_q_proj(self):
                if self.config.q_lora_rank is None:
                    self.linear_q_proj.backward_dw()
                else:
                    self.linear_q_down_proj.backward_dw()
                    self.linear_q_up_proj.backward_dw()

            def _backward_output_proj(self):
                self.linear_proj.backward_dw()
        """,
        twin="""
        class MLASelfAttention(MultiLatentAttention):
            def __init__(self, config, submodules, layer_number, attn_mask_type=AttnMaskType.padding, cp_comm_type=None, pg_collection=None):
                super().__init__(config=config, submodules=submodules, layer_number=layer_number, attn_mask_type=attn_mask_type, attention_type="self", cp_comm_type=cp_comm_type, pg_collection=pg_collection)
                if self.config.q_lora_rank is None:
                    self.linear_q_proj = build_module(submodules.linear_q_proj, self.config.hidden_size, self.config.num_attention_heads * self.q_head_dim, config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_proj")
                else:
                    self.linear_q_down_proj = build_module(submodules.linear_q_down_proj, self.config.hidden_size, self.config.q_lora_rank, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")
                    self.linear_q_up_proj = build_module(submodules.linear_q_up_proj, self.config.q_lora_rank, self.config.num_attention_heads * self.q_head_dim, config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_up_proj")
                self.linear_kv_down_proj = build_module(submodules.linear_kv_down_proj, self.config.hidden_size, self.config.kv_lora_rank + self.config.qk_pos_emb_head_dim, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="kv_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")
                self.linear_kv_up_proj = build_module(submodules.linear_kv_up_proj, self.config.kv_lora_rank, self.config.num_attention_heads * (self.config.qk_head_dim + self.config.v_head_dim), config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="kv_up_proj")

            def backward_dw(self) -> NoReturn:
                self._backward_kv_proj()
                self._backward_q_proj()
                self._backward_output_proj()

            def _backward_kv_proj(self):
                self.linear_kv_up_proj.backward_dw()
                self.linear_kv_down_proj.backward_dw()

            def _backward_q_proj(self):
                if self.config.q_lora_rank is None:
                    self.linear_q_proj.backward_dw()
                else:
                    self.linear_q_down_proj.backward_dw()
                    self.linear_q_up_proj.backward_dw()

            def _backward_output_proj(self):
                self.linear_proj.backward_dw()
        """,
    ),
    # ------------------------------------------------------------------ 7: the seed shape in other syntax
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/grouped_linear.py,
    # _GroupedLinear.backward (wgrad part). accumulate_wgrad_into_param_main_grad is the GEMM's accumulate flag,
    # False on the first microbatch although the GEMM still writes main_grad. The regression decides per weight
    # in the list comprehension, on that local flag, whether to run the custom-DDP handling: on first
    # microbatches the weights are not flagged and main_grad itself is returned as their .grad.
    Variant(
        7,
        "blind14-tefp8-grouped-bwd-comprehension-gates-ddp-on-local-flag",
        bug="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            N = ctx.num_gemms
            inputmats = saved_tensors[:N]
            weights = saved_tensors[N : 2 * N]
            origin_weights = saved_tensors[2 * N : 3 * N]
            main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
            grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.m_splits)

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
                    wgrad_list = [
                        torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device)
                        for w in weights
                    ]
                general_grouped_gemm(
                    inputmats,
                    grad_output,
                    wgrad_list,
                    ctx.activation_dtype,
                    get_multi_stream_cublas_workspace(),
                    layout="NT",
                    grad=True,
                    m_splits=ctx.m_splits,
                    accumulate=accumulate_wgrad_into_param_main_grad,
                )

                def handle_custom_ddp_from_mcore(weight, wgrad):
                    if ctx.weights_requires_grad:
                        if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                            weight.grad_added_to_main_grad = True
                            if getattr(weight, "zero_out_wgrad", False):
                                wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        elif ctx.fuse_wgrad_accumulation:
                            wgrad = None
                    else:
                        wgrad = None
                    return wgrad

                wgrad_list = [
                    handle_custom_ddp_from_mcore(weight, wgrad) if accumulate_wgrad_into_param_main_grad else wgrad  # bug
                    for weight, wgrad in zip(origin_weights, wgrad_list)
                ]
            else:
                wgrad_list = [None] * ctx.num_gemms
            return (None, *wgrad_list)
        """,
        twin="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            N = ctx.num_gemms
            inputmats = saved_tensors[:N]
            weights = saved_tensors[N : 2 * N]
            origin_weights = saved_tensors[2 * N : 3 * N]
            main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
            grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.m_splits)

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
                    wgrad_list = [
                        torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device)
                        for w in weights
                    ]
                general_grouped_gemm(
                    inputmats,
                    grad_output,
                    wgrad_list,
                    ctx.activation_dtype,
                    get_multi_stream_cublas_workspace(),
                    layout="NT",
                    grad=True,
                    m_splits=ctx.m_splits,
                    accumulate=accumulate_wgrad_into_param_main_grad,
                )

                def handle_custom_ddp_from_mcore(weight, wgrad):
                    if ctx.weights_requires_grad:
                        if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                            weight.grad_added_to_main_grad = True
                            if getattr(weight, "zero_out_wgrad", False):
                                wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
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
            return (None, *wgrad_list)
        """,
    ),
    # ------------------------------------------------------------------ 8: Megatron-LM #5209's shape
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/linear.py, _Linear.forward
    # (ctx setup for wgrad fusion) and the start of _Linear.backward. Megatron-FSDP creates main_grad lazily, so
    # the real code stores weight.get_main_grad for __fsdp_param__ weights and calls it in backward. The
    # regression always stores a getter of weight.main_grad ("the lambda is lazy anyway"): under Megatron-FSDP
    # it returns None (or a stale buffer), and the wgrad GEMM is handed out=None or the wrong buffer.
    Variant(
        8,
        "blind14-tefp8-linear-fwd-main-grad-getter-skips-get-main-grad",
        bug="""
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, weight, inp, bias, is_first_microbatch, fp8, fuse_wgrad_accumulation, cpu_offloading, activation_dtype, is_grad_enabled, wgrad_store):
                out, *_ = general_gemm(weight, inp, get_workspace(), out_dtype=activation_dtype, bias=bias)
                if is_grad_enabled:
                    tensors_to_save, tensor_objects = prepare_for_saving(inp, weight, weight, bias)
                    ctx.save_for_backward(*tensors_to_save)
                    ctx.tensor_objects = tensor_objects
                    ctx.activation_dtype = activation_dtype
                    ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                    if fuse_wgrad_accumulation and weight.requires_grad:
                        ctx.main_grad_func = lambda: weight.main_grad  # bug
                    ctx.is_first_microbatch = is_first_microbatch
                    ctx.requires_wgrad = weight.requires_grad
                    ctx.wgrad_store = wgrad_store
                return out

            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                # Since main_grad can be modified inplace, it should not be a part of saved_tensors
                main_grad = (
                    ctx.main_grad_func()
                    if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                    else None
                )
                dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)
                wgrad = None
                if ctx.requires_wgrad:
                    wgrad, _, *_ = general_gemm(
                        inputmat,
                        grad_output,
                        get_workspace(),
                        out_dtype=(main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                        accumulate=ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch,
                        layout="NT",
                        out=main_grad if ctx.fuse_wgrad_accumulation else None,
                        grad=True,
                    )
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=getattr(weight, "zero_out_wgrad", False))
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                return (wgrad, dgrad, None, None, None, None, None, None, None, None)
        """,
        twin="""
        class _Linear(torch.autograd.Function):
            @staticmethod
            def forward(ctx, weight, inp, bias, is_first_microbatch, fp8, fuse_wgrad_accumulation, cpu_offloading, activation_dtype, is_grad_enabled, wgrad_store):
                out, *_ = general_gemm(weight, inp, get_workspace(), out_dtype=activation_dtype, bias=bias)
                if is_grad_enabled:
                    tensors_to_save, tensor_objects = prepare_for_saving(inp, weight, weight, bias)
                    ctx.save_for_backward(*tensors_to_save)
                    ctx.tensor_objects = tensor_objects
                    ctx.activation_dtype = activation_dtype
                    ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
                    if fuse_wgrad_accumulation and weight.requires_grad:
                        # This check is needed to ensure that main_grad is not created
                        # during the forward pass when using MCore FSDP as it creates
                        # the main_grad buffer lazily before backprop
                        if hasattr(weight, "__fsdp_param__"):
                            # MCore FSDP creates main_grad lazily before backward
                            ctx.main_grad_func = weight.get_main_grad
                        else:
                            ctx.main_grad_func = lambda: weight.main_grad
                    ctx.is_first_microbatch = is_first_microbatch
                    ctx.requires_wgrad = weight.requires_grad
                    ctx.wgrad_store = wgrad_store
                return out

            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                # Since main_grad can be modified inplace, it should not be a part of saved_tensors
                main_grad = (
                    ctx.main_grad_func()
                    if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                    else None
                )
                dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)
                wgrad = None
                if ctx.requires_wgrad:
                    wgrad, _, *_ = general_gemm(
                        inputmat,
                        grad_output,
                        get_workspace(),
                        out_dtype=(main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                        accumulate=ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch,
                        layout="NT",
                        out=main_grad if ctx.fuse_wgrad_accumulation else None,
                        grad=True,
                    )
                    if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                        weight.grad_added_to_main_grad = True
                        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=getattr(weight, "zero_out_wgrad", False))
                    elif ctx.fuse_wgrad_accumulation:
                        wgrad = None
                return (wgrad, dgrad, None, None, None, None, None, None, None, None)
        """,
    ),
)
