"""The eighteenth blind corpus (H-blind18): main_grad bookkeeping variants of the eight classes
of issue #19, grounded in code from repositories no earlier blind corpus used: Azure MS-AMP
(FP8 `ScalingTensor` weights whose gradients reach an FP8 `main_grad` through
`backward_grad_update` and FP8DistributedDataParallel's post hooks), huggingface picotron
(`DataParallelBucket`, `param.main_grad` views into bucket buffers, AccumulateGrad hooks),
microsoft nnscaler (the runtime `Reducer`, a contiguous fp32-style gradient buffer filled by
AccumulateGrad hooks), deepseek-ai DualPipe (`WeightGradStore`, split backward with deferred
weight-gradient closures) and EleutherAI gpt-neox (Transformer Engine wrappers).

Sources (repo, commit, path, function):
- Azure/MS-AMP 9746ea85289f8e6233646e73ace35f730d1245d5
  msamp/megatron/layers.py FP8LinearWithGradAccumulationAndAsyncCommunication.forward / .backward
- Azure/MS-AMP 9746ea85289f8e6233646e73ace35f730d1245d5
  msamp/nn/functional.py _FP8GemmFunction.forward / .backward
- Azure/MS-AMP 9746ea85289f8e6233646e73ace35f730d1245d5
  msamp/common/tensor/tensor.py ScalingTensor.grad / .register_backward_post_hook / .backward_grad_update,
  msamp/megatron/distributed.py FP8DistributedDataParallel._fp8_make_param_hook (and the hook registration in __init__)
- huggingface/picotron 59714b1bf25541dbeb6f5a721ed15f6d0768e786
  picotron/data_parallel/data_parallel.py DataParallelBucket.register_backward_hook / ._make_param_hook / ._post_backward
- huggingface/picotron 59714b1bf25541dbeb6f5a721ed15f6d0768e786
  picotron/data_parallel/bucket.py BucketManager._initialize_buckets / ._get_view_from_tensor
- microsoft/nnscaler 1585c15d4ca99e23a410c90f9bad2664125524d4
  nnscaler/runtime/adapter/reducer.py Reducer.register_hooks (post_grad_hook) / .sync_grads
- deepseek-ai/DualPipe 3da1bbea53606543d7f5f232338fc58096db30e3
  examples/example_dualpipe.py LinearFunc.forward / .backward, dualpipe/utils.py WeightGradStore
- deepseek-ai/DualPipe 3da1bbea53606543d7f5f232338fc58096db30e3
  dualpipe/dualpipe.py DualPipe._backward_compute_chunk / ._weight_chunk
- EleutherAI/gpt-neox ea7aefd8f8e183256992d9fede4d7c71a46d67a5
  megatron/model/transformer_engine.py TELinear, TELayerNormMLP

Conventions: twins are the real code shortened (real names and idioms; sequence-parallel
gathers, async all-reduces, FP4 simulation and logging dropped). Three twins are adapted where the
real code lacks the main_grad feature a class is about, and say so above their source block:
MS-AMP's Megatron FP8 linear asserts `not gradient_accumulation_fusion`; its class-7 twin gives
it the fused path (the wgrad written into the FP8 `main_grad` that FP8DistributedDataParallel
allocates, `overwrite_main_grad` honoured, `grad_added_to_main_grad` set, and
`backward_grad_update` only when not fused). gpt-neox's TE wrappers do not pass
`fuse_wgrad_accumulation`; their class-8 twins pass it and expose a Megatron-FSDP
`get_main_grad()` buffer before the TE module runs (Megatron-LM #5209's fix).
Per-repository stand-ins for main_grad: MS-AMP's `ScalingTensor.grad` plus its post hooks
(`backward_grad_update` sets `.grad` and fires the hooks that add it into the FP8 `main_grad`;
a stand-in without hooks drops the gradient); picotron's `param.main_grad` (a view into the
bucket's `grad_data`); nnscaler's `Reducer._contiguous_grads`; DualPipe's `weight.grad`
(LinearFunc accumulates into it and returns None for the weight).
Bugs are written as `_swap(twin, old, new)`: one passage of the twin replaced, the changed
line(s) carrying `# bug`.
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- Azure/MS-AMP 9746ea85 msamp/megatron/layers.py FP8LinearWithGradAccumulationAndAsyncCommunication
# (shortened: sequence-parallel gathers, async all-reduce and FP4 simulation dropped). The FP8 weight
# gradient is handed to the ScalingTensor parameter by `backward_grad_update`, whose post hook
# (FP8DistributedDataParallel) adds it into the FP8 main_grad; None is returned to autograd.
_MSAMP_MEGATRON_LINEAR = """
import torch

from msamp.common.dtype import Dtypes
from msamp.common.tensor import ScalingTensor
from msamp.operators.gemm import Gemm


class FP8LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce, sequence_parallel):
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.input_shape = input.shape
        metas = weight._scaling_metas
        ctx.metas = metas
        input_fp8 = input.contiguous().cast(Dtypes.kfloat8_e4m3, meta=metas['input'], sync=sequence_parallel)
        input_fp8.requires_grad = input.requires_grad
        weight_fp8 = weight.cast(Dtypes.kfloat8_e4m3)
        weight_fp8.requires_grad = weight.requires_grad

        # save tensors
        ctx.input_fp8 = input_fp8
        ctx.weight_fp8 = weight_fp8
        ctx.weight = weight

        total_input_fp8 = ScalingTensor(input_fp8.value.view(-1, input.shape[-1]), input_fp8.meta)
        output_qtype = Dtypes.dtype_to_qtype[input.dtype]
        ctx.output_qtype = output_qtype
        output = Gemm.fp8_gemm(weight_fp8, total_input_fp8, output_qtype, use_split_accumulator=False)
        output = output.view(list(input.size())[:-1] + [-1])
        if bias is not None:
            output.add_(bias)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input_fp8 = ctx.input_fp8
        weight_fp8 = ctx.weight_fp8
        output_qtype = ctx.output_qtype
        ograd_meta = ctx.metas['ograd']

        grad_output = grad_output.contiguous()
        if len(grad_output.shape) != 2:
            grad_output = grad_output.view(-1, grad_output.shape[-1])
        grad_output_fp8, grad_output_fp8_t = grad_output.fused_cast_transpose(Dtypes.kfloat8_e5m2, meta=ograd_meta)

        # grad_input
        weight_fp8_t = weight_fp8.fp8_transpose()
        grad_input = Gemm.fp8_gemm(weight_fp8_t, grad_output_fp8, output_qtype, use_split_accumulator=True)
        grad_input = grad_input.view(ctx.input_shape)

        assert not ctx.gradient_accumulation_fusion, \\
            'gradient_accumulation_fusion not supported for FP8LinearWithGradAccumulationAndAsyncCommunication'
        # MS-AMP: compute wgrad
        total_input_fp8 = ScalingTensor(input_fp8.value.view(-1, ctx.input_shape[-1]), input_fp8.meta)
        total_input_fp8_t = total_input_fp8.fp8_transpose()
        grad_weight = Gemm.fp8_gemm(total_input_fp8_t, grad_output_fp8_t, output_qtype, use_split_accumulator=True)
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None

        # FP8 Weight Gradient
        ctx.weight.backward_grad_update(grad_weight)
        grad_weight = None
        return grad_input, grad_weight, grad_bias, None, None, None
"""

# --- Azure/MS-AMP 9746ea85 msamp/megatron/layers.py, the same backward ADAPTED with the fused
# path that MS-AMP asserts away: under gradient_accumulation_fusion the FP8 wgrad goes straight
# into the parameter's FP8 main_grad (added, or copied when Megatron-FSDP asks for an overwrite),
# grad_added_to_main_grad is set and the post-hook path (`backward_grad_update`) is skipped.
_MSAMP_MEGATRON_LINEAR_FUSED = """
import torch

from msamp.common.dtype import Dtypes
from msamp.common.tensor import ScalingTensor
from msamp.operators.arithmetic import Arithmetic
from msamp.operators.gemm import Gemm


class FP8LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        input_fp8 = ctx.input_fp8
        weight = ctx.weight
        output_qtype = ctx.output_qtype

        grad_output = grad_output.contiguous().view(-1, grad_output.shape[-1])
        grad_output_fp8, grad_output_fp8_t = grad_output.fused_cast_transpose(Dtypes.kfloat8_e5m2, meta=ctx.metas['ograd'])
        grad_input = Gemm.fp8_gemm(ctx.weight_fp8.fp8_transpose(), grad_output_fp8, output_qtype, use_split_accumulator=True)
        grad_input = grad_input.view(ctx.input_shape)

        total_input_fp8 = ScalingTensor(input_fp8.value.view(-1, ctx.input_shape[-1]), input_fp8.meta)
        grad_weight = Gemm.fp8_gemm(total_input_fp8.fp8_transpose(), grad_output_fp8_t, output_qtype, use_split_accumulator=True)
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None

        accumulate = ctx.gradient_accumulation_fusion and not getattr(weight, 'overwrite_main_grad', False)
        if ctx.gradient_accumulation_fusion:
            main_grad = weight.main_grad
            if accumulate:
                Arithmetic.add_to_fp8(main_grad.value, main_grad.meta, grad_weight)
            else:
                main_grad.value.copy_(grad_weight.cast(Dtypes.kfloat8_e4m3, meta=main_grad.meta).value)
            weight.grad_added_to_main_grad = True
        else:
            # FP8 Weight Gradient: FP8DistributedDataParallel's post hook adds it to main_grad
            weight.backward_grad_update(grad_weight)
        return grad_input, None, grad_bias, None, None, None
"""

# --- Azure/MS-AMP 9746ea85 msamp/nn/functional.py _FP8GemmFunction (shortened: docstrings and the
# pytorch stride workaround comment dropped). `ctx.weight` is the ScalingParameter (or, for a
# flattened uint8 weight, a fresh ScalingParameter whose wgrad is returned to autograd instead);
# `ctx.weight.grad` is the accumulation buffer across microbatches.
_MSAMP_GEMM_FN = """
import torch

from msamp.common.dtype import Dtypes
from msamp.common.tensor import ScalingTensor
from msamp.nn.parameter import ScalingParameter
from msamp.nn.state import model_state
from msamp.operators.gemm import Gemm


class _FP8GemmFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, metas, dtype_holder):
        if isinstance(weight, torch.Tensor) and hasattr(weight, '_meta'):
            padded = weight._padded
            original_shape = weight._original_shape
            meta = weight._meta

            weight = weight.view(dtype=torch.uint8)
            if padded != 0:
                weight = weight[0:weight.numel() - padded]
            weight = weight.view(original_shape)
            weight = ScalingParameter(ScalingTensor(weight, meta))
            ctx.return_wgrad = True

        ctx.metas = metas
        model_state.check_metas_in_flat(metas)
        input_fp8 = input.cast(Dtypes.kfloat8_e4m3, meta=metas['input'])
        weight_fp8 = weight.cast(Dtypes.kfloat8_e4m3)

        ctx.input_fp8 = input_fp8
        ctx.input_fp8.requires_grad = input.requires_grad
        ctx.weight_fp8 = weight_fp8
        ctx.weight = weight

        output_dtype = dtype_holder.dtype
        output_qtype = Dtypes.dtype_to_qtype[output_dtype]
        ctx.output_dtype = output_dtype
        ctx.output_qtype = output_qtype
        return Gemm.fp8_gemm(weight_fp8, input_fp8, output_qtype, use_split_accumulator=False)

    @staticmethod
    def backward(ctx, output_grad):
        output_grad = output_grad.contiguous()
        metas = ctx.metas
        wgrad_meta = metas['wgrad']
        ograd_fp8, ograd_fp8_t = output_grad.fused_cast_transpose(Dtypes.kfloat8_e5m2, meta=metas['ograd'])

        if ctx.input_fp8.requires_grad:
            weight_fp8_t = ctx.weight_fp8.fp8_transpose()
            input_grad = Gemm.fp8_gemm(weight_fp8_t, ograd_fp8, ctx.output_qtype, use_split_accumulator=True)
        else:
            input_grad = None

        if ctx.weight.requires_grad:
            input_fp8_t = ctx.input_fp8.fp8_transpose()
            wgrad_qtype = ctx.output_qtype
            # compute weight gradient
            if ctx.weight.grad is None:
                wgrad = Gemm.fp8_gemm(
                    input_fp8_t,
                    ograd_fp8_t,
                    wgrad_qtype,
                    use_split_accumulator=True,
                )
            else:
                # gradient accumulation, old_wgrad is FP32 or FP16 without tensor scaling.
                old_wgrad = ctx.weight.grad.to(ctx.output_dtype)
                wgrad = Gemm.fp8_gemm(
                    input_fp8_t,
                    ograd_fp8_t,
                    wgrad_qtype,
                    accumulate=True,
                    out=old_wgrad,
                    use_split_accumulator=True,
                )
                del old_wgrad
            if hasattr(ctx, 'return_wgrad') and ctx.return_wgrad:
                wgrad = wgrad.cast(Dtypes.kfloat8_e4m3, meta=wgrad_meta, sync=True)
                wgrad = wgrad.value.view(-1).view(dtype=torch.float32)
                wgrad.meta = wgrad_meta
                return input_grad, wgrad, None, None
            elif model_state.use_fp8_ddp:
                wgrad.meta = wgrad_meta
            else:
                # wgrad above this line is torch.Tensor w/o tensor scaling
                wgrad = wgrad.cast(Dtypes.kfloat8_e4m3, meta=wgrad_meta, sync=True)

            ctx.weight.backward_grad_update(wgrad)

        return input_grad, None, None, None
"""

# --- Azure/MS-AMP 9746ea85 msamp/common/tensor/tensor.py ScalingTensor (grad property, post hooks,
# backward_grad_update) with msamp/megatron/distributed.py FP8DistributedDataParallel's FP8 hook
# (the hook reads `param.grad`, adds it into the FP8 main_grad and frees it).
_MSAMP_SCALING_TENSOR_HOOKS = """
import torch

from msamp.common.tensor import HookManager
from msamp.operators.arithmetic import Arithmetic


class ScalingTensor:
    def __init__(self, value, meta):
        super().__init__()
        self.value = value
        self._grad = None
        self._backward_post_hooks = HookManager()
        self.meta = meta
        self._requires_grad = False

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, grad):
        self._grad = grad

    def register_backward_post_hook(self, fn):
        return self._backward_post_hooks.register_hook(fn)

    def backward_grad_update(self, grad):
        self.grad = grad
        self._backward_post_hooks(grad)


class FP8DistributedDataParallel(DistributedDataParallelBase):
    def _register_fp8_hooks(self, fp8_params):
        self.grad_accs = []
        for param in fp8_params:
            hook = self._fp8_make_param_hook(param)
            grad_acc = param.register_backward_post_hook(hook)
            self.grad_accs.append(grad_acc)

    def _fp8_make_param_hook(self, param):
        # Hook used for back-prop.
        def param_hook(*unused):
            # Add the gradient to the buffer.
            if param.grad is not None:
                Arithmetic.add_to_fp8(param.main_grad.value, param.main_grad.meta, param.grad)
                # Now we can deallocate grad memory.
                param.grad = None

        return param_hook
"""

# --- huggingface/picotron 59714b1b picotron/data_parallel/data_parallel.py DataParallelBucket
# (shortened: docstrings dropped). The AccumulateGrad hook adds `.grad` into `param.main_grad`
# (a view into the bucket buffer), frees `.grad`, and marks the parameter ready for the bucket's
# all-reduce unless inside `no_sync()`.
_PICOTRON_DP = """
import contextlib

import torch
from torch import nn
from torch.autograd import Variable

import picotron.process_group_manager as pgm
from picotron.data_parallel.bucket import BucketManager


class DataParallelBucket(nn.Module):
    def __init__(self, module, bucket_cap_mb=25, grad_type=torch.float32):
        super().__init__()
        self.module = module
        self.require_backward_grad_sync = True
        grad_size = 2 if grad_type == torch.bfloat16 else 4
        bucket_size = bucket_cap_mb * 1024 * 1024 // grad_size
        self.bucket_manager = BucketManager(module.parameters(), pgm.process_group_manager.cp_dp_group, bucket_size, grad_type)
        self.register_backward_hook()
        self._post_backward_callback_set = False

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    def register_backward_hook(self):
        self.grad_accs = []
        for param in self.module.parameters():
            if param.requires_grad:
                # Expand so we get access to grad_fn.
                param_tmp = param.expand_as(param)
                # Get the gradient accumulator function.
                grad_acc_fn = param_tmp.grad_fn.next_functions[0][0]
                grad_acc_fn.register_hook(self._make_param_hook(param, self.bucket_manager))
                self.grad_accs.append(grad_acc_fn)

    def _make_param_hook(self, param: torch.nn.Parameter, bucket_manager: BucketManager):
        def param_hook(*unused):
            if param.requires_grad:
                assert param.grad is not None
                param.main_grad.add_(param.grad.data)  # accumulate the gradients
                param.grad = None

                # skip the gradient synchronization (gradient accumulation/PP micro batches)
                if self.require_backward_grad_sync:
                    if not self._post_backward_callback_set:
                        Variable._execution_engine.queue_callback(self._post_backward)
                        self._post_backward_callback_set = True

                    # mark the parameter as ready for gradient synchronization.
                    bucket_manager.mark_param_as_ready(param)
        return param_hook

    @contextlib.contextmanager
    def no_sync(self):
        self.require_backward_grad_sync = False
        yield
        self.require_backward_grad_sync = True

    def _post_backward(self):
        self.bucket_manager.wait()
        self._post_backward_callback_set = False
        # copy to params.grad so we can use the optimizer to update the parameters
        for p in self.module.parameters():
            if p.requires_grad:
                p.grad = p.main_grad.to(p.dtype)

    def reset(self):
        self.bucket_manager.reset()
"""

# --- huggingface/picotron 59714b1b picotron/data_parallel/bucket.py BucketManager._initialize_buckets
# (shortened: the bucket-size bookkeeping loop is kept; Bucket construction and sync elided).
# `param.main_grad` must be a view into the bucket's grad_data: the all-reduce runs on grad_data.
_PICOTRON_BUCKET = """
from typing import List

import torch


class BucketManager:
    def _initialize_buckets(self) -> None:
        cur_bucket_size = 0
        cur_bucket_idx = 0
        for param in self.params:
            if not param.requires_grad:
                continue
            if cur_bucket_size == 0:
                self.params_to_bucket_location[param] = (0, param.numel(), cur_bucket_idx)
                cur_bucket_size = param.numel()
                continue
            if cur_bucket_size + param.numel() > self.bucket_size:
                cur_bucket_idx += 1
                self.params_to_bucket_location[param] = (0, param.numel(), cur_bucket_idx)
                cur_bucket_size = param.numel()
            else:
                self.params_to_bucket_location[param] = (cur_bucket_size, cur_bucket_size + param.numel(), cur_bucket_idx)
                cur_bucket_size += param.numel()

        bucket_sizes = [0] * (cur_bucket_idx + 1)
        buckets_to_params = [[] for _ in range(cur_bucket_idx + 1)]
        for param, (_, end, idx) in self.params_to_bucket_location.items():
            bucket_sizes[idx] = max(bucket_sizes[idx], end)
            buckets_to_params[idx].append(param)

        for i in range(len(bucket_sizes)):
            self.grad_data_list.append(torch.zeros(bucket_sizes[i], dtype=self.grad_type, device=self.device))
            self.buckets.append(Bucket(buckets_to_params[i], self.grad_data_list[i], self.process_group))

        # Create gradient views for each parameter.
        for param in self.params[::-1]:
            if not param.requires_grad:
                continue
            data_start_index, data_end_index, bucket_id = self.params_to_bucket_location[param]
            # param.main_grad is used for gradient calculation
            param.main_grad = self._get_view_from_tensor(self.grad_data_list[bucket_id], param.shape, data_start_index, data_end_index)

    def _get_view_from_tensor(self, tensor: torch.Tensor, shape: torch.Size, start: int, end: int) -> torch.Tensor:
        return tensor[start:end].view(shape)
"""

# --- microsoft/nnscaler 1585c15d nnscaler/runtime/adapter/reducer.py Reducer.register_hooks
# (shortened: the asynchronous all-reduce / reduce-scatter launch is one helper call). The hook
# adds `.grad` into the contiguous gradient buffer and frees `.grad`; in accumulation mode
# (`RuntimeFlag.skip_reducer`) it returns before launching any communication.
_NNSCALER_REDUCER = """
from functools import partial

import torch

from nnscaler.flags import RuntimeFlag


class Reducer:
    def register_hooks(self):
        @torch.no_grad()
        def post_grad_hook(param: torch.nn.Parameter, *unused):
            ofst = self._pofset[param]
            self._contiguous_grads[ofst:ofst+param.numel()].add_(param.grad.data.view(-1))
            param.grad = None

            if RuntimeFlag.skip_reducer: return
            self._async_param_cnt += 1

            # perform all-reduce
            if self._async:
                if self._async_param_cnt > len(self._params):
                    raise RuntimeError(
                        "Detected gradient accumulation with asynchronous Reducer. "
                        "Users should run with `nnscaler.accum_mode` to manage gradient synchronization.")
                if self._async_param_cnt == len(self._params):
                    self._apply_pre_hooks()
                    self._launch_async_reduce()

        for param in self._params:
            # same trick with FSDP and Megatron
            param_tmp = param.expand_as(param)
            # gets its AccumulateGrad object
            grad_acc = param_tmp.grad_fn.next_functions[0][0]
            hook = grad_acc.register_hook(partial(post_grad_hook, param))
            # grad_acc must keep, otherwise the hook won't take effect
            self._hooks.append((grad_acc, hook))

    def sync_grads(self):
        if self._async:
            assert self._async_handle is not None
            self._async_handle.wait()
        else:
            self._apply_pre_hooks()
            torch.distributed.all_reduce(self._contiguous_grads, op=self._reduce_op, group=self._group)
        for param in self._params:
            assert param.grad is None
            pofst = self._pofset[param]
            param.grad = self._contiguous_grads[pofst:pofst+param.numel()].view(param.size())
        self._param_for_optimizer.grad = self._contiguous_grads
        self._apply_post_hooks()
"""

# --- deepseek-ai/DualPipe 3da1bbea examples/example_dualpipe.py LinearFunc with dualpipe/utils.py
# WeightGradStore (whole). The weight gradient accumulates into `weight.grad` (None is returned
# for the weight); with zero bubble on, its closure is cached, flushed per backward chunk and run
# by `pop()` in a later W step.
_DUALPIPE_LINEAR = """
import queue
from typing import Callable, List

import torch
import torch.nn.functional as F


class WeightGradStore:

    enabled: bool = False
    cache: List[Callable] = []
    funcs_queue = queue.Queue()

    @classmethod
    def put(cls, func: Callable) -> None:
        cls.cache.append(func)

    @classmethod
    def flush(cls) -> None:
        cls.funcs_queue.put(cls.cache)
        cls.cache = []

    @classmethod
    def pop(cls) -> None:
        assert not cls.funcs_queue.empty(), "Pop empty queue."
        funcs = cls.funcs_queue.get()
        for func in funcs:
            func()


class LinearFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        output = F.linear(input, weight)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)

        def grad_weight_fn():
            weight.grad += grad_output.flatten(0, -2).T @ input.flatten(0, -2)

        if WeightGradStore.enabled:
            WeightGradStore.put(grad_weight_fn)
        else:
            grad_weight_fn()
        grad_input = grad_output @ weight
        return grad_input, None
"""

# --- deepseek-ai/DualPipe 3da1bbea dualpipe/dualpipe.py DualPipe._backward_compute_chunk /
# ._weight_chunk (shortened: p2p bookkeeping of the chunk's inputs dropped). Each backward chunk
# run with zero bubble flushes the cached wgrad closures as one W unit; `_weight_chunk` pops one.
_DUALPIPE_SCHEDULE = """
from torch import nn

from dualpipe.utils import WeightGradStore, run_backward


class DualPipe(nn.Module):
    def _backward_compute_chunk(self, phase: int, enable_zb: bool = False) -> None:
        if self.forward_only:
            return

        phase ^= self.is_in_second_half
        chunk_id = self.current_b_chunk_id[phase]
        self.current_b_chunk_id[phase] += 1

        is_last_stage = (self.is_first_rank and phase == 1) or (self.is_last_rank and phase == 0)

        WeightGradStore.enabled = enable_zb
        if is_last_stage:
            loss = self.loss_chunks[chunk_id]
            loss.backward()
            loss.detach_()
        else:
            outputs = self.output_chunks[phase][chunk_id]
            output_grads = self.output_grad_chunks[phase][chunk_id]
            self.output_grad_chunks[phase][chunk_id] = None
            non_empty = [(t, g) for t, g in zip(outputs, output_grads) if g is not None]
            outputs, output_grads = list(zip(*non_empty))
            if len(outputs) > 0:
                run_backward(outputs, output_grads)
        WeightGradStore.enabled = False
        if enable_zb:
            WeightGradStore.flush()

        inputs = self.input_chunks[phase][chunk_id]
        self.input_chunks[phase][chunk_id] = None
        input_grads = [t.grad for t in inputs]
        self.input_grad_chunks[phase].append(input_grads)

    def _weight_chunk(self) -> None:
        if self.forward_only:
            return

        self._commit_and_wait_comm()

        # Assume FIFO
        WeightGradStore.pop()
"""

# --- EleutherAI/gpt-neox ea7aefd8 megatron/model/transformer_engine.py TELinear, ADAPTED: the real
# wrapper does not pass fuse_wgrad_accumulation; the twin passes neox's
# gradient_accumulation_fusion and, before TE's fused wgrad writes param.main_grad, fetches a
# Megatron-FSDP parameter's buffer with get_main_grad() (Megatron-LM #5209's fix). mup rescaling
# dropped.
_NEOX_TE_LINEAR = """
import torch
import torch.nn.init as init
import transformer_engine as te

from megatron.mpu import get_cuda_rng_tracker


def _expose_main_grads(module):
    for param in module.parameters(recurse=False):
        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
            param.main_grad = param.get_main_grad()


class TELinear(te.pytorch.Linear):
    \"\"\"
    Wrapper for the Transformer-Engine's `Linear` layer.
    \"\"\"

    def __init__(self, neox_args, input_size, output_size, bias=True, init_method=init.xavier_normal_, skip_bias_add=False):
        self.input_size = input_size
        self.output_size = output_size
        self.skip_bias_add = skip_bias_add
        self.use_bias = bias
        self.init_method = init_method
        self.params_dtype = neox_args.params_dtype
        self.fuse_wgrad_accumulation = neox_args.gradient_accumulation_fusion

        super(TELinear, self).__init__(
            in_features=self.input_size,
            out_features=self.output_size,
            bias=self.use_bias,
            init_method=self.init_method,
            get_rng_state_tracker=get_cuda_rng_tracker,
            device=torch.cuda.current_device(),
            return_bias=self.skip_bias_add,
            params_dtype=self.params_dtype,
            fuse_wgrad_accumulation=self.fuse_wgrad_accumulation,
        )

    def forward(self, inp, **kwargs):
        if self.fuse_wgrad_accumulation:
            _expose_main_grads(self)
        output = super(TELinear, self).forward(inp, **kwargs)

        if self.skip_bias_add:
            return output
        else:
            return output, None
"""

# --- EleutherAI/gpt-neox ea7aefd8 megatron/model/transformer_engine.py TELayerNormMLP, ADAPTED as
# TELinear above (the fused setting is passed; both fc weights are fetched before the module runs).
_NEOX_TE_LAYERNORM_MLP = """
import torch
import transformer_engine as te

from megatron.mpu import get_cuda_rng_tracker, get_model_parallel_world_size, get_tensor_model_parallel_group


class TELayerNormMLP(te.pytorch.LayerNormMLP):
    def __init__(self, neox_args, init_method, output_layer_init_method, parallel_output=False, multiple_of=256, MOE=False):
        self.activation_func = "swiglu" if neox_args.activation == "swiglu" else "gelu"
        self.bias = neox_args.use_bias_in_mlp
        self.init_method = init_method
        self.output_layer_init_method = output_layer_init_method
        self.tp_size = get_model_parallel_world_size()
        self.tp_group = get_tensor_model_parallel_group()
        self.params_dtype = neox_args.params_dtype
        self.set_parallel_mode = True
        self.fuse_wgrad_accumulation = neox_args.gradient_accumulation_fusion

        super().__init__(
            hidden_size=neox_args.hidden_size,
            ffn_hidden_size=neox_args.ffn_hidden_size,
            eps=neox_args.layernorm_epsilon,
            bias=self.bias,
            init_method=self.init_method,
            output_layer_init_method=self.output_layer_init_method,
            tp_group=self.tp_group,
            tp_size=self.tp_size,
            set_parallel_mode=self.set_parallel_mode,
            activation=self.activation_func,
            params_dtype=self.params_dtype,
            get_rng_state_tracker=get_cuda_rng_tracker,
            fuse_wgrad_accumulation=self.fuse_wgrad_accumulation,
        )

    def forward(self, x, **kwargs):
        if self.fuse_wgrad_accumulation:
            for name in ("fc1_weight", "fc2_weight"):
                param = getattr(self, name)
                if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
                    param.main_grad = param.get_main_grad()
        return super().forward(x, **kwargs)
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        cls=1,
        name="msamp_megatron_linear_grad_update_on_fp8_cast",
        bug=_swap(
            _MSAMP_MEGATRON_LINEAR,
            "        ctx.weight.backward_grad_update(grad_weight)\n",
            "        weight_fp8.backward_grad_update(grad_weight)  # bug\n",
        ),
        twin=_MSAMP_MEGATRON_LINEAR,
    ),
    Variant(
        cls=1,
        name="msamp_gemm_fn_accumulate_decision_from_fp8_cast",
        bug=_swap(
            _MSAMP_GEMM_FN,
            "            if ctx.weight.grad is None:\n",
            "            if ctx.weight_fp8.grad is None:  # bug\n",
        ),
        twin=_MSAMP_GEMM_FN,
    ),
    # ---------------------------------------------------------------- 2: rebound / copy
    Variant(
        cls=2,
        name="msamp_gemm_fn_return_flag_read_from_rebound_parameter",
        bug=_swap(
            _MSAMP_GEMM_FN,
            "            ctx.return_wgrad = True\n",
            "            ctx.return_wgrad = hasattr(weight, '_meta')  # bug\n",
        ),
        twin=_MSAMP_GEMM_FN,
    ),
    Variant(
        cls=2,
        name="picotron_main_grad_is_a_copy_of_the_bucket_view",
        bug=_swap(
            _PICOTRON_BUCKET,
            "        return tensor[start:end].view(shape)\n",
            "        return tensor[start:end].view(shape).clone()  # bug\n",
        ),
        twin=_PICOTRON_BUCKET,
    ),
    # ---------------------------------------------------------------- 3: flags / writes
    Variant(
        cls=3,
        name="picotron_hook_keeps_grad_under_no_sync",
        bug=_swap(
            _PICOTRON_DP,
            "                param.main_grad.add_(param.grad.data)  # accumulate the gradients\n"
            "                param.grad = None\n"
            "\n"
            "                # skip the gradient synchronization (gradient accumulation/PP micro batches)\n"
            "                if self.require_backward_grad_sync:\n",
            "                param.main_grad.add_(param.grad.data)  # accumulate the gradients\n"
            "\n"
            "                # skip the gradient synchronization (gradient accumulation/PP micro batches)\n"
            "                if self.require_backward_grad_sync:\n"
            "                    param.grad = None  # bug\n",
        ),
        twin=_PICOTRON_DP,
    ),
    Variant(
        cls=3,
        name="nnscaler_hook_returns_before_freeing_grad",
        bug=_swap(
            _NNSCALER_REDUCER,
            "            param.grad = None\n\n            if RuntimeFlag.skip_reducer: return\n",
            "\n"
            "            if RuntimeFlag.skip_reducer: return  # bug\n"
            "            param.grad = None  # bug\n",
        ),
        twin=_NNSCALER_REDUCER,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        cls=4,
        name="picotron_hook_copies_into_main_grad",
        bug=_swap(
            _PICOTRON_DP,
            "                param.main_grad.add_(param.grad.data)  # accumulate the gradients\n",
            "                param.main_grad.copy_(param.grad.data)  # accumulate the gradients  # bug\n",
        ),
        twin=_PICOTRON_DP,
    ),
    Variant(
        cls=4,
        name="msamp_gemm_fn_accumulation_gemm_overwrites",
        bug=_swap(
            _MSAMP_GEMM_FN,
            "                    accumulate=True,\n",
            "                    accumulate=False,  # bug\n",
        ),
        twin=_MSAMP_GEMM_FN,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        cls=5,
        name="msamp_grad_update_fires_hooks_before_setting_grad",
        bug=_swap(
            _MSAMP_SCALING_TENSOR_HOOKS,
            "        self.grad = grad\n        self._backward_post_hooks(grad)\n",
            "        self._backward_post_hooks(grad)  # bug\n        self.grad = grad  # bug\n",
        ),
        twin=_MSAMP_SCALING_TENSOR_HOOKS,
    ),
    Variant(
        cls=5,
        name="picotron_hook_on_param_tensor_not_accumulator",
        bug=_swap(
            _PICOTRON_DP,
            "                grad_acc_fn.register_hook(self._make_param_hook(param, self.bucket_manager))\n",
            "                param.register_hook(self._make_param_hook(param, self.bucket_manager))  # bug\n",
        ),
        twin=_PICOTRON_DP,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad
    Variant(
        cls=6,
        name="dualpipe_linear_defers_when_zero_bubble_is_off",
        bug=_swap(
            _DUALPIPE_LINEAR,
            "        if WeightGradStore.enabled:\n"
            "            WeightGradStore.put(grad_weight_fn)\n",
            "        if not WeightGradStore.enabled:  # bug\n"
            "            WeightGradStore.put(grad_weight_fn)\n",
        ),
        twin=_DUALPIPE_LINEAR,
    ),
    Variant(
        cls=6,
        name="dualpipe_weight_chunk_gated_on_reset_enabled_flag",
        bug=_swap(
            _DUALPIPE_SCHEDULE,
            "    def _weight_chunk(self) -> None:\n        if self.forward_only:\n",
            "    def _weight_chunk(self) -> None:\n"
            "        if self.forward_only or not WeightGradStore.enabled:  # bug\n",
        ),
        twin=_DUALPIPE_SCHEDULE,
    ),
    # ------------------------------------------------- 7: the seed shape in other syntax
    Variant(
        cls=7,
        name="msamp_fused_linear_flag_assigned_the_local_accumulate",
        bug=_swap(
            _MSAMP_MEGATRON_LINEAR_FUSED,
            "            weight.grad_added_to_main_grad = True\n",
            "            weight.grad_added_to_main_grad = accumulate  # bug\n",
        ),
        twin=_MSAMP_MEGATRON_LINEAR_FUSED,
    ),
    Variant(
        cls=7,
        name="msamp_fused_linear_hook_path_chosen_on_local_accumulate",
        bug=_swap(
            _MSAMP_MEGATRON_LINEAR_FUSED,
            "        else:\n"
            "            # FP8 Weight Gradient: FP8DistributedDataParallel's post hook adds it to main_grad\n",
            "        if not accumulate:  # bug\n"
            "            # FP8 Weight Gradient: FP8DistributedDataParallel's post hook adds it to main_grad\n",
        ),
        twin=_MSAMP_MEGATRON_LINEAR_FUSED,
    ),
    # ------------------------------------------------- 8: Megatron-LM #5209's shape
    Variant(
        cls=8,
        name="neox_te_linear_fetch_skipped_when_main_grad_attr_missing",
        bug=_swap(
            _NEOX_TE_LINEAR,
            '        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):\n',
            '        if hasattr(param, "main_grad") and hasattr(param, "get_main_grad"):  # bug\n',
        ),
        twin=_NEOX_TE_LINEAR,
    ),
    Variant(
        cls=8,
        name="neox_te_layernorm_mlp_fetches_the_wrong_weights",
        bug=_swap(
            _NEOX_TE_LAYERNORM_MLP,
            '            for name in ("fc1_weight", "fc2_weight"):\n',
            '            for name in ("layer_norm_weight", "fc1_weight"):  # bug\n',
        ),
        twin=_NEOX_TE_LAYERNORM_MLP,
    ),
)
