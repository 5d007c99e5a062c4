"""The twenty-fourth blind corpus (H-blind24), held-out half: one main_grad bookkeeping variant for
each of the eight classes of issue #19, from the same repositories as the development half
(variant_corpus_blind24.py) but, where the repositories allow, from other functions: never tune a
rule on these.

Sources (repo, commit, path, function):
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  transformer_engine/pytorch/ops/basic/basic_linear.py BasicLinear.__init__ / .op_backward
  (two variants: classes 1 and 7)
- momo609/mindspeed 7e624cf19f9a26b2ae216f8450fa4298110df8ca
  mindspeed/core/tensor_parallel/mc2_feature/linear_function.py ColumnSeqParallelLinearFunction.backward
  (two variants: classes 2 and 3)
- momo609/mindspeed 7e624cf19f9a26b2ae216f8450fa4298110df8ca
  mindspeed/core/transformer/moe/moe_feature/fb_overlap/adaptor.py _make_backward_post_hook (class 4)
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  transformer_engine/pytorch/ops/fused/backward_grouped_mlp.py _compute_grad_params (class 5; the
  development half uses this function for other classes)
- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e55446283435720bcd095900dac8545d3
  megatron/core/weight_grad_store.py WeightGradStore.put / .flush / .clear (class 6)
- ptrendx/TransformerEngine c74e5aa37a65eda5c1680562119d466c123ca6ae
  transformer_engine/pytorch/ops/_common.py get_main_grad_from_param /
  get_accumulate_flag_in_param / get_dummy_wgrads_for_params (class 8)

Conventions as in the development half: twins are the real code shortened (real names and
idioms; docstrings, FP8 details, NPU communication overlap and unrelated branches dropped); no
repository history was available, so no variant reverts a known fix.
Adapted, and said so here (a twin must be correct under CONTRACT.md):
- ptrendx's ``BasicLinear.op_backward`` gates its dummy-grad bookkeeping on the local
  ``accumulate_into_main_grad`` after ``get_accumulate_flag_in_param`` has switched it off for
  ``overwrite_main_grad`` (TE PR #2936's seed bug, at the head); the twin gates it on the
  op-level ``self._accumulate_into_main_grad``. The class-7 variant's bug is the head's code.
- mindspeed's ``ColumnSeqParallelLinearFunction.backward`` is shortened to the recomputed
  all-gather path; its bias gradient is kept.
- Cuiym715's ``WeightGradStore.clear`` is shortened: the last-stage output-layer special case,
  the shared-embedding wait and the embedding all-reduce are dropped.
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


# --- ptrendx/TransformerEngine c74e5aa3 transformer_engine/pytorch/ops/basic/basic_linear.py
# BasicLinear.__init__ (flag only) / .op_backward (adapted: bookkeeping on the op-level flag)
_PX_BASIC_LINEAR = """
from __future__ import annotations

import torch

from transformer_engine.pytorch.ops._common import (
    get_accumulate_flag_in_param,
    get_dummy_wgrads_for_params,
    get_main_grad_from_param,
)
from transformer_engine.pytorch.ops.op import BasicOperation
from transformer_engine.pytorch.utils import clear_tensor_data


class BasicLinear(BasicOperation):
    def __init__(self, in_features, out_features, *, tensor_parallel_mode=None, accumulate_into_main_grad=False, **kwargs):
        super().__init__()
        self.in_features: int = in_features
        self.out_features: int = out_features
        self.tensor_parallel_mode = tensor_parallel_mode
        # Whether to accumulate weight gradient into main_grad
        self._accumulate_into_main_grad: bool = accumulate_into_main_grad

    def op_backward(self, ctx, grad_output):
        # Saved tensors from forward pass
        (x_local, w) = ctx.saved_tensors

        # Megatron-LM wgrad fusion
        # Note: Get grad tensor from param so we can accumulate
        # directly into it.
        accumulate_into_main_grad = self._accumulate_into_main_grad
        grad_weight = None
        if ctx.weight_requires_grad and accumulate_into_main_grad:
            weight_param = self.weight
            main_grad = get_main_grad_from_param(weight_param, op_label="BasicLinear")
            accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)
            grad_weight = main_grad.detach()
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
            input_quantizer=ctx.input_quantizer,
            weight_quantizer=ctx.weight_quantizer,
            grad_output_quantizer=ctx.grad_output_quantizer,
            grad_input_quantizer=ctx.grad_input_quantizer,
        )

        # Clear input tensor if possible
        clear_tensor_data(x_local)

        # Megatron-LM wgrad fusion
        # Note: Return dummy tensor for grad weight if needed.
        if ctx.weight_requires_grad and self._accumulate_into_main_grad:
            grad_weight = get_dummy_wgrads_for_params([self.weight])[0]

        return grad_input, [grad_weight]
"""

# --- momo609/mindspeed 7e624cf1 mindspeed/core/tensor_parallel/mc2_feature/linear_function.py
# ColumnSeqParallelLinearFunction.backward (the cached all-gather branch dropped)
_MS_MC2_COLUMN_BWD = """
import torch
import torch_npu


class ColumnSeqParallelLinearFunction(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad_output):
        input_ = ctx.saved_tensors[0]
        weight = ctx.weight

        grad_output_ = grad_output.reshape(grad_output.shape[0] * grad_output.shape[1], grad_output.shape[2])

        dim_size = list(input_.size())
        dim_size[0] = dim_size[0] * ctx.world_size
        all_gather_output = torch.empty(dim_size, dtype=input_.dtype, device=torch.cuda.current_device(), requires_grad=False)
        all_gather_work = torch.distributed._all_gather_base(all_gather_output, input_.contiguous(), group=ctx.group, async_op=True)

        grad_input = grad_output_.matmul(weight)
        grad_input = grad_input.reshape(grad_output.shape[0], grad_output.shape[1], weight.shape[1])

        sub_grad_input = torch.empty(list(input_.size()), dtype=input_.dtype, device=torch.cuda.current_device())
        reduce_scatter_work = torch.distributed._reduce_scatter_base(sub_grad_input, grad_input, group=ctx.group, async_op=True)

        all_gather_work.wait()
        all_gather_output = all_gather_output.reshape(
            all_gather_output.shape[0] * all_gather_output.shape[1],
            all_gather_output.shape[2],
        )

        if ctx.gradient_accumulation_fusion and weight.main_grad.dtype == torch.float32:
            from mindspeed.ops.npu_matmul_add import npu_matmul_add_fp32
            npu_matmul_add_fp32(all_gather_output, grad_output_, weight.main_grad)

            if hasattr(weight, 'grad_added_to_main_grad'):
                if getattr(weight, 'zero_out_wgrad', False):
                    grad_weight = torch.zeros(weight.main_grad.shape, dtype=input_.dtype,
                                              device=torch.cuda.current_device(), requires_grad=False)
                else:
                    grad_weight = torch.empty(weight.main_grad.shape, dtype=input_.dtype,
                                              device=torch.cuda.current_device(), requires_grad=False)
                weight.grad_added_to_main_grad = True
            else:
                grad_weight = None
        else:
            grad_weight = grad_output_.t().matmul(all_gather_output)

        is_grad_bias_needed = ctx.needs_input_grad[2]
        if is_grad_bias_needed and ctx.use_bias:
            grad_bias = grad_output_.sum(dim=0) if grad_output_.is_contiguous() else grad_output_.t().sum(dim=1)
        else:
            grad_bias = None

        reduce_scatter_work.wait()
        return sub_grad_input, grad_weight, grad_bias, None, None, None
"""

# --- momo609/mindspeed 7e624cf1 mindspeed/core/transformer/moe/moe_feature/fb_overlap/adaptor.py
# _make_backward_post_hook (the DDP hook MindSpeed patches in for fb-overlap)
_MS_FB_DDP_HOOK = """
import torch

from megatron.core.transformer.cuda_graphs import is_graph_capturing


def _make_backward_post_hook(self, param: torch.nn.Parameter):
    \"\"\"
    Creates a backward post-hook to dispatch an all-reduce / reduce-scatter when
    ready (i.e., when all grads in a bucket have been computed in all microbatches
    in a batch).
    \"\"\"

    def hook(*unused):
        if is_graph_capturing():
            return
        if param in self.param_to_bucket_group:
            if not getattr(param, 'skip_grad_accum', False):
                assert param.requires_grad
                if self.ddp_config.overlap_grad_reduce:
                    assert (
                        param.grad is not None
                    ), 'param.grad being None is not safe when overlap_grad_reduce is True'
                if param.grad is not None and (
                    not param.grad_added_to_main_grad or getattr(param, 'zero_out_wgrad', False)
                ):
                    param.main_grad.add_(param.grad.data)
                param.grad = None

            if self.ddp_config.overlap_grad_reduce:
                self.param_to_bucket_group[param].register_grad_ready(param)

        if getattr(param, 'skip_grad_accum', False):
            param.skip_grad_accum = False

    return hook
"""

# --- ptrendx/TransformerEngine c74e5aa3 transformer_engine/pytorch/ops/fused/backward_grouped_mlp.py
# _compute_grad_params (discrete weights; the cuDNN wgrad kernel and single grouped weight dropped)
_PX_GROUPED_MLP_GRAD_PARAMS = """
import functools

import torch

from transformer_engine.pytorch.cpp_extensions import general_grouped_gemm_for_grouped_tensor
from transformer_engine.pytorch.module.base import _2X_ACC_WGRAD
from transformer_engine.pytorch.ops._common import (
    get_accumulate_flag_in_param,
    get_dummy_wgrads_for_params,
    get_main_grad_from_param,
)


def _compute_grad_params(fc_op, ctx, num_groups, weight_shape, grouped_x, grouped_dy, dtype, device,
                         bias_grads, label=""):
    \"\"\"Compute weight gradients and build grad_params for a GroupedLinear layer.\"\"\"

    # Allocate grad buffers, determine accumulate flag.
    accumulate_into_main_grad = False
    wgrad_output = None
    op_label = f"Grouped MLP fused backward ({label})" if label else "Grouped MLP fused backward"
    weights = fc_op._get_weight_tensors()
    w_list = [None] * num_groups
    if ctx.weight_requires_grad:
        if fc_op._accumulate_into_main_grad:
            w_list = [get_main_grad_from_param(w, op_label=op_label) for w in weights]
            accumulate_into_main_grad = get_accumulate_flag_in_param(weights[0])
        else:
            w_list = [torch.empty(weight_shape, dtype=dtype, device=device) for _ in range(num_groups)]
        wgrad_output = w_list

    if ctx.weight_requires_grad:
        # Launch or defer the GEMM
        delay_wgrad = fc_op.wgrad_store is not None and fc_op.wgrad_store.delay_wgrad_compute()
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

        # Need to return dummy wgrads for Megatron-LM wgrad fusion if grad is already added
        if fc_op._accumulate_into_main_grad:
            w_list = get_dummy_wgrads_for_params(weights)
        elif delay_wgrad:
            w_list = [None] * num_groups

    # Assemble grad_params in parameter registration order.
    if not fc_op.has_bias:
        return w_list
    bias_list = bias_grads if bias_grads is not None else [None] * num_groups
    return w_list + bias_list
"""

# --- Cuiym715/zero-bubble-pipeline-parallelism c1b9372e megatron/core/weight_grad_store.py
# WeightGradStore.put / .flush / .clear (shortened, see the docstring)
_ZB_WEIGHT_GRAD_STORE_CLEAR = """
import queue

from megatron import get_args


class WeightGradStore:

    cache = []
    weight_grad_queue = [queue.Queue(), queue.Queue()]

    @classmethod
    def put(cls, total_input, grad_output, weight, func):
        # func(total_input, grad_output, weight.main_grad)
        cls.cache.append((total_input, grad_output, weight, func))

    @classmethod
    def flush(cls, chunk=0):
        cls.weight_grad_queue[chunk].put(cls.cache)
        cls.cache = []

    @classmethod
    def clear(cls, model, chunk=0):
        weight_grad_tasks = []
        while cls.weight_grad_queue[chunk].qsize() > 0:
            stored_grads = cls.weight_grad_queue[chunk].get()
            if len(weight_grad_tasks) == 0:
                for _ in stored_grads:
                    weight_grad_tasks.append([])
            else:
                assert len(weight_grad_tasks) == len(stored_grads)
            for i, task in enumerate(stored_grads):
                weight_grad_tasks[i].append(task)
        weight_params = []
        handles = []
        if get_args().overlap_grad_reduce:
            handles += model.async_reduce_grad()

        for i in range(len(weight_grad_tasks)):
            tasks = weight_grad_tasks[i]
            param = None
            for j in range(len(tasks)):
                total_input, grad_output, weight, func = tasks[j]
                if param is None:
                    param = weight
                assert param is weight
                func(total_input, grad_output, weight.main_grad)
                tasks[j] = None  # release memory
            weight_params.append(param)
            if get_args().overlap_grad_reduce:
                # All-reduce param grad here
                handles += model.async_reduce_grad(param)
            weight_grad_tasks[i] = None  # release memory

        for handle in handles:
            if handle is not None:
                handle.wait()
"""

# --- ptrendx/TransformerEngine c74e5aa3 transformer_engine/pytorch/ops/_common.py
# get_main_grad_from_param / get_accumulate_flag_in_param / get_dummy_wgrads_for_params
_PX_OPS_COMMON = """
from typing import Optional

import torch


def get_main_grad_from_param(weight_param: torch.nn.Parameter, *, op_label: str = "") -> torch.Tensor:
    \"\"\"Refresh ``main_grad`` from FSDP (if applicable) and return it.\"\"\"
    if hasattr(weight_param, "__fsdp_param__"):
        weight_param.main_grad = weight_param.get_main_grad()
    if not hasattr(weight_param, "main_grad") or weight_param.main_grad is None:
        prefix = f"{op_label} " if op_label else ""
        raise RuntimeError(
            f"{prefix}operation is configured with accumulate_into_main_grad=True, "
            "but weight parameter does not have a valid main_grad attribute"
        )
    return weight_param.main_grad


def get_accumulate_flag_in_param(weight_param: torch.nn.Parameter) -> bool:
    \"\"\"Return whether the wgrad GEMM should accumulate into ``main_grad``.\"\"\"
    return not getattr(weight_param, "overwrite_main_grad", False)


def get_dummy_wgrads_for_params(weight_params: list[torch.nn.Parameter]) -> list[Optional[torch.Tensor]]:
    \"\"\"Build dummy ``.grad`` placeholders for Megatron-LM wgrad-fusion params.\"\"\"
    from transformer_engine.pytorch.module.base import get_dummy_wgrad

    out: list[Optional[torch.Tensor]] = []
    for wp in weight_params:
        if hasattr(wp, "grad_added_to_main_grad"):
            wp.grad_added_to_main_grad = True
            out.append(
                get_dummy_wgrad(
                    list(wp.size()),
                    wp.dtype,
                    zero=getattr(wp, "zero_out_wgrad", False),
                )
            )
        else:
            out.append(None)
    return out
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    # w is the weight saved for the GEMM (a quantized copy under FP8) and carries no
    # overwrite_main_grad: Megatron-FSDP's overwrite mode accumulates into stale main_grad.
    Variant(
        1,
        "te_ptrendx_basic_linear_overwrite_flag_from_saved_weight",
        _swap(
            _PX_BASIC_LINEAR,
            "            accumulate_into_main_grad = get_accumulate_flag_in_param(weight_param)\n",
            "            accumulate_into_main_grad = get_accumulate_flag_in_param(w)  # bug\n",
        ),
        _PX_BASIC_LINEAR,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    # The NPU re-layout idiom rebinds weight to a copy that gets main_grad but none of the
    # Parameter's flags: the dummy and grad_added_to_main_grad never reach the Parameter.
    Variant(
        2,
        "mindspeed_mc2_column_weight_relaid_out_before_wgrad",
        _swap(
            _MS_MC2_COLUMN_BWD,
            "        weight = ctx.weight\n",
            "        weight = ctx.weight\n"
            "        main_grad = weight.main_grad  # bug\n"
            "        weight = weight.t().contiguous().t()  # bug\n"
            "        weight.main_grad = main_grad  # bug\n",
        ),
        _MS_MC2_COLUMN_BWD,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    # The fused GEMM adds into main_grad and an (uninitialised) dummy is handed on without the
    # flag: DDP's hook adds the dummy into main_grad.
    Variant(
        3,
        "mindspeed_mc2_column_dummy_returned_without_flag",
        _swap(
            _MS_MC2_COLUMN_BWD,
            "                weight.grad_added_to_main_grad = True\n            else:\n                grad_weight = None\n",
            "            else:  # bug\n                grad_weight = None\n",
        ),
        _MS_MC2_COLUMN_BWD,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    # The hook copies .grad over main_grad whatever the sharding strategy: earlier microbatches
    # (and, under zero_out_wgrad, the fused wgrad itself) are lost.
    Variant(
        4,
        "mindspeed_fb_overlap_ddp_hook_copies_grad",
        _swap(
            _MS_FB_DDP_HOOK,
            "                    param.main_grad.add_(param.grad.data)\n",
            "                    param.main_grad.copy_(param.grad.data)  # bug\n",
        ),
        _MS_FB_DDP_HOOK,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    # The delayed branch is tested first: delayed fused weights are never flagged and get no
    # dummy, while backward_dw later fires the reduce hooks on their main_grad.
    Variant(
        5,
        "te_ptrendx_grouped_mlp_delayed_branch_checked_first",
        _swap(
            _PX_GROUPED_MLP_GRAD_PARAMS,
            "        if fc_op._accumulate_into_main_grad:\n"
            "            w_list = get_dummy_wgrads_for_params(weights)\n"
            "        elif delay_wgrad:\n"
            "            w_list = [None] * num_groups\n",
            "        if delay_wgrad:  # bug\n"
            "            w_list = [None] * num_groups  # bug\n"
            "        elif fc_op._accumulate_into_main_grad:  # bug\n"
            "            w_list = get_dummy_wgrads_for_params(weights)  # bug\n",
        ),
        _PX_GROUPED_MLP_GRAD_PARAMS,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    # The pipeline flush reduces each weight's main_grad without ever running its stored W pass.
    Variant(
        6,
        "zero_bubble_weight_grad_store_clear_reduces_without_w_pass",
        _swap(
            _ZB_WEIGHT_GRAD_STORE_CLEAR,
            "                assert param is weight\n                func(total_input, grad_output, weight.main_grad)\n",
            "                assert param is weight  # bug\n",
        ),
        _ZB_WEIGHT_GRAD_STORE_CLEAR,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    # The head's code: the dummy is gated on the local flag overwrite_main_grad switched off, so
    # overwrite mode returns main_grad.detach() as .grad and sets no flag.
    Variant(
        7,
        "te_ptrendx_basic_linear_dummy_on_local_accumulate_flag",
        _swap(
            _PX_BASIC_LINEAR,
            "        if ctx.weight_requires_grad and self._accumulate_into_main_grad:\n",
            "        if accumulate_into_main_grad:  # bug\n",
        ),
        _PX_BASIC_LINEAR,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    # Megatron-FSDP parameters get main_grad only through get_main_grad(); without the fetch the
    # fused ops find None (or a stale buffer) when they run.
    Variant(
        8,
        "te_ptrendx_ops_main_grad_helper_skips_fsdp_fetch",
        _swap(
            _PX_OPS_COMMON,
            '    if hasattr(weight_param, "__fsdp_param__"):\n'
            "        weight_param.main_grad = weight_param.get_main_grad()\n"
            '    if not hasattr(weight_param, "main_grad") or weight_param.main_grad is None:\n',
            '    if not hasattr(weight_param, "main_grad") or weight_param.main_grad is None:  # bug\n',
        ),
        _PX_OPS_COMMON,
    ),
)
