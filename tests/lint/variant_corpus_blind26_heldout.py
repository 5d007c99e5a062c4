"""The twenty-sixth blind corpus (H-blind26), held-out half: one main_grad bookkeeping variant per
class of issue #19, grounded in the same three repositories as the development half
(``variant_corpus_blind26.py``), none of them used by an earlier blind corpus: linkedin Liger-Kernel
(branch ``megatron-vp-flce``: fused linear + vocab-parallel cross-entropy for Megatron's LM head),
Dao-AILab quack (CuTe-DSL GEMMs; ``Linear``/``MLP`` autograd Functions with their own fused gradient
accumulation) and luoshuqing2001 hexa_moe (HEXA-MoE expert MLPs with hand-written backward and a
"data-centric" mode that all-gathers the expert weights of every rank).

Sources (repo, commit, path, function):
- linkedin/Liger-Kernel 7528b17ba7c2c0d7fa748e551094d02fd30af328 (head of branch ``megatron-vp-flce``)
  src/liger_kernel/ops/fused_linear_vocab_parallel_cross_entropy.py
  LigerFusedLinearVPCEFunction.forward / .backward
- Dao-AILab/quack c8ec3170057987da0ec99883736f381ea1937cf3 quack/mlp.py MLPRecomputeFunc,
  _compute_weight_grad, MLP; quack/linear.py Linear.forward / linear_func
- luoshuqing2001/hexa_moe e321faad536dcdd38a94c1912607d4bca853d155
  hexa_moe_triton/hexa_moe/impls/layers.py MLP_Implement and FusedMoE_Shared_CudaCore.forward /
  .backward (the ``data_centric`` branch)

Conventions as in the development half: twins are the real code shortened (real names and idioms;
Triton/ESMM kernels, biases, label smoothing, the non-data-centric branch and the pipelined
prefetch of the next stage's weights dropped). No repository history of these files was available
here, so no variant reverts a known fix.
Adapted where the real code lacks the main_grad feature a class is about, or gets it wrong (a twin
must be correct under CONTRACT.md):
- Liger's VP-FLCE backward and hexa_moe's per-expert MLP: adapted exactly as in the development
  half (op-level gate, FSDP fetch, overwrite, flag and dummy for Liger; accumulate-mode DDP finish
  into ``main_grad`` for hexa_moe); the twin texts are the same.
- hexa_moe's data-centric branch returns each rank's slice of the all-reduced gradients of the
  gathered weights as the shard Parameters' gradients; the twin adds those slices into the shards'
  ``main_grad``, flags the shards and returns dummies (accumulate mode only).
- quack's ``MLPRecomputeFunc`` accumulates into ``weight_og.grad``; the twin moves it onto
  ``main_grad`` (``gemm_add_inplace`` in accumulate mode, ``gemm(out=)`` under
  ``overwrite_main_grad``, then the flag and a dummy) and adds TE's delayed-wgrad idiom
  (``WeightGradStore`` put/pop, ``backward_dw`` flagging and firing the
  wgrad-accumulation-and-reduce hooks), which quack does not have.
- quack's ``Linear`` module gains a Megatron-FSDP fetch (``get_main_grad()`` for
  ``__fsdp_param__`` weights) before ``linear_func`` when ``fuse_grad_accum`` is on; its op reads
  ``weight.main_grad`` directly.
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


# --- linkedin/Liger-Kernel 7528b17b LigerFusedLinearVPCEFunction (adapted as in the development half)
_LIGER_VPCE = """
import torch
import torch.distributed as dist

from liger_kernel.ops.vocab_parallel_cross_entropy import _is_tp_distributed


def _dummy_wgrad(param):
    shape = param.main_grad.shape
    if getattr(param, "zero_out_wgrad", False):
        return torch.zeros(shape, dtype=param.dtype, device=param.device)
    return torch.empty(shape, dtype=param.dtype, device=param.device)


class LigerFusedLinearVPCEFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden_states, weight, target, tp_group, ignore_index, accum_dtype, accumulate_into_main_grad):
        s, b, h = hidden_states.shape
        BT = s * b
        v_local = weight.shape[0]
        rank = dist.get_rank(tp_group) if _is_tp_distributed(tp_group) else 0
        x = hidden_states.reshape(BT, h).contiguous()
        flat_target = target.reshape(-1).contiguous().to(torch.int64)
        max_global, sum_exp_global, loss = _vpce_forward_stats(x, weight, flat_target, rank * v_local, tp_group)
        ctx.save_for_backward(x, weight, flat_target, max_global, sum_exp_global)
        ctx.vocab_start = rank * v_local
        ctx.ignore_index = ignore_index
        ctx.chunk_size = _select_chunk_size(BT, v_local, h)
        ctx.orig_shape = (s, b, h)
        ctx.accum_dtype = accum_dtype
        ctx.accumulate_into_main_grad = accumulate_into_main_grad
        return loss.reshape(s, b)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, flat_target, max_global, sum_exp_global = ctx.saved_tensors
        BT, H = x.shape
        V_local = weight.shape[0]
        grad_out_flat = grad_output.contiguous().reshape(-1).to(torch.float32)
        accum_dtype = ctx.accum_dtype if ctx.accum_dtype is not None else weight.dtype
        weight_c = weight.to(accum_dtype)

        grad_x = torch.empty_like(x)
        grad_W = torch.zeros(V_local, H, device=x.device, dtype=accum_dtype) if weight.requires_grad else None
        for s_idx in range(0, BT, ctx.chunk_size):
            e_idx = min(s_idx + ctx.chunk_size, BT)
            x_chunk = x[s_idx:e_idx]
            grad_logits_chunk = _grad_logits_chunk(
                x_chunk @ weight.t(), max_global[s_idx:e_idx], sum_exp_global[s_idx:e_idx],
                flat_target[s_idx:e_idx], grad_out_flat[s_idx:e_idx], ctx.vocab_start, ctx.ignore_index,
            )
            grad_x[s_idx:e_idx] = (grad_logits_chunk @ weight).to(grad_x.dtype)
            if grad_W is not None:
                grad_W.addmm_(grad_logits_chunk.t().to(weight_c.dtype), x_chunk.to(weight_c.dtype))

        grad_W_return = None
        if grad_W is not None and ctx.accumulate_into_main_grad:
            # main_grad routing for Megatron's gradient_accumulation_fusion.
            if hasattr(weight, "__fsdp_param__"):
                weight.main_grad = weight.get_main_grad()
            if getattr(weight, "main_grad", None) is None:
                raise RuntimeError("accumulate_into_main_grad=True but the LM-head weight has no main_grad")
            accumulate = not getattr(weight, "overwrite_main_grad", False)
            if accumulate:
                weight.main_grad.add_(grad_W.to(weight.main_grad.dtype))
            else:
                weight.main_grad.copy_(grad_W.to(weight.main_grad.dtype))
            # Mirror Megatron's marker so the bucket reducer skips this param.
            weight.grad_added_to_main_grad = True
            grad_W_return = _dummy_wgrad(weight)
        elif grad_W is not None:
            grad_W_return = grad_W.to(weight.dtype)

        s, b, h = ctx.orig_shape
        return grad_x.view(s, b, h), grad_W_return, None, None, None, None, None
"""

# --- luoshuqing2001/hexa_moe e321faad MLP_Implement, per-expert form (as in the development half)
_HEXA_EXPERTS = """
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor


class Experts_Implement(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, config: Any, tokens_input: Tensor, fc1_w, fc2_w, tokens_per_expert):
        ctx.config = config
        outs, hids = [], []
        for e, x_e in enumerate(torch.split(tokens_input, tokens_per_expert)):
            hid = torch.matmul(x_e, fc1_w[e].permute(1, 0).to(x_e.dtype))
            hids.append(hid)
            outs.append(torch.matmul(config.activation_fn(hid), fc2_w[e].to(x_e.dtype)))
        ctx.save_for_backward(tokens_input, torch.cat(hids), fc1_w, fc2_w)
        ctx.tokens_per_expert = tokens_per_expert
        return torch.cat(outs)

    @staticmethod
    def backward(ctx: Any, j_tokens_output: Tensor):
        tokens_input, hid_feat, fc1_w, fc2_w = ctx.saved_tensors
        splits = ctx.tokens_per_expert
        j_x = []
        pending = []
        for e, (x_e, h_e, dy_e) in enumerate(
            zip(torch.split(tokens_input, splits), torch.split(hid_feat, splits), torch.split(j_tokens_output, splits))
        ):
            y2 = ctx.config.activation_fn(h_e)
            j_w2 = torch.matmul(y2.permute(1, 0), dy_e).to(torch.float32)
            j_y1 = torch.matmul(dy_e, fc2_w[e].permute(1, 0).to(dy_e.dtype)) * ctx.config.activation_grad(h_e)
            j_w1 = torch.matmul(j_y1.permute(1, 0), x_e).to(torch.float32)
            j_x.append(torch.matmul(j_y1, fc1_w[e].to(dy_e.dtype)))
            pending.append((e, j_w1, j_w2, dist.all_reduce(j_w1, op=dist.ReduceOp.AVG, async_op=True),
                            dist.all_reduce(j_w2, op=dist.ReduceOp.AVG, async_op=True)))

        for e, j_w1, j_w2, w1_op, w2_op in pending:
            w1_op.wait()
            w2_op.wait()
            fc1_w.main_grad[e].add_(j_w1)
            fc2_w.main_grad[e] += j_w2
        fc1_w.grad_added_to_main_grad = True
        fc2_w.grad_added_to_main_grad = True
        dummy1 = torch.empty(fc1_w.main_grad.shape, dtype=fc1_w.dtype, device=fc1_w.device)
        dummy2 = torch.empty(fc2_w.main_grad.shape, dtype=fc2_w.dtype, device=fc2_w.device)
        return None, torch.cat(j_x), dummy1, dummy2, None
"""

# --- luoshuqing2001/hexa_moe e321faad FusedMoE_Shared_CudaCore, data_centric branch: the experts run
# on weights all-gathered from every rank; each rank keeps a hidden-dim shard of every expert
# (adapted: main_grad of the shards, flag and dummy; accumulate mode only)
_HEXA_DATA_CENTRIC = """
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from ..kernels.esmm import ESMM
from ..kernels.fused import es_fused


class FusedMoE_DataCentric(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, config: Any, tokens_input: Tensor, fc1_w, fc2_w, token_idx, expert_idx, expert_start):
        ctx.config = config
        # Receive parameters from different devices.
        config.fc1_w_op.wait()
        batched_fc1_w = torch.cat(tuple(config.batched_fc1_w_cache), dim=1).permute(0, 2, 1).contiguous()
        config.fc2_w_op.wait()
        batched_fc2_w = torch.cat(tuple(config.batched_fc2_w_cache), dim=1).contiguous()
        empty_bias = torch.empty(0, device=tokens_input.device)
        tokens_hid = ESMM(tokens_input, batched_fc1_w, empty_bias, token_idx, expert_idx)
        tokens_out = ESMM(config.activation_fn(tokens_hid), batched_fc2_w, empty_bias, token_idx, expert_idx)
        ctx.save_for_backward(tokens_input, tokens_hid, token_idx, expert_idx, expert_start)
        ctx.shards = (fc1_w, fc2_w)
        ctx.gathered = (batched_fc1_w, batched_fc2_w)
        return tokens_out

    @staticmethod
    def backward(ctx: Any, j_tokens_output: Tensor):
        tokens_input, y1, token_idx, expert_idx, expert_start = ctx.saved_tensors
        fc1_w, fc2_w = ctx.shards
        batched_fc1_w, batched_fc2_w = ctx.gathered
        num_global_experts = ctx.config.num_global_experts
        lo, hi = ctx.config.local_start, ctx.config.local_end

        y1_grad, fc2_w_grad_whole = es_fused(
            j_tokens_output.contiguous(), ctx.config.activation_fn(y1).contiguous(), batched_fc2_w.permute(0, 2, 1).contiguous(),
            token_idx, expert_idx, expert_start, num_global_experts, bias=False,
        )
        fc2_w_grad_whole = fc2_w_grad_whole.permute(0, 2, 1).contiguous()
        fc2_w_op = dist.all_reduce(fc2_w_grad_whole, op=dist.ReduceOp.AVG, async_op=True)

        y1_grad = (y1_grad * ctx.config.activation_grad(y1)).contiguous()
        j_tokens_input, fc1_w_grad_whole = es_fused(
            y1_grad, tokens_input, batched_fc1_w.permute(0, 2, 1).contiguous(),
            token_idx, expert_idx, expert_start, num_global_experts, bias=False,
        )
        fc1_w_op = dist.all_reduce(fc1_w_grad_whole, op=dist.ReduceOp.AVG, async_op=True)

        fc2_w_op.wait()
        fc1_w_op.wait()
        # each rank owns a hidden-dim slice of every expert
        shard_grads = (fc1_w_grad_whole[:, lo:hi, :], fc2_w_grad_whole[:, lo:hi, :])
        for param, grad in zip((fc1_w, fc2_w), shard_grads):
            param.main_grad.add_(grad.to(param.main_grad.dtype))
        for param in (fc1_w, fc2_w):
            setattr(param, "grad_added_to_main_grad", True)
        dummies = tuple(torch.empty_like(param) for param in (fc1_w, fc2_w))
        return (None, j_tokens_input, *dummies, None, None, None)
"""

# --- Dao-AILab/quack c8ec3170 quack/mlp.py MLPRecomputeFunc / _compute_weight_grad / MLP with TE's
# delayed-wgrad idiom (adapted: main_grad, overwrite, flag, dummy, WeightGradStore; see the docstring)
_QUACK_DELAYED_MLP = """
import torch
import torch.nn as nn
from torch import Tensor

from quack.gemm_interface import gemm, gemm_act, gemm_add_inplace, gemm_dact
from transformer_engine.pytorch.module._common import WeightGradStore


def _dummy_wgrad(param):
    if getattr(param, "zero_out_wgrad", False):
        return torch.zeros_like(param)
    return torch.empty_like(param)


def _wgrad_into_main_grad(dout, x, weight_og):
    if getattr(weight_og, "overwrite_main_grad", False):
        gemm(dout.T, x, out=weight_og.main_grad, dynamic_scheduler=True)
    else:
        gemm_add_inplace(dout.T, x, weight_og.main_grad, dynamic_scheduler=True)


def _compute_weight_grad(ctx, dout, x, weight_og, needs_grad):
    if not needs_grad:
        return None
    x = x.reshape(-1, x.shape[-1])
    if not ctx.fuse_grad_accum:
        return gemm(dout.T, x, out_dtype=ctx.weight_dtype, dynamic_scheduler=True)
    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
        ctx.wgrad_store.put([dout, x, weight_og], _wgrad_into_main_grad)
        return None
    accumulate = not getattr(weight_og, "overwrite_main_grad", False)
    if accumulate:
        gemm_add_inplace(dout.T, x, weight_og.main_grad, dynamic_scheduler=True)
    else:
        gemm(dout.T, x, out=weight_og.main_grad, dynamic_scheduler=True)
    weight_og.grad_added_to_main_grad = True
    return _dummy_wgrad(weight_og)


class MLPRecomputeFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight1, weight2, activation, fuse_grad_accum, wgrad_store):
        ctx.weight_dtype = weight1.dtype
        ctx.fuse_grad_accum = fuse_grad_accum
        ctx.activation = activation
        ctx.wgrad_store = wgrad_store
        batch_shape = x.shape[:-1]
        x_flat = x.reshape(-1, x.shape[-1])
        _preact, postact = gemm_act(x_flat, weight1.T, activation=activation)
        out = gemm(postact, weight2.T)
        ctx.save_for_backward(x, weight1, weight2)
        return out.reshape(*batch_shape, out.shape[-1])

    @staticmethod
    def backward(ctx, dout):
        x, weight1, weight2 = ctx.saved_tensors
        batch_shape = dout.shape[:-1]
        dout = dout.reshape(-1, dout.shape[-1]).contiguous()
        x_flat = x.reshape(-1, x.shape[-1])
        preact = gemm(x_flat, weight1.T)
        dpreact, postact = gemm_dact(dout, weight2, preact, activation=ctx.activation, dynamic_scheduler=True)
        dweight2 = _compute_weight_grad(ctx, dout, postact, weight2, ctx.needs_input_grad[2])
        dx = gemm(dpreact, weight1, dynamic_scheduler=True).reshape(*batch_shape, -1) if ctx.needs_input_grad[0] else None
        dweight1 = _compute_weight_grad(ctx, dpreact, x_flat, weight1, ctx.needs_input_grad[1])
        return dx, dweight1, dweight2, None, None, None


class MLP(nn.Module):
    def __init__(self, in_features, hidden_features, activation="swiglu", fuse_grad_accum=False, delay_wgrad_compute=False):
        super().__init__()
        self.activation = activation
        self.fc1 = nn.Linear(in_features, 2 * hidden_features, bias=False)
        self.fc2 = nn.Linear(hidden_features, in_features, bias=False)
        self.fuse_grad_accum = fuse_grad_accum
        self.wgrad_store = WeightGradStore(delay_wgrad_compute)
        self.wgrad_accumulation_and_reduce_hooks = []

    def register_wgrad_accumulation_and_reduce_hooks(self, hook):
        self.wgrad_accumulation_and_reduce_hooks.append(hook)

    def forward(self, input: Tensor) -> Tensor:
        return MLPRecomputeFunc.apply(
            input, self.fc1.weight, self.fc2.weight, self.activation, self.fuse_grad_accum, self.wgrad_store
        )

    def backward_dw(self):
        if not self.wgrad_store.delay_wgrad_compute():
            return
        self.wgrad_store.pop()
        for weight in (self.fc1.weight, self.fc2.weight):
            weight.grad_added_to_main_grad = True
        for hook in self.wgrad_accumulation_and_reduce_hooks:
            hook()


class DownProjFirstMLP(MLP):
    def backward_dw(self):
        # fc2's wgrad first, so its bucket can start reducing while fc1's GEMM runs
        if not self.wgrad_store.delay_wgrad_compute():
            return
        super().backward_dw()
"""

# --- Dao-AILab/quack c8ec3170 quack/linear.py Linear / linear_func (adapted: FSDP fetch; see the docstring)
_QUACK_LINEAR_MODULE = """
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from quack.linear import linear_func


class Linear(nn.Linear):
    # nn.Linear whose CUDA path runs quack's GEMMs (with fused wgrad accumulation if asked)

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = False,
        device=None,
        dtype=None,
        fuse_grad_accum: bool = False,
    ) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.fuse_grad_accum = fuse_grad_accum

    def forward(self, input: Tensor) -> Tensor:
        if input.is_cuda and self.in_features % 8 == 0 and self.out_features % 8 == 0:
            weight = self.weight
            if self.fuse_grad_accum and hasattr(weight, "__fsdp_param__"):
                # Megatron-FSDP hands out main_grad lazily; the fused op writes weight.main_grad
                weight.main_grad = weight.get_main_grad()
            return linear_func(input, weight, self.bias, fuse_grad_accum=self.fuse_grad_accum)
        else:
            return F.linear(input, self.weight, self.bias)
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1
    Variant(
        1,
        "hexa_data_centric_flags_gathered_expert_weights",
        _swap(
            _HEXA_DATA_CENTRIC,
            '        for param in (fc1_w, fc2_w):\n            setattr(param, "grad_added_to_main_grad", True)\n',
            '        for param in ctx.gathered:  # bug\n            setattr(param, "grad_added_to_main_grad", True)\n',
        ),
        _HEXA_DATA_CENTRIC,
    ),
    # ---------------------------------------------------------------- 2
    Variant(
        2,
        "liger_vpce_returns_main_grad_in_backward_tuple",
        _swap(
            _LIGER_VPCE,
            "        return grad_x.view(s, b, h), grad_W_return, None, None, None, None, None\n",
            "        return grad_x.view(s, b, h), weight.main_grad if ctx.accumulate_into_main_grad else grad_W_return, None, None, None, None, None  # bug\n",
        ),
        _LIGER_VPCE,
    ),
    # ---------------------------------------------------------------- 3
    Variant(
        3,
        "liger_vpce_main_grad_written_real_grad_returned",
        _swap(
            _LIGER_VPCE,
            "            # Mirror Megatron's marker so the bucket reducer skips this param.\n"
            "            weight.grad_added_to_main_grad = True\n"
            "            grad_W_return = _dummy_wgrad(weight)\n",
            "            grad_W_return = grad_W.to(weight.dtype)  # bug\n",
        ),
        _LIGER_VPCE,
    ),
    # ---------------------------------------------------------------- 4
    Variant(
        4,
        "hexa_experts_fc2_main_grad_subscript_assignment",
        _swap(
            _HEXA_EXPERTS,
            "            fc2_w.main_grad[e] += j_w2\n",
            "            fc2_w.main_grad[e] = j_w2  # bug\n",
        ),
        _HEXA_EXPERTS,
    ),
    # ---------------------------------------------------------------- 5
    Variant(
        5,
        "quack_mlp_backward_dw_hooks_before_flags",
        _swap(
            _QUACK_DELAYED_MLP,
            "        self.wgrad_store.pop()\n"
            "        for weight in (self.fc1.weight, self.fc2.weight):\n"
            "            weight.grad_added_to_main_grad = True\n"
            "        for hook in self.wgrad_accumulation_and_reduce_hooks:\n"
            "            hook()\n",
            "        self.wgrad_store.pop()\n"
            "        for hook in self.wgrad_accumulation_and_reduce_hooks:  # bug\n"
            "            hook()  # bug\n"
            "        for weight in (self.fc1.weight, self.fc2.weight):  # bug\n"
            "            weight.grad_added_to_main_grad = True  # bug\n",
        ),
        _QUACK_DELAYED_MLP,
    ),
    # ---------------------------------------------------------------- 6
    Variant(
        6,
        "quack_mlp_subclass_backward_dw_inverted_guard",
        _swap(
            _QUACK_DELAYED_MLP,
            "        # fc2's wgrad first, so its bucket can start reducing while fc1's GEMM runs\n"
            "        if not self.wgrad_store.delay_wgrad_compute():\n",
            "        # fc2's wgrad first, so its bucket can start reducing while fc1's GEMM runs\n"
            "        if self.wgrad_store.delay_wgrad_compute():  # bug\n",
        ),
        _QUACK_DELAYED_MLP,
    ),
    # ---------------------------------------------------------------- 7
    Variant(
        7,
        "quack_mlp_dummy_picked_by_tuple_index_on_local_flag",
        _swap(
            _QUACK_DELAYED_MLP,
            "    weight_og.grad_added_to_main_grad = True\n    return _dummy_wgrad(weight_og)\n",
            "    weight_og.grad_added_to_main_grad = accumulate  # bug\n"
            "    return (gemm(dout.T, x, out_dtype=ctx.weight_dtype), _dummy_wgrad(weight_og))[accumulate]  # bug\n",
        ),
        _QUACK_DELAYED_MLP,
    ),
    # ---------------------------------------------------------------- 8
    Variant(
        8,
        "quack_linear_main_grad_set_on_data_alias",
        _swap(
            _QUACK_LINEAR_MODULE,
            "                weight.main_grad = weight.get_main_grad()\n",
            "                weight.data.main_grad = weight.get_main_grad()  # bug\n",
        ),
        _QUACK_LINEAR_MODULE,
    ),
)
