"""The twenty-second blind corpus (H-blind22), held-out half: one main_grad bookkeeping variant
per class of issue #19, taken from other functions than the development half
(``variant_corpus_blind22.py``), in the same repositories: PaddlePaddle PaddleFormers and
PaddlePaddle PaddleNLP (FP8 MLP and FP8 grouped-GEMM expert node writing ``main_grad`` and firing
``_apply_backward_hook()``) and Jetteyc Megatron-LM-AutoTuner (profiling subclass of
Megatron-core's MoELayer).

Sources (repo, commit, path, function):
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8GroupGemmMlpFunctionNode.bwd_down_weight
- PaddlePaddle/PaddleNLP 0146f2c7011728a37fbfad179cca9e95c58f9567
  paddlenlp/transformers/fp8_utils.py FP8GroupGemmMlpFunctionNode.backward / .bwd_down_weight
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8LinearFunctionBase.fp8_mlp_bwd_norm_rc
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8LinearFunctionBase.kitchen_gemm
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8GroupGemmMlpFunctionNode.bwd_gate_up_weight
- Jetteyc/Megatron-LM-AutoTuner 2cf9e5983f512e9285203f1b18c6dbe8a21e7565
  AutoTuner/testbench/ops/moe_layer.py MoELayerForTest (two variants: classes 6 and 8)
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8LinearFunction.backward

Conventions as in the development half: twins are the real code shortened; Paddle's contract is
that a path writing a weight's gradient into ``main_grad`` returns no gradient for it and fires
its backward hook with ``_apply_backward_hook()``. No repository history was available here, so
no variant reverts a known fix.
Adapted where the real code lacks the main_grad feature a class is about, and said so here:
- PaddleFormers' ``bwd_gate_up_weight`` (class 5) is given Megatron DDP's hook contract: a
  parameter whose main_grad its producer wrote must carry ``grad_added_to_main_grad=True`` when its
  hook fires (``compute_expert_w_grad`` fires it), so the closure sets the flag before the call.
- PaddleFormers' ``FP8LinearFunction.backward`` (class 7) is given Megatron-FSDP's
  ``overwrite_main_grad``: the wgrad GEMM into main_grad (Blackwell path of ``kitchen_gemm``,
  ``c=`` the accumulator) accumulates unless the parameter asks for overwrite; the hook that
  reports the weight ready fires on the op-level main_grad path either way.
- AutoTuner's MoELayerForTest defines no ``backward_dw`` and no main_grad setup; the twin gives it
  the profiled ``backward_dw`` of its Megatron-core base (experts, then the shared experts when not
  overlapped) and the Megatron-FSDP pre-forward hook of Megatron-LM #5209 (``get_main_grad()`` for
  every expert parameter whose ``main_grad`` is still None under gradient accumulation fusion).
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


# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8GroupGemmMlpFunctionNode.bwd_down_weight
_PF_NODE_DOWN_WEIGHT = """
from functools import partial

import paddle
from paddle.distributed.fleet.meta_parallel.zero_bubble_utils import WeightGradStore


class FP8GroupGemmMlpFunctionNode:
    def fused_transpose_split_quant(self, x, scale, tokens_per_expert, pow_2_scales):
        out, scale = paddle.incubate.nn.functional.fused_transpose_split_quant(
            x, scale, tokens_per_expert, pow_2_scales
        )
        return out, scale

    def bwd_down_weight(self, do3, o2, expert_w2, tokens_per_expert):
        if isinstance(o2, tuple):
            o2_t_fp8, o2_t_scale = o2
        else:
            o2_t_fp8, o2_t_scale = self.fused_transpose_split_quant(o2, None, tokens_per_expert, True)

        if isinstance(do3, tuple):
            do3_t_fp8, do3_t_scale = do3
        else:
            do3_t_fp8, do3_t_scale = self.fused_transpose_split_quant(do3, None, tokens_per_expert, True)

        def cal_weight_fn(o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, expert_w2):
            with paddle.no_grad():
                for i in range(len(expert_w2)):
                    FP8LinearFunctionBase.compute_expert_w_grad(
                        o2_t_fp8[i],
                        o2_t_scale[i],
                        do3_t_fp8[i],
                        do3_t_scale[i],
                        True,
                        True,
                        expert_w2[i],
                        paddle.float32,
                    )

        if WeightGradStore.enabled:
            WeightGradStore.put(partial(cal_weight_fn, o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, expert_w2))
        else:
            cal_weight_fn(o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, expert_w2)
"""

# --- PaddlePaddle/PaddleNLP 0146f2c7 paddlenlp/transformers/fp8_utils.py
# FP8GroupGemmMlpFunctionNode.backward / .bwd_down_weight
_PN_NODE_BACKWARD = """
import paddle


class FP8GroupGemmMlpFunctionNode:
    def bwd_down_weight(self, do3, o2, expert_w2):
        o2_t_fp8, o2_t_scale = self.fused_transpose_split_quant(o2, self.tokens_per_expert, True)
        do3_t_fp8, do3_t_scale = self.fused_transpose_split_quant(do3, self.tokens_per_expert, True)

        for i in range(len(expert_w2)):
            if hasattr(expert_w2[i], "main_grad"):
                if expert_w2[i].main_grad is None:
                    expert_w2[i].main_grad = paddle.zeros(shape=expert_w2[i].shape, dtype=paddle.float32)
                kitchen_fp8_gemm(
                    o2_t_fp8[i], o2_t_scale[i], do3_t_fp8[i], do3_t_scale[i], True, True, expert_w2[i].main_grad, paddle.float32
                )
            else:
                if expert_w2[i].grad is None:
                    expert_w2[i].grad = paddle.zeros(shape=expert_w2[i].shape, dtype=paddle.float32)
                kitchen_fp8_gemm(
                    o2_t_fp8[i], o2_t_scale[i], do3_t_fp8[i], do3_t_scale[i], True, True, expert_w2[i].grad, paddle.float32
                )
            if hasattr(expert_w2[i], "_apply_backward_hook"):
                expert_w2[i]._apply_backward_hook()

    @paddle.no_grad()
    def backward(self, out_grad):
        # recompute expert_w2 and expert_w1
        expert_w1 = [x.w1 for x in self.experts if x is not None]
        expert_w2 = [x.w2 for x in self.experts if x is not None]

        if self.recompute_fwd_gate_up:
            o1 = self.fwd_gate_up(None, expert_w1, len(expert_w1), self.tokens_per_expert)
        else:
            o1 = self.o1

        do1, o2_s, probs_grad = self.bwd_dowm_input(expert_w2, out_grad, o1, inplace_swiglu_prob=True)
        del o1
        self.o1 = None

        self.bwd_gate_up_weight(do1, None, expert_w1, clear_input=True)
        self.input_fp8 = None
        self.input_scale = None
        self.input = None

        self.bwd_down_weight(out_grad, o2_s, expert_w2)

        dx = self.bwd_gate_up_input(do1, expert_w1, dx=out_grad)
        del do1

        self.reset_statue()
        return dx, probs_grad
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8LinearFunctionBase.fp8_mlp_bwd_norm_rc
_PF_NORM_RC = """
import paddle


class FP8LinearFunctionBase:
    @staticmethod
    def fp8_mlp_bwd_norm_rc(do3, x, norm_w, norm_eps, w1, w2):
        # recompute norm_output
        norm_output, invar = paddle.incubate.nn.functional.fused_rms_norm_ext(x, norm_w, norm_eps)

        # compute fp8_mlp_fwd
        d_norm_output = FP8LinearFunctionBase.fp8_mlp_bwd(do3, norm_output, w1, w2, True)

        # ===== compute norm grad =====
        dx, d_rms_norm_weight = paddle._C_ops.fused_rms_norm_ext_grad(x, norm_w, invar, d_norm_output, norm_eps)
        if hasattr(norm_w, "main_grad"):
            if norm_w.main_grad is None:
                norm_w.main_grad = paddle.zeros(shape=norm_w.shape, dtype=paddle.float32)
            norm_w.main_grad += d_rms_norm_weight
        else:
            if norm_w.grad is None:
                norm_w.grad = paddle.zeros(shape=norm_w.shape, dtype=paddle.float32)
            norm_w.grad += d_rms_norm_weight

        if hasattr(norm_w, "_apply_backward_hook"):
            norm_w._apply_backward_hook()

        return dx, norm_output, invar
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8LinearFunctionBase.kitchen_gemm
_PF_KITCHEN_GEMM = """
import numpy
import paddle
from paddlefleet_ops import deep_gemm


class FP8LinearFunctionBase:
    @staticmethod
    def kitchen_gemm(
        x_fp8, x_scale, w_fp8, w_scale, is_a_1d_scaled, is_b_1d_scaled, out=None, rtn_dtype=paddle.bfloat16
    ):
        if paddle.cuda.is_available() and paddle.cuda.get_device_capability()[0] >= 10:
            if out is not None:
                c = out
            else:
                c = paddle.empty([x_fp8.shape[0], w_fp8.shape[0]], rtn_dtype)
            if numpy.prod(x_fp8.shape) != 0 and numpy.prod(w_fp8.shape) != 0:
                recipe = (1, 1, 128) if (is_a_1d_scaled and is_b_1d_scaled) else None
                deep_gemm.fp8_gemm_nt(
                    (x_fp8, x_scale.t()),
                    (w_fp8, w_scale.t()),
                    c,
                    c=out,
                    recipe=recipe,
                    compiled_dims="mn",
                )
            return c
        if out is not None:
            accumulate = True
            out_dtype = out.dtype
        else:
            accumulate = False
            out_dtype = rtn_dtype
        if numpy.prod(x_fp8.shape) != 0 and numpy.prod(w_fp8.shape) != 0:
            y = paddle.incubate.nn.functional.fp8_gemm_blockwise(
                a=x_fp8,
                a_decode_scale=x_scale,
                b=w_fp8,
                b_decode_scale=w_scale,
                out_dtype=out_dtype,
                out=out,
                accumulate=accumulate,
                use_split_accumulator=True,
                is_a_1d_scaled=is_a_1d_scaled,
                is_b_1d_scaled=is_b_1d_scaled,
            )
        else:
            y = paddle.zeros([x_fp8.shape[0], w_fp8.shape[0]], out_dtype)
            if out is not None:
                out = out + y
                return out
        return y
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8GroupGemmMlpFunctionNode.bwd_gate_up_weight (class 5: flag before the hook, see the docstring)
_PF_NODE_GATE_UP_FLAGGED = """
from functools import partial

import paddle
from paddle.distributed.fleet.meta_parallel.zero_bubble_utils import WeightGradStore


class FP8GroupGemmMlpFunctionNode:
    def bwd_gate_up_weight(
        self,
        do1,
        input_x,
        expert_w1,
        tokens_per_expert,
        input_fp8_slice=None,
        input_scale_slice=None,
        clear_input=False,
    ):
        if input_x is None:
            inp = (input_fp8_slice, input_scale_slice) if self.bwd_subbatch else (self.input_fp8, self.input_scale)
            input_x_t_fp8, input_x_t_scale = self.fused_transpose_split_quant(inp[0], inp[1], tokens_per_expert, True)
        else:
            input_x_t_fp8, input_x_t_scale = self.fused_transpose_split_quant(input_x, None, tokens_per_expert, True)

        if clear_input:
            self.input_fp8 = None
            self.input_scale = None
            self.input = None

        do1_t_fp8, do1_t_scale = self.fused_transpose_split_quant(do1, None, tokens_per_expert, True)

        def cal_weight_fn(input_x_t_fp8, input_x_t_scale, do1_t_fp8, do1_t_scale, expert_w1):
            with paddle.no_grad():
                for i in range(len(expert_w1)):
                    if hasattr(expert_w1[i], "main_grad"):
                        expert_w1[i].grad_added_to_main_grad = True
                    FP8LinearFunctionBase.compute_expert_w_grad(
                        input_x_t_fp8[i],
                        input_x_t_scale[i],
                        do1_t_fp8[i],
                        do1_t_scale[i],
                        True,
                        True,
                        expert_w1[i],
                        paddle.float32,
                    )

        if WeightGradStore.enabled:
            WeightGradStore.put(
                partial(cal_weight_fn, input_x_t_fp8, input_x_t_scale, do1_t_fp8, do1_t_scale, expert_w1)
            )
        else:
            cal_weight_fn(input_x_t_fp8, input_x_t_scale, do1_t_fp8, do1_t_scale, expert_w1)
"""

# --- Jetteyc/Megatron-LM-AutoTuner 2cf9e598 AutoTuner/testbench/ops/moe_layer.py MoELayerForTest
# (adapted: profiled backward_dw and the #5209 main_grad pre-forward hook, see the docstring)
_AT_MOE_LAYER = """
from typing import Optional

import torch
from megatron.core import utils
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec
from megatron.core.process_groups_config import ProcessGroupCollection
from megatron.core.transformer.moe.moe_layer import MoELayer
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.utils import nvtx_decorator, nvtx_range_pop, nvtx_range_push

from .common import CommonOpsForTest


def _expose_fsdp_main_grads(module, args):
    for param in module.parameters():
        if getattr(param, "main_grad", None) is None and hasattr(param, "get_main_grad"):
            param.main_grad = param.get_main_grad()


class MoELayerForTest(MoELayer, CommonOpsForTest):
    def __init__(
        self,
        config: TransformerConfig,
        pg_collection: Optional[ProcessGroupCollection] = None,
        layer_number: int = 1,
        hook_activation: bool = False,
    ):
        transformer_layer_spec = get_gpt_layer_with_transformer_engine_spec(
            num_experts=config.num_moe_experts, moe_grouped_gemm=config.moe_grouped_gemm
        )
        assert config.num_moe_experts is not None
        assert config.num_moe_experts % utils.get_pg_size(pg_collection.ep) == 0
        MoELayer.__init__(
            self,
            config,
            submodules=transformer_layer_spec.submodules.mlp.submodules,
            layer_number=layer_number,
            pg_collection=pg_collection,
        )
        CommonOpsForTest.__init__(self, hook_activation=hook_activation, module_name="MoELayer")
        if config.gradient_accumulation_fusion:
            self.experts.register_forward_pre_hook(_expose_fsdp_main_grads)

    @nvtx_decorator(message="MoELayer forward")
    def _forward(self, hidden_states: torch.Tensor):
        def custom_forward(hidden_states):
            hidden_states, probs, residual = self.router_and_preprocess(hidden_states)
            dispatched_input, probs = self.dispatch(hidden_states, probs)
            output, shared_expert_output, mlp_bias = self.experts_compute(dispatched_input, probs, residual)
            output = self.combine(output, shared_expert_output)
            return output, mlp_bias

        return custom_forward(hidden_states)

    @nvtx_decorator(message="MoELayer backward_dw")
    def backward_dw(self):
        nvtx_range_push(suffix="experts_dw")
        self.experts.backward_dw()
        nvtx_range_pop(suffix="experts_dw")
        if self.use_shared_expert and not self.shared_expert_overlap:
            nvtx_range_push(suffix="shared_experts_dw")
            self.shared_experts.backward_dw()
            nvtx_range_pop(suffix="shared_experts_dw")

    def forward(self, hidden_states: torch.Tensor):
        self.activation_hook.clear()
        with torch.autograd.graph.saved_tensors_hooks(
            self.activation_hook.save_hook, self.activation_hook.load_hook
        ):
            ret = self._forward(hidden_states)
        return ret
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8LinearFunction.backward (adapted: overwrite_main_grad, see the docstring)
_PF_FP8_LINEAR_BACKWARD = """
import paddle
from paddlefleet_ops import deep_gemm


class FP8LinearFunction(paddle.autograd.PyLayer):
    @staticmethod
    def backward(ctx, dout):
        x, weight = ctx.saved_tensor()
        dout_2d = dout.reshape([-1, dout.shape[-1]])
        x_t_fp8, x_t_scale = x

        # dx = deep_gemm(dout_fp8, w_fp8)
        dx, dout_t_fp8, dout_t_scale = FP8LinearFunctionBase.compute_fp8_linear(
            dout_2d, weight, weight_transpose=False, return_mode="with_input_transpose_quant"
        )
        dx_orig_shape = dout.shape[:-1]
        dx_orig_shape.append(ctx.x_t_shape[0])
        dx = dx.reshape(dx_orig_shape)

        # dw1 = deep_gemm(x_t_fp8, dout_t_fp8)
        if hasattr(weight, "main_grad"):
            if weight.main_grad is None:
                weight.main_grad = paddle.zeros(shape=weight.shape, dtype=paddle.float32)
            accumulate = not getattr(weight, "overwrite_main_grad", False)
            deep_gemm.fp8_gemm_nt(
                (x_t_fp8, x_t_scale.t()),
                (dout_t_fp8, dout_t_scale.t()),
                weight.main_grad,
                c=weight.main_grad if accumulate else None,
                recipe=(1, 1, 128),
                compiled_dims="mn",
            )
            if hasattr(weight, "_apply_backward_hook"):
                weight._apply_backward_hook()
        else:
            FP8LinearFunctionBase.compute_expert_w_grad(
                x_t_fp8, x_t_scale, dout_t_fp8, dout_t_scale, True, True, weight, paddle.float32
            )
        return dx
"""


VARIANTS = (
    Variant(
        1,
        "paddleformers_down_weight_wgrad_into_cached_fp8_weight",
        _swap(
            _PF_NODE_DOWN_WEIGHT,
            "                        expert_w2[i],\n",
            '                        getattr(expert_w2[i], "fp8_weight", expert_w2[i]),  # bug\n',
        ),
        _PF_NODE_DOWN_WEIGHT,
    ),
    Variant(
        2,
        "paddlenlp_node_backward_on_copied_w2",
        _swap(
            _PN_NODE_BACKWARD,
            "        expert_w2 = [x.w2 for x in self.experts if x is not None]\n",
            "        expert_w2 = [paddle.assign(x.w2) for x in self.experts if x is not None]  # bug\n",
        ),
        _PN_NODE_BACKWARD,
    ),
    Variant(
        3,
        "paddleformers_norm_rc_fires_hook_without_main_grad_write",
        _swap(
            _PF_NORM_RC,
            "            norm_w.main_grad += d_rms_norm_weight\n",
            "            d_rms_norm_weight = d_rms_norm_weight.cast(paddle.float32)  # bug\n",
        ),
        _PF_NORM_RC,
    ),
    Variant(
        4,
        "paddleformers_kitchen_gemm_blackwell_drops_accumulator",
        _swap(
            _PF_KITCHEN_GEMM,
            "                    c=out,\n",
            "                    c=None,  # bug\n",
        ),
        _PF_KITCHEN_GEMM,
    ),
    Variant(
        5,
        "paddleformers_gate_up_flag_set_after_hook_fired",
        _swap(
            _PF_NODE_GATE_UP_FLAGGED,
            "                for i in range(len(expert_w1)):\n"
            '                    if hasattr(expert_w1[i], "main_grad"):\n'
            "                        expert_w1[i].grad_added_to_main_grad = True\n"
            "                    FP8LinearFunctionBase.compute_expert_w_grad(\n"
            "                        input_x_t_fp8[i],\n"
            "                        input_x_t_scale[i],\n"
            "                        do1_t_fp8[i],\n"
            "                        do1_t_scale[i],\n"
            "                        True,\n"
            "                        True,\n"
            "                        expert_w1[i],\n"
            "                        paddle.float32,\n"
            "                    )\n",
            "                for i in range(len(expert_w1)):\n"
            "                    FP8LinearFunctionBase.compute_expert_w_grad(\n"
            "                        input_x_t_fp8[i],\n"
            "                        input_x_t_scale[i],\n"
            "                        do1_t_fp8[i],\n"
            "                        do1_t_scale[i],\n"
            "                        True,\n"
            "                        True,\n"
            "                        expert_w1[i],\n"
            "                        paddle.float32,\n"
            "                    )\n"
            '                    if hasattr(expert_w1[i], "main_grad"):  # bug\n'
            "                        expert_w1[i].grad_added_to_main_grad = True  # bug\n",
        ),
        _PF_NODE_GATE_UP_FLAGGED,
    ),
    Variant(
        6,
        "autotuner_moe_layer_backward_dw_flushes_only_shared_experts",
        _swap(
            _AT_MOE_LAYER,
            '        nvtx_range_push(suffix="experts_dw")\n'
            "        self.experts.backward_dw()\n"
            '        nvtx_range_pop(suffix="experts_dw")\n',
            '        nvtx_range_push(suffix="experts_dw")\n'
            '        nvtx_range_pop(suffix="experts_dw")  # bug\n',
        ),
        _AT_MOE_LAYER,
    ),
    Variant(
        7,
        "paddleformers_fp8_linear_hook_fired_only_when_accumulating",
        _swap(
            _PF_FP8_LINEAR_BACKWARD,
            '            if hasattr(weight, "_apply_backward_hook"):\n'
            "                weight._apply_backward_hook()\n",
            '            weight._apply_backward_hook() if accumulate and hasattr(weight, "_apply_backward_hook") else None  # bug\n',
        ),
        _PF_FP8_LINEAR_BACKWARD,
    ),
    Variant(
        8,
        "autotuner_moe_layer_main_grad_hook_misses_nested_expert_weights",
        _swap(
            _AT_MOE_LAYER,
            "    for param in module.parameters():\n",
            "    for param in module.parameters(recurse=False):  # bug\n",
        ),
        _AT_MOE_LAYER,
    ),
)
