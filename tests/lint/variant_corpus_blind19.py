"""The nineteenth blind corpus (H-blind19): main_grad bookkeeping variants of the eight classes
of issue #19, grounded in code from repositories no earlier blind corpus used: InternLM
InternEvo (ISP weight-parallel linears that return a zero placeholder and accumulate the
reduce-scattered gradient into `.grad` later, HybridZeroOptimizer's AccumulateGrad hooks, the
zero-bubble `WeightGradStore`), facebookresearch fairscale (FSDP's `_saved_grad_shard`
accumulator filled by post-backward hooks, ShardedDDP's bucketed reduce hooks), laekov fastmoe
(`MOELinear`, a grouped expert GEMM, and its Megatron integration), databricks megablocks
(grouped-GEMM expert MLPs with hand-written weight gradients) and pytorch/pytorch
(torch.distributed.pipelining's split input/weight backward).

Sources (repo, commit, path, function):
- InternLM/InternEvo 92e40abe58a98c8531f6be0293ebbe9a170b041e
  internlm/model/modules/linear.py WPFusedDenseFunc.forward / .backward
- InternLM/InternEvo 92e40abe58a98c8531f6be0293ebbe9a170b041e
  internlm/core/parallel/comm/isp.py ISPCommunicator.grad_hook,
  with internlm/solver/optimizer/hybrid_zero_optim.py (0aa6d26e784cc562b4664a4d0ad209bcf1273646)
  HybridZeroOptimizer._accum_grads_store_in_bucket
- InternLM/InternEvo 0aa6d26e784cc562b4664a4d0ad209bcf1273646
  internlm/solver/optimizer/hybrid_zero_optim.py HybridZeroOptimizer._attach_reduction_hook
- InternLM/InternEvo 0607da81f47d4786012d6e8a9ab10fd2d078fd93
  internlm/core/scheduler/pipeline_scheduler_zb.py WeightGradStore,
  ZeroBubblePipelineScheduler._forward_backward_step
- facebookresearch/fairscale 146f160241651e1211c4247979f159a4ef43b54a
  fairscale/nn/data_parallel/fully_sharded_data_parallel.py
  FullyShardedDataParallel._post_backward_hook / ._post_reduction_hook
- facebookresearch/fairscale 146f160241651e1211c4247979f159a4ef43b54a
  fairscale/nn/data_parallel/sharded_ddp.py ShardedDataParallel._clear_counters / ._get_reduce_fn /
  ._setup_backward_hooks
- laekov/fastmoe ee3c5615a5588c65273a512de82f19ca287e1bdf
  fmoe/megatron/layers.py _megatron_init_method, MegatronMLP.__init__ / .reset_parameters,
  fmoe/layers.py mark_module_parallel_comm, fmoe/distributed.py DistributedGroupedDataParallel
  (allreduce_gradients)
- laekov/fastmoe ee3c5615a5588c65273a512de82f19ca287e1bdf
  fmoe/linear.py MOELinear.forward / .backward, FMoELinear.forward
- laekov/fastmoe ee3c5615a5588c65273a512de82f19ca287e1bdf
  fmoe/megatron/layers.py MegatronMLP.__init__ / .forward
- databricks/megablocks 78eea65fda01e638af36ae38853bc51efb04a4b4
  megablocks/layers/mlp.py MLP.__init__, megablocks/layers/mpu.py set_expert_model_parallel_attributes
- databricks/megablocks 78eea65fda01e638af36ae38853bc51efb04a4b4
  megablocks/layers/glu.py MemoryOptimizedGroupedGLU.forward / .backward, GroupedGLU.forward
- pytorch/pytorch 060ca5d783bd6935f20d77522ebb416a5c3c3d86
  torch/distributed/pipelining/_backward.py _get_grad_fn_or_grad_acc, stage_backward_weight
- pytorch/pytorch 88fa1e7170b48d369c6b00d545a89e97fb9e2e43
  torch/distributed/pipelining/stage.py _PipelineStageBase.backward_one_chunk /
  .backward_weight_one_chunk

Conventions: twins are the real code shortened (real names and idioms; autocast casts, logging,
return_residual, sequence-parallel communication and unrelated branches dropped). Three source
blocks are adapted where the real code lacks the main_grad feature a class is about, and say so
above their source block: fastmoe's MOELinear returns its grouped wgrad to autograd; its twin gives it
Megatron's gradient_accumulation_fusion path (the wgrad added into, or when Megatron-FSDP sets
`overwrite_main_grad` copied into, `weight.main_grad`, `grad_added_to_main_grad` set, a dummy
returned). fastmoe's MegatronMLP and megablocks' GroupedGLU get the matching integration: they
turn the fused path on and fetch a Megatron-FSDP parameter's buffer with `get_main_grad()` before
the fused op runs (Megatron-LM #5209's fix). megablocks' MemoryOptimizedGroupedGLU returns dw1,
dv1, dw2 to autograd; its twin receives the Parameters next to their [experts, rows, hidden] views
and writes the grouped wgrads into their main_grad the way Transformer Engine's GroupedLinear does.
Per-repository stand-ins for main_grad: InternEvo's `param.grad` (accumulated across microbatches:
the ISP linear hands autograd a zero placeholder and HybridZeroOptimizer later adds the
reduce-scattered gradient) and `weight.grad` for the zero-bubble W pass; fairscale's
`param._saved_grad_shard` (FSDP) and the bucket buffers behind `param.grad` (ShardedDDP); PyTorch
pipelining's `weight.grad`; fastmoe's `dp_comm` attribute decides which group reduces a
gradient, megablocks' `expert_model_parallel` attribute likewise.
Bugs are written as `_swap(twin, old, new)`: one passage of the twin replaced, the changed
line(s) carrying `# bug` (a dropped line marks the line that now stands in its place).
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- InternLM/InternEvo 92e40abe internlm/model/modules/linear.py WPFusedDenseFunc (shortened:
# autocast casts, return_residual and the size check dropped). The weight is a weight-parallel
# shard; `total_weight` is the all-gathered full weight used for the GEMMs. Under zero bubble the
# wgrad is deferred to WeightGradStore, whose W pass accumulates it into the stored weight's `.grad`.
_INTERNEVO_WP_DENSE = """
from __future__ import annotations

import torch
from torch import nn

from internlm.core.context import ParallelMode
from internlm.core.context import global_context as gpc
from internlm.model.ops.linear import linear_backward_op, linear_forward_op


class WPFusedDenseFunc(torch.autograd.Function):
    "FusedDenseFunc for weigth parallel, which is optimized based on flash implementation."

    @staticmethod
    @custom_fwd
    def forward(ctx, x, weight, bias, module: nn.Module, communicator: WPCommunicator):
        ctx.compute_weight_gradient = weight.requires_grad
        ctx.module = module
        ctx.communicator = communicator

        x = x.contiguous()

        total_weight = communicator.weight_hook(weight, module=module)
        total_bias = bias if bias is None else communicator.weight_hook(bias, module=module, is_bias=True)
        total_weight = total_weight.contiguous()

        output = linear_forward_op(x, total_weight, total_bias)

        # release memory
        del total_weight
        del total_bias

        saved_x = None if ctx.compute_weight_gradient is False else x
        ctx.save_for_backward(saved_x, weight, bias)

        return output

    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output, *args):
        module: nn.Module = ctx.module
        communicator: WPCommunicator = ctx.communicator
        x, weight, bias = ctx.saved_tensors

        grad_output = grad_output.contiguous()

        batch_shape = grad_output.shape[:-1]
        batch_dim = batch_shape.numel()
        grad_output = grad_output.reshape(batch_dim, grad_output.shape[-1])

        total_weight = communicator.weight_hook(weight, module=module)

        is_using_ZB = gpc.is_using_parallel_mode(ParallelMode.PIPELINE) and (
            (
                gpc.config.parallel["pipeline"].get("mode", "1F1B") == "ZBH1"
                and not gpc.is_first_rank(ParallelMode.PIPELINE)
            )
            or gpc.config.parallel["pipeline"].get("mode", "1F1B") == "ZBV"
        )

        # compute weight grad
        if ctx.needs_input_grad[1]:
            assert ctx.compute_weight_gradient
            x = x.reshape(batch_dim, x.shape[-1])
            if is_using_ZB:
                from internlm.core.scheduler.pipeline_scheduler_zb import (
                    WeightGradStore,
                )

                WeightGradStore.put(
                    weight,
                    bias,
                    x,
                    grad_output,
                    ctx.needs_input_grad[2],
                    linear_backward_op,
                    communicator.grad_hook,
                    module,
                )
                grad_weight, grad_bias = None, None
            else:
                grad_weight, grad_bias = linear_backward_op(
                    x,
                    grad_output,
                    ctx.needs_input_grad[2],
                )

                grad_weight, grad_weight_sync = communicator.grad_hook(
                    grad_weight, async_op=True, module=module, is_bias=False
                )
                if grad_bias is not None:
                    grad_bias, grad_bias_sync = communicator.grad_hook(
                        grad_bias, async_op=True, module=module, is_bias=True
                    )
        else:
            grad_weight = None
            grad_bias = grad_output if ctx.needs_input_grad[2] else None

        if ctx.needs_input_grad[0]:
            grad_input = linear_forward_op(grad_output, total_weight.t())
            grad_input = grad_input.reshape(*batch_shape, grad_input.shape[-1])
        else:
            grad_input = None

        del total_weight

        if ctx.needs_input_grad[1] and not is_using_ZB:
            grad_weight_sync.wait()
            if grad_bias is not None:
                grad_bias_sync.wait()

        return grad_input, grad_weight, grad_bias, None, None
"""

# --- InternLM/InternEvo 92e40abe internlm/core/parallel/comm/isp.py ISPCommunicator.grad_hook with
# internlm/solver/optimizer/hybrid_zero_optim.py (0aa6d26e) HybridZeroOptimizer._accum_grads_store_in_bucket
# (shortened: the non-ISP communicators dropped). With overlap on, the wgrad's reduce-scatter is
# parked in `reduce_scatter_handlers` and autograd receives a zero placeholder; the optimizer's
# AccumulateGrad hook later waits for the reduce-scatter and adds the result into `param.grad`.
_INTERNEVO_ISP_GRAD_HOOK = """
from typing import Optional, Tuple

import torch
from torch import distributed as dist
from torch import nn

from internlm.core.parallel.comm.utils import DUMMY_HANDLE_CONST, AsyncCommHandle, reduce_scatter_raw


class ISPCommunicator(WPCommunicator):
    def _get_constant_zero(self, size: tuple) -> torch.Tensor:
        return torch.zeros(
            *size,
            dtype=self.model_conf.dtype,
            device=self.model_conf.device,
        ).contiguous()

    def grad_hook(
        self,
        tensor: torch.Tensor,
        async_op: bool = False,
        module: nn.Module = None,
        reduce_op: dist.ReduceOp = dist.ReduceOp.AVG,
        is_bias: bool = False,
    ) -> Tuple[torch.Tensor, AsyncCommHandle]:
        if dist.get_world_size(self.process_group) <= 1:
            return tensor, DUMMY_HANDLE_CONST

        if not self.overlap:
            result, handle = reduce_scatter_raw(tensor, self.process_group, op=reduce_op, async_op=async_op)
        else:
            assert module is not None, "The module parameter must be specified"

            if is_bias:
                assert hasattr(module.bias, "isp_reduce_scatter_name")
                key = getattr(module.bias, "isp_reduce_scatter_name")
            else:
                assert hasattr(module.weight, "isp_reduce_scatter_name")
                key = getattr(module.weight, "isp_reduce_scatter_name")

            self.reduce_scatter_handlers[key] = reduce_scatter_raw(
                tensor,
                self.process_group,
                op=reduce_op,
                async_op=async_op,
            )

            result, handle = (
                self._get_constant_zero(
                    (
                        tensor.shape[0] // dist.get_world_size(self.process_group),
                        *tensor.shape[1:],
                    )
                ),
                DUMMY_HANDLE_CONST,
            )

        return result, handle


class HybridZeroOptimizer(BaseOptimizer):
    def _accum_grads_store_in_bucket(self, bucket: BucketStore, reduce_rank: Optional[int] = None) -> None:
        for _param in bucket.get_param(reduce_rank):
            if not hasattr(_param, "isp_reduce_scatter_name"):
                continue

            # wait and accumulate gardient.
            _key = getattr(_param, "isp_reduce_scatter_name")
            _grad, _comm_handle = self._isp_communicator.reduce_scatter_handlers[_key]
            _comm_handle.wait()
            _param.grad.add_(_grad)

            # release cuda memory.
            _grad = None
            self._isp_communicator.reduce_scatter_handlers[_key] = None

        bucket.reset_by_rank(reduce_rank)
"""

# --- InternLM/InternEvo 0aa6d26e internlm/solver/optimizer/hybrid_zero_optim.py
# HybridZeroOptimizer._attach_reduction_hook (shortened: the layernorm all-reduce hook dropped).
# A dense ISP module overlaps its wgrad reduce-scatter when `parallel.weight.overlap` is on, an
# expert module when `parallel.expert_weight.overlap` is on; either way the module hands autograd a
# zero placeholder, and `accum_grad_hook` is what later adds the reduce-scattered gradient.
_INTERNEVO_ZERO_HOOKS = """
from functools import partial

from internlm.core.context import global_context as gpc
from internlm.model.modules.utils import is_moe_param
from internlm.solver.optimizer.utils import get_grad_accumulate_object


class HybridZeroOptimizer(BaseOptimizer):
    def _attach_reduction_hook(self):
        # we iterate over the fp16 params
        # on each param, we register a hook to its AccumulateGrad object
        for group_id in range(self.num_param_groups):
            param_group = self._fp16_param_groups[group_id]
            for param in param_group:
                # we should not reduce the param in moe
                if not param.requires_grad:
                    continue

                reduce_rank = None

                def _define_and_attach(param, reduce_rank=None):
                    reduction_func = partial(
                        self._store_and_try_reduce_grads_by_bucket,
                        param=param,
                        reduce_rank=reduce_rank,
                    )

                    reduce_scatter_checker = partial(
                        self._wait_reduce_scatter_and_accumulate_grads,
                        param=param,
                        reduce_rank=reduce_rank,
                    )

                    # define hook
                    # NOT IMPORTANT BUT GOOD TO KNOW:
                    # args here is not grad, but allow_unreacable and accumulate_grad
                    def reduce_grad_hook(*args):  # pylint: disable=W0613
                        if self.skip_grad_reduce is False:
                            reduction_func()

                    # define hook for real gradient accumulation.
                    def accum_grad_hook(*args):  # pylint: disable=W0613
                        reduce_scatter_checker()

                    # get the AccumulateGrad object of the param itself
                    # If these objects are not kept, reduction hooks may not be attached successfully.
                    if not hasattr(param, "evo_tensor"):
                        accum_grad_obj = get_grad_accumulate_object(param)
                        self._grad_store.add_accumulate_grad_object(accum_grad_obj)

                    # we should not only register for parameters which have isp_reduce_scatter_name attr.
                    # we must keep up with reduce_grad_hook.
                    if self._isp_communicator and (
                        (
                            is_moe_param(param)
                            and gpc.config.parallel.expert_weight.size > 1
                            and gpc.config.parallel.expert_weight.overlap
                        )
                        or (
                            not is_moe_param(param)
                            and gpc.config.parallel.weight.size > 1
                            and gpc.config.parallel.weight.overlap
                        )
                    ):
                        if hasattr(param, "evo_tensor"):
                            param.register_post_accumulate_grad_hook(accum_grad_hook)
                        else:
                            accum_grad_obj.register_hook(accum_grad_hook)

                    if self._overlap_sync_grad:
                        if hasattr(param, "evo_tensor"):
                            param.register_post_accumulate_grad_hook(reduce_grad_hook)
                        else:
                            accum_grad_obj.register_hook(reduce_grad_hook)

                _define_and_attach(param, reduce_rank)
"""

# --- InternLM/InternEvo 0607da81 internlm/core/scheduler/pipeline_scheduler_zb.py WeightGradStore
# (whole) and ZeroBubblePipelineScheduler._forward_backward_step (shortened to its backward
# backward bookkeeping: tensor-shape negotiation, loss accumulation and the MoE loss all-reduce
# dropped). Each backward flushes the
# cached wgrads as one W; on ZBH1 a stage only starts popping W's once `i >= rank`, so up to `rank`
# W's are still queued after the cooldown and must be drained before the optimizer step.
_INTERNEVO_ZB_STORE = """
import queue

from internlm.core.context import ParallelMode
from internlm.core.context import global_context as gpc
from internlm.core.scheduler import comm
from internlm.utils.parallel import is_using_isp

from .pipeline_scheduler_1f1b import PipelineScheduler, pack_return_tensors


class WeightGradStore:
    \"\"\"
    When using zero bubble pp, WeightGradStore is used to store the args and func for computating weight grad.
    \"\"\"

    _cache = []
    _weight_grad_queue = queue.Queue()
    _hooks = {}
    pp_mode = None
    optim = None
    temp = []

    @classmethod
    def size(cls):
        return cls._weight_grad_queue.qsize()

    @classmethod
    def put(cls, weight, bias, input_tensor, grad_output, has_d_bias, grad_compute_func, *args):
        if cls.pp_mode == "ZBH1":
            assert not gpc.is_first_rank(ParallelMode.PIPELINE), "pp rank 0 should not arrive here"
        # Store the weight gradient computation of linear layers.
        cls._cache.append((weight, bias, input_tensor, grad_output, has_d_bias, grad_compute_func, *args))

    @classmethod
    def flush(cls):
        if cls.pp_mode == "ZBH1" and gpc.is_first_rank(ParallelMode.PIPELINE):
            return
        # Collect all stored computations during backward as a W for each micro batch.
        cls._weight_grad_queue.put(cls._cache)
        cls._cache = []

    @classmethod
    def pop(cls):
        if cls.pp_mode == "ZBH1" and gpc.is_first_rank(ParallelMode.PIPELINE):
            return
        assert cls._weight_grad_queue.qsize() > 0
        stored_w_grad_computation = cls._weight_grad_queue.get()
        # Run computation for a single W.
        for weight, bias, input_tensor, grad_output, has_d_bias, grad_compute_func, *args in stored_w_grad_computation:
            assert weight.requires_grad
            grad_weight, grad_bias = grad_compute_func(input_tensor, grad_output, has_d_bias)

            if is_using_isp():
                isp_grad_hook = args[0]
                module = args[1]
                grad_weight, handle_weight = isp_grad_hook(grad_weight, async_op=True, is_bias=False, module=module)
                handle_weight.wait()
                if grad_bias is not None:
                    grad_bias, handle_bias = isp_grad_hook(grad_bias, async_op=True, is_bias=True, module=module)
                    handle_bias.wait()

            # Gradient Accumulation
            weight.grad = weight.grad.data + grad_weight if weight.grad is not None else grad_weight
            if has_d_bias:
                bias.grad = bias.grad.data + grad_bias if bias.grad is not None else grad_bias

            # overlap hook
            if weight in cls._hooks:
                for hook in cls._hooks[weight]:
                    hook()
                if has_d_bias:
                    for hook in cls._hooks[bias]:
                        hook()


class ZeroBubblePipelineScheduler(PipelineScheduler):
    def _forward_backward_step(self, engine, return_loss=True, return_output_label=True):
        num_warmup_microsteps = (
            gpc.get_world_size(ParallelMode.PIPELINE) - gpc.get_local_rank(ParallelMode.PIPELINE) - 1
        )
        num_warmup_microsteps = min(num_warmup_microsteps, self.num_microbatches)
        num_1f1b_micropairs = self.num_microbatches - num_warmup_microsteps

        # Input, output tensors only need to be saved when doing backward passes
        input_objs = []
        output_objs = []
        moe_losses = []
        return_tensors = []

        # Used for tensor meta information communication
        forward_recv_shapes = self.tensor_shape
        backward_recv_shapes = None

        # Run warmup forward passes.
        for i in range(num_warmup_microsteps):
            if not gpc.is_first_rank(ParallelMode.PIPELINE):
                input_obj = comm.recv_forward(
                    forward_recv_shapes,
                    dtype=self.dtype,
                    scatter_gather_tensors=self.scatter_gather_tensors,
                )
            else:
                input_obj = None

            output_obj, moe_loss = self._forward_step(engine, input_obj, return_tensors)

            if not gpc.is_last_rank(ParallelMode.PIPELINE):
                comm.send_forward(output_obj, scatter_gather_tensors=self.scatter_gather_tensors)

            input_objs.append(input_obj)
            output_objs.append(output_obj)
            moe_losses.append(moe_loss)

        if num_1f1b_micropairs > 0:
            if not gpc.is_first_rank(ParallelMode.PIPELINE):
                input_obj = comm.recv_forward(
                    forward_recv_shapes,
                    dtype=self.dtype,
                    scatter_gather_tensors=self.scatter_gather_tensors,
                )
            else:
                input_obj = None

        # Run 1F1B in steady state.
        for i in range(num_1f1b_micropairs):
            output_obj, moe_loss = self._forward_step(engine, input_obj, return_tensors)

            if gpc.is_last_rank(ParallelMode.PIPELINE):
                output_obj_grad = None
            else:
                output_obj_grad = comm.send_forward_recv_backward(
                    output_obj,
                    backward_recv_shapes,
                    dtype=self.dtype,
                    scatter_gather_tensors=self.scatter_gather_tensors,
                )

            input_objs.append(input_obj)
            output_objs.append(output_obj)
            moe_losses.append(moe_loss)

            input_obj = input_objs.pop(0)
            output_obj = output_objs.pop(0)
            moe_loss = moe_losses.pop(0)

            input_obj_grad = self._backward_step(engine, i, input_obj, output_obj, output_obj_grad, moe_loss)

            if i == (num_1f1b_micropairs - 1):
                input_obj = None
                if not gpc.is_first_rank(ParallelMode.PIPELINE):
                    comm.send_backward(input_obj_grad, scatter_gather_tensors=self.scatter_gather_tensors)
            else:
                if gpc.is_first_rank(ParallelMode.PIPELINE):
                    input_obj = None
                else:
                    input_obj = comm.send_backward_recv_forward(
                        input_obj_grad,
                        forward_recv_shapes,
                        dtype=self.dtype,
                        scatter_gather_tensors=self.scatter_gather_tensors,
                    )

            WeightGradStore.flush()
            if i >= gpc.get_local_rank(ParallelMode.PIPELINE):
                WeightGradStore.pop()

        # Run cooldown backward passes.
        for i in range(num_warmup_microsteps):
            input_obj = input_objs.pop(0)
            output_obj = output_objs.pop(0)
            moe_loss = moe_losses.pop(0)

            if not gpc.is_last_rank(ParallelMode.PIPELINE):
                output_obj_grad = comm.recv_backward(
                    backward_recv_shapes,
                    dtype=self.dtype,
                    scatter_gather_tensors=self.scatter_gather_tensors,
                )
            else:
                output_obj_grad = None

            input_obj_grad = self._backward_step(
                engine, num_1f1b_micropairs + i, input_obj, output_obj, output_obj_grad, moe_loss
            )

            if not gpc.is_first_rank(ParallelMode.PIPELINE):
                comm.send_backward(input_obj_grad, scatter_gather_tensors=self.scatter_gather_tensors)

            WeightGradStore.flush()
            WeightGradStore.pop()

        while WeightGradStore.size() > 0:
            WeightGradStore.pop()

        output, label = pack_return_tensors(return_tensors) if len(return_tensors) > 0 else (None, None)
        return output, label
"""

# --- facebookresearch/fairscale 146f1602 fairscale/nn/data_parallel/fully_sharded_data_parallel.py
# FullyShardedDataParallel._post_backward_hook / ._post_reduction_hook (shortened: the linked-param
# redirect, predivide, stream bookkeeping and CPU offload dropped). The reduce-scattered shard of
# each backward is accumulated into `param._saved_grad_shard`, which becomes `param.grad` at the
# end of the backward; gradient accumulation without no_sync relies on it.
_FAIRSCALE_FSDP_REDUCTION = """
import functools
from typing import Any

import torch
from torch import nn
from torch.nn import Parameter

from fairscale.internal.parallel import chunk_and_pad


class FullyShardedDataParallel(nn.Module):
    @torch.no_grad()
    def _post_backward_hook(self, param: Parameter, *unused: Any) -> None:
        self.assert_state([TrainingState.BACKWARD_PRE, TrainingState.BACKWARD_POST])
        self.training_state = TrainingState.BACKWARD_POST

        if param.grad is None:
            return

        if param.grad.requires_grad:
            raise RuntimeError("FSDP only works with gradients that don't require gradients")

        if self._require_backward_grad_sync or self.reshard_after_forward:
            self._free_full_params([param])

        if self.mixed_precision:
            self._free_fp16_param_shard([param])

        # Switch to FP32 shard after backward.
        self._use_fp32_param_shard([param])

        if not self._require_backward_grad_sync:
            return

        self._streams["post_backward"].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._streams["post_backward"]):
            if self.mixed_precision and self.fp32_reduce_scatter:
                # Cast grad to FP32.
                param.grad.data = param.grad.data.to(param.dtype)

            if param._is_sharded:
                assert self._reducer is not None
                grad = param.grad.data
                # Clear grad on the tensor, so any repeated gradient computations do not interfere with this reduction.
                param.grad = None
                callback_fn = functools.partial(self._post_reduction_hook, param)
                grad_chunks = chunk_and_pad(grad, self.process_group_reduce_scatter.size())
                self._reducer.reduce_scatter_async(
                    grad_chunks, group=self.process_group_reduce_scatter, callback_fn=callback_fn
                )
            else:
                assert self.world_size == 1
                self._post_reduction_hook(param, param.grad.data)

    def _post_reduction_hook(self, param: Parameter, reduced_grad: torch.Tensor) -> None:
        \"\"\"Hook to call on each param after the reduce-scatter.\"\"\"
        assert torch.cuda.current_stream() == self._streams["post_backward"]
        self.assert_state(TrainingState.BACKWARD_POST)
        if self.gradient_postdivide_factor > 1:
            # Average grad by world_size for consistency with PyTorch DDP.
            reduced_grad.data.div_(self.gradient_postdivide_factor)
        if self.mixed_precision:
            orig_param_grad_data = reduced_grad.data
            reduced_grad.data = reduced_grad.data.to(dtype=param.data.dtype)
            # Don't let this memory get reused until after the transfer.
            orig_param_grad_data.record_stream(torch.cuda.current_stream())

        if param._is_sharded:
            # Accumulate into the gradient shard.
            if getattr(param, "_saved_grad_shard", None) is None:
                param._saved_grad_shard = reduced_grad.data
            else:
                assert (
                    param._saved_grad_shard.shape == reduced_grad.shape
                ), f"{param._saved_grad_shard.shape} vs {reduced_grad.shape}"
                param._saved_grad_shard.data += reduced_grad.data
            reduced_grad = param._saved_grad_shard.data
"""

# --- facebookresearch/fairscale 146f1602 fairscale/nn/data_parallel/sharded_ddp.py
# ShardedDataParallel._clear_counters / ._get_reduce_fn / ._setup_backward_hooks (shortened: the
# unbucketed direct-reduce branch and profiler scopes dropped). `param.grad` is a view into the
# bucket buffer; the bucket is reduced once every parameter in it has checked in exactly once.
_FAIRSCALE_SHARDED_DDP = """
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.autograd import Variable


class ShardedDataParallel(nn.Module):
    @torch.no_grad()
    def _clear_counters(self) -> None:
        \"\"\"Reset all the grad reduce and call counters\"\"\"
        if self.training:
            self._grad_to_be_reduced = [True for _ in self._trainable_params]
        self._bucket_flush_callback_set = False

        if self._use_buckets:
            for bucket in self._bucket_list:
                bucket.reset_checked_in()

        if not self._should_accumulate_grads:
            self._accumulate_grads_flipped = False

    def _get_reduce_fn(self, index: int, param: torch.Tensor, dst_rank: int) -> Callable:
        @torch.no_grad()
        def reduce(*_: Any) -> None:
            # Skip gradient reduction, do not alter status flags

            if not self._should_accumulate_grads and self._grad_to_be_reduced[index]:
                assert param.grad is not None, "Reducing gradients during backward pass, cannot be None"

                if not self._bucket_flush_callback_set:
                    Variable._execution_engine.queue_callback(self._flush_reduce_calls)
                    self._bucket_flush_callback_set = True

                # Make sure that this is not fired twice
                self._grad_to_be_reduced[index] = False
                bucket = self._buckets[param.device][dst_rank]
                bucket.params_checked_in += 1

                if bucket.all_checked_in:
                    assert bucket.buffer is not None

                    # Normalize the bucket in one go
                    bucket.buffer.mul_(self._world_size_scaling)

                    # Reduce the bucket
                    bucket.sent = True
                    self._work_handles.append(
                        Workhandle(
                            handle=dist.reduce(
                                tensor=bucket.buffer,
                                dst=bucket.destination,
                                group=self._process_group,
                                async_op=True,
                            ),
                            callback=None,
                        )
                    )

                # Opportunistically try to empty the queue
                self._try_consume_work_handle()

        return reduce

    def _setup_backward_hooks(self) -> None:
        # Detach possible pre-existing hooks
        while len(self._grad_hooks) > 0:
            self._grad_hooks.pop().remove()

        # Go through the parameters, attach the hook
        self._grad_accs = []
        self._manual_reduce = []
        if not self.training:
            return

        for index, param in enumerate(self._trainable_params):
            if param.grad is not None and param.grad.requires_grad:
                raise RuntimeError("ShardedDataParallel only works with gradients that don't require grad")

            p_tmp = param.expand_as(param)

            if p_tmp.grad_fn is not None:
                grad_acc = p_tmp.grad_fn.next_functions[0][0]
                dst_rank = self._trainable_param_to_rank[param]

                reduce_function = self._get_reduce_fn(index, param, dst_rank)

                self._grad_hooks.append(grad_acc.register_hook(reduce_function))
                self._grad_accs.append(grad_acc)  # keep this hook in scope
                self._manual_reduce.append(reduce_function)
"""

# --- laekov/fastmoe ee3c5615 fmoe/megatron/layers.py _megatron_init_method, MegatronMLP.__init__ /
# .reset_parameters, with fmoe/layers.py mark_module_parallel_comm and fmoe/distributed.py
# DistributedGroupedDataParallel.__init__'s allreduce_gradients (shortened: gate selection, the
# gate hook and the parameter broadcast dropped). `dp_comm` on a parameter names the group its
# gradient is reduced in; distributed experts get "none" (each rank owns different experts).
_FASTMOE_MEGATRON_INIT = """
import math

import numpy as np
import torch
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from fmoe.transformer import FMoETransformerMLP
from fmoe.utils import get_torch_default_comm


def mark_module_parallel_comm(module, comm):
    for p in module.parameters():
        setattr(p, "dp_comm", comm)


def _megatron_init_method(self, rng, sigma):
    r\"\"\"
    Init method based on N(0, sigma).
    Copied from Megatron-LM
    \"\"\"
    device = self.weight.device
    dtype = self.weight.dtype
    weight = rng.normal(loc=0.0, scale=sigma, size=tuple(self.weight.size()))
    self.weight.data = torch.from_numpy(weight).to(dtype=dtype, device=device)

    if self.bias is not None:
        # Always initialize bias to zero.
        with torch.no_grad():
            self.bias.zero_()


class MegatronMLP(FMoETransformerMLP):
    def __init__(self, args, layer_idx, gate=None):
        if not args.distributed_experts:
            world_size = 1
            moe_group = None
        else:
            world_size = args.data_parallel_size
            from megatron.mpu import get_data_parallel_group
            moe_group = get_data_parallel_group()

        super().__init__(
            args.fmoe_num_experts,
            top_k=args.top_k,
            d_model=args.hidden_size,
            d_hidden=args.hidden_hidden_size,
            world_size=world_size,
            moe_group=moe_group,
            expert_dp_comm="none" if args.distributed_experts else "dp",
            gate=gate,
        )
        self.hidden_size = args.hidden_size
        if args.distributed_experts:
            self.rank = args.rank
        else:
            self.rank = 0
        self.sigma = args.init_method_std
        self.num_layers = args.num_layers
        self.reset_parameters()

    def reset_parameters(self):
        rng = np.random.default_rng(np.random.randint(2048) + self.rank)

        for expert in self.experts:
            _megatron_init_method(expert.htoh4, rng, self.sigma)

        std = self.sigma / math.sqrt(2.0 * self.num_layers)

        for expert in self.experts:
            _megatron_init_method(expert.h4toh, rng, std)


class DistributedGroupedDataParallel(nn.Module):
    def __init__(
        self,
        module,
        auto_allreduce=False,
        need_sync=True,
        **kwargs
    ):
        super().__init__()
        self.module = module

        self.comms = dict()
        for k in kwargs:
            if k.endswith('_group'):
                self.comms[k[:-6]] = kwargs[k]
        for k in ['dp', 'gate', 'moe', 'world']:
            if k not in self.comms:
                self.comms[k] = get_torch_default_comm()

        def allreduce_gradients(no_scale=False,
                reduce_after=False, fp32_allreduce=False):
            groups = dict()
            for p in self.module.parameters():
                if not p.requires_grad or p.grad is None:
                    continue
                if hasattr(p, "dp_comm"):
                    dp_comm = p.dp_comm
                else:
                    dp_comm = "dp"
                group_key = (dp_comm, p.dtype)
                if group_key not in groups:
                    groups[group_key] = [p]
                else:
                    groups[group_key].append(p)
            for (dp_comm, dtype), group in groups.items():
                if dp_comm not in self.comms:
                    continue
                comm = self.comms[dp_comm]
                grads = [p.grad.data for p in group]
                coalesced = _flatten_dense_tensors(grads)
                if fp32_allreduce and dtype != torch.float32:
                    coalesced = coalesced.float()
                if not no_scale and not reduce_after:
                    coalesced /= comm.size()
                torch.distributed.all_reduce(coalesced, group=comm)
                if not no_scale and reduce_after:
                    coalesced /= comm.size()
                synced = _unflatten_dense_tensors(coalesced, grads)
                for g, s in zip(grads, synced):
                    g.copy_(s)

        self.allreduce_gradients = allreduce_gradients
"""

# --- laekov/fastmoe ee3c5615 fmoe/linear.py MOELinear / FMoELinear, ADAPTED: the real function
# returns the grouped expert wgrad to autograd; the twin gives it Megatron's
# gradient_accumulation_fusion path (FMoELinear shortened: reset_parameters and extra_repr
# dropped). The wgrad is added into `weight.main_grad`, or copied when
# Megatron-FSDP sets `overwrite_main_grad` (`ctx.accumulate` caches that choice for the write);
# `grad_added_to_main_grad` is set and a dummy returned only where main_grad was written.
_FASTMOE_MOE_LINEAR_FUSED = """
import torch
import torch.nn as nn
from torch.autograd import Function

import fmoe_cuda


def _finish_wgrad(weight, grad_weight, written_to_main_grad):
    if not written_to_main_grad:
        return grad_weight
    weight.grad_added_to_main_grad = True
    if getattr(weight, "zero_out_wgrad", False):
        return torch.zeros_like(weight)
    return torch.empty_like(weight)


class MOELinear(Function):
    r\"\"\"
    Computes linear operators within one GPU on different experts simutaneously.
    \"\"\"

    @staticmethod
    def forward(ctx, global_input_buf, fwd_expert_count, weight, bias=None, gradient_accumulation_fusion=False):
        global_output_buf = fmoe_cuda.linear_forward(
            global_input_buf, fwd_expert_count, weight, bias
        )
        variables = (global_input_buf, fwd_expert_count, weight, bias)
        ctx.save_for_backward(*variables)
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.accumulate = gradient_accumulation_fusion and not getattr(weight, "overwrite_main_grad", False)
        return global_output_buf

    @staticmethod
    def backward(ctx, grad_out):
        (input_buf, fwd_expert_count, weight, bias) = ctx.saved_tensors
        grad_inp_buf, grad_weight, grad_bias = fmoe_cuda.linear_backward(
            grad_out, input_buf, fwd_expert_count, weight, bias
        )

        if not torch.is_tensor(bias):
            grad_bias = None

        if ctx.gradient_accumulation_fusion:
            if ctx.accumulate:
                weight.main_grad.add_(grad_weight)
            else:
                weight.main_grad.copy_(grad_weight)

        return grad_inp_buf, None, _finish_wgrad(weight, grad_weight, ctx.gradient_accumulation_fusion), grad_bias, None


class FMoELinear(nn.Module):
    def __init__(
        self,
        num_expert: int,
        in_feat: int,
        out_feat: int,
        bias: bool = True,
        rank: int = 0,
        gradient_accumulation_fusion: bool = False,
    ):
        super().__init__()
        self.num_expert = num_expert
        self.in_feat = in_feat
        self.out_feat = out_feat
        self.rank = rank
        self.gradient_accumulation_fusion = gradient_accumulation_fusion
        self.weight = nn.Parameter(torch.Tensor(num_expert, out_feat, in_feat))
        if bias:
            self.bias = nn.Parameter(torch.zeros(num_expert, out_feat))
        else:
            self.register_parameter("bias", None)

        self.reset_parameters()

    def forward(self, inp, fwd_expert_count):
        r\"\"\"
        Call MOE function
        \"\"\"
        x = MOELinear.apply(
            inp.type_as(self.weight), fwd_expert_count, self.weight, self.bias, self.gradient_accumulation_fusion
        )
        return x
"""

# --- laekov/fastmoe ee3c5615 fmoe/megatron/layers.py MegatronMLP.__init__ / .forward, ADAPTED: the
# real layer has no fused path; the twin turns on the adapted MOELinear's
# gradient_accumulation_fusion for every expert linear and, before the experts run, fetches a
# Megatron-FSDP parameter's buffer with get_main_grad() (Megatron-LM #5209's fix). The expert
# weights live in `self.experts[i].htoh4` / `.h4toh`, not on the MLP itself.
_FASTMOE_MEGATRON_MLP_FETCH = """
import torch

from fmoe.transformer import FMoETransformerMLP


class MegatronMLP(FMoETransformerMLP):
    def __init__(self, args, layer_idx, gate=None):
        super().__init__(
            args.fmoe_num_experts,
            top_k=args.top_k,
            d_model=args.hidden_size,
            d_hidden=args.hidden_hidden_size,
            world_size=args.data_parallel_size,
            expert_dp_comm="none",
            gate=gate,
        )
        self.hidden_size = args.hidden_size
        self.gradient_accumulation_fusion = args.gradient_accumulation_fusion
        for expert in self.experts:
            expert.htoh4.gradient_accumulation_fusion = args.gradient_accumulation_fusion
            expert.h4toh.gradient_accumulation_fusion = args.gradient_accumulation_fusion

    def _expose_main_grads(self):
        for param in self.experts.parameters():
            if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
                param.main_grad = param.get_main_grad()

    def forward(self, inp):
        from megatron import mpu
        if self.gradient_accumulation_fusion:
            self._expose_main_grads()
        x = super().forward(inp)
        x = mpu.reduce_from_tensor_model_parallel_region(x)
        return (
            x,
            torch.zeros(self.hidden_size, dtype=inp.dtype, device=inp.device),
        )
"""

# --- databricks/megablocks 78eea65f megablocks/layers/mlp.py MLP.__init__ (shortened: the
# allocator note dropped). megablocks/layers/mpu.py set_expert_model_parallel_attributes sets
# `expert_model_parallel` on the Parameter; param_is_expert_model_parallel is how the training
# framework's data-parallel gradient reduction learns that the weight holds this rank's experts
# only and must not be averaged with other ranks' experts.
_MEGABLOCKS_MLP_INIT = """
import torch

from megablocks.layers import common, mpu
from megablocks.layers.arguments import Arguments
from megablocks.layers.mlp import create_moe_expert_weights


class MLP(torch.nn.Module):

    def __init__(self, args: Arguments):
        super().__init__()
        self.args = args
        experts_per_rank = mpu.experts_per_rank(args)

        self.w1 = torch.nn.Parameter(
            torch.empty(
                experts_per_rank,
                args.hidden_size,
                mpu.features_per_rank(args),
                device=args.device,
                dtype=common.dtype(args),
            ),
        )
        self.w2 = torch.nn.Parameter(
            torch.empty(
                experts_per_rank,
                mpu.features_per_rank(args),
                args.hidden_size,
                device=args.device,
                dtype=common.dtype(args),
            ),
        )
        mpu.set_expert_model_parallel_attributes(
            self.w1,
            args.moe_expert_model_parallelism,
        )
        mpu.set_expert_model_parallel_attributes(
            self.w2,
            args.moe_expert_model_parallelism,
        )

        with torch.no_grad():
            w1 = create_moe_expert_weights(
                args,
                args.moe_num_experts,
                args.ffn_hidden_size,
                args.hidden_size,
                args.init_method,
            )
            self.w1.copy_(w1.transpose(1, 2).contiguous())
            self.w2.copy_(
                create_moe_expert_weights(
                    args,
                    args.moe_num_experts,
                    args.ffn_hidden_size,
                    args.hidden_size,
                    args.output_layer_init_method,
                ),
            )

        self.gradient_scale = None
        if self.args.moe_expert_model_parallelism:
            self.gradient_scale = 1 / mpu.get_expert_parallel_world_size(self.args,)
"""

# --- databricks/megablocks 78eea65f megablocks/layers/glu.py MemoryOptimizedGroupedGLU and
# GroupedGLU.forward, ADAPTED: the real function returns dw1, dv1, dw2 to autograd. The twin also
# receives the Parameters behind the [experts, rows, hidden] views and, under
# fuse_wgrad_accumulation, writes each grouped wgrad into the Parameter's main_grad (added, or
# copied when `overwrite_main_grad` is set), sets `grad_added_to_main_grad` and returns a dummy,
# as Transformer Engine's GroupedLinear does. GroupedGLU fetches Megatron-FSDP buffers with
# get_main_grad() first (Megatron-LM #5209's fix). AMP casts, the shape notes and SparseGLU (the
# base class defining w1, v1, w2 and scale_grad, unchanged) are dropped.
_MEGABLOCKS_GLU_FUSED = """
import torch

from megablocks import grouped_gemm_util as gg
from megablocks.layers import mpu
from megablocks.layers.mlp import resolve_dtensor


def _expose_main_grad(param):
    if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
        param.main_grad = param.get_main_grad()


class MemoryOptimizedGroupedGLU(torch.autograd.Function):
    \"\"\"GroupedMLP with manually scheduled memory reuse.\"\"\"

    @staticmethod
    @torch.amp.autocast_mode.custom_fwd(device_type='cuda')
    def forward(ctx, x, w1, v1, w2, batch_sizes, activation_fn, params, fuse_wgrad_accumulation):
        if (not x.is_contiguous() or not w1.is_contiguous() or not v1.is_contiguous() or not w2.is_contiguous()):
            raise ValueError("Expected contiguous 'x', 'w1', 'v1' and 'w2'.")

        # Layer 0: x @ w1.t().
        assert gg.backend is not None
        sdd_out = gg.backend.gmm(x, w1, batch_sizes, trans_b=True)
        v1_out = gg.backend.gmm(x, v1, batch_sizes, trans_b=True)

        # GeLU.
        activation_fn_out = activation_fn(sdd_out) * v1_out

        # Layer 1: x @ w2.
        dsd_out = gg.backend.gmm(activation_fn_out, w2, batch_sizes)

        ctx.x_shape = x.shape
        ctx.sdd_out_shape = sdd_out.shape
        ctx.dtype = x.dtype
        ctx.activation_fn = activation_fn
        ctx.params = params
        ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        ctx.save_for_backward(w1, v1, w2, batch_sizes, x, sdd_out, v1_out)
        return dsd_out

    @staticmethod
    @torch.amp.autocast_mode.custom_bwd(device_type='cuda')
    def backward(ctx, ddsd_out):
        if (not ctx.needs_input_grad[0] or not ctx.needs_input_grad[1] or not ctx.needs_input_grad[2]):
            raise ValueError('Expected all MLP inputs to need grad.')

        saved_tensors = ctx.saved_tensors
        w1, v1, w2 = saved_tensors[:3]
        batch_sizes = saved_tensors[3]
        x = saved_tensors[4]
        sdd_out, v1_out = saved_tensors[5:7]

        # Rematerialize activation_fn output.
        activation_fn = ctx.activation_fn
        with torch.set_grad_enabled(True):
            sdd_out.requires_grad = True
            v1_out.requires_grad = True
            activation_fn_out = activation_fn(sdd_out) * v1_out
            activation_grad_fn = activation_fn_out.backward

        # Compute dw2 with recomputed activation_fn output.
        assert gg.backend is not None
        dw2 = gg.backend.gmm(
            activation_fn_out,
            ddsd_out,
            batch_sizes,
            trans_a=True,
        )

        # Compute dactivation_fn_out.
        #
        # NOTE: We reuse the activation_fn_out allocation.
        dactivation_fn_out = activation_fn_out
        gg.backend.gmm(
            ddsd_out,
            w2,
            batch_sizes,
            trans_b=True,
            c=dactivation_fn_out,
        )

        # Compute dsdd_out.
        #
        # NOTE: This reuses the dactivation_fn_out allocation.
        assert activation_grad_fn is not None
        activation_grad_fn(dactivation_fn_out)
        dsdd_out = sdd_out.grad
        dv1_out = v1_out.grad

        # Compute dw1.
        dw1 = gg.backend.gmm(dsdd_out, x, batch_sizes, trans_a=True)

        # Compute dv1.
        dv1 = gg.backend.gmm(dv1_out, x, batch_sizes, trans_a=True)

        # Compute dx.
        #
        # NOTE: This reuses the ddsd_out allocation.
        dx = ddsd_out
        gg.backend.gmm(dsdd_out, w1, batch_sizes, c=dx)
        dx += gg.backend.gmm(dv1_out, v1, batch_sizes)

        if ctx.fuse_wgrad_accumulation:
            wgrads = []
            for param, weight, wgrad in zip(ctx.params, (w1, v1, w2), (dw1, dv1, dw2)):
                accumulate = not getattr(param, "overwrite_main_grad", False)
                main_grad = param.main_grad.view_as(weight)
                if accumulate:
                    main_grad.add_(wgrad)
                else:
                    main_grad.copy_(wgrad)
                param.grad_added_to_main_grad = True
                wgrads.append(torch.zeros_like(wgrad) if getattr(param, "zero_out_wgrad", False) else torch.empty_like(wgrad))
            dw1, dv1, dw2 = wgrads
        return dx, dw1, dv1, dw2, None, None, None, None


memory_optimized_grouped_glu = MemoryOptimizedGroupedGLU.apply


class GroupedGLU(SparseGLU):

    def forward(self, x, tokens_per_expert):
        batch_sizes = tokens_per_expert.cpu().to(torch.long)
        w1, v1, w2 = (
            self.scale_grad(self.w1),
            self.scale_grad(self.v1),
            self.scale_grad(self.w2),
        )
        w1, v1, w2 = resolve_dtensor(w1), resolve_dtensor(v1,), resolve_dtensor(w2)

        # Re-shape the weights for the grouped GEMMs.
        ne = mpu.experts_per_rank(self.args)
        w1 = w1.view(ne, -1, self.args.hidden_size)
        v1 = v1.view(ne, -1, self.args.hidden_size)
        w2 = w2.view(ne, -1, self.args.hidden_size)

        if self.args.memory_optimized_mlp:
            fuse = self.args.fuse_wgrad_accumulation
            if fuse:
                for param in (self.w1, self.v1, self.w2):
                    _expose_main_grad(param)
            return memory_optimized_grouped_glu(
                x,
                w1,
                v1,
                w2,
                batch_sizes,
                self.args.activation_fn,
                (self.w1, self.v1, self.w2),
                fuse,
            )

        # Compute the MLP.
        assert gg.ops is not None
        x1 = gg.ops.gmm(x, w1, batch_sizes, trans_b=True)
        x2 = gg.ops.gmm(x, v1, batch_sizes, trans_b=True)
        x1 = self.args.activation_fn(x1) * x2
        return gg.ops.gmm(x1, w2, batch_sizes)
"""

# --- pytorch/pytorch 060ca5d7 torch/distributed/pipelining/_backward.py _get_grad_fn_or_grad_acc /
# stage_backward_weight (whole). The W pass of a split backward: for each parameter group it
# replays autograd from the saved intermediates and accumulates dW into `weight.grad`, which holds
# the earlier microbatches' (and other groups') contributions.
_PYTORCH_STAGE_BACKWARD_WEIGHT = """
from typing import Any, Dict, Iterator, List, Union

import torch
from torch.autograd.graph import GradientEdge, Node
from torch.nn import Parameter


def _get_grad_fn_or_grad_acc(t: torch.Tensor) -> Union[Node, None]:
    if t.requires_grad and t.grad_fn is None:
        # if no grad function (leaf tensors) we use view
        viewed_t = t.view_as(t)
        grad_fn = viewed_t.grad_fn
        if grad_fn is not None:
            return grad_fn.next_functions[0][0]
        else:
            raise RuntimeError(
                "Attempted to get grad_fn, but got None."
                "Is this being created in a no-grad context?"
            )
    else:
        return t.grad_fn


def stage_backward_weight(
    weights: Iterator[Parameter], param_groups: List[Dict[str, Any]], retain_graph=False
):
    # map weights to param_group_weights
    grad_acc_to_weight = {}
    weight_grads = []
    for index, weight in enumerate(weights):
        grad_acc = _get_grad_fn_or_grad_acc(weight)
        grad_acc_to_weight[grad_acc] = weight, index
        weight_grads.append(weight.grad)

    for param_group in param_groups:
        # TODO: Handle case where intermediate can have multiple outputs
        intermediate_edges = tuple(
            GradientEdge(i, 0) for i in param_group["intermediates"]
        )
        weights_edges = tuple(GradientEdge(w, 0) for w in param_group["params"])

        del param_group["intermediates"]

        assert all(len(g) == 1 for g in param_group["grads"])
        dweights = torch.autograd.grad(
            intermediate_edges,
            weights_edges,
            grad_outputs=sum(param_group["grads"], tuple()),
            retain_graph=retain_graph,
        )
        for grad_acc, dw in zip(param_group["params"], dweights):
            weight, index = grad_acc_to_weight[grad_acc]
            if weight.grad is None:
                weight.grad = dw
            else:
                weight.grad += dw
    # return grads in the original order weights were provided in
    return weight_grads
"""

# --- pytorch/pytorch 88fa1e71 torch/distributed/pipelining/stage.py
# _PipelineStageBase.backward_one_chunk / .backward_weight_one_chunk (shortened: the full-backward
# branch's bookkeeping, output detaching and logging dropped). With full_backward=False the input
# backward runs now and the weight part is left in `dw_runner` (a custom dw_builder's closure, or a
# placeholder when the saved param_groups are replayed) for the schedule's W action.
_PYTORCH_STAGE_SPLIT_BACKWARD = """
from typing import Any, Optional

import torch


class _PipelineStageBase(ABC):
    def backward_one_chunk(
        self,
        bwd_chunk_id: int,
        loss=None,
        full_backward: bool = True,
        last_backward=False,
    ):
        self._check_chunk_id(bwd_chunk_id)

        (
            stage_output,
            input_values,
        ) = self.fwd_cache.pop(bwd_chunk_id)

        # Compute backward
        if self.is_last:
            bwd_kwargs = {
                "stage_output": loss,
                "output_grads": None,
                "input_values": input_values,
            }
        else:
            grads_output = self._retrieve_recv_grads(bwd_chunk_id)
            bwd_kwargs = {
                "stage_output": stage_output,
                "output_grads": grads_output,
                "input_values": input_values,
            }

        grads_input: tuple[Optional[torch.Tensor], ...] = ()

        # Custom backward function
        if self.dw_builder:
            grads_input, _ = self.backward_maybe_with_nosync(
                "full",
                bwd_kwargs,
                last_backward=last_backward,
            )
            if full_backward:
                self.dw_builder()()
            else:
                self.dw_runner[bwd_chunk_id] = self.dw_builder()
        else:
            if full_backward:
                grads_input, _ = self.backward_maybe_with_nosync(
                    "full", bwd_kwargs, last_backward=last_backward
                )
            else:
                param_groups: list[dict[str, Any]] | None = None
                if not self.is_first:
                    if isinstance(bwd_kwargs["stage_output"], torch.Tensor):
                        bwd_kwargs["stage_output"] = (bwd_kwargs["stage_output"],)

                    grads_input, param_groups = self.backward_maybe_with_nosync(
                        "input", bwd_kwargs, last_backward=last_backward
                    )

                self.backward_state[bwd_chunk_id] = (
                    bwd_kwargs["input_values"],
                    param_groups,
                    bwd_kwargs["stage_output"],
                    bwd_kwargs["output_grads"],
                )
                # Save a placeholder for the dw_runner
                self.dw_runner[bwd_chunk_id] = lambda: None

        self.bwd_cache[bwd_chunk_id] = grads_input

    def backward_weight_one_chunk(self, bwd_chunk_id: int, last_backward=False):
        assert bwd_chunk_id in self.dw_runner, (
            f"{self.log_prefix} Attempted to run backward_weight_one_chunk for chunk {bwd_chunk_id}"
            " without first calling `backward_one_chunk(full_backward=False)`"
        )

        if self.dw_builder is not None:
            self.dw_runner.pop(bwd_chunk_id)()
        else:
            (
                input_values,
                param_groups,
                stage_output,
                output_grads,
            ) = self.backward_state.pop(bwd_chunk_id)

            if self.stage_index != 0:
                bwd_kwargs = {
                    "stage_output": stage_output,
                    "param_groups": param_groups,
                }
                self.backward_maybe_with_nosync(
                    "weight", bwd_kwargs, last_backward=last_backward
                )
            else:
                bwd_kwargs = {
                    "stage_output": stage_output,
                    "output_grads": output_grads,
                    "input_values": input_values,
                }
                self.backward_maybe_with_nosync(
                    "full", bwd_kwargs, last_backward=last_backward
                )
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        cls=1,
        name="megablocks_grouped_glu_main_grad_flag_set_on_weight_view",
        bug=_swap(
            _MEGABLOCKS_GLU_FUSED,
            "                param.grad_added_to_main_grad = True\n",
            "                weight.grad_added_to_main_grad = True  # bug\n",
        ),
        twin=_MEGABLOCKS_GLU_FUSED,
    ),
    Variant(
        cls=1,
        name="internevo_wp_dense_zero_bubble_store_gets_gathered_weight",
        bug=_swap(
            _INTERNEVO_WP_DENSE,
            "                WeightGradStore.put(\n                    weight,\n",
            "                WeightGradStore.put(\n                    total_weight,  # bug\n",
        ),
        twin=_INTERNEVO_WP_DENSE,
    ),
    # ---------------------------------------------------------------- 2: rebound / copy
    Variant(
        cls=2,
        name="fastmoe_megatron_init_rebinds_expert_weight_losing_dp_comm",
        bug=_swap(
            _FASTMOE_MEGATRON_INIT,
            "    self.weight.data = torch.from_numpy(weight).to(dtype=dtype, device=device)\n",
            "    self.weight = nn.Parameter(torch.from_numpy(weight).to(dtype=dtype, device=device))  # bug\n",
        ),
        twin=_FASTMOE_MEGATRON_INIT,
    ),
    Variant(
        cls=2,
        name="megablocks_mlp_init_rebinds_w1_losing_expert_parallel_attr",
        bug=_swap(
            _MEGABLOCKS_MLP_INIT,
            "            self.w1.copy_(w1.transpose(1, 2).contiguous())\n",
            "            self.w1 = torch.nn.Parameter(w1.transpose(1, 2).contiguous())  # bug\n",
        ),
        twin=_MEGABLOCKS_MLP_INIT,
    ),
    # ---------------------------------------------------------------- 3: flags / writes
    Variant(
        cls=3,
        name="internevo_isp_grad_hook_returns_reduced_grad_it_also_parks",
        bug=_swap(
            _INTERNEVO_ISP_GRAD_HOOK,
            "            result, handle = (\n"
            "                self._get_constant_zero(\n"
            "                    (\n"
            "                        tensor.shape[0] // dist.get_world_size(self.process_group),\n"
            "                        *tensor.shape[1:],\n"
            "                    )\n"
            "                ),\n"
            "                DUMMY_HANDLE_CONST,\n"
            "            )\n",
            "            result, handle = self.reduce_scatter_handlers[key]  # bug\n",
        ),
        twin=_INTERNEVO_ISP_GRAD_HOOK,
    ),
    Variant(
        cls=3,
        name="fastmoe_moe_linear_flag_set_before_unfused_early_return",
        bug=_swap(
            _FASTMOE_MOE_LINEAR_FUSED,
            "    if not written_to_main_grad:\n"
            "        return grad_weight\n"
            "    weight.grad_added_to_main_grad = True\n",
            "    weight.grad_added_to_main_grad = True  # bug\n"
            "    if not written_to_main_grad:\n"
            "        return grad_weight\n",
        ),
        twin=_FASTMOE_MOE_LINEAR_FUSED,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        cls=4,
        name="fairscale_fsdp_saved_grad_shard_assigned_not_accumulated",
        bug=_swap(
            _FAIRSCALE_FSDP_REDUCTION,
            "                param._saved_grad_shard.data += reduced_grad.data\n",
            "                param._saved_grad_shard.data = reduced_grad.data  # bug\n",
        ),
        twin=_FAIRSCALE_FSDP_REDUCTION,
    ),
    Variant(
        cls=4,
        name="pytorch_pipelining_stage_backward_weight_assigns_grad",
        bug=_swap(
            _PYTORCH_STAGE_BACKWARD_WEIGHT,
            "            if weight.grad is None:\n"
            "                weight.grad = dw\n"
            "            else:\n"
            "                weight.grad += dw\n",
            "            weight.grad = dw  # bug\n",
        ),
        twin=_PYTORCH_STAGE_BACKWARD_WEIGHT,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        cls=5,
        name="fairscale_sharded_ddp_bucket_hook_not_marked_reduced",
        bug=_swap(
            _FAIRSCALE_SHARDED_DDP,
            "                # Make sure that this is not fired twice\n"
            "                self._grad_to_be_reduced[index] = False\n"
            "                bucket = self._buckets[param.device][dst_rank]\n",
            "                bucket = self._buckets[param.device][dst_rank]  # bug\n",
        ),
        twin=_FAIRSCALE_SHARDED_DDP,
    ),
    Variant(
        cls=5,
        name="internevo_zero_expert_accum_hook_gated_on_dense_overlap",
        bug=_swap(
            _INTERNEVO_ZERO_HOOKS,
            "                            and gpc.config.parallel.expert_weight.overlap\n",
            "                            and gpc.config.parallel.weight.overlap  # bug\n",
        ),
        twin=_INTERNEVO_ZERO_HOOKS,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad
    Variant(
        cls=6,
        name="pytorch_pipelining_weight_chunk_pops_dw_runner_without_calling",
        bug=_swap(
            _PYTORCH_STAGE_SPLIT_BACKWARD,
            "            self.dw_runner.pop(bwd_chunk_id)()\n",
            "            self.dw_runner.pop(bwd_chunk_id)  # bug\n",
        ),
        twin=_PYTORCH_STAGE_SPLIT_BACKWARD,
    ),
    Variant(
        cls=6,
        name="internevo_zb_scheduler_drains_one_leftover_w",
        bug=_swap(
            _INTERNEVO_ZB_STORE,
            "        while WeightGradStore.size() > 0:\n",
            "        if WeightGradStore.size() > 0:  # bug\n",
        ),
        twin=_INTERNEVO_ZB_STORE,
    ),
    # ------------------------------------------------- 7: the seed shape in other syntax
    Variant(
        cls=7,
        name="fastmoe_moe_linear_dummy_chosen_on_ctx_accumulate",
        bug=_swap(
            _FASTMOE_MOE_LINEAR_FUSED,
            "        return grad_inp_buf, None, _finish_wgrad(weight, grad_weight, ctx.gradient_accumulation_fusion), grad_bias, None\n",
            "        return grad_inp_buf, None, _finish_wgrad(weight, grad_weight, ctx.accumulate), grad_bias, None  # bug\n",
        ),
        twin=_FASTMOE_MOE_LINEAR_FUSED,
    ),
    Variant(
        cls=7,
        name="megablocks_grouped_glu_bookkeeping_gated_on_loop_accumulate",
        bug=_swap(
            _MEGABLOCKS_GLU_FUSED,
            "                param.grad_added_to_main_grad = True\n"
            '                wgrads.append(torch.zeros_like(wgrad) if getattr(param, "zero_out_wgrad", False) else torch.empty_like(wgrad))\n',
            "                param.grad_added_to_main_grad = accumulate  # bug\n"
            '                wgrads.append((torch.zeros_like(wgrad) if getattr(param, "zero_out_wgrad", False) else torch.empty_like(wgrad)) if accumulate else wgrad)  # bug\n',
        ),
        twin=_MEGABLOCKS_GLU_FUSED,
    ),
    # ------------------------------------------------- 8: Megatron-LM #5209's shape
    Variant(
        cls=8,
        name="fastmoe_megatron_mlp_fetches_own_params_not_experts",
        bug=_swap(
            _FASTMOE_MEGATRON_MLP_FETCH,
            "        for param in self.experts.parameters():\n",
            "        for param in self.parameters(recurse=False):  # bug\n",
        ),
        twin=_FASTMOE_MEGATRON_MLP_FETCH,
    ),
    Variant(
        cls=8,
        name="megablocks_grouped_glu_fetch_skips_v1",
        bug=_swap(
            _MEGABLOCKS_GLU_FUSED,
            "                for param in (self.w1, self.v1, self.w2):\n",
            "                for param in (self.w1, self.w2):  # bug\n",
        ),
        twin=_MEGABLOCKS_GLU_FUSED,
    ),
)
