"""The held-out half of the nineteenth blind corpus (H-blind19): one main_grad bookkeeping variant
per class of issue #19, kept apart from variant_corpus_blind19.py and never used to write or tune
rules; it measures how the rules transfer. Grounded in the same repositories no earlier blind
corpus used: databricks megablocks (the grouped-GEMM expert MLP), laekov fastmoe (FasterMoE's
shadow-expert gradient collection, the Megatron `fmoefy` integration), InternLM InternEvo
(HybridZeroOptimizer's ISP gradient accumulation, the tensor-parallel linear's zero-bubble
deferral) and pytorch/pytorch (torch.distributed.pipelining's data-parallel backward wrapper).

Sources (repo, commit, path, function):
- databricks/megablocks 78eea65fda01e638af36ae38853bc51efb04a4b4
  megablocks/layers/mlp.py MemoryOptimizedGroupedMLP.forward / .backward, GroupedMLP.forward
- laekov/fastmoe ee3c5615a5588c65273a512de82f19ca287e1bdf
  fmoe/fastermoe/expert_utils.py stash_expert_params / pop_expert_params / collect_expert_grads /
  set_grads, fmoe/fastermoe/schedule.py MoEForward.backward
- laekov/fastmoe ee3c5615a5588c65273a512de82f19ca287e1bdf
  fmoe/megatron/layers.py fmoefy
- InternLM/InternEvo 0aa6d26e784cc562b4664a4d0ad209bcf1273646
  internlm/solver/optimizer/hybrid_zero_optim.py HybridZeroOptimizer.accumulate_left_grads_after_backward /
  ._accum_grads_store_in_bucket / ._wait_reduce_scatter_and_accumulate_grads
- InternLM/InternEvo 92e40abe58a98c8531f6be0293ebbe9a170b041e
  internlm/model/modules/linear.py SPFusedDenseFunc.backward
- pytorch/pytorch 88fa1e7170b48d369c6b00d545a89e97fb9e2e43
  torch/distributed/pipelining/stage.py _PipelineStageBase.backward_maybe_with_nosync

Conventions: as in variant_corpus_blind19.py. Twins are the real code shortened. Two twins are
adapted and say so above their source block: megablocks' MemoryOptimizedGroupedMLP returns dw1, dw2
to autograd; its twin receives the Parameters (as weakrefs, the way Transformer Engine keeps them)
and, under fuse_wgrad_accumulation, writes the grouped wgrads into their main_grad (added, or
copied when Megatron-FSDP sets `overwrite_main_grad`), sets `grad_added_to_main_grad` and returns
a dummy. fastmoe's fmoefy has no fused path; its twin registers a forward pre-hook on each new
MegatronMLP that fetches Megatron-FSDP's `get_main_grad()` buffers before the experts run
(Megatron-LM #5209's fix).
Per-repository stand-ins for main_grad: FasterMoE's shadow gradient buffer (`ctx.shadows`, reduced
to the expert's owner) next to the local expert's `p.grad`; InternEvo's `param.grad` (accumulated
across microbatches: the ISP linear hands autograd a zero placeholder and the optimizer adds the
reduce-scattered gradient); FSDP2's post_backward reduce-scatter for PyTorch pipelining.
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


# --- databricks/megablocks 78eea65f megablocks/layers/mlp.py MemoryOptimizedGroupedMLP and
# GroupedMLP.forward, ADAPTED: the real function returns dw1, dw2 to autograd. The twin also takes
# the Parameters (kept as weakrefs) behind the scaled, [experts, rows, hidden] views and, under
# fuse_wgrad_accumulation, hands each grouped wgrad to `_wgrad_into_main_grad`. AMP casts and the
# default-GeLU fast path are dropped. With expert parallelism `scale_grad` returns a new tensor
# (ScaleGradient's output), not the Parameter.
_MEGABLOCKS_GROUPED_MLP_FUSED = """
import weakref

import torch

from megablocks import grouped_gemm_util as gg
from megablocks.layers import mpu
from megablocks.layers.mlp import SparseMLP, resolve_dtensor


def _wgrad_into_main_grad(param, wgrad):
    accumulate = not getattr(param, "overwrite_main_grad", False)
    main_grad = param.main_grad.view_as(wgrad)
    if accumulate:
        main_grad.add_(wgrad)
    else:
        main_grad.copy_(wgrad)
    param.grad_added_to_main_grad = True
    if getattr(param, "zero_out_wgrad", False):
        return torch.zeros_like(wgrad)
    return torch.empty_like(wgrad)


class MemoryOptimizedGroupedMLP(torch.autograd.Function):
    \"\"\"GroupedMLP with manually scheduled memory reuse.\"\"\"

    @staticmethod
    @torch.amp.autocast_mode.custom_fwd(device_type='cuda')
    def forward(ctx, x, w1, w2, batch_sizes, activation_fn, params, fuse_wgrad_accumulation):
        # x: [m, k], w1: [n, k], w2: [n, k]
        if (not x.is_contiguous() or not w1.is_contiguous() or not w2.is_contiguous()):
            raise ValueError("Expected contiguous 'x', 'w1' and 'w2'.")

        # Layer 0: x @ w1.t().
        assert gg.backend is not None
        sdd_out = gg.backend.gmm(x, w1, batch_sizes, trans_b=True)

        # activation_fn
        activation_fn_out = activation_fn(sdd_out)

        # Layer 1: x @ w2.
        dsd_out = gg.backend.gmm(activation_fn_out, w2, batch_sizes)

        ctx.x_shape = x.shape
        ctx.sdd_out_shape = sdd_out.shape
        ctx.dtype = x.dtype
        ctx.activation_fn = activation_fn
        ctx.weight_refs = tuple(weakref.ref(p) for p in params)
        ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        ctx.save_for_backward(w1, w2, batch_sizes, x, sdd_out)
        return dsd_out

    @staticmethod
    @torch.amp.autocast_mode.custom_bwd(device_type='cuda')
    def backward(ctx, ddsd_out):
        if (not ctx.needs_input_grad[0] or not ctx.needs_input_grad[1] or not ctx.needs_input_grad[2]):
            raise ValueError('Expected all MLP inputs to need grad.')

        # Unpack saved tensors
        saved_tensors = ctx.saved_tensors
        w1, w2 = saved_tensors[:2]
        batch_sizes = saved_tensors[2]
        x = saved_tensors[3]
        sdd_out = saved_tensors[4]

        # Rematerialize activation_fn output.
        activation_fn = ctx.activation_fn
        with torch.set_grad_enabled(True):
            sdd_out.requires_grad = True
            activation_fn_out = activation_fn(sdd_out)
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
        assert activation_grad_fn is not None
        activation_grad_fn(dactivation_fn_out)
        dsdd_out = sdd_out.grad

        # Compute dw1.
        dw1 = gg.backend.gmm(dsdd_out, x, batch_sizes, trans_a=True)

        # Compute dx.
        #
        # NOTE: This reuses the ddsd_out allocation.
        gg.backend.gmm(dsdd_out, w1, batch_sizes, c=ddsd_out)
        dx = ddsd_out

        if ctx.fuse_wgrad_accumulation:
            w1_ref, w2_ref = ctx.weight_refs
            dw1 = _wgrad_into_main_grad(w1_ref(), dw1)
            dw2 = _wgrad_into_main_grad(w2_ref(), dw2)
        return dx, dw1, dw2, None, None, None, None


memory_optimized_grouped_mlp = MemoryOptimizedGroupedMLP.apply


class GroupedMLP(SparseMLP):

    def forward(self, x, tokens_per_expert):
        batch_sizes = tokens_per_expert.cpu().to(torch.long)
        w1, w2 = (self.scale_grad(self.w1), self.scale_grad(self.w2))
        params = (self.w1, self.w2)

        # Re-shape the weights for the grouped GEMMs.
        ne = mpu.experts_per_rank(self.args)
        w1 = resolve_dtensor(w1).view(ne, -1, self.args.hidden_size)
        w2 = resolve_dtensor(w2).view(ne, -1, self.args.hidden_size)

        if self.args.memory_optimized_mlp:
            return memory_optimized_grouped_mlp(
                x,
                w1,
                w2,
                batch_sizes,
                self.args.activation_fn,
                params,
                self.args.fuse_wgrad_accumulation,
            )

        # Compute the MLP.
        assert gg.ops is not None
        x = gg.ops.gmm(x, w1, batch_sizes, trans_b=True)
        x = self.args.activation_fn(x)
        return gg.ops.gmm(x, w2, batch_sizes)
"""

# --- laekov/fastmoe ee3c5615 fmoe/fastermoe/expert_utils.py (whole but get_expert_param_size /
# get_expert_params) with fmoe/fastermoe/schedule.py MoEForward.backward (shortened: the scatter /
# gather around the native smart schedule dropped). A shadowed expert runs on a borrowed copy of the
# remote expert's parameters: its gradient is collected into the shadow buffer and reduced to the
# owner, which adds it with set_grads; pop_expert_params then restores the local expert's own
# parameters and gradient.
_FASTERMOE_EXPERT_UTILS = """
import torch
from torch.autograd.function import Function

import fmoe_cuda as fmoe_native


def stash_expert_params(e, params, idx):
    e = e[idx]
    if not hasattr(e, 'expert_param_stash'):
        setattr(e, 'expert_param_stash', dict())
        setattr(e, 'expert_grad_stash', dict())
    offset = 0
    for n, p in e.named_parameters():
        if n not in e.expert_param_stash:
            e.expert_param_stash[n] = p.data.clone()
            e.expert_grad_stash[n] = p.grad.clone() if p.grad is not None else None
        with torch.no_grad():
            seg = params[offset:offset + p.numel()]
            offset += p.numel()
            p.copy_(seg.reshape(p.shape))
            p.grad = None


def pop_expert_params(e, idx):
    e = e[idx]
    if not hasattr(e, 'expert_param_stash'):
        return
    if not e.expert_param_stash:
        return
    for n, p in e.named_parameters():
        with torch.no_grad():
            p.copy_(e.expert_param_stash[n])
            if e.expert_grad_stash[n] is not None:
                p.grad = e.expert_grad_stash[n].clone()
    e.expert_param_stash.clear()
    e.expert_grad_stash.clear()


def collect_expert_grads(e, grads, idx):
    e = e[idx]
    offset = 0
    for _, p in e.named_parameters():
        seg = grads[offset:offset + p.numel()]
        offset += p.numel()
        if p.grad is not None:
            seg.copy_(p.grad.flatten())
            p.grad = None
        else:
            seg.zero_()


def set_grads(e, grads, idx):
    e = e[idx]
    offset = 0
    for n, p in e.named_parameters():
        seg = grads[offset:offset + p.numel()]
        offset += p.numel()
        if p.grad is None:
            p.grad = seg.clone().reshape(p.shape)
        else:
            p.grad += seg.reshape(p.shape)


class MoEForward(Function):
    @staticmethod
    def backward(ctx, grad_out):
        (pos_s, pos_g, local_expert_count, global_expert_count,
                stored_models, _1, _2) = ctx.saved_tensors
        (fwd_batch_size, inp_batch_size, num_expert, world_size) = ctx.moe_args

        def _expert_backward(grad_y, grad_x, expert_idx, store_idx):
            y = ctx.gobs[store_idx]
            x = ctx.gibs[store_idx]
            torch.autograd.backward([y], [grad_y])
            grad_x.copy_(x.grad)

        experts = ctx.experts
        def stash_fn(store_idx, expert_idx):
            stash_expert_params(experts, ctx.shadows[store_idx], expert_idx)
        pop_fn = lambda idx: pop_expert_params(experts, idx)
        def collect_fn(store_idx, root, expert_idx):
            grad = ctx.shadows[store_idx]
            collect_expert_grads(experts, grad, expert_idx)
            fmoe_native.reduce_grad(grad, root, ctx.expert_size)
        set_grad_fn = lambda store_idx, expert_idx: set_grads(experts, ctx.shadows[store_idx], expert_idx)

        grad_out_buf = _local_scatter(grad_out.contiguous(), pos_g)
        grad_in_buf = fmoe_native.smart_sch_backward(
                grad_out_buf,
                local_expert_count, global_expert_count,
                stored_models,
                pos_s.shape[0], fwd_batch_size,
                world_size,
                _expert_backward, stash_fn, pop_fn, collect_fn, set_grad_fn)
        grad_in = _local_gather(grad_in_buf, pos_s, inp_batch_size)

        return (None, None, grad_in, None, None, None, None, None, None, None, None, None)
"""

# --- laekov/fastmoe ee3c5615 fmoe/megatron/layers.py fmoefy, ADAPTED: the real function only swaps
# each layer's MLP for a MegatronMLP (shortened here to the v2.2 layer loop). The twin, with
# Megatron's gradient_accumulation_fusion on, also registers a forward pre-hook on each new
# MegatronMLP that fetches Megatron-FSDP `get_main_grad()` buffers for its expert weights before the
# fused expert linears run (Megatron-LM #5209's fix).
_FASTMOE_FMOEFY_FETCH = """
from .balance import reset_gate_hook


def _expose_expert_main_grads(module, inputs):
    for param in module.experts.parameters():
        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
            param.main_grad = param.get_main_grad()


def fmoefy(
    model,
    fmoe_num_experts=None,
    distributed_experts=True,
    hidden_hidden_size=None,
    top_k=None,
    gate=None,
):
    from megatron import get_args

    args = get_args()

    # Set distributed_experts to None to use default setting in args
    if distributed_experts is not None:
        args.distributed_experts = distributed_experts

    if fmoe_num_experts is not None:
        args.fmoe_num_experts = fmoe_num_experts
    assert (
        "fmoe_num_experts" in args
    ), "fmoe_num_experts should be specified in arguments or fmoefy function"

    if top_k is not None:
        args.top_k = top_k
    elif not hasattr(args, "top_k"):
        args.top_k = 2

    args.hidden_hidden_size = hidden_hidden_size

    for idx, l in enumerate(model.language_model.transformer.layers):
        l.mlp = MegatronMLP(args, idx, gate=gate)
        if args.gradient_accumulation_fusion:
            l.mlp.register_forward_pre_hook(_expose_expert_main_grads)

    # initialize gate hook
    num_layers = len(model.language_model.transformer.layers)
    reset_gate_hook(num_layers)

    return model
"""

# --- InternLM/InternEvo 0aa6d26e internlm/solver/optimizer/hybrid_zero_optim.py
# HybridZeroOptimizer.accumulate_left_grads_after_backward / ._accum_grads_store_in_bucket /
# ._wait_reduce_scatter_and_accumulate_grads (whole). Each microbatch autograd adds the ISP linear's
# zero placeholder into `param.grad`; these functions add the parked reduce-scatter result on top,
# so `param.grad` holds the sum over all microbatches of the step.
_INTERNEVO_ZERO_ACCUM = """
from typing import Optional


class HybridZeroOptimizer(BaseOptimizer):
    def accumulate_left_grads_after_backward(self):
        if self._isp_communicator is None:
            return

        for group_id in range(self.num_param_groups):
            self._accum_grads_store_in_bucket(self._accum_grad_buckets[group_id])

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

    def _wait_reduce_scatter_and_accumulate_grads(self, param, reduce_rank: Optional[int] = None):
        param_size = param.numel()

        group_id = getattr(param, "group_id")
        current_bucket = self._accum_grad_buckets[group_id]

        # check if the bucket is full
        # if full, will reduce the grads already in the bucket
        # after reduction, the bucket will be empty
        if current_bucket.num_elements_in_bucket(reduce_rank) + param_size > self._reduce_bucket_size:
            self._accum_grads_store_in_bucket(current_bucket, reduce_rank)

        # otherwise, add the parameter into bucket.
        current_bucket.add_num_elements_in_bucket(param_size, reduce_rank)
        current_bucket.add_param(param, reduce_rank)
"""

# --- InternLM/InternEvo 92e40abe internlm/model/modules/linear.py SPFusedDenseFunc.backward
# (shortened: return_residual and the debug print dropped). Under ZBH1 the first pipeline rank
# never runs a W pass (WeightGradStore.flush and .pop return at once there), so it must compute its
# wgrad inline; other ranks, and every rank under ZBV, defer it to WeightGradStore.
_INTERNEVO_SP_DENSE = """
import torch

from internlm.core.context import ParallelMode
from internlm.core.context import global_context as gpc
from internlm.model.ops.linear import linear_backward_op, linear_forward_op


class SPFusedDenseFunc(torch.autograd.Function):
    "FusedDenseFunc for tensor parallel in flash-attn implementation."

    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output, *args):
        communicator: TPCommunicator = ctx.communicator

        # parallel strategy-specific communication callback 3.
        # see more details in the communicator for different parallel strategies.
        grad_output, _ = communicator.grad_output_hook(grad_output, async_op=False)
        grad_output = grad_output.contiguous()

        x, weight, bias = ctx.saved_tensors

        # parallel strategy-specific communication callback 1-2.
        # see more details in the communicator for different parallel strategies.
        if ctx.needs_input_grad[1]:
            x, handle_x = communicator.input_hook(x, async_op=True, is_forward=False)

        batch_shape = grad_output.shape[:-1]
        batch_dim = batch_shape.numel()
        grad_output = grad_output.reshape(batch_dim, grad_output.shape[-1])

        if ctx.needs_input_grad[0]:
            grad_input = linear_forward_op(grad_output, weight.t())
            grad_input = grad_input.reshape(*batch_shape, grad_input.shape[-1])
            # parallel strategy-specific communication callback 4.
            # see more details in the communicator for different parallel strategies.
            grad_input, handle_grad_input = communicator.grad_input_hook(grad_input, async_op=True)
        else:
            grad_input = None

        # computes gradinets for weight and bias if necessary
        if ctx.needs_input_grad[1]:
            assert ctx.compute_weight_gradient

            # wait for x has been gathered
            handle_x.wait()

            x = x.reshape(batch_dim, x.shape[-1])
            if gpc.is_using_parallel_mode(ParallelMode.PIPELINE) and (
                (
                    gpc.config.parallel["pipeline"].get("mode", "1F1B") == "ZBH1"
                    and not gpc.is_first_rank(ParallelMode.PIPELINE)
                )
                or gpc.config.parallel["pipeline"].get("mode", "1F1B") == "ZBV"
            ):
                from internlm.core.scheduler.pipeline_scheduler_zb import (
                    WeightGradStore,
                )

                WeightGradStore.put(weight, bias, x, grad_output, ctx.needs_input_grad[2], linear_backward_op)
                grad_weight, grad_bias = None, None
            else:
                grad_weight, grad_bias = linear_backward_op(x, grad_output, ctx.needs_input_grad[2])

        else:
            grad_weight = None
            grad_bias = grad_output if ctx.needs_input_grad[2] else None

        # wait for grad_input has been gathered
        handle_grad_input.wait()

        return grad_input, grad_weight, grad_bias, None, None, None, None, None
"""

# --- pytorch/pytorch 88fa1e71 torch/distributed/pipelining/stage.py
# _PipelineStageBase.backward_maybe_with_nosync (whole). Pipelining runs autograd itself, so FSDP2's
# post-backward reduce-scatter does not fire from hooks; on the last backward it is invoked by hand
# for every FSDP state under the stage module (nested fully_shard units included).
_PYTORCH_STAGE_NOSYNC = """
from typing import Any, Callable, Optional

import torch
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.nn.parallel import DistributedDataParallel

from ._backward import stage_backward, stage_backward_input, stage_backward_weight


class _PipelineStageBase(ABC):
    def backward_maybe_with_nosync(
        self,
        backward_type,
        bwd_kwargs: dict,
        last_backward: bool = False,
    ) -> tuple[tuple[Optional[torch.Tensor], ...], Optional[list[dict[str, Any]]]]:
        def perform_backward(
            backward_type,
        ) -> Callable[
            [],
            tuple[tuple[Optional[torch.Tensor], ...], Optional[list[dict[str, Any]]]],
        ]:
            if backward_type == "full":
                return lambda: (
                    stage_backward(
                        bwd_kwargs["stage_output"],
                        bwd_kwargs["output_grads"],
                        bwd_kwargs["input_values"],
                    ),
                    None,
                )
            elif backward_type == "input":
                return lambda: stage_backward_input(
                    bwd_kwargs["stage_output"],
                    bwd_kwargs["output_grads"],
                    bwd_kwargs["input_values"],
                    self.submod.parameters(),
                )
            elif backward_type == "weight":
                return lambda: (
                    stage_backward_weight(
                        self.submod.parameters(), bwd_kwargs["param_groups"]
                    ),
                    None,
                )
            else:
                raise RuntimeError(f"Unknown backward type: {backward_type}")

        # If submod is wrapped by DDP
        if isinstance(self.submod, DistributedDataParallel):
            if last_backward:
                # Last chunk, prepare for gradient reduction
                # HACK: reaching into DDP implementation details here. Is there a better way?
                self.submod.reducer.prepare_for_backward(  # type: ignore[union-attr, operator]
                    list(
                        torch.nn.parallel.distributed._find_tensors(  # type: ignore[attr-defined]
                            bwd_kwargs["stage_output"]
                        )
                    )
                )
                result = perform_backward(backward_type)()
            else:
                with self.submod.no_sync():  # type: ignore[operator]
                    result = perform_backward(backward_type)()
        # If submod is a FSDP module
        elif isinstance(self.submod, FSDPModule):
            self.submod.set_is_last_backward(False)
            self.submod.set_reshard_after_backward(False)
            self.submod.set_requires_gradient_sync(False)
            result = perform_backward(backward_type)()
            if last_backward:
                # Manually call post backward for FSDP
                def run_post_backward(fsdp_module: FSDPModule) -> None:
                    fsdp_module.set_is_last_backward(True)
                    fsdp_module.set_reshard_after_backward(True)
                    fsdp_module.set_requires_gradient_sync(True)
                    fsdp_state = fully_shard.state(fsdp_module)  # type: ignore[arg-type]
                    for state in fsdp_state._state_ctx.all_states:
                        if state._fsdp_param_group:
                            state._fsdp_param_group.post_backward()

                    # it would be much better if pipelining backward invoked .backward so autograd hooks
                    # worked and modules like DDP/FSDP behaved as expected.  Working around this for the time being,
                    # we need to call this too to ensure FSDP syncs its grad reduction ops back to the default stream.
                    fsdp_state._root_post_backward_final_callback()

                run_post_backward(self.submod)

        else:
            # Non-DP submodule, regular backward
            result = perform_backward(backward_type)()

        grads, param_groups = result
        return grads, param_groups
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        cls=1,
        name="megablocks_grouped_mlp_params_taken_after_scale_grad",
        bug=_swap(
            _MEGABLOCKS_GROUPED_MLP_FUSED,
            "        params = (self.w1, self.w2)\n",
            "        params = (w1, w2)  # bug\n",
        ),
        twin=_MEGABLOCKS_GROUPED_MLP_FUSED,
    ),
    # ---------------------------------------------------------------- 2: rebound / copy
    Variant(
        cls=2,
        name="megablocks_grouped_mlp_returns_main_grad_view_as_wgrad",
        bug=_swap(
            _MEGABLOCKS_GROUPED_MLP_FUSED,
            "    param.grad_added_to_main_grad = True\n"
            '    if getattr(param, "zero_out_wgrad", False):\n'
            "        return torch.zeros_like(wgrad)\n"
            "    return torch.empty_like(wgrad)\n",
            "    param.grad_added_to_main_grad = True\n    return main_grad  # bug\n",
        ),
        twin=_MEGABLOCKS_GROUPED_MLP_FUSED,
    ),
    # ---------------------------------------------------------------- 3: flags / writes
    Variant(
        cls=3,
        name="fastermoe_collect_keeps_shadow_grad_on_local_expert",
        bug=_swap(
            _FASTERMOE_EXPERT_UTILS,
            "            seg.copy_(p.grad.flatten())\n"
            "            p.grad = None\n"
            "        else:\n"
            "            seg.zero_()\n",
            "            seg.copy_(p.grad.flatten())\n"
            "        else:  # bug\n"
            "            seg.zero_()\n",
        ),
        twin=_FASTERMOE_EXPERT_UTILS,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        cls=4,
        name="internevo_zero_isp_accum_copies_into_param_grad",
        bug=_swap(
            _INTERNEVO_ZERO_ACCUM,
            "            _param.grad.add_(_grad)\n",
            "            _param.grad.copy_(_grad)  # bug\n",
        ),
        twin=_INTERNEVO_ZERO_ACCUM,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        cls=5,
        name="pytorch_pipelining_fsdp_post_backward_on_root_state_only",
        bug=_swap(
            _PYTORCH_STAGE_NOSYNC,
            "                    for state in fsdp_state._state_ctx.all_states:\n"
            "                        if state._fsdp_param_group:\n"
            "                            state._fsdp_param_group.post_backward()\n",
            "                    if fsdp_state._fsdp_param_group:  # bug\n"
            "                        fsdp_state._fsdp_param_group.post_backward()  # bug\n",
        ),
        twin=_PYTORCH_STAGE_NOSYNC,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad
    Variant(
        cls=6,
        name="internevo_sp_dense_defers_wgrad_on_zbh1_first_rank",
        bug=_swap(
            _INTERNEVO_SP_DENSE,
            "                (\n"
            '                    gpc.config.parallel["pipeline"].get("mode", "1F1B") == "ZBH1"\n'
            "                    and not gpc.is_first_rank(ParallelMode.PIPELINE)\n"
            "                )\n",
            '                gpc.config.parallel["pipeline"].get("mode", "1F1B") == "ZBH1"  # bug\n',
        ),
        twin=_INTERNEVO_SP_DENSE,
    ),
    # ------------------------------------------------- 7: the seed shape in other syntax
    Variant(
        cls=7,
        name="megablocks_grouped_mlp_overwrite_branch_returns_real_wgrad",
        bug=_swap(
            _MEGABLOCKS_GROUPED_MLP_FUSED,
            "    else:\n        main_grad.copy_(wgrad)\n",
            "    else:\n        main_grad.copy_(wgrad)\n        return wgrad  # bug\n",
        ),
        twin=_MEGABLOCKS_GROUPED_MLP_FUSED,
    ),
    # ------------------------------------------------- 8: Megatron-LM #5209's shape
    Variant(
        cls=8,
        name="fastmoe_fmoefy_fetch_hook_registered_on_replaced_mlp",
        bug=_swap(
            _FASTMOE_FMOEFY_FETCH,
            "        l.mlp = MegatronMLP(args, idx, gate=gate)\n"
            "        if args.gradient_accumulation_fusion:\n"
            "            l.mlp.register_forward_pre_hook(_expose_expert_main_grads)\n",
            "        if args.gradient_accumulation_fusion:  # bug\n"
            "            l.mlp.register_forward_pre_hook(_expose_expert_main_grads)  # bug\n"
            "        l.mlp = MegatronMLP(args, idx, gate=gate)  # bug\n",
        ),
        twin=_FASTMOE_FMOEFY_FETCH,
    ),
)
