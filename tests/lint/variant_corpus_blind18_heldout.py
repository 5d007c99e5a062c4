"""The held-out half of the eighteenth blind corpus (H-blind18): one main_grad bookkeeping variant
per class of issue #19, kept apart from variant_corpus_blind18.py and never used to write or tune
rules; it measures how the rules transfer. Grounded in the same repositories no earlier blind
corpus used: Azure MS-AMP (FP8 `ScalingTensor` weights, `backward_grad_update` and the TE
function override), microsoft nnscaler (the runtime `Reducer` and its AccumulateGrad hooks),
deepseek-ai DualPipe (`WeightGradStore`, the DualPipeV schedule) and EleutherAI gpt-neox
(Transformer Engine wrappers).

Sources (repo, commit, path, function):
- Azure/MS-AMP 9746ea85289f8e6233646e73ace35f730d1245d5
  msamp/nn/functional.py _FP8GemmFunction.forward / .backward
- Azure/MS-AMP 9746ea85289f8e6233646e73ace35f730d1245d5
  msamp/te/modules.py TeModuleOverrider._override_function (the inner Func.forward / .backward)
- microsoft/nnscaler 1585c15d4ca99e23a410c90f9bad2664125524d4
  nnscaler/runtime/adapter/reducer.py Reducer.register_hooks (post_grad_hook) / .sync_grads
- deepseek-ai/DualPipe 3da1bbea53606543d7f5f232338fc58096db30e3
  examples/example_dualpipe.py LinearFunc.forward / .backward, dualpipe/utils.py WeightGradStore
- deepseek-ai/DualPipe 3da1bbea53606543d7f5f232338fc58096db30e3
  dualpipe/dualpipev.py DualPipeV._backward_compute_chunk / ._weight_chunk
- EleutherAI/gpt-neox ea7aefd8f8e183256992d9fede4d7c71a46d67a5
  megatron/model/transformer_engine.py TEColumnParallelLinear.__init__

Conventions: as in variant_corpus_blind18.py. Twins are the real code shortened. Two twins are
adapted and say so above their source block: DualPipe's example LinearFunc accumulates into
`weight.grad` only; its class-7 twin gives it a Megatron-style main_grad path (accumulate, or
overwrite when `overwrite_main_grad` is set, `grad_added_to_main_grad`, a dummy gradient so the
DDP hook still fires). gpt-neox's TEColumnParallelLinear does not pass `fuse_wgrad_accumulation`;
its class-8 twin passes it through a kwargs dict and registers a forward pre-hook that fetches
Megatron-FSDP's `get_main_grad()` buffers (Megatron-LM #5209's fix).
Per-repository stand-ins for main_grad: MS-AMP's `ScalingTensor.grad` plus its post hooks
(FP8DistributedDataParallel adds `.grad` into the FP8 main_grad when `backward_grad_update`
fires them); nnscaler's `Reducer._contiguous_grads`; DualPipe's `weight.grad`.
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


# --- Azure/MS-AMP 9746ea85 msamp/nn/functional.py _FP8GemmFunction (shortened: docstrings dropped,
# the wgrad accumulation and return paths kept). `ctx.weight` must be the ScalingParameter whose
# post hooks (FP8DistributedDataParallel) add the gradient into its FP8 main_grad.
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
                wgrad = Gemm.fp8_gemm(input_fp8_t, ograd_fp8_t, wgrad_qtype, use_split_accumulator=True)
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

# --- Azure/MS-AMP 9746ea85 msamp/te/modules.py TeModuleOverrider._override_function (the wrapper
# autograd Function around TE's _Linear / _LayerNormLinear / _LayerNormMLP; Wrapper and setattr
# kept, docstrings dropped). ScalingTensor weights are taken out of autograd: their TE gradient is
# accumulated into `v.grad` and handed on by `backward_grad_update` (FP8 DDP's post hooks).
_MSAMP_TE_OVERRIDE = """
import torch

from msamp.common.tensor import ScalingTensor


class TeModuleOverrider:
    @staticmethod
    def _override_function(mod, func_name):
        old_func = getattr(mod, func_name)
        assert issubclass(old_func, torch.autograd.Function), (func_name, old_func)

        class Func(torch.autograd.Function):
            @staticmethod
            def forward(ctx, place_holder, *args):
                scaling_tensors = []
                for i, a in enumerate(args):
                    if isinstance(a, ScalingTensor):
                        scaling_tensors.append((i, a))
                if ctx is not None:
                    ctx.scaling_tensors = scaling_tensors
                    ctx = CtxWrapper(ctx)
                return old_func.forward(ctx, *args)

            @staticmethod
            def backward(ctx, *args):
                ctx = CtxWrapper(ctx)
                grads = list(old_func.backward(ctx, *args))
                for i, v in ctx.scaling_tensors:
                    if not v.requires_grad:
                        continue
                    assert grads[i] is not None
                    if v.grad is None:
                        v.grad = grads[i]
                    elif torch.is_tensor(v.grad):
                        v.grad += grads[i]
                    else:
                        assert isinstance(v.grad, ScalingTensor)
                        v.grad = v.grad.to(grads[i].dtype) + grads[i]
                    v.backward_grad_update(v.grad)
                    grads[i] = None
                return (None, ) + tuple(grads)

        class Wrapper:
            EMPTY_TENSOR = torch.tensor([], requires_grad=True)

            @staticmethod
            def forward(ctx, *args):
                return Func.forward(ctx, Wrapper.EMPTY_TENSOR.detach(), *args)

            @staticmethod
            def apply(*args):
                return Func.apply(Wrapper.EMPTY_TENSOR, *args)

        setattr(mod, func_name, Wrapper)
"""

# --- microsoft/nnscaler 1585c15d nnscaler/runtime/adapter/reducer.py Reducer.register_hooks /
# .sync_grads (shortened: the asynchronous all-reduce / reduce-scatter launch is one helper call,
# ZeRO sharding of the optimizer gradient dropped). The AccumulateGrad hook adds `.grad` into the
# contiguous gradient buffer and frees `.grad`.
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
# WeightGradStore (put / flush / pop). The weight gradient accumulates into `weight.grad`; None
# is returned to autograd for the weight.
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

# --- deepseek-ai/DualPipe 3da1bbea examples/example_dualpipe.py LinearFunc, ADAPTED with a
# Megatron-style main_grad path: a weight that carries main_grad gets its wgrad added (or copied
# when overwrite_main_grad is set), grad_added_to_main_grad is set, and a zero dummy is returned
# so AccumulateGrad still fires the DDP hook; deferral through WeightGradStore is unchanged.
_DUALPIPE_LINEAR_MAIN_GRAD = """
import torch
import torch.nn.functional as F

from dualpipe.utils import WeightGradStore


class LinearFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        output = F.linear(input, weight)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        fuse = hasattr(weight, "main_grad")
        accumulate = fuse and not getattr(weight, "overwrite_main_grad", False)
        if not fuse and weight.grad is None:
            weight.grad = torch.zeros_like(weight)

        def grad_weight_fn():
            dw = grad_output.flatten(0, -2).T @ input.flatten(0, -2)
            if accumulate:
                weight.main_grad.add_(dw)
            elif fuse:
                weight.main_grad.copy_(dw)
            else:
                weight.grad += dw

        if WeightGradStore.enabled:
            WeightGradStore.put(grad_weight_fn)
        else:
            grad_weight_fn()
        if fuse:
            weight.grad_added_to_main_grad = True
        grad_input = grad_output @ weight
        return grad_input, (torch.zeros_like(weight) if fuse else None)
"""

# --- deepseek-ai/DualPipe 3da1bbea dualpipe/dualpipev.py DualPipeV._backward_compute_chunk /
# ._weight_chunk (shortened: p2p bookkeeping of the chunk's inputs dropped).
_DUALPIPEV_SCHEDULE = """
from torch import nn

from dualpipe.utils import WeightGradStore, run_backward


class DualPipeV(nn.Module):
    def _backward_compute_chunk(self, phase: int, enable_zb: bool = False) -> None:
        if self.forward_only:
            return

        chunk_id = self.current_b_chunk_id[phase]
        self.current_b_chunk_id[phase] += 1

        is_last_stage = (self.is_first_rank and phase == 1)

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
        if self.is_last_rank and phase == 1:
            self.output_grad_chunks[0].append(input_grads)
        else:
            self.input_grad_chunks[phase].append(input_grads)

    def _weight_chunk(self) -> None:
        if self.forward_only:
            return

        self._commit_and_wait_comm()

        # Assume FIFO
        WeightGradStore.pop()
"""

# --- EleutherAI/gpt-neox ea7aefd8 megatron/model/transformer_engine.py TEColumnParallelLinear.__init__,
# ADAPTED: TE's settings go through a kwargs dict that passes neox's gradient_accumulation_fusion
# as fuse_wgrad_accumulation, and a forward pre-hook fetches Megatron-FSDP main_grad buffers.
# mup helpers dropped.
_NEOX_TE_COLUMN = """
import torch
import torch.nn.init as init
import transformer_engine as te

from megatron.mpu import divide, get_cuda_rng_tracker, get_model_parallel_world_size, get_tensor_model_parallel_group


def _fetch_main_grads_pre_hook(module, args):
    for param in module.parameters(recurse=False):
        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
            param.main_grad = param.get_main_grad()


class TEColumnParallelLinear(te.pytorch.Linear):
    def __init__(self, neox_args, input_size, output_size, bias=True, gather_output=True, init_method=init.xavier_normal_, skip_bias_add=False, MOE=False, MoE_mp_size=1):
        self.input_size = input_size
        self.output_size = output_size
        self.gather_output = gather_output
        world_size = MoE_mp_size if MOE else get_model_parallel_world_size()
        self.world_size = world_size
        self.tp_group = get_tensor_model_parallel_group()
        self.output_size_per_partition = divide(output_size, world_size)
        self.skip_bias_add = skip_bias_add
        self.use_bias = bias
        self.sequence_parallel = neox_args.sequence_parallel
        self.init_method = init_method
        self.params_dtype = neox_args.params_dtype
        self.parallel_mode = "column"

        te_kwargs = dict(
            sequence_parallel=self.sequence_parallel,
            tp_group=self.tp_group,
            tp_size=self.world_size,
            parallel_mode=self.parallel_mode,
            return_bias=self.skip_bias_add,
            params_dtype=self.params_dtype,
            fuse_wgrad_accumulation=neox_args.gradient_accumulation_fusion,
        )
        super(TEColumnParallelLinear, self).__init__(
            in_features=self.input_size,
            out_features=self.output_size,
            bias=self.use_bias,
            init_method=self.init_method,
            get_rng_state_tracker=get_cuda_rng_tracker,
            device=torch.cuda.current_device(),
            **te_kwargs,
        )
        if te_kwargs["fuse_wgrad_accumulation"]:
            self.register_forward_pre_hook(_fetch_main_grads_pre_hook)

    def forward(self, inp, **kwargs):
        output = super(TEColumnParallelLinear, self).forward(inp, **kwargs)
        if self.skip_bias_add:
            return output
        else:
            return output, None
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        cls=1,
        name="msamp_gemm_fn_ctx_weight_is_the_fp8_cast",
        bug=_swap(
            _MSAMP_GEMM_FN,
            "        ctx.weight = weight\n",
            "        ctx.weight = weight_fp8  # bug\n",
        ),
        twin=_MSAMP_GEMM_FN,
    ),
    # ---------------------------------------------------------------- 2: rebound / copy
    Variant(
        cls=2,
        name="msamp_te_override_records_detached_scaling_tensor",
        bug=_swap(
            _MSAMP_TE_OVERRIDE,
            "                        scaling_tensors.append((i, a))\n",
            "                        scaling_tensors.append((i, a.detach()))  # bug\n",
        ),
        twin=_MSAMP_TE_OVERRIDE,
    ),
    # ---------------------------------------------------------------- 3: flags / writes
    Variant(
        cls=3,
        name="dualpipe_linear_returns_wgrad_after_accumulating",
        bug=_swap(
            _DUALPIPE_LINEAR,
            "        return grad_input, None\n",
            "        return grad_input, grad_output.flatten(0, -2).T @ input.flatten(0, -2)  # bug\n",
        ),
        twin=_DUALPIPE_LINEAR,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        cls=4,
        name="nnscaler_hook_assigns_into_contiguous_grads",
        bug=_swap(
            _NNSCALER_REDUCER,
            "            self._contiguous_grads[ofst:ofst+param.numel()].add_(param.grad.data.view(-1))\n",
            "            self._contiguous_grads[ofst:ofst+param.numel()] = param.grad.data.view(-1)  # bug\n",
        ),
        twin=_NNSCALER_REDUCER,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        cls=5,
        name="nnscaler_prehook_on_accumulate_grad",
        bug=_swap(
            _NNSCALER_REDUCER,
            "            hook = grad_acc.register_hook(partial(post_grad_hook, param))\n",
            "            hook = grad_acc.register_prehook(partial(post_grad_hook, param))  # bug\n",
        ),
        twin=_NNSCALER_REDUCER,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad
    Variant(
        cls=6,
        name="dualpipev_flush_skipped_on_last_stage",
        bug=_swap(
            _DUALPIPEV_SCHEDULE,
            "        if enable_zb:\n            WeightGradStore.flush()\n",
            "        if enable_zb and not is_last_stage:  # bug\n"
            "            WeightGradStore.flush()\n",
        ),
        twin=_DUALPIPEV_SCHEDULE,
    ),
    # ------------------------------------------------- 7: the seed shape in other syntax
    Variant(
        cls=7,
        name="dualpipe_main_grad_linear_dummy_chosen_on_local_accumulate",
        bug=_swap(
            _DUALPIPE_LINEAR_MAIN_GRAD,
            "        return grad_input, (torch.zeros_like(weight) if fuse else None)\n",
            "        return grad_input, (torch.zeros_like(weight) if accumulate else None)  # bug\n",
        ),
        twin=_DUALPIPE_LINEAR_MAIN_GRAD,
    ),
    # ------------------------------------------------- 8: Megatron-LM #5209's shape
    Variant(
        cls=8,
        name="neox_te_column_fetch_hook_keyed_on_te_ops_name",
        bug=_swap(
            _NEOX_TE_COLUMN,
            '        if te_kwargs["fuse_wgrad_accumulation"]:\n',
            '        if te_kwargs.get("accumulate_into_main_grad", False):  # bug\n',
        ),
        twin=_NEOX_TE_COLUMN,
    ),
)
