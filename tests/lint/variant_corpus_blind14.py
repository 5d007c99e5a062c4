"""The fourteenth blind corpus (H-blind14): 16 variants, the first two per class 1..8 of issue #19 (the third
of each class is in variant_corpus_blind14_heldout.py), written by someone who read neither the linter nor
its tests (only CONTRACT.md, the two seed reports and issue #19's class list).

Every variant is grounded in a real function that does main_grad / weight-gradient bookkeeping, read
from a repository snapshot in /work/.mirror that no earlier corpus used; the twin is that code shortened
(real names, control flow and idioms kept), the bug the same code with one regression of the variant's
class, marked ``# bug``. Where the snapshot's HEAD already seems to ship a bug of the class, the twin is the
corrected code (said in the comment above the variant). Sources (snapshot HEAD unless a commit is named):

- 021ai/TransformerEngine-FP8FlowMoe 4c097bf: transformer_engine/pytorch/module/linear.py
  (_Linear.backward), transformer_engine/pytorch/module/grouped_linear.py (_GroupedLinear.backward,
  GroupedLinear.backward_dw), transformer_engine/pytorch/ops/basic/basic_linear.py (BasicLinear.op_backward)
- 021ai/Megatron-LM-FP8FlowMoe e68853f: megatron/core/tensor_parallel/layers.py
  (LinearWithGradAccumulationAndAsyncCommunication.backward), megatron/core/transformer/cuda_graphs.py
  (_CudagraphReplayNode / Graphed backward, _CudaGraphRunner.get_input_grads_with_dummy_flags),
  megatron/core/transformer/moe/experts.py (TEGroupedMLP.backward_dw),
  megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py
  (MegatronFSDP._replace_param_with_distributed_if_needed), megatron/core/extensions/transformer_engine.py
  (TEFusedMLP.forward / _make_fused_impl)
- HabanaAI/Megatron-LM 13c28de: megatron/core/tensor_parallel/layers.py
  (LinearWithGradAccumulationAndAsyncCommunication.backward)
- THUDM/slime 624b824: slime_plugins/models/glm5/glm5.py (DSAMLASelfAttention.__init__ / backward_dw)
- bigscience-workshop/Megatron-DeepSpeed 8387ae1: megatron/model/distributed.py
  (DistributedDataParallel._make_param_hook)
- NVIDIA/apex 16fadfe (the last commit before apex.transformer was removed):
  apex/transformer/tensor_parallel/layers.py (LinearWithGradAccumulationAndAsyncCommunication.backward)
"""

# ruff: noqa: E501

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------------------------ 1: which object
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/linear.py, _Linear.backward
    # (userbuffers, FSDP gather, FP8 and debug paths dropped). Under CPU offload the saved weight comes back as a
    # plain tensor (torch rips off the Parameter wrapper), so the real code restores ctx.weight_object before
    # attaching main_grad and doing the custom-DDP bookkeeping. The regression "simplifies" the offload branch
    # into one condition and drops that restore: main_grad is hung on the restored stand-in, and the
    # grad_added_to_main_grad / dummy bookkeeping runs (or silently doesn't) on it instead of the Parameter.
    Variant(
        1,
        "blind14-tefp8-linear-bwd-cpu-offload-keeps-restored-weight-stand-in",
        bug="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            with torch.cuda.nvtx.range("_Linear_backward"):
                saved_tensors = ctx.saved_tensors
                inputmat, weight_fp8, weight, bias = (  # pylint: disable=unbalanced-tuple-unpacking
                    restore_from_saved(ctx.tensor_objects, saved_tensors)
                )
                ctx.tensor_objects = None

                # Since main_grad can be modified inplace, it should not be a part of saved_tensors
                main_grad = (
                    ctx.main_grad_func()
                    if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                    else None
                )

                if ctx.cpu_offloading and ctx.requires_wgrad and ctx.fuse_wgrad_accumulation:  # bug
                    weight.main_grad = main_grad

                dgrad = None
                if ctx.requires_dgrad:
                    dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)

                wgrad = None
                grad_bias = None
                if ctx.requires_wgrad:
                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
                    wgrad, grad_bias, *_ = general_gemm(
                        inputmat,
                        grad_output,
                        get_workspace(),
                        out_dtype=(main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                        accumulate=accumulate_wgrad_into_param_main_grad,
                        layout="NT",
                        out=main_grad if ctx.fuse_wgrad_accumulation else None,
                        bias=(bias if not ctx.fp8 else None),
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

            return (wgrad, dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, grad_bias if ctx.use_bias else None, None, None)
        """,
        twin="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            with torch.cuda.nvtx.range("_Linear_backward"):
                saved_tensors = ctx.saved_tensors
                inputmat, weight_fp8, weight, bias = (  # pylint: disable=unbalanced-tuple-unpacking
                    restore_from_saved(ctx.tensor_objects, saved_tensors)
                )
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

                dgrad = None
                if ctx.requires_dgrad:
                    dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)

                wgrad = None
                grad_bias = None
                if ctx.requires_wgrad:
                    if ctx.is_first_microbatch is not None:
                        accumulate_wgrad_into_param_main_grad = (
                            ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                        )
                    else:
                        accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation
                    wgrad, grad_bias, *_ = general_gemm(
                        inputmat,
                        grad_output,
                        get_workspace(),
                        out_dtype=(main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype),
                        accumulate=accumulate_wgrad_into_param_main_grad,
                        layout="NT",
                        out=main_grad if ctx.fuse_wgrad_accumulation else None,
                        bias=(bias if not ctx.fp8 else None),
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

            return (wgrad, dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, grad_bias if ctx.use_bias else None, None, None)
        """,
    ),
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/ops/basic/basic_linear.py,
    # BasicLinear.op_backward (the op-fuser linear). The GEMM writes self.weight.main_grad; the regression takes
    # the parameter for the post-GEMM bookkeeping from the saved tensors (w, which is the quantized / cast weight
    # under quantized compute), so hasattr(..., "grad_added_to_main_grad") and the dummy's shape follow the
    # stand-in and the real Parameter is never flagged.
    Variant(
        1,
        "blind14-tefp8-basiclinear-op-bwd-bookkeeping-on-saved-weight",
        bug="""
        def op_backward(
            self,
            ctx: OperationContext,
            grad_output: torch.Tensor,
        ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:

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
            )

            # Clear input tensor if possible
            clear_tensor_data(x_local)

            # Megatron-LM wgrad fusion
            # Note: Return dummy tensor for grad weight if needed.
            if accumulate_into_main_grad:
                grad_weight = None
                weight_param = w  # bug
                if hasattr(weight_param, "grad_added_to_main_grad"):
                    weight_param.grad_added_to_main_grad = True
                    grad_weight = get_dummy_wgrad(
                        list(weight_param.size()),
                        weight_param.dtype,
                        zero=getattr(weight_param, "zero_out_wgrad", False),
                    )

            return grad_input, [grad_weight]
        """,
        twin="""
        def op_backward(
            self,
            ctx: OperationContext,
            grad_output: torch.Tensor,
        ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:

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
            )

            # Clear input tensor if possible
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
    # ------------------------------------------------------------------ 2: parameter rebound
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/grouped_linear.py,
    # _GroupedLinear.backward (FP8 grad-output quantization, save_original_input and bias paths shortened). The
    # real code re-wraps only the restored compute weights under CPU offload and keeps the module's Parameters
    # (origin_weights) for the custom-DDP bookkeeping. The regression re-wraps origin_weights instead ("so that
    # the weights handed to mcore carry main_grad"): each is a fresh torch.nn.Parameter with only main_grad, so
    # hasattr(weight, "grad_added_to_main_grad") fails, the real Parameter is never flagged and gets no dummy.
    Variant(
        2,
        "blind14-tefp8-grouped-bwd-offload-rewraps-origin-weights",
        bug="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                origin_weights = saved_tensors[2 * N : 3 * N]
                biases = saved_tensors[3 * N : 4 * N]
                main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]

                if ctx.cpu_offloading and ctx.fuse_wgrad_accumulation:
                    for i in range(ctx.num_gemms):
                        w = torch.nn.Parameter(origin_weights[i], origin_weights[i].requires_grad)  # bug
                        w.main_grad = main_grads[i]
                        origin_weights[i] = w  # bug

                grad_output_view = grad_output.contiguous().view(-1, grad_output.shape[-1])
                grad_output = torch.split(
                    cast_if_needed(grad_output_view, ctx.activation_dtype),
                    ctx.m_splits,
                )

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

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
                        accumulate=accumulate_wgrad_into_param_main_grad,
                    )
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)

                    def handle_custom_ddp_from_mcore(weight, wgrad):
                        if ctx.weights_requires_grad:
                            # Handle custom DDP from mcore.
                            if ctx.fuse_wgrad_accumulation and hasattr(
                                weight, "grad_added_to_main_grad"
                            ):
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

            return (dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, None, None, *wgrad_list)
        """,
        twin="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            with torch.cuda.nvtx.range("_GroupedLinear_backward"):
                saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                weights = saved_tensors[N : 2 * N]
                origin_weights = saved_tensors[2 * N : 3 * N]
                biases = saved_tensors[3 * N : 4 * N]
                main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]

                if ctx.cpu_offloading and ctx.fuse_wgrad_accumulation:
                    for i in range(ctx.num_gemms):
                        w = torch.nn.Parameter(weights[i], weights[i].requires_grad)
                        w.main_grad = main_grads[i]
                        weights[i] = w

                grad_output_view = grad_output.contiguous().view(-1, grad_output.shape[-1])
                grad_output = torch.split(
                    cast_if_needed(grad_output_view, ctx.activation_dtype),
                    ctx.m_splits,
                )

                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

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
                        accumulate=accumulate_wgrad_into_param_main_grad,
                    )
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)

                    def handle_custom_ddp_from_mcore(weight, wgrad):
                        if ctx.weights_requires_grad:
                            # Handle custom DDP from mcore.
                            if ctx.fuse_wgrad_accumulation and hasattr(
                                weight, "grad_added_to_main_grad"
                            ):
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

            return (dgrad.view(ctx.inp_shape) if ctx.requires_dgrad else None, None, None, *wgrad_list)
        """,
    ),
    # 021ai/Megatron-LM-FP8FlowMoe e68853f, megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py,
    # MegatronFSDP._replace_param_with_distributed_if_needed plus the module-level _replace_module_parameter. The
    # real code installs the buffer's own distributed parameter objects (which carry get_main_grad, the
    # main_grad property and grad_added_to_main_grad) into the module. The regression re-wraps each one in a
    # fresh torch.nn.Parameter "so that the module sees a Parameter": the object the module now holds has no
    # main_grad, no get_main_grad and no grad_added_to_main_grad, so fused wgrad GEMMs and _grad_acc lose it.
    Variant(
        2,
        "blind14-mlfp8-fsdp-replace-param-rewraps-fresh-parameter",
        bug="""
        class MegatronFSDP(torch.nn.Module):
            def _replace_param_with_distributed_if_needed(self):
                if self.is_param_fsdp_distributed:
                    return
                self.is_param_fsdp_distributed = True

                pg_buffer = self.param_and_grad_buffer
                fsdp_params = dict(pg_buffer.optimizer_named_parameters)
                for name, _ in self.module.named_parameters():
                    assert name in fsdp_params, f"Parameter {name} not found in FSDP parameters."
                    dist_param = torch.nn.Parameter(fsdp_params[name], requires_grad=fsdp_params[name].requires_grad)  # bug
                    # Set the __fsdp_param__ attribute to True to indicate that this
                    # DTensor parameter is managed by Megatron FSDP.
                    if not hasattr(dist_param, "__fsdp_param__"):
                        dist_param.__fsdp_param__ = True
                    _replace_module_parameter(self.module, name, dist_param)

                # Handle shared weights
                self._reestablish_shared_weights(self.raw_param, fsdp_params)


        def _replace_module_parameter(module, name, new_param):
            parts = name.split(".")
            parent = module
            for part in parts[:-1]:  # Navigate to parent module
                parent = getattr(parent, part)

            # Replace the parameter
            setattr(parent, parts[-1], new_param)
        """,
        twin="""
        class MegatronFSDP(torch.nn.Module):
            def _replace_param_with_distributed_if_needed(self):
                if self.is_param_fsdp_distributed:
                    return
                self.is_param_fsdp_distributed = True

                pg_buffer = self.param_and_grad_buffer
                fsdp_params = dict(pg_buffer.optimizer_named_parameters)
                for name, _ in self.module.named_parameters():
                    assert name in fsdp_params, f"Parameter {name} not found in FSDP parameters."
                    dist_param = fsdp_params[name]
                    # Set the __fsdp_param__ attribute to True to indicate that this
                    # DTensor parameter is managed by Megatron FSDP.
                    if not hasattr(dist_param, "__fsdp_param__"):
                        dist_param.__fsdp_param__ = True
                    _replace_module_parameter(self.module, name, dist_param)

                # Handle shared weights
                self._reestablish_shared_weights(self.raw_param, fsdp_params)


        def _replace_module_parameter(module, name, new_param):
            parts = name.split(".")
            parent = module
            for part in parts[:-1]:  # Navigate to parent module
                parent = getattr(parent, part)

            # Replace the parameter
            setattr(parent, parts[-1], new_param)
        """,
    ),
    # ------------------------------------------------------------------ 3: flags without writes
    # HabanaAI/Megatron-LM 13c28de, megatron/core/tensor_parallel/layers.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward (sequence-parallel all-gather / reduce-scatter
    # kept in short form). The regression dedents the custom-DDP block out of `if ctx.gradient_accumulation_fusion:`
    # ("the hook needs the dummy in both modes"): with fusion off nothing writes main_grad, yet the weight is
    # flagged grad_added_to_main_grad and its real gradient is replaced by an uninitialised dummy, so the DDP hook
    # skips it and the step's weight gradient is lost.
    Variant(
        3,
        "blind14-habana-linear-bwd-ddp-flag-set-on-non-fused-path",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            main_grad = ctx.main_grad
            use_bias = ctx.use_bias
            grad_output_buffer = ctx.grad_output_buffer
            wgrad_deferral_limit = ctx.wgrad_deferral_limit
            handle = None
            tp_group = ctx.tp_group

            if ctx.gradient_accumulation_fusion:
                weight.main_grad = main_grad

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
                handle = torch.distributed.all_reduce(grad_input, group=tp_group, async_op=True)

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
                grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)

            if hasattr(weight, "grad_added_to_main_grad"):  # bug
                # When overlap_grad_reduce is True, need to ensure that backward hooks
                # are all run on the main backprop thread to prevent deadlocks. Setup
                # dummy grad_weight tensor to prevent backward hooks from being run
                # in a background thread.
                if getattr(weight, "zero_out_wgrad", False):
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
            grad_bias = grad_output.sum(dim=0) if use_bias else None

            if ctx.allreduce_dgrad:
                handle.wait()

            return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
        """,
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            main_grad = ctx.main_grad
            use_bias = ctx.use_bias
            grad_output_buffer = ctx.grad_output_buffer
            wgrad_deferral_limit = ctx.wgrad_deferral_limit
            handle = None
            tp_group = ctx.tp_group

            if ctx.gradient_accumulation_fusion:
                weight.main_grad = main_grad

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
                handle = torch.distributed.all_reduce(grad_input, group=tp_group, async_op=True)

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

                if hasattr(weight, "grad_added_to_main_grad"):
                    # When overlap_grad_reduce is True, need to ensure that backward hooks
                    # are all run on the main backprop thread to prevent deadlocks. Setup
                    # dummy grad_weight tensor to prevent backward hooks from being run
                    # in a background thread.
                    if getattr(weight, "zero_out_wgrad", False):
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

            return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
        """,
    ),
    # 021ai/Megatron-LM-FP8FlowMoe e68853f, megatron/core/transformer/cuda_graphs.py, _CudagraphReplayNode.backward
    # (the backward-graph replay). After replay the real code restores, per parameter, the
    # grad_added_to_main_grad value recorded at capture time (True only where the captured backward wrote
    # main_grad). The regression sets it True for every parameter that carries the attribute: parameters whose
    # captured wgrad was a real gradient (not written into main_grad) are flagged, get a dummy, and the DDP hook
    # never adds their gradient.
    Variant(
        3,
        "blind14-mlfp8-cudagraph-bwd-replay-flags-every-param",
        bug="""
        class _CudagraphReplayNode(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                runner = ctx.runner
                assert (
                    runner.bwd_graph is not None
                ), "Tried replaying bwd cudagraph before calling 'create_bwd_cudagraph'!"
                assert len(grads) == len(
                    runner.static_grad_outputs
                ), "Bwd cudagraph received a different number of tensors than what it was graphed with!"

                # Copy new data into bwd graph input buffer
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                runner.bwd_graph.replay()
                runner.status = _GraphStatus.FWD_READY

                # If using gradient_accumulation_fusion, whenever `main_grad` is calculated
                # the `grad_added_to_main_grad` attribute is expected to set. However when using
                # cudagraphs this doesn't occur so we emulate this behavior here.
                for param in runner.groundtruth_grad_added_to_main_grad:
                    param.grad_added_to_main_grad = True  # bug

                grads, is_dummy_grad = runner.get_input_grads_with_dummy_flags()
                output_grads = tuple(
                    b.detach() if not (b is None or dummy) else b
                    for dummy, b in zip(is_dummy_grad, grads)
                )
                return None, None, *output_grads
        """,
        twin="""
        class _CudagraphReplayNode(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                runner = ctx.runner
                assert (
                    runner.bwd_graph is not None
                ), "Tried replaying bwd cudagraph before calling 'create_bwd_cudagraph'!"
                assert len(grads) == len(
                    runner.static_grad_outputs
                ), "Bwd cudagraph received a different number of tensors than what it was graphed with!"

                # Copy new data into bwd graph input buffer
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                runner.bwd_graph.replay()
                runner.status = _GraphStatus.FWD_READY

                # If using gradient_accumulation_fusion, whenever `main_grad` is calculated
                # the `grad_added_to_main_grad` attribute is expected to set. However when using
                # cudagraphs this doesn't occur so we emulate this behavior here.
                for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():
                    param.grad_added_to_main_grad = grad_added

                grads, is_dummy_grad = runner.get_input_grads_with_dummy_flags()
                output_grads = tuple(
                    b.detach() if not (b is None or dummy) else b
                    for dummy, b in zip(is_dummy_grad, grads)
                )
                return None, None, *output_grads
        """,
    ),
    # ------------------------------------------------------------------ 4: overwrite without asking
    # bigscience-workshop/Megatron-DeepSpeed 8387ae1, megatron/model/distributed.py,
    # DistributedDataParallel.__init__ (contiguous-buffer part) and _make_param_hook. main_grad is a view into a
    # contiguous buffer zeroed once per iteration by zero_grad_buffer(), and the hook runs once per microbatch.
    # The regression copies instead of adding ("the buffer was zeroed anyway"): nothing reads a
    # sharding strategy or overwrite flag, and with gradient accumulation only the last microbatch survives.
    Variant(
        4,
        "blind14-bigscience-ddp-param-hook-copies-into-main-grad",
        bug="""
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
                        self._grad_buffers[dtype] = MemoryBuffer(num_elements, dtype)
                    for param in self.module.parameters():
                        if param.requires_grad:
                            dtype = _get_buffer_type(param)
                            type_num_elements[dtype] -= param.data.nelement()
                            param.main_grad = self._grad_buffers[dtype].get(
                                param.data.shape, type_num_elements[dtype])

                    self.grad_accs = []
                    for param in self.module.parameters():
                        if param.requires_grad:
                            param_tmp = param.expand_as(param)
                            grad_acc = param_tmp.grad_fn.next_functions[0][0]
                            grad_acc.register_hook(self._make_param_hook(param))
                            self.grad_accs.append(grad_acc)

            def _make_param_hook(self, param):
                # Hook used for back-prop.
                def param_hook(*unused):
                    # Add the gradient to the buffer.
                    if param.grad.data is not None:
                        param.main_grad.copy_(param.grad.data)  # bug
                        # Now we can deallocate grad memory.
                        param.grad = None
                return param_hook

            def zero_grad_buffer(self):
                assert self._grad_buffers is not None, 'buffers are not initialized.'
                for _, buffer_ in self._grad_buffers.items():
                    buffer_.zero()
        """,
        twin="""
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
                        self._grad_buffers[dtype] = MemoryBuffer(num_elements, dtype)
                    for param in self.module.parameters():
                        if param.requires_grad:
                            dtype = _get_buffer_type(param)
                            type_num_elements[dtype] -= param.data.nelement()
                            param.main_grad = self._grad_buffers[dtype].get(
                                param.data.shape, type_num_elements[dtype])

                    self.grad_accs = []
                    for param in self.module.parameters():
                        if param.requires_grad:
                            param_tmp = param.expand_as(param)
                            grad_acc = param_tmp.grad_fn.next_functions[0][0]
                            grad_acc.register_hook(self._make_param_hook(param))
                            self.grad_accs.append(grad_acc)

            def _make_param_hook(self, param):
                # Hook used for back-prop.
                def param_hook(*unused):
                    # Add the gradient to the buffer.
                    if param.grad.data is not None:
                        param.main_grad.add_(param.grad.data)
                        # Now we can deallocate grad memory.
                        param.grad = None
                return param_hook

            def zero_grad_buffer(self):
                assert self._grad_buffers is not None, 'buffers are not initialized.'
                for _, buffer_ in self._grad_buffers.items():
                    buffer_.zero()
        """,
    ),
    # NVIDIA/apex 16fadfe (last commit with apex.transformer), apex/transformer/tensor_parallel/layers.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward (sequence-parallel and async-allreduce parts
    # shortened). With gradient_accumulation_fusion the fused CUDA kernels accumulate into weight.main_grad. The
    # regression replaces the half-precision kernel by a plain torch.matmul with out=weight.main_grad ("the fp16
    # kernel is missing on some builds"): that writes main_grad instead of adding to it, in code that reads no
    # overwrite flag, so for fp16/bf16 main_grad only the last microbatch's gradient survives.
    Variant(
        4,
        "blind14-apex-linear-bwd-half-main-grad-matmul-out",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)

            if ctx.async_grad_allreduce:
                handle = torch.distributed.all_reduce(
                    grad_input, group=get_tensor_model_parallel_group(), async_op=True
                )

            # if no weight gradient, immediately return
            if not ctx.compute_weight_gradient:
                if ctx.async_grad_allreduce:
                    handle.wait()
                return grad_input, None, None, None, None, None, None

            # Convert the tensor shapes to 2D for execution compatibility
            grad_output = grad_output.contiguous()
            grad_output = grad_output.view(
                grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2]
            )
            total_input = total_input.view(
                total_input.shape[0] * total_input.shape[1], total_input.shape[2]
            )

            if ctx.gradient_accumulation_fusion:
                if not hasattr(weight, "main_grad"):
                    raise RuntimeError(
                        "attempted to perform gradient accumulation fusion on param without setting main_grad"
                    )
                if weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                        total_input, grad_output, weight.main_grad
                    )
                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                    torch.matmul(grad_output.t(), total_input, out=weight.main_grad)  # bug
                else:
                    raise RuntimeError(f"unsupported dtype for main_grad ({weight.main_grad.dtype})")
                grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            if ctx.async_grad_allreduce:
                handle.wait()
            return grad_input, grad_weight, grad_bias, None, None, None, None
        """,
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            use_bias = ctx.use_bias
            total_input = input
            grad_input = grad_output.matmul(weight)

            if ctx.async_grad_allreduce:
                handle = torch.distributed.all_reduce(
                    grad_input, group=get_tensor_model_parallel_group(), async_op=True
                )

            # if no weight gradient, immediately return
            if not ctx.compute_weight_gradient:
                if ctx.async_grad_allreduce:
                    handle.wait()
                return grad_input, None, None, None, None, None, None

            # Convert the tensor shapes to 2D for execution compatibility
            grad_output = grad_output.contiguous()
            grad_output = grad_output.view(
                grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2]
            )
            total_input = total_input.view(
                total_input.shape[0] * total_input.shape[1], total_input.shape[2]
            )

            if ctx.gradient_accumulation_fusion:
                if not hasattr(weight, "main_grad"):
                    raise RuntimeError(
                        "attempted to perform gradient accumulation fusion on param without setting main_grad"
                    )
                if weight.main_grad.dtype == torch.float32:
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                        total_input, grad_output, weight.main_grad
                    )
                elif weight.main_grad.dtype in (torch.float16, torch.bfloat16):
                    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp16(
                        total_input, grad_output, weight.main_grad
                    )
                else:
                    raise RuntimeError(f"unsupported dtype for main_grad ({weight.main_grad.dtype})")
                grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None
            if ctx.async_grad_allreduce:
                handle.wait()
            return grad_input, grad_weight, grad_bias, None, None, None, None
        """,
    ),
    # ------------------------------------------------------------------ 5: hooks without bookkeeping
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/grouped_linear.py,
    # _GroupedLinear.backward (wgrad part) and GroupedLinear.backward_dw. With delay_wgrad_compute the GEMM is put
    # in the wgrad store and backward_dw() runs it later and then fires the DDP wgrad-accumulation-and-reduce
    # hooks; the real backward still flags each Parameter and hands autograd a dummy for it. The regression returns
    # None on the delayed path ("nothing was computed yet"): backward_dw() fires the hooks for weights that carry
    # neither grad_added_to_main_grad nor a dummy .grad (overlap_grad_reduce asserts on .grad is None).
    Variant(
        5,
        "blind14-tefp8-grouped-delayed-wgrad-skips-ddp-bookkeeping",
        bug="""
        class _GroupedLinear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                origin_weights = saved_tensors[2 * N : 3 * N]
                main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.m_splits)
                accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    wgrad_list = main_grads if ctx.fuse_wgrad_accumulation else [
                        torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device)
                        for w in origin_weights
                    ]
                    grouped_gemm_wgrad = functools.partial(
                        general_grouped_gemm,
                        out_dtype=ctx.activation_dtype,
                        workspaces=get_multi_stream_cublas_workspace(),
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        accumulate=accumulate_wgrad_into_param_main_grad,
                    )

                    def handle_custom_ddp_from_mcore(weight, wgrad):
                        if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                            weight.grad_added_to_main_grad = True
                            if getattr(weight, "zero_out_wgrad", False):
                                wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        elif ctx.fuse_wgrad_accumulation:
                            wgrad = None
                        return wgrad

                    # WGRAD
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                        wgrad_list = [None] * ctx.num_gemms  # bug
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)
                        wgrad_list = [
                            handle_custom_ddp_from_mcore(weight, wgrad)
                            for weight, wgrad in zip(origin_weights, wgrad_list)
                        ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
                return (None, *wgrad_list)


        class GroupedLinear(TransformerEngineBaseModule):
            def backward_dw(self):
                if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
                    return
                with torch.cuda.nvtx.range("_GroupedLinear_wgrad"):
                    (_, grad_biases_, _), tensor_list = self.wgrad_store.pop()
                    wgrad_list = tensor_list[2]
                    weight_params = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
                    if not self.fuse_wgrad_accumulation:
                        for i in range(self.num_gemms):
                            weight_params[i].grad = wgrad_list[i].to(weight_params[i].dtype)
                    del wgrad_list
                    del tensor_list
                    for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                        wgrad_accumulation_and_reduce_hook()
        """,
        twin="""
        class _GroupedLinear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
                saved_tensors = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                N = ctx.num_gemms
                inputmats = saved_tensors[:N]
                origin_weights = saved_tensors[2 * N : 3 * N]
                main_grads = [main_grad_func() for main_grad_func in ctx.main_grad_funcs]
                grad_output = torch.split(grad_output.contiguous().view(-1, grad_output.shape[-1]), ctx.m_splits)
                accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                if ctx.weights_requires_grad:
                    wgrad_list = main_grads if ctx.fuse_wgrad_accumulation else [
                        torch.empty(w.size(), dtype=ctx.activation_dtype, device=ctx.device)
                        for w in origin_weights
                    ]
                    grouped_gemm_wgrad = functools.partial(
                        general_grouped_gemm,
                        out_dtype=ctx.activation_dtype,
                        workspaces=get_multi_stream_cublas_workspace(),
                        layout="NT",
                        grad=True,
                        m_splits=ctx.m_splits,
                        accumulate=accumulate_wgrad_into_param_main_grad,
                    )

                    def handle_custom_ddp_from_mcore(weight, wgrad):
                        if ctx.fuse_wgrad_accumulation and hasattr(weight, "grad_added_to_main_grad"):
                            weight.grad_added_to_main_grad = True
                            if getattr(weight, "zero_out_wgrad", False):
                                wgrad = torch.zeros(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                wgrad = torch.empty(weight.main_grad.shape, dtype=weight.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        elif ctx.fuse_wgrad_accumulation:
                            wgrad = None
                        return wgrad

                    # WGRAD
                    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
                        ctx.wgrad_store.put([inputmats, grad_output, wgrad_list], grouped_gemm_wgrad)
                    else:
                        grouped_gemm_wgrad(inputmats, grad_output, wgrad_list)
                        clear_tensor_data(*inputmats)
                    wgrad_list = [
                        handle_custom_ddp_from_mcore(weight, wgrad)
                        for weight, wgrad in zip(origin_weights, wgrad_list)
                    ]
                else:
                    wgrad_list = [None] * ctx.num_gemms
                return (None, *wgrad_list)


        class GroupedLinear(TransformerEngineBaseModule):
            def backward_dw(self):
                if self.wgrad_store is None or not self.wgrad_store.delay_wgrad_compute():
                    return
                with torch.cuda.nvtx.range("_GroupedLinear_wgrad"):
                    (_, grad_biases_, _), tensor_list = self.wgrad_store.pop()
                    wgrad_list = tensor_list[2]
                    weight_params = [getattr(self, f"weight{i}") for i in range(self.num_gemms)]
                    if not self.fuse_wgrad_accumulation:
                        for i in range(self.num_gemms):
                            weight_params[i].grad = wgrad_list[i].to(weight_params[i].dtype)
                    del wgrad_list
                    del tensor_list
                    for wgrad_accumulation_and_reduce_hook in self.wgrad_accumulation_and_reduce_hooks:
                        wgrad_accumulation_and_reduce_hook()
        """,
    ),
    # 021ai/Megatron-LM-FP8FlowMoe e68853f, megatron/core/transformer/cuda_graphs.py, _CudagraphReplayNode.backward
    # and _CudaGraphRunner.get_input_grads_with_dummy_flags. The replayed backward graph has already accumulated
    # the wgrads into main_grad; the real code first restores grad_added_to_main_grad from the capture-time record
    # and only then asks the runner which wgrads to replace by dummies (it reads that very attribute). The
    # regression moves the restore after the call ("restore state once grads are collected"): DDP has reset the
    # flags to False, so the runner hands back the static real wgrads, and the DDP hooks that fire on them add
    # them into main_grad a second time.
    Variant(
        5,
        "blind14-mlfp8-cudagraph-bwd-dummy-choice-before-flag-restore",
        bug="""
        class _CudagraphReplayNode(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                runner = ctx.runner
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                runner.bwd_graph.replay()
                runner.status = _GraphStatus.FWD_READY

                grads, is_dummy_grad = runner.get_input_grads_with_dummy_flags()  # bug

                # If using gradient_accumulation_fusion, whenever `main_grad` is calculated
                # the `grad_added_to_main_grad` attribute is expected to set. However when using
                # cudagraphs this doesn't occur so we emulate this behavior here.
                for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():
                    param.grad_added_to_main_grad = grad_added

                output_grads = tuple(
                    b.detach() if not (b is None or dummy) else b
                    for dummy, b in zip(is_dummy_grad, grads)
                )
                return None, None, *output_grads


        class _CudaGraphRunner(torch.nn.Module):
            def get_input_grads_with_dummy_flags(self):
                is_dummy_grad = [False] * len(self.static_grad_inputs)
                if not self.fuse_wgrad_accumulation:
                    return self.static_grad_inputs, is_dummy_grad
                else:
                    num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
                    dgrads = self.static_grad_inputs[:num_dgrads]
                    wgrads = self.static_grad_inputs[num_dgrads:]

                    wgrads_with_placeholders = []
                    is_dummy_grad = [False] * len(dgrads)
                    for idx, param in enumerate(self.base_module.parameters()):
                        wgrad_is_dummy = getattr(param, "grad_added_to_main_grad", False)
                        if wgrad_is_dummy:
                            if getattr(param, "zero_out_wgrad", False):
                                wgrad = torch.zeros(param.main_grad.shape, dtype=param.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                wgrad = torch.empty(param.main_grad.shape, dtype=param.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = wgrads[idx]
                        wgrads_with_placeholders.append(wgrad)
                        is_dummy_grad.append(wgrad_is_dummy)
                    return tuple(dgrads + wgrads_with_placeholders), is_dummy_grad
        """,
        twin="""
        class _CudagraphReplayNode(torch.autograd.Function):
            @staticmethod
            def backward(ctx, *grads):
                runner = ctx.runner
                for user_output_grad, cudagraph_output_grad in zip(grads, runner.static_grad_outputs):
                    if user_output_grad.data_ptr() != cudagraph_output_grad.data_ptr():
                        cudagraph_output_grad.copy_(user_output_grad)

                runner.bwd_graph.replay()
                runner.status = _GraphStatus.FWD_READY

                # If using gradient_accumulation_fusion, whenever `main_grad` is calculated
                # the `grad_added_to_main_grad` attribute is expected to set. However when using
                # cudagraphs this doesn't occur so we emulate this behavior here.
                for param, grad_added in runner.groundtruth_grad_added_to_main_grad.items():
                    param.grad_added_to_main_grad = grad_added

                grads, is_dummy_grad = runner.get_input_grads_with_dummy_flags()

                output_grads = tuple(
                    b.detach() if not (b is None or dummy) else b
                    for dummy, b in zip(is_dummy_grad, grads)
                )
                return None, None, *output_grads


        class _CudaGraphRunner(torch.nn.Module):
            def get_input_grads_with_dummy_flags(self):
                is_dummy_grad = [False] * len(self.static_grad_inputs)
                if not self.fuse_wgrad_accumulation:
                    return self.static_grad_inputs, is_dummy_grad
                else:
                    num_dgrads = len(self.static_grad_inputs) - len(list(self.base_module.parameters()))
                    dgrads = self.static_grad_inputs[:num_dgrads]
                    wgrads = self.static_grad_inputs[num_dgrads:]

                    wgrads_with_placeholders = []
                    is_dummy_grad = [False] * len(dgrads)
                    for idx, param in enumerate(self.base_module.parameters()):
                        wgrad_is_dummy = getattr(param, "grad_added_to_main_grad", False)
                        if wgrad_is_dummy:
                            if getattr(param, "zero_out_wgrad", False):
                                wgrad = torch.zeros(param.main_grad.shape, dtype=param.dtype, device=torch.cuda.current_device(), requires_grad=False)
                            else:
                                wgrad = torch.empty(param.main_grad.shape, dtype=param.dtype, device=torch.cuda.current_device(), requires_grad=False)
                        else:
                            wgrad = wgrads[idx]
                        wgrads_with_placeholders.append(wgrad)
                        is_dummy_grad.append(wgrad_is_dummy)
                    return tuple(dgrads + wgrads_with_placeholders), is_dummy_grad
        """,
    ),
    # ------------------------------------------------------------------ 6: delayed wgrad across classes
    # THUDM/slime 624b824, slime_plugins/models/glm5/glm5.py, DSAMLASelfAttention.__init__ (shortened) and
    # backward_dw. NOTE: the bug is the code at this HEAD as far as can be read from it: the indexer projections
    # wq_b / wk / weights_proj are built with config=self.config (so TE linears get delay_wgrad_compute from it),
    # but backward_dw() only covers the q / kv / output projections, so the indexer weights' delayed wgrads are
    # never computed and their reduce hooks never fire. The twin adds the indexer projections to backward_dw
    # (skipping the ones that index-share skip layers delete).
    Variant(
        6,
        "blind14-slime-glm5-dsa-backward-dw-misses-indexer-projections",
        bug="""
        class DSAMLASelfAttention(DSAMultiLatentAttention):
            def __init__(self, config, submodules, layer_number, attn_mask_type=AttnMaskType.padding, is_mtp_layer=False, cp_comm_type=None, model_comm_pgs=None, pg_collection=None, name=None):
                super().__init__(config=config, submodules=submodules, layer_number=layer_number, attn_mask_type=attn_mask_type, attention_type="self", is_mtp_layer=is_mtp_layer, cp_comm_type=cp_comm_type, model_comm_pgs=model_comm_pgs, pg_collection=pg_collection)
                self.linear_q_down_proj = build_module(submodules.linear_q_down_proj, self.config.hidden_size, self.config.q_lora_rank, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")
                self.linear_q_up_proj = build_module(submodules.linear_q_up_proj, self.config.q_lora_rank, self.config.num_attention_heads * self.q_head_dim, config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_up_proj")
                self.linear_kv_down_proj = build_module(submodules.linear_kv_down_proj, self.config.hidden_size, self.config.kv_lora_rank + self.config.qk_pos_emb_head_dim, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="kv_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")

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
                self.wq_b = build_module(submodules.wq_b, input_size=self.config.q_lora_rank, output_size=self.config.index_num_attention_heads * self.config.index_head_dim, tp_comm_buffer_name="wq_b", **indexer_linear_kwargs)
                self.wk = build_module(submodules.wk, input_size=self.config.hidden_size, output_size=self.config.index_head_dim, tp_comm_buffer_name="wk", **indexer_linear_kwargs)
                self.weights_proj = build_module(submodules.weights_proj, input_size=self.config.hidden_size, output_size=self.config.index_num_attention_heads, tp_comm_buffer_name="weights_proj", **indexer_linear_kwargs)
                if self.skip_topk:
                    for name in _INDEXER_SUBMODULE_NAMES:
                        if hasattr(self, name):
                            delattr(self, name)

            def backward_dw(self) -> NoReturn:  # bug
                self._backward_kv_proj()
                self._backward_q_proj()
                self._backward_output_proj()

            def _backward_kv_proj(self):
                self.linear_kv_up_proj.backward_dw()
                self.linear_kv_down_proj.backward_dw()

            def _backward_q_proj(self):
                self.linear_q_down_proj.backward_dw()
                self.linear_q_up_proj.backward_dw()

            def _backward_output_proj(self):
                self.linear_proj.backward_dw()
        """,
        twin="""
        class DSAMLASelfAttention(DSAMultiLatentAttention):
            def __init__(self, config, submodules, layer_number, attn_mask_type=AttnMaskType.padding, is_mtp_layer=False, cp_comm_type=None, model_comm_pgs=None, pg_collection=None, name=None):
                super().__init__(config=config, submodules=submodules, layer_number=layer_number, attn_mask_type=attn_mask_type, attention_type="self", is_mtp_layer=is_mtp_layer, cp_comm_type=cp_comm_type, model_comm_pgs=model_comm_pgs, pg_collection=pg_collection)
                self.linear_q_down_proj = build_module(submodules.linear_q_down_proj, self.config.hidden_size, self.config.q_lora_rank, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")
                self.linear_q_up_proj = build_module(submodules.linear_q_up_proj, self.config.q_lora_rank, self.config.num_attention_heads * self.q_head_dim, config=self.config, init_method=self.config.init_method, gather_output=False, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="q_up_proj")
                self.linear_kv_down_proj = build_module(submodules.linear_kv_down_proj, self.config.hidden_size, self.config.kv_lora_rank + self.config.qk_pos_emb_head_dim, config=self.config, init_method=self.config.init_method, bias=False, skip_bias_add=False, is_expert=False, tp_comm_buffer_name="kv_down_proj", skip_weight_param_allocation=False, parallel_mode="duplicated")

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
                self.wq_b = build_module(submodules.wq_b, input_size=self.config.q_lora_rank, output_size=self.config.index_num_attention_heads * self.config.index_head_dim, tp_comm_buffer_name="wq_b", **indexer_linear_kwargs)
                self.wk = build_module(submodules.wk, input_size=self.config.hidden_size, output_size=self.config.index_head_dim, tp_comm_buffer_name="wk", **indexer_linear_kwargs)
                self.weights_proj = build_module(submodules.weights_proj, input_size=self.config.hidden_size, output_size=self.config.index_num_attention_heads, tp_comm_buffer_name="weights_proj", **indexer_linear_kwargs)
                if self.skip_topk:
                    for name in _INDEXER_SUBMODULE_NAMES:
                        if hasattr(self, name):
                            delattr(self, name)

            def backward_dw(self) -> NoReturn:
                self._backward_kv_proj()
                self._backward_q_proj()
                self._backward_indexer_proj()
                self._backward_output_proj()

            def _backward_kv_proj(self):
                self.linear_kv_up_proj.backward_dw()
                self.linear_kv_down_proj.backward_dw()

            def _backward_q_proj(self):
                self.linear_q_down_proj.backward_dw()
                self.linear_q_up_proj.backward_dw()

            def _backward_indexer_proj(self):
                for name in ("wq_b", "wk", "weights_proj"):
                    if hasattr(self, name):
                        getattr(self, name).backward_dw()

            def _backward_output_proj(self):
                self.linear_proj.backward_dw()
        """,
    ),
    # 021ai/Megatron-LM-FP8FlowMoe e68853f, megatron/core/transformer/moe/experts.py, TEGroupedMLP.__init__
    # (shortened) and backward_dw. Both grouped linears are TE GroupedLinear wrappers built from config, so with
    # delay_wgrad_compute both only compute dgrad in backward and rely on backward_dw(). The regression skips
    # fc1's backward_dw under FP8 ("fc1 wgrad runs with the FP8 flow"), so in FP8 runs fc1's expert weights never
    # get their wgrad and their reduce hooks never fire.
    Variant(
        6,
        "blind14-mlfp8-tegroupedmlp-backward-dw-skips-fc1-under-fp8",
        bug="""
        class TEGroupedMLP(MegatronModule):
            def __init__(self, num_local_experts, config: TransformerConfig, submodules: MLPSubmodules, pg_collection=None):
                super().__init__(config=config)
                self.num_local_experts = num_local_experts
                self.input_size = self.config.hidden_size
                ffn_hidden_size = self.config.moe_ffn_hidden_size
                if self.config.gated_linear_unit:
                    ffn_hidden_size *= 2
                self.linear_fc1 = build_module(
                    submodules.linear_fc1,
                    self.num_local_experts,
                    self.input_size,
                    ffn_hidden_size,
                    config=self.config,
                    init_method=self.config.init_method,
                    bias=self.config.add_bias_linear,
                    skip_bias_add=True,
                    is_expert=True,
                    tp_comm_buffer_name='fc1',
                    tp_group=pg_collection.expt_tp,
                )
                self.activation_func = self.config.activation_func
                self.linear_fc2 = build_module(
                    submodules.linear_fc2,
                    self.num_local_experts,
                    self.config.moe_ffn_hidden_size,
                    self.config.hidden_size,
                    config=self.config,
                    init_method=self.config.output_layer_init_method,
                    bias=self.config.add_bias_linear,
                    skip_bias_add=True,
                    is_expert=True,
                    tp_comm_buffer_name='fc2',
                    tp_group=pg_collection.expt_tp,
                )
                if self.config.fp8:
                    self.fp8_padding = Fp8Padding(self.num_local_experts)
                    self.fp8_unpadding = Fp8Unpadding(self.num_local_experts)

            def backward_dw(self):
                self.linear_fc2.backward_dw()
                if not self.config.fp8:  # bug
                    self.linear_fc1.backward_dw()
        """,
        twin="""
        class TEGroupedMLP(MegatronModule):
            def __init__(self, num_local_experts, config: TransformerConfig, submodules: MLPSubmodules, pg_collection=None):
                super().__init__(config=config)
                self.num_local_experts = num_local_experts
                self.input_size = self.config.hidden_size
                ffn_hidden_size = self.config.moe_ffn_hidden_size
                if self.config.gated_linear_unit:
                    ffn_hidden_size *= 2
                self.linear_fc1 = build_module(
                    submodules.linear_fc1,
                    self.num_local_experts,
                    self.input_size,
                    ffn_hidden_size,
                    config=self.config,
                    init_method=self.config.init_method,
                    bias=self.config.add_bias_linear,
                    skip_bias_add=True,
                    is_expert=True,
                    tp_comm_buffer_name='fc1',
                    tp_group=pg_collection.expt_tp,
                )
                self.activation_func = self.config.activation_func
                self.linear_fc2 = build_module(
                    submodules.linear_fc2,
                    self.num_local_experts,
                    self.config.moe_ffn_hidden_size,
                    self.config.hidden_size,
                    config=self.config,
                    init_method=self.config.output_layer_init_method,
                    bias=self.config.add_bias_linear,
                    skip_bias_add=True,
                    is_expert=True,
                    tp_comm_buffer_name='fc2',
                    tp_group=pg_collection.expt_tp,
                )
                if self.config.fp8:
                    self.fp8_padding = Fp8Padding(self.num_local_experts)
                    self.fp8_unpadding = Fp8Unpadding(self.num_local_experts)

            def backward_dw(self):
                self.linear_fc2.backward_dw()
                self.linear_fc1.backward_dw()
        """,
    ),
    # ------------------------------------------------------------------ 7: the seed shape in other syntax
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/module/linear.py, _Linear.backward
    # (wgrad part and the custom-DDP block). accumulate_wgrad_into_param_main_grad is the GEMM-local flag: it is
    # False on the first microbatch (the GEMM then overwrites main_grad) although the output still goes into
    # main_grad. The regression picks the dummy with a conditional expression on that local flag: on first
    # microbatches the flagged weight hands autograd the real wgrad, which is main_grad itself (out=main_grad).
    Variant(
        7,
        "blind14-tefp8-linear-bwd-dummy-chosen-on-gemm-accumulate-flag",
        bug="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            ctx.tensor_objects = None
            main_grad = (
                ctx.main_grad_func()
                if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                else None
            )
            dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)

            wgrad = None
            if ctx.requires_wgrad:
                # Figure out whether to output wgrad GEMM directly into main grad
                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                wgrad_gemm_kwargs = {
                    "workspace": get_workspace(),
                    "out_dtype": (
                        main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype
                    ),
                    "accumulate": accumulate_wgrad_into_param_main_grad,
                    "layout": "NT",
                    "out": main_grad if ctx.fuse_wgrad_accumulation else None,
                    "grad": True,
                }
                wgrad, grad_bias, *_ = general_gemm(inputmat, grad_output, **wgrad_gemm_kwargs)

                # Handle custom DDP from mcore.
                if (
                    ctx.fuse_wgrad_accumulation
                    and weight is not None
                    and hasattr(weight, "grad_added_to_main_grad")
                ):
                    weight.grad_added_to_main_grad = True
                    wgrad = (  # bug
                        get_dummy_wgrad(
                            list(weight.main_grad.shape),
                            weight.dtype,
                            zero=getattr(weight, "zero_out_wgrad", False),
                        )
                        if accumulate_wgrad_into_param_main_grad  # bug
                        else wgrad
                    )
                elif ctx.fuse_wgrad_accumulation:
                    wgrad = None

            return (wgrad, dgrad.view(ctx.inp_shape), None, None)
        """,
        twin="""
        @staticmethod
        def backward(ctx, grad_output: torch.Tensor) -> Tuple[Union[torch.Tensor, None], ...]:
            inputmat, weight_fp8, weight, bias = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            ctx.tensor_objects = None
            main_grad = (
                ctx.main_grad_func()
                if weight is not None and ctx.fuse_wgrad_accumulation and ctx.requires_wgrad
                else None
            )
            dgrad, *_ = general_gemm(weight_fp8, grad_output, get_workspace(), layout="NN", grad=True)

            wgrad = None
            if ctx.requires_wgrad:
                # Figure out whether to output wgrad GEMM directly into main grad
                if ctx.is_first_microbatch is not None:
                    accumulate_wgrad_into_param_main_grad = (
                        ctx.fuse_wgrad_accumulation and not ctx.is_first_microbatch
                    )
                else:
                    accumulate_wgrad_into_param_main_grad = ctx.fuse_wgrad_accumulation

                wgrad_gemm_kwargs = {
                    "workspace": get_workspace(),
                    "out_dtype": (
                        main_grad.dtype if ctx.fuse_wgrad_accumulation else ctx.activation_dtype
                    ),
                    "accumulate": accumulate_wgrad_into_param_main_grad,
                    "layout": "NT",
                    "out": main_grad if ctx.fuse_wgrad_accumulation else None,
                    "grad": True,
                }
                wgrad, grad_bias, *_ = general_gemm(inputmat, grad_output, **wgrad_gemm_kwargs)

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

            return (wgrad, dgrad.view(ctx.inp_shape), None, None)
        """,
    ),
    # 021ai/Megatron-LM-FP8FlowMoe e68853f, megatron/core/tensor_parallel/layers.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward (sequence-parallel path kept, async all-reduce
    # dropped). wgrad_compute is a local flag that turns False when the output-layer wgrad is deferred
    # (grad_output_buffer, drained later into main_grad by drain_embedding_wgrad_compute); the weight is still
    # flagged and must still get its dummy. The regression picks the returned weight gradient on that local flag
    # inside the return tuple: deferred microbatches hand autograd None for a flagged weight, so the DDP
    # overlap hook sees .grad is None.
    Variant(
        7,
        "blind14-mlfp8-linear-bwd-return-picks-dummy-on-wgrad-compute",
        bug="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            main_grad = ctx.main_grad
            use_bias = ctx.use_bias
            grad_output_buffer = ctx.grad_output_buffer
            wgrad_deferral_limit = ctx.wgrad_deferral_limit
            tp_group = ctx.tp_group

            if ctx.gradient_accumulation_fusion:
                weight.main_grad = main_grad

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

            if ctx.sequence_parallel:
                sub_grad_input = torch.empty(
                    list(input.size()), dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False
                )
                handle = dist_reduce_scatter_func(sub_grad_input, grad_input, group=tp_group, async_op=True)

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

                if hasattr(weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = get_dummy_wgrad(
                            list(weight.main_grad.shape), input.dtype, zero=True
                        )
                    else:
                        grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None

            if ctx.sequence_parallel:
                handle.wait()
                return (sub_grad_input, grad_weight if wgrad_compute else None, grad_bias, None, None, None, None, None, None)  # bug

            return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
        """,
        twin="""
        @staticmethod
        @custom_bwd
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            main_grad = ctx.main_grad
            use_bias = ctx.use_bias
            grad_output_buffer = ctx.grad_output_buffer
            wgrad_deferral_limit = ctx.wgrad_deferral_limit
            tp_group = ctx.tp_group

            if ctx.gradient_accumulation_fusion:
                weight.main_grad = main_grad

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

            if ctx.sequence_parallel:
                sub_grad_input = torch.empty(
                    list(input.size()), dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False
                )
                handle = dist_reduce_scatter_func(sub_grad_input, grad_input, group=tp_group, async_op=True)

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

                if hasattr(weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = get_dummy_wgrad(
                            list(weight.main_grad.shape), input.dtype, zero=True
                        )
                    else:
                        grad_weight = get_dummy_wgrad(list(weight.main_grad.shape), input.dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
            else:
                grad_weight = grad_output.t().matmul(total_input)
            grad_bias = grad_output.sum(dim=0) if use_bias else None

            if ctx.sequence_parallel:
                handle.wait()
                return (sub_grad_input, grad_weight, grad_bias, None, None, None, None, None, None)

            return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
        """,
    ),
    # ------------------------------------------------------------------ 8: Megatron-LM #5209's shape
    # 021ai/TransformerEngine-FP8FlowMoe 4c097bf, transformer_engine/pytorch/ops/basic/basic_linear.py,
    # BasicLinear.op_backward (pre-GEMM part). Under Megatron-FSDP the weight is a DTensor parameter whose
    # main_grad is None until fetched; the real code calls get_main_grad() for __fsdp_param__ weights before
    # taking the GEMM output buffer. The regression drops that fetch ("main_grad is a property on FSDP params"):
    # with accumulate_into_main_grad=True the op dereferences a None / stale main_grad.
    Variant(
        8,
        "blind14-tefp8-basiclinear-op-bwd-no-fsdp-get-main-grad",
        bug="""
        def op_backward(
            self,
            ctx: OperationContext,
            grad_output: torch.Tensor,
        ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:
            (x_local, w) = ctx.saved_tensors

            # Megatron-LM wgrad fusion
            # Note: Get grad tensor from param so we can accumulate
            # directly into it.
            accumulate_into_main_grad = self._accumulate_into_main_grad
            grad_weight = None
            if ctx.weight_requires_grad and accumulate_into_main_grad:
                weight_param = self.weight
                if not hasattr(weight_param, "main_grad"):
                    raise RuntimeError(
                        "BasicLinear op is configured with "
                        "accumulate_into_main_grad=True, "
                        "but weight parameter does not have main_grad attribute"
                    )
                grad_weight = weight_param.main_grad.detach()  # bug
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
        twin="""
        def op_backward(
            self,
            ctx: OperationContext,
            grad_output: torch.Tensor,
        ) -> tuple[torch.Tensor, Iterable[Optional[torch.Tensor]]]:
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
    # 021ai/Megatron-LM-FP8FlowMoe e68853f, megatron/core/extensions/transformer_engine.py, TEFusedMLP
    # (_make_fused_impl shortened to the two BasicLinear ops, and forward). NOTE: the bug is the code at this
    # HEAD: it builds TE op-fuser BasicLinear ops with accumulate_into_main_grad on the wrapper modules'
    # parameters and runs them without ever making param.main_grad available from Megatron-FSDP's
    # get_main_grad() (whether that bites depends on the TE version's op_backward). The twin exposes the buffers
    # before fused execution, as upstream Megatron-LM's fix for the grouped MLP ("Fix TE grouped MLP fused
    # main-grad setup") does.
    Variant(
        8,
        "blind14-mlfp8-tefusedmlp-forward-runs-ops-without-main-grad",
        bug="""
        class TEFusedMLP(MLP):
            def _make_fused_impl(self) -> te.pytorch.ops.Sequential:
                fused_impl = te.pytorch.ops.Sequential()
                tp_world_size = get_tensor_model_parallel_world_size()
                tp_group = get_tensor_model_parallel_group() if tp_world_size > 1 else None

                # FC1 linear op
                weight = self.linear_fc1.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1),
                    weight.size(0) * tp_world_size,
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode="column" if tp_world_size > 1 else None,
                    tensor_parallel_group=tp_group,
                    sequence_parallel=self.linear_fc1.sequence_parallel,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)

                fused_impl.append(self._make_activation_op(self.activation_func, self.config.gated_linear_unit, self.config.activation_func_fp8_input_store))

                # FC2 linear op
                weight = self.linear_fc2.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1) * tp_world_size,
                    weight.size(0),
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode="row" if tp_world_size > 1 else None,
                    tensor_parallel_group=tp_group,
                    sequence_parallel=self.linear_fc2.sequence_parallel,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)
                return fused_impl

            def forward(self, hidden_states: torch.Tensor) -> Tuple[Tensor, Optional[Tensor]]:
                if self._fused_impl is None:
                    self._fused_impl = (self._make_fused_impl(),)

                # Apply fused impl
                out = self._fused_impl[0](hidden_states)  # bug

                bias = None
                if self.linear_fc2.te_return_bias:
                    bias = self.linear_fc2.bias
                    if isinstance(bias, torch.Tensor) and bias.numel() == 0:
                        bias = None
                return out, bias
        """,
        twin="""
        class TEFusedMLP(MLP):
            def _make_fused_impl(self) -> te.pytorch.ops.Sequential:
                fused_impl = te.pytorch.ops.Sequential()
                tp_world_size = get_tensor_model_parallel_world_size()
                tp_group = get_tensor_model_parallel_group() if tp_world_size > 1 else None

                # FC1 linear op
                weight = self.linear_fc1.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1),
                    weight.size(0) * tp_world_size,
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode="column" if tp_world_size > 1 else None,
                    tensor_parallel_group=tp_group,
                    sequence_parallel=self.linear_fc1.sequence_parallel,
                    accumulate_into_main_grad=self.linear_fc1.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)

                fused_impl.append(self._make_activation_op(self.activation_func, self.config.gated_linear_unit, self.config.activation_func_fp8_input_store))

                # FC2 linear op
                weight = self.linear_fc2.weight
                op = te.pytorch.ops.BasicLinear(
                    weight.size(1) * tp_world_size,
                    weight.size(0),
                    device="meta",
                    dtype=weight.dtype,
                    tensor_parallel_mode="row" if tp_world_size > 1 else None,
                    tensor_parallel_group=tp_group,
                    sequence_parallel=self.linear_fc2.sequence_parallel,
                    accumulate_into_main_grad=self.linear_fc2.fuse_wgrad_accumulation,
                )
                op.weight = weight
                fused_impl.append(op)
                return fused_impl

            def _expose_main_grads(self):
                for linear in (self.linear_fc1, self.linear_fc2):
                    if not linear.fuse_wgrad_accumulation:
                        continue
                    for param in linear.parameters(recurse=False):
                        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
                            param.main_grad = param.get_main_grad()

            def forward(self, hidden_states: torch.Tensor) -> Tuple[Tensor, Optional[Tensor]]:
                if self._fused_impl is None:
                    self._fused_impl = (self._make_fused_impl(),)

                # Apply fused impl
                self._expose_main_grads()
                out = self._fused_impl[0](hidden_states)

                bias = None
                if self.linear_fc2.te_return_bias:
                    bias = self.linear_fc2.bias
                    if isinstance(bias, torch.Tensor) and bias.numel() == 0:
                        bias = None
                return out, bias
        """,
    ),
)
