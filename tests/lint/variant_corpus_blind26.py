"""The twenty-sixth blind corpus (H-blind26), development half: main_grad bookkeeping variants
of the eight classes of issue #19, two per class, grounded in code from repositories no earlier
blind corpus used: linkedin Liger-Kernel (its ``megatron-vp-flce`` branch adds a fused linear +
vocab-parallel cross-entropy autograd Function for Megatron's LM head whose backward adds the
chunked wgrad into ``weight.main_grad`` itself and sets ``grad_added_to_main_grad``, plus the
Megatron drop-in module that wraps it), Dao-AILab quack (CuTe-DSL GEMM library whose ``Linear``,
``MLP`` and recompute-MLP autograd Functions do their own fused gradient accumulation:
``gemm_add_inplace`` adds the wgrad GEMM into the weight's existing gradient buffer and the buffer is
handed back to autograd; ``gemm``/``gemm_add_inplace`` also take ``cu_seqlens_k`` for grouped,
per-expert wgrads), and luoshuqing2001 hexa_moe (HEXA-MoE: a research MoE library whose expert-MLP
autograd Functions compute every weight gradient by hand, all-reduce it inside backward and, in its
"data-centric" mode, run the experts on weights all-gathered from every rank).

Sources (repo, commit, path, function):
- linkedin/Liger-Kernel 7528b17ba7c2c0d7fa748e551094d02fd30af328 (head of branch ``megatron-vp-flce``)
  src/liger_kernel/ops/fused_linear_vocab_parallel_cross_entropy.py
  LigerFusedLinearVPCEFunction.forward / .backward (classes 1 and 7)
- linkedin/Liger-Kernel 7528b17ba7c2c0d7fa748e551094d02fd30af328
  src/liger_kernel/megatron/fused_linear_cross_entropy.py LigerMegatronFusedLinearCrossEntropy and
  src/liger_kernel/transformers/fused_linear_vocab_parallel_cross_entropy.py
  LigerFusedLinearVocabParallelCrossEntropy.forward (class 8)
- Dao-AILab/quack c8ec3170057987da0ec99883736f381ea1937cf3 quack/linear.py LinearFunc.forward /
  .backward, linear_fwd_postprocess, linear_bwd_compute_weight_grad (classes 1, 2, 3 and 7)
- Dao-AILab/quack c8ec3170057987da0ec99883736f381ea1937cf3 quack/mlp.py MLPRecomputeFunc,
  _compute_weight_grad, MLP.__init__ / .forward, with quack/gemm_interface.py gemm /
  gemm_add_inplace (``cu_seqlens_k``) for the grouped expert wgrad (classes 5, 6 and 8)
- luoshuqing2001/hexa_moe e321faad536dcdd38a94c1912607d4bca853d155
  hexa_moe_triton/hexa_moe/impls/layers.py MLP_Implement.forward / .backward (classes 2, 3 and 4)

Conventions: twins are the real code shortened (real names and idioms kept; docstrings, Triton
kernels, label smoothing, the TP all-reduces, autocast plumbing, the tuned/untuned ``ops`` bundles
and unrelated branches dropped; Liger's per-chunk Triton grad kernel is folded into a helper
``_grad_logits_chunk``). No repository history of these files was available here, so no variant
reverts a known fix.
Adapted where the real code lacks the main_grad feature a class is about, or gets it wrong, and
said so here (a twin must be correct under CONTRACT.md):
- Liger's VP-FLCE backward adds into ``main_grad`` whenever the weight has one, sets the flag and
  returns ``None`` for the weight (TE #2097's shape: no dummy), ignores ``overwrite_main_grad`` and
  Megatron-FSDP's ``get_main_grad``. The twins add an op-level ``accumulate_into_main_grad``
  argument (the Megatron module's ``gradient_accumulation_fusion``), fetch through
  ``get_main_grad()`` for ``__fsdp_param__`` weights, downgrade a local ``accumulate`` with
  ``overwrite_main_grad`` choosing ``add_`` or ``copy_`` and, on the op-level setting, set the flag
  and return a dummy (zeroed under ``zero_out_wgrad``). The GEMM runs on an ``accum_dtype`` copy of
  the weight (the real code casts the chunks instead). The class-8 twin keeps the real op reading
  ``weight.main_grad`` directly and puts the fetch in the Megatron drop-in module.
- quack's fused accumulation targets ``weight.grad``: it GEMM-adds into ``weight_og.grad``, sets
  ``.grad = None`` and returns the buffer as the gradient. The twins move it onto ``main_grad``:
  accumulate mode ``gemm_add_inplace(..., main_grad)``, overwrite mode ``gemm(..., out=main_grad)``,
  then the flag and a dummy; ``weight_og`` is taken before the autocast cast (quack takes it after).
- The quack grouped-expert twin (classes 5 and 6) is written from quack's MLP and its varlen
  ``gemm_add_inplace`` with TE's delayed-wgrad idiom (``WeightGradStore`` put/pop, ``backward_dw``
  handing over and firing the wgrad-accumulation-and-reduce hooks); quack has no delayed wgrad.
  The wgrad GEMM picks ``gemm(out=)`` under ``overwrite_main_grad`` (the varlen-K GEMM writes every
  expert's region, zero-token experts included) and the zero-token path zeroes ``main_grad`` there.
- hexa_moe's ``MLP_Implement`` returns plain averaged gradients; its twin adds them into
  ``main_grad`` after the all-reduce, sets the flag and returns Megatron's dummy (``layers.py``
  idiom). Accumulate mode only (plain DDP; hexa_moe has no FSDP), so the class-4 twins read no
  ``overwrite_main_grad``.
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


# --- linkedin/Liger-Kernel 7528b17b src/liger_kernel/ops/fused_linear_vocab_parallel_cross_entropy.py
# LigerFusedLinearVPCEFunction (adapted: op-level gate, FSDP fetch, overwrite, dummy; see the docstring)
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

# --- Dao-AILab/quack c8ec3170 quack/linear.py LinearFunc, linear_fwd_postprocess,
# linear_bwd_compute_weight_grad (adapted: main_grad instead of .grad; see the docstring)
_QUACK_LINEAR = """
import torch
from torch import Tensor

from quack.gemm_interface import gemm, gemm_add_inplace


def linear_fwd_convert_type(*tensors):
    autocast_dtype = torch.get_autocast_dtype("cuda")
    if torch.is_autocast_enabled():
        tensors = tuple(t.to(dtype=autocast_dtype) for t in tensors)
    return tensors


def _dummy_wgrad(param):
    if getattr(param, "zero_out_wgrad", False):
        return torch.zeros_like(param)
    return torch.empty_like(param)


def linear_fwd_postprocess(ctx, x, weight, weight_og, needs_x_w_grad):
    needs_input_grad, needs_weight_grad = needs_x_w_grad
    if not needs_input_grad:
        weight = None
    if not needs_weight_grad:
        x = None
    ctx.save_for_backward(x, weight)
    ctx.weight_og = weight_og if ctx.fuse_grad_accum else None


def linear_bwd_compute_weight_grad(ctx, dout, x, weight, weight_og):
    if not ctx.needs_input_grad[1]:
        return None
    x = x.flatten(0, -2)
    main_grad = getattr(weight_og, "main_grad", None) if weight_og is not None else None
    # fuse_grad_accum is not compatible with torch.compile
    if not ctx.fuse_grad_accum or main_grad is None or torch.compiler.is_compiling():
        return gemm(dout.T, x, out_dtype=ctx.weight_dtype)
    accumulate = not getattr(weight_og, "overwrite_main_grad", False)
    if accumulate:
        gemm_add_inplace(dout.T, x, main_grad, dynamic_scheduler=True)
    else:
        gemm(dout.T, x, out=main_grad, dynamic_scheduler=True)
    weight_og.grad_added_to_main_grad = True
    dweight = _dummy_wgrad(weight_og)
    return dweight


class LinearFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, fuse_grad_accum):
        weight_og = weight
        x, weight = linear_fwd_convert_type(x, weight)
        with torch.amp.autocast("cuda", enabled=False):
            ctx.weight_dtype = weight.dtype
            ctx.fuse_grad_accum = fuse_grad_accum
            batch_shape = x.shape[:-1]
            x = x.flatten(0, -2)
            out = gemm(x, weight.T, bias=bias)
            linear_fwd_postprocess(ctx, x, weight, weight_og, needs_x_w_grad=ctx.needs_input_grad[:2])
            ctx.bias_dtype = bias.dtype if bias is not None else None
            ctx.compute_dbias = bias is not None and ctx.needs_input_grad[2]
            return out.reshape(*batch_shape, out.shape[-1])

    @staticmethod
    def backward(ctx, dout: Tensor):
        with torch.amp.autocast("cuda", enabled=False):
            x, weight = ctx.saved_tensors
            batch_shape = dout.shape[:-1]
            dout = dout.flatten(0, -2).contiguous()
            dbias = dout.sum(0, dtype=ctx.bias_dtype) if ctx.compute_dbias else None
            dx = gemm(dout, weight, dynamic_scheduler=True) if ctx.needs_input_grad[0] else None
            dx = dx.reshape(*batch_shape, dx.shape[-1]) if dx is not None else None
            dweight = linear_bwd_compute_weight_grad(ctx, dout, x, weight, ctx.weight_og)
            return dx, dweight, dbias, None
"""

# --- Dao-AILab/quack c8ec3170 quack/mlp.py MLPRecomputeFunc / MLP and quack/gemm_interface.py
# gemm_add_inplace(cu_seqlens_k=...) as a grouped expert MLP with TE's delayed-wgrad idiom
# (written from them; see the docstring)
_QUACK_EXPERTS = """
import torch
import torch.nn as nn

from quack.gemm_interface import gemm, gemm_act, gemm_add_inplace, gemm_dact
from transformer_engine.pytorch.module._common import WeightGradStore


def _expert_wgrad(dout, x, cu_seqlens, weight):
    # one varlen-K GEMM: expert e reduces over its own token rows into main_grad[e]
    if getattr(weight, "overwrite_main_grad", False):
        gemm(dout.T, x, out=weight.main_grad, cu_seqlens_k=cu_seqlens, dynamic_scheduler=True)
    else:
        gemm_add_inplace(dout.T, x, weight.main_grad, cu_seqlens_k=cu_seqlens, dynamic_scheduler=True)


class GroupedMLPFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight1, weight2, cu_seqlens, activation, wgrad_store):
        preact, postact = gemm_act(x, weight1.mT, cu_seqlens_m=cu_seqlens, activation=activation)
        out = gemm(postact, weight2.mT, cu_seqlens_m=cu_seqlens)
        ctx.save_for_backward(x, preact, cu_seqlens)
        ctx.weights = (weight1, weight2)
        ctx.activation = activation
        ctx.wgrad_store = wgrad_store
        return out

    @staticmethod
    def backward(ctx, dout):
        x, preact, cu_seqlens = ctx.saved_tensors
        weight1, weight2 = ctx.weights
        dpreact, postact = gemm_dact(dout, weight2, preact, cu_seqlens_m=cu_seqlens, activation=ctx.activation)
        dx = gemm(dpreact, weight1, cu_seqlens_m=cu_seqlens)
        wgrad_args = [
            (dout, postact, cu_seqlens, weight2),
            (dpreact, x, cu_seqlens, weight1),
        ]
        if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
            for args in wgrad_args:
                ctx.wgrad_store.put(args, _expert_wgrad)
            return dx, None, None, None, None, None
        for args in wgrad_args:
            _expert_wgrad(*args)
        grads = []
        for weight in (weight1, weight2):
            weight.grad_added_to_main_grad = True
            grads.append(torch.zeros_like(weight) if getattr(weight, "zero_out_wgrad", False) else torch.empty_like(weight))
        return dx, grads[0], grads[1], None, None, None


class GroupedMLP(nn.Module):
    def __init__(self, num_experts, in_features, hidden_features, activation="swiglu", delay_wgrad_compute=False):
        super().__init__()
        self.activation = activation
        self.weight1 = nn.Parameter(torch.empty(num_experts, 2 * hidden_features, in_features))
        self.weight2 = nn.Parameter(torch.empty(num_experts, in_features, hidden_features))
        self.wgrad_store = WeightGradStore(delay_wgrad_compute)
        self.wgrad_accumulation_and_reduce_hooks = []

    def register_wgrad_accumulation_and_reduce_hooks(self, hook):
        self.wgrad_accumulation_and_reduce_hooks.append(hook)

    def forward(self, x, cu_seqlens):
        return GroupedMLPFunc.apply(x, self.weight1, self.weight2, cu_seqlens, self.activation, self.wgrad_store)

    def _trigger_hooks(self):
        for hook in self.wgrad_accumulation_and_reduce_hooks:
            hook()

    def backward_dw(self):
        if not self.wgrad_store.delay_wgrad_compute():
            return
        self.wgrad_store.pop()
        for weight in (self.weight1, self.weight2):
            weight.grad_added_to_main_grad = True
        self._trigger_hooks()

    def skip_backward(self):
        # this rank's experts got no tokens: nothing to compute, but the buckets still wait on them
        for weight in (self.weight1, self.weight2):
            if getattr(weight, "overwrite_main_grad", False):
                weight.main_grad.zero_()
            weight.grad_added_to_main_grad = True
        self._trigger_hooks()


class SharedExpertMLP(GroupedMLP):
    def __init__(self, in_features, hidden_features, activation="swiglu", delay_wgrad_compute=False):
        super().__init__(1, in_features, hidden_features, activation, delay_wgrad_compute)
        self.gate_weight = nn.Parameter(torch.empty(1, in_features))
        self.wgrad_stream = torch.cuda.Stream()

    def forward(self, x, cu_seqlens):
        gate = torch.sigmoid(x @ self.gate_weight.t())
        return gate * GroupedMLPFunc.apply(x, self.weight1, self.weight2, cu_seqlens, self.activation, self.wgrad_store)

    def backward_dw(self):
        # the shared expert's wgrad overlaps the routed experts' dgrad on a side stream
        self.wgrad_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.wgrad_stream):
            super().backward_dw()
"""

# --- luoshuqing2001/hexa_moe e321faad hexa_moe_triton/hexa_moe/impls/layers.py MLP_Implement
# (adapted: main_grad after the all-reduce, flag and dummy; accumulate mode only; see the docstring)
_HEXA_MLP = """
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd.functional import jacobian as jacobian


def _finish_wgrad(param, grad):
    param.main_grad.add_(grad.to(param.main_grad.dtype))
    param.grad_added_to_main_grad = True
    return torch.zeros(
        param.main_grad.shape,
        dtype=param.dtype,
        device=torch.cuda.current_device(),
        requires_grad=False,
    )


class MLP_Implement(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, config: Any, tokens_input: Tensor, fc1_w, fc2_w):
        ctx.config = config
        num_tokens, num_in_dims = tokens_input.shape
        num_out_dims = fc2_w.shape[1]
        hid_feat = torch.matmul(tokens_input, fc1_w.permute(1, 0).to(tokens_input.dtype))
        ctx.save_for_backward(tokens_input, hid_feat, fc1_w, fc2_w)
        y = ctx.config.activation_fn(hid_feat)
        y = torch.matmul(y, fc2_w.to(tokens_input.dtype))
        return y.reshape(num_tokens, num_out_dims)

    @staticmethod
    def backward(ctx: Any, j_tokens_output: Tensor):
        def activate(x):
            return ctx.config.activation_fn(x).sum()

        diff_activate = lambda x: jacobian(activate, x)  # noqa: E731

        tokens_input, hid_feat, fc1_w, fc2_w = ctx.saved_tensors
        num_tokens, num_in_dims = tokens_input.shape
        num_out_dims = fc2_w.shape[1]
        num_hid_dims = fc1_w.shape[0]

        y2 = ctx.config.activation_fn(hid_feat)
        j_y2 = torch.matmul(j_tokens_output, fc2_w.permute(1, 0).to(j_tokens_output.dtype)).reshape(num_tokens, num_hid_dims)
        j_w2 = torch.matmul(y2.permute(1, 0), j_tokens_output).reshape(num_hid_dims, num_out_dims).to(fc2_w.dtype)
        w2_op = dist.all_reduce(j_w2, op=dist.ReduceOp.AVG, async_op=True)

        j_y1 = j_y2.mul(diff_activate(hid_feat))
        j_x = torch.matmul(j_y1, fc1_w.to(j_tokens_output.dtype)).reshape(num_tokens, num_in_dims)
        j_w1 = torch.matmul(j_y1.permute(1, 0), tokens_input).reshape(num_hid_dims, num_in_dims).to(fc1_w.dtype)
        w1_op = dist.all_reduce(j_w1, op=dist.ReduceOp.AVG, async_op=True)

        w2_op.wait()
        w1_op.wait()
        if ctx.config.gradient_accumulation_fusion:
            j_w1 = _finish_wgrad(fc1_w, j_w1)
            j_w2 = _finish_wgrad(fc2_w, j_w2)

        return (None, j_x, j_w1, j_w2)
"""

# --- hexa_moe e321faad MLP_Implement, the per-expert form its FusedMoE functions use: expert weights
# stacked [E, hid, in] / [E, hid, out], token rows grouped by expert (accumulate mode only)
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

# --- linkedin/Liger-Kernel 7528b17b src/liger_kernel/megatron/fused_linear_cross_entropy.py and
# src/liger_kernel/transformers/fused_linear_vocab_parallel_cross_entropy.py (the op reads
# weight.main_grad itself; the Megatron drop-in fetches it: adapted, see the docstring)
_LIGER_MEGATRON = """
import torch
import torch.nn as nn

from liger_kernel.ops.fused_linear_vocab_parallel_cross_entropy import LigerFusedLinearVPCEFunction
from liger_kernel.ops.fused_linear_vocab_parallel_cross_entropy import validate_formula_and_mode


class LigerFusedLinearVocabParallelCrossEntropy(nn.Module):
    def __init__(
        self,
        ignore_index: int = -100,
        label_smoothing: float = 0.0,
        reduction: str = "none",
        label_smoothing_formula: str = "pytorch",
        label_smoothing_mode: str = "global",
        accum_dtype=None,
        gradient_accumulation_fusion: bool = False,
    ):
        super().__init__()
        if reduction != "none":
            raise ValueError(f"Vocab-parallel CE returns per-token loss; reduction must be 'none', got {reduction!r}.")
        validate_formula_and_mode(label_smoothing_formula, label_smoothing_mode)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.label_smoothing_formula = label_smoothing_formula
        self.label_smoothing_mode = label_smoothing_mode
        self.accum_dtype = accum_dtype
        self.gradient_accumulation_fusion = gradient_accumulation_fusion

    def forward(self, hidden_states, weight, target, bias=None, tp_group=None):
        if hidden_states.dim() != 3:
            raise ValueError(f"hidden_states must be 3-D ([seq, batch, hidden]); got shape {tuple(hidden_states.shape)}.")
        return LigerFusedLinearVPCEFunction.apply(
            hidden_states,
            weight,
            target,
            bias,
            tp_group,
            self.ignore_index,
            self.label_smoothing,
            self.label_smoothing_formula,
            self.label_smoothing_mode,
            self.accum_dtype,
            self.gradient_accumulation_fusion,
        )


class LigerMegatronFusedLinearCrossEntropy(LigerFusedLinearVocabParallelCrossEntropy):
    def __init__(self, config, ignore_index: int = -100, label_smoothing: float = 0.0):
        super().__init__(
            ignore_index=ignore_index,
            label_smoothing=label_smoothing,
            label_smoothing_formula="megatron",
            label_smoothing_mode="partition",
            accum_dtype=torch.float32,
            gradient_accumulation_fusion=config.gradient_accumulation_fusion,
        )

    def forward(self, hidden_states, output_weight, target, bias=None, tp_group=None):
        if self.gradient_accumulation_fusion:
            for param in (output_weight, bias):
                if param is not None and hasattr(param, "__fsdp_param__"):
                    param.main_grad = param.get_main_grad()
        return super().forward(hidden_states, output_weight, target, bias=bias, tp_group=tp_group)
"""

# --- Dao-AILab/quack c8ec3170 quack/mlp.py MLP.__init__ / .forward with mlp_func (the op reads
# weight.main_grad itself; the module fetches it: adapted, see the docstring)
_QUACK_MLP_MODULE = """
import torch
import torch.nn as nn
from torch import Tensor

from quack.mlp import mlp_func
from quack.gemm_interface import gate_fn_map


class MLP(nn.Module):
    def __init__(
        self,
        in_features,
        hidden_features=None,
        out_features=None,
        activation="gelu_tanh_approx",
        device=None,
        dtype=None,
        fuse_grad_accum: bool = False,
        tuned: bool = True,
        recompute: bool = False,
    ):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        out_features = out_features if out_features is not None else in_features
        self.activation = activation
        self.gated = activation in gate_fn_map
        if hidden_features is None:
            hidden_features = int(8 / 3 * in_features) if self.gated else 4 * in_features
        fc1_out = 2 * hidden_features if self.gated else hidden_features
        self.fc1 = nn.Linear(in_features, fc1_out, bias=False, **factory_kwargs)
        self.fc2 = nn.Linear(hidden_features, out_features, bias=False, **factory_kwargs)
        self.fuse_grad_accum = fuse_grad_accum
        self.tuned = tuned
        self.recompute = recompute

    def _expose_main_grads(self):
        for weight in (self.fc1.weight, self.fc2.weight):
            if getattr(weight, "main_grad", None) is None and hasattr(weight, "get_main_grad"):
                weight.main_grad = weight.get_main_grad()

    def forward(self, input: Tensor) -> Tensor:
        if input.is_cuda and self.fc1.in_features % 8 == 0 and self.fc2.out_features % 8 == 0:
            if self.fuse_grad_accum:
                self._expose_main_grads()
            out = mlp_func(
                input,
                self.fc1.weight,
                self.fc2.weight,
                activation=self.activation,
                fuse_grad_accum=self.fuse_grad_accum,
                tuned=self.tuned,
                recompute=self.recompute,
            )
            return out
        y = self.fc1(input)
        y = torch.nn.functional.gelu(y, approximate="tanh")
        return self.fc2(y)
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    # The overwrite flag is read from the accum_dtype copy of the LM-head weight, which never
    # carries it: under Megatron-FSDP the wgrad is added onto the previous microbatch's buffer.
    Variant(
        1,
        "liger_vpce_overwrite_flag_read_from_accum_dtype_copy",
        _swap(
            _LIGER_VPCE,
            '            accumulate = not getattr(weight, "overwrite_main_grad", False)\n',
            '            accumulate = not getattr(weight_c, "overwrite_main_grad", False)  # bug\n',
        ),
        _LIGER_VPCE,
    ),
    # The flag goes onto the autocast-cast weight saved for dgrad instead of the Parameter whose
    # main_grad the GEMM wrote: the DDP hook sees no flag and adds the uninitialised dummy.
    Variant(
        1,
        "quack_linear_flag_set_on_autocast_cast_weight",
        _swap(
            _QUACK_LINEAR,
            "    weight_og.grad_added_to_main_grad = True\n",
            "    weight.grad_added_to_main_grad = True  # bug\n",
        ),
        _QUACK_LINEAR,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    # quack's own idiom carried over to main_grad: the fused path hands main_grad itself back as the
    # weight's gradient, so the hook adds the buffer into itself (doubling it) and .grad aliases it.
    Variant(
        2,
        "quack_linear_returns_main_grad_as_dweight",
        _swap(
            _QUACK_LINEAR,
            "    dweight = _dummy_wgrad(weight_og)\n",
            "    dweight = main_grad  # bug\n",
        ),
        _QUACK_LINEAR,
    ),
    # The backward rebinds fc1's weight to a fresh Parameter before the fused finish: main_grad
    # (and the flag) are looked up on an object DDP never registered.
    Variant(
        2,
        "hexa_mlp_fc1_rebound_to_fresh_parameter",
        _swap(
            _HEXA_MLP,
            "        tokens_input, hid_feat, fc1_w, fc2_w = ctx.saved_tensors\n",
            "        tokens_input, hid_feat, fc1_w, fc2_w = ctx.saved_tensors\n"
            "        fc1_w = torch.nn.Parameter(fc1_w.detach().contiguous())  # bug\n",
        ),
        _HEXA_MLP,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    # The non-fused fallback (no main_grad yet, or torch.compile) computes a plain dweight but
    # still claims main_grad holds it: the DDP hook skips the real .grad and the wgrad is lost.
    Variant(
        3,
        "quack_linear_fallback_path_sets_flag",
        _swap(
            _QUACK_LINEAR,
            "        return gemm(dout.T, x, out_dtype=ctx.weight_dtype)\n",
            "        if weight_og is not None:  # bug\n"
            "            weight_og.grad_added_to_main_grad = True  # bug\n"
            "        return gemm(dout.T, x, out_dtype=ctx.weight_dtype)\n",
        ),
        _QUACK_LINEAR,
    ),
    # The finish helper adds into main_grad but neither flags it nor returns a dummy: the averaged
    # gradient is handed on as .grad and the DDP hook adds it a second time.
    Variant(
        3,
        "hexa_mlp_finish_writes_main_grad_without_flag",
        _swap(
            _HEXA_MLP,
            "    param.main_grad.add_(grad.to(param.main_grad.dtype))\n"
            "    param.grad_added_to_main_grad = True\n"
            "    return torch.zeros(\n"
            "        param.main_grad.shape,\n"
            "        dtype=param.dtype,\n"
            "        device=torch.cuda.current_device(),\n"
            "        requires_grad=False,\n"
            "    )\n",
            "    param.main_grad.add_(grad.to(param.main_grad.dtype))\n    return grad  # bug\n",
        ),
        _HEXA_MLP,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    # The per-expert fc1 write copies instead of adding, in code that never asks
    # overwrite_main_grad: under gradient accumulation only the last microbatch survives.
    Variant(
        4,
        "hexa_experts_fc1_main_grad_copy_per_expert",
        _swap(
            _HEXA_EXPERTS,
            "            fc1_w.main_grad[e].add_(j_w1)\n",
            "            fc1_w.main_grad[e].copy_(j_w1)  # bug\n",
        ),
        _HEXA_EXPERTS,
    ),
    # The dense MLP's fused finish writes the all-reduced gradient with torch.mul(out=): the buffer
    # is replaced on every microbatch though nothing asked for overwrite.
    Variant(
        4,
        "hexa_mlp_finish_overwrites_via_out_kwarg",
        _swap(
            _HEXA_MLP,
            "    param.main_grad.add_(grad.to(param.main_grad.dtype))\n",
            "    torch.mul(grad.to(param.main_grad.dtype), 1.0, out=param.main_grad)  # bug\n",
        ),
        _HEXA_MLP,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    # The delayed path's backward_dw runs the wgrad GEMMs into main_grad and fires the reduce hooks
    # without flagging the weights: the DDP hook adds their (empty) .grad on top.
    Variant(
        5,
        "quack_grouped_backward_dw_fires_hooks_without_flag",
        _swap(
            _QUACK_EXPERTS,
            "        self.wgrad_store.pop()\n"
            "        for weight in (self.weight1, self.weight2):\n"
            "            weight.grad_added_to_main_grad = True\n"
            "        self._trigger_hooks()\n",
            "        self.wgrad_store.pop()\n        self._trigger_hooks()  # bug\n",
        ),
        _QUACK_EXPERTS,
    ),
    # The zero-token expert path fires the bucket hooks but only marks the weights in overwrite
    # mode: in accumulate mode the hooks find neither the flag nor a .grad.
    Variant(
        5,
        "quack_grouped_zero_token_path_hooks_without_flag",
        _swap(
            _QUACK_EXPERTS,
            '            if getattr(weight, "overwrite_main_grad", False):\n'
            "                weight.main_grad.zero_()\n"
            "            weight.grad_added_to_main_grad = True\n",
            '            if getattr(weight, "overwrite_main_grad", False):\n'
            "                weight.main_grad.zero_()\n"
            "                weight.grad_added_to_main_grad = True  # bug\n",
        ),
        _QUACK_EXPERTS,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    # The shared-expert subclass's backward_dw override only synchronises its side stream and no
    # longer calls the base: the deferred wgrad GEMMs are never popped, so main_grad never gets them.
    Variant(
        6,
        "quack_shared_expert_backward_dw_skips_base",
        _swap(
            _QUACK_EXPERTS,
            "        with torch.cuda.stream(self.wgrad_stream):\n            super().backward_dw()\n",
            "        torch.cuda.current_stream().wait_stream(self.wgrad_stream)  # bug\n",
        ),
        _QUACK_EXPERTS,
    ),
    # The shared-expert subclass hands its autograd Function a fresh store of its own on every
    # forward: the deferred GEMMs land in a store nobody pops, so backward_dw computes nothing.
    Variant(
        6,
        "quack_shared_expert_forward_uses_private_store",
        _swap(
            _QUACK_EXPERTS,
            "        return gate * GroupedMLPFunc.apply(x, self.weight1, self.weight2, cu_seqlens, self.activation, self.wgrad_store)\n",
            "        return gate * GroupedMLPFunc.apply(x, self.weight1, self.weight2, cu_seqlens, self.activation, WeightGradStore(True))  # bug\n",
        ),
        _QUACK_EXPERTS,
    ),
    # ---------------------------------------------------------------- 7: the seed shape in other syntax
    # The flag and the dummy-versus-real choice follow the downgraded local flag (an assignment and a
    # conditional expression): in overwrite mode main_grad is written and the real wgrad goes back
    # unflagged as .grad, so the hook adds it a second time.
    Variant(
        7,
        "liger_vpce_dummy_chosen_on_local_accumulate",
        _swap(
            _LIGER_VPCE,
            "            weight.grad_added_to_main_grad = True\n"
            "            grad_W_return = _dummy_wgrad(weight)\n",
            "            weight.grad_added_to_main_grad = accumulate  # bug\n"
            "            grad_W_return = _dummy_wgrad(weight) if accumulate else grad_W.to(weight.dtype)  # bug\n",
        ),
        _LIGER_VPCE,
    ),
    # An early return on the local accumulate flag skips the flag and the dummy: overwrite mode
    # writes main_grad via gemm(out=) and hands the real gradient on, which the hook adds again.
    Variant(
        7,
        "quack_linear_return_ifexp_on_local_accumulate",
        _swap(
            _QUACK_LINEAR,
            "    weight_og.grad_added_to_main_grad = True\n",
            "    if not accumulate:  # bug\n"
            "        return gemm(dout.T, x, out_dtype=ctx.weight_dtype)  # bug\n"
            "    weight_og.grad_added_to_main_grad = True\n",
        ),
        _QUACK_LINEAR,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209's shape
    # The Megatron drop-in no longer exposes the FSDP main_grad before the fused op runs: the op
    # reads weight.main_grad, which Megatron-FSDP leaves None until get_main_grad().
    Variant(
        8,
        "liger_megatron_ce_no_main_grad_fetch",
        _swap(
            _LIGER_MEGATRON,
            "        if self.gradient_accumulation_fusion:\n"
            "            for param in (output_weight, bias):\n"
            '                if param is not None and hasattr(param, "__fsdp_param__"):\n'
            "                    param.main_grad = param.get_main_grad()\n"
            "        return super().forward(hidden_states, output_weight, target, bias=bias, tp_group=tp_group)\n",
            "        return super().forward(hidden_states, output_weight, target, bias=bias, tp_group=tp_group)  # bug\n",
        ),
        _LIGER_MEGATRON,
    ),
    # The quack MLP exposes main_grad only after the fused op has run (and been recorded for
    # backward): on the first microbatch the op is built against weights whose main_grad is None.
    Variant(
        8,
        "quack_mlp_main_grad_exposed_after_op",
        _swap(
            _QUACK_MLP_MODULE,
            "            if self.fuse_grad_accum:\n"
            "                self._expose_main_grads()\n"
            "            out = mlp_func(\n"
            "                input,\n"
            "                self.fc1.weight,\n"
            "                self.fc2.weight,\n"
            "                activation=self.activation,\n"
            "                fuse_grad_accum=self.fuse_grad_accum,\n"
            "                tuned=self.tuned,\n"
            "                recompute=self.recompute,\n"
            "            )\n",
            "            out = mlp_func(  # bug\n"
            "                input,\n"
            "                self.fc1.weight,\n"
            "                self.fc2.weight,\n"
            "                activation=self.activation,\n"
            "                fuse_grad_accum=self.fuse_grad_accum,\n"
            "                tuned=self.tuned,\n"
            "                recompute=self.recompute,\n"
            "            )\n"
            "            if self.fuse_grad_accum:  # bug\n"
            "                self._expose_main_grads()  # bug\n",
        ),
        _QUACK_MLP_MODULE,
    ),
)
