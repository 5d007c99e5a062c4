"""The twenty-second blind corpus (H-blind22), development half: main_grad bookkeeping variants
of the eight classes of issue #19, two per class, grounded in code from repositories no earlier
blind corpus used: PaddlePaddle PaddleNLP and PaddlePaddle PaddleFormers (the FP8 DeepSeek-V3
MLP and the FP8 grouped-GEMM expert node, whose weight gradients go straight into
``param.main_grad`` and whose parameters' backward hooks are fired by the node itself with
``_apply_backward_hook()``), and Jetteyc Megatron-LM-AutoTuner (a profiler that subclasses
Megatron-core's TEGroupedMLP and SharedExpertMLP and runs them standalone).

Sources (repo, commit, path, function):
- PaddlePaddle/PaddleNLP 0146f2c7011728a37fbfad179cca9e95c58f9567
  paddlenlp/transformers/fp8_utils.py kitchen_fp8_gemm, fp8_mlp_bwd
  (three variants: classes 1, 4 and 4)
- PaddlePaddle/PaddleNLP 0146f2c7011728a37fbfad179cca9e95c58f9567
  paddlenlp/transformers/fp8_utils.py FP8GroupGemmMlpFunctionNode.bwd_gate_up_weight / .forward
  (two variants: classes 1 and 5)
- PaddlePaddle/PaddleNLP 0146f2c7011728a37fbfad179cca9e95c58f9567
  paddlenlp/transformers/fp8_utils.py FP8LinearFunction.forward / .backward (two variants: class 7)
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8GroupGemmMlpFunctionNode.backward
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8LinearFunctionBase.common_fp8_mlp_bwd,
  FP8MlpFunction.backward (two variants: classes 2 and 3)
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FusedNormFP8MLPFunction.backward
- PaddlePaddle/PaddleFormers 1f12fca8f33833aa8439fd4d492cb5d8f1a3a852
  paddleformers/transformers/fp8_utils.py FP8LinearFunctionBase.compute_expert_w_grad
- Jetteyc/Megatron-LM-AutoTuner ecd530b21057f1e159babf7bb675cf7eb5331971
  AutoTuner/testbench/ops/te_grouped_mlp.py TEGroupedMLPForTest
- Jetteyc/Megatron-LM-AutoTuner cccdd2152eb8c38858cbf999b2a7c3b334a3e38f
  AutoTuner/testbench/ops/shared_expert_mlp.py SharedExpertMLPForTest
- Jetteyc/Megatron-LM-AutoTuner ecd530b21057f1e159babf7bb675cf7eb5331971
  AutoTuner/testbench/ops_test/te_grouped_mlp_test.py TestTEGroupedMLP.__init__
- Jetteyc/Megatron-LM-AutoTuner 098ba18ed668ba7b7e548601649fc60b44ec9b82
  AutoTuner/testbench/ops_test/common.py TestCommon.run_micro_batch

Conventions: twins are the real code shortened (real names and idioms; docstrings, FP8
padding/transpose details, nvtx ranges, timing/memory bookkeeping and unrelated branches dropped).
The Paddle sources follow Paddle's contract: a path that writes a weight's gradient into
``main_grad`` returns no gradient for it and fires the parameter's backward hook itself with
``_apply_backward_hook()`` (the data-parallel reducer's "gradient ready"); a path that does not
write main_grad returns the gradient. No repository history of these files was available here,
so no variant reverts a known fix.
Adapted where the real code lacks the main_grad feature a class is about, and said so here:
- Paddle parameters carry no ``grad_added_to_main_grad``. The class-5 twins (PaddleNLP's
  ``bwd_gate_up_weight``, PaddleFormers' ``compute_expert_w_grad``) give the fired hook Megatron
  DDP's contract: a parameter whose main_grad its producer wrote must carry
  ``grad_added_to_main_grad=True`` when its hook fires (the hook otherwise adds the parameter's
  ``.grad`` into main_grad again, and under ``overlap_grad_reduce`` asserts that a ``.grad``
  exists), so the producer sets the flag before it fires the hook.
- PaddleNLP's ``FP8LinearFunction`` (class 7) returns a real fp32 wgrad; the twin gives it
  Megatron's fused path (``main_grad_fusion``: wgrad GEMM into ``weight.main_grad``, accumulate
  unless Megatron-FSDP's ``overwrite_main_grad``, ``grad_added_to_main_grad`` and a dummy grad
  zero-filled under ``zero_out_wgrad``), the bookkeeping on the op-level flag.
- PaddleNLP's ``kitchen_fp8_gemm`` is kept as is (``out`` given means accumulate into it).
- AutoTuner's TEGroupedMLPForTest and SharedExpertMLPForTest override ``_forward`` (adding
  nvtx ranges) and define no ``backward_dw``; the twins give each the profiled ``backward_dw``
  their Megatron-core bases have (flush ``linear_fc2`` then ``linear_fc1``; SharedExpertMLP on its
  overlap stream when ``moe_shared_expert_overlap``).
- AutoTuner's harness runs modules without DDP; the class-8 twins give it the main_grad setup a
  standalone run with ``gradient_accumulation_fusion`` needs (fp32 buffers, or Megatron-FSDP's
  ``get_main_grad()`` where a parameter has it), done on the module that is actually run.
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


# --- PaddlePaddle/PaddleNLP 0146f2c7 paddlenlp/transformers/fp8_utils.py kitchen_fp8_gemm, fp8_mlp_bwd
_PN_FP8_MLP_BWD = """
import numpy
import paddle
from paddle.incubate.fp8 import deep_gemm


def kitchen_fp8_gemm(
    x_fp8, x_scale, w_fp8, w_scale, is_a_1d_scaled, is_b_1d_scaled, out=None, rtn_dtype=paddle.bfloat16
):
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


def fp8_mlp_bwd(do3, x_fp8, x_scale, w1, w2):
    do3 = do3.reshape([-1, do3.shape[-1]])
    _, _, w1_fp8, w1_sacle = paddle.incubate.nn.functional.fp8_quant_blockwise(
        w1, output_scale_transpose=False, quant_method="128x128", input_transpose=True
    )
    o1 = paddle.empty([x_fp8.shape[0], w1_fp8.shape[0]], dtype=do3.dtype)
    deep_gemm.gemm_fp8_fp8_bf16_nt((x_fp8, x_scale.T), (w1_fp8, w1_sacle), o1, num_sms=112)
    x_t_fp8, x_t_scale = quant_transpose(x_fp8, x_scale)
    o2 = swiglu(o1)
    do3_fp8, do3_scale, do3_t_fp8, do3_t_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
        do3, output_scale_transpose=True, quant_method="1x128", input_transpose=True
    )
    w2_fp8, w2_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
        w2, output_scale_transpose=False, quant_method="128x128", input_transpose=False
    )
    do2 = paddle.empty([do3_fp8.shape[0], w2_fp8.shape[0]], do3.dtype)
    deep_gemm.gemm_fp8_fp8_bf16_nt((do3_fp8, do3_scale.T), (w2_fp8, w2_scale), do2, num_sms=112)

    # ===== dw2 = deep_gemm(o2_t_fp8, do3_t_fp8)
    o2_t_fp8, o2_t_scale = quant_transpose(o2)
    if hasattr(w2, "main_grad"):
        if w2.main_grad is None:
            w2.main_grad = paddle.zeros(shape=w2.shape, dtype=paddle.float32)
        kitchen_fp8_gemm(o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, w2.main_grad, paddle.float32)
    else:
        if w2.grad is None:
            w2.grad = paddle.zeros(shape=w2.shape, dtype=paddle.float32)
        kitchen_fp8_gemm(o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, w2.grad, paddle.float32)
    if hasattr(w2, "_apply_backward_hook"):
        w2._apply_backward_hook()

    do1, _ = paddle._C_ops.swiglu_grad(o1, None, do2)
    do1_fp8, do1_scale, do1_t_fp8, do1_t_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
        do1, output_scale_transpose=True, quant_method="1x128", input_transpose=True
    )
    w1_fp8, w1_sacle = paddle.incubate.nn.functional.fp8_quant_blockwise(
        w1, output_scale_transpose=False, quant_method="128x128", input_transpose=False
    )
    dx = paddle.empty([do1_fp8.shape[0], w1_fp8.shape[0]], do1.dtype)
    deep_gemm.gemm_fp8_fp8_bf16_nt((do1_fp8, do1_scale.T), (w1_fp8, w1_sacle), dx, num_sms=112)

    # ===== dw1 = deep_gemm(x_t_fp8, do1_t_fp8)
    if hasattr(w1, "main_grad"):
        if w1.main_grad is None:
            w1.main_grad = paddle.zeros(shape=w1.shape, dtype=paddle.float32)
        kitchen_fp8_gemm(x_t_fp8, x_t_scale, do1_t_fp8, do1_t_scale, True, True, w1.main_grad, paddle.float32)
    else:
        if w1.grad is None:
            w1.grad = paddle.zeros(shape=w1.shape, dtype=paddle.float32)
        kitchen_fp8_gemm(x_t_fp8, x_t_scale, do1_t_fp8, do1_t_scale, True, True, w1.grad, paddle.float32)
    if hasattr(w1, "_apply_backward_hook"):
        w1._apply_backward_hook()

    return dx
"""

# --- PaddlePaddle/PaddleNLP 0146f2c7 paddlenlp/transformers/fp8_utils.py
# FP8GroupGemmMlpFunctionNode.forward / .bwd_gate_up_weight
_PN_NODE_GATE_UP = """
import paddle


class FP8GroupGemmMlpFunctionNode:
    def __init__(self, custom_map, recompute_fwd_gate_up=False, dequant_input=False, is_split_group_gemm=False):
        self.experts = custom_map.experts
        self.recompute_fwd_gate_up = recompute_fwd_gate_up
        self.dequant_input = dequant_input
        self.is_split_group_gemm = is_split_group_gemm
        self.tokens_per_expert = None
        self.input = None
        self.input_fp8 = None
        self.input_scale = None

    def bwd_gate_up_weight(self, do1, input_x, expert_w1, clear_input=False):
        if input_x is None:
            if self.dequant_input:
                input_x = paddle.incubate.nn.functional.fused_act_dequant(self.input_fp8, self.input_scale)
            else:
                input_x = self.input
        if clear_input:
            self.input = None
            self.input_fp8 = None
            self.input_scale = None

        input_x_t_fp8, input_x_t_scale = self.fused_transpose_split_quant(input_x, self.tokens_per_expert, True)
        del input_x
        do1_t_fp8, do1_t_scale = self.fused_transpose_split_quant(do1, self.tokens_per_expert, True)

        for i in range(len(expert_w1)):
            if hasattr(expert_w1[i], "main_grad"):
                if expert_w1[i].main_grad is None:
                    expert_w1[i].main_grad = paddle.zeros(shape=expert_w1[i].shape, dtype=paddle.float32)
                kitchen_fp8_gemm(
                    input_x_t_fp8[i],
                    input_x_t_scale[i],
                    do1_t_fp8[i],
                    do1_t_scale[i],
                    True,
                    True,
                    expert_w1[i].main_grad,
                    paddle.float32,
                )
            else:
                if expert_w1[i].grad is None:
                    expert_w1[i].grad = paddle.zeros(shape=expert_w1[i].shape, dtype=paddle.float32)
                kitchen_fp8_gemm(
                    input_x_t_fp8[i],
                    input_x_t_scale[i],
                    do1_t_fp8[i],
                    do1_t_scale[i],
                    True,
                    True,
                    expert_w1[i].grad,
                    paddle.float32,
                )
            if hasattr(expert_w1[i], "_apply_backward_hook"):
                expert_w1[i]._apply_backward_hook()

    @paddle.no_grad()
    def backward_gate_up(self, do1):
        expert_w1 = [x.w1 for x in self.experts if x is not None]
        self.bwd_gate_up_weight(do1, None, expert_w1, clear_input=True)
"""

# Class 5 twin: the same node, its hook given Megatron DDP's contract (see the docstring).
_PN_NODE_GATE_UP_FLAGGED = """
import paddle


class FP8GroupGemmMlpFunctionNode:
    def __init__(self, custom_map, recompute_fwd_gate_up=False, dequant_input=False, is_split_group_gemm=False):
        self.experts = custom_map.experts
        self.tokens_per_expert = None
        self.input = None

    def bwd_gate_up_weight(self, do1, input_x, expert_w1, clear_input=False):
        if input_x is None:
            input_x = self.input
        if clear_input:
            self.input = None

        input_x_t_fp8, input_x_t_scale = self.fused_transpose_split_quant(input_x, self.tokens_per_expert, True)
        do1_t_fp8, do1_t_scale = self.fused_transpose_split_quant(do1, self.tokens_per_expert, True)

        for i in range(len(expert_w1)):
            w = expert_w1[i]
            if hasattr(w, "main_grad"):
                if w.main_grad is None:
                    w.main_grad = paddle.zeros(shape=w.shape, dtype=paddle.float32)
                kitchen_fp8_gemm(
                    input_x_t_fp8[i], input_x_t_scale[i], do1_t_fp8[i], do1_t_scale[i], True, True, w.main_grad, paddle.float32
                )
                if hasattr(w, "grad_added_to_main_grad"):
                    w.grad_added_to_main_grad = True
            else:
                if w.grad is None:
                    w.grad = paddle.zeros(shape=w.shape, dtype=paddle.float32)
                kitchen_fp8_gemm(
                    input_x_t_fp8[i], input_x_t_scale[i], do1_t_fp8[i], do1_t_scale[i], True, True, w.grad, paddle.float32
                )
            if hasattr(w, "_apply_backward_hook"):
                w._apply_backward_hook()
"""

# --- PaddlePaddle/PaddleNLP 0146f2c7 paddlenlp/transformers/fp8_utils.py FP8LinearFunction
# (adapted: Megatron's fused main_grad path, see the docstring)
_PN_FP8_LINEAR_FUSED = """
import paddle
from paddle.incubate.fp8 import deep_gemm


class FP8LinearFunction(paddle.autograd.PyLayer):
    @staticmethod
    def forward(ctx, x, weight, main_grad_fusion=False):
        x_orig_shape = x.shape
        x_t = x.T
        x = x.reshape([-1, x_orig_shape[-1]]).contiguous()
        x_fp8, x_scale, x_t_fp8, x_t_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
            x, output_scale_transpose=True, quant_method="1x128", input_transpose=True
        )
        _, _, w_fp8, w_sacle = paddle.incubate.nn.functional.fp8_quant_blockwise(
            weight, output_scale_transpose=False, quant_method="128x128", input_transpose=True
        )
        out = paddle.empty([x_fp8.shape[0], w_fp8.shape[0]], dtype=x.dtype)
        deep_gemm.gemm_fp8_fp8_bf16_nt((x_fp8, x_scale.T), (w_fp8, w_sacle), out, num_sms=112)
        out = out.reshape([x_orig_shape[0], -1, weight.shape[-1]])

        ctx.save_for_backward(x_t_fp8, x_t_scale, weight)
        ctx.x_t_shape = x_t.shape
        ctx.main_grad_fusion = main_grad_fusion and hasattr(weight, "main_grad")
        return out

    @staticmethod
    def backward(ctx, dout):
        x_t_fp8, x_t_scale, weight = ctx.saved_tensor()
        dout_2d = dout.reshape([-1, dout.shape[-1]])
        dout_fp8, dout_scale, dout_t_fp8, dout_t_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
            dout_2d, output_scale_transpose=True, quant_method="1x128", input_transpose=True
        )
        w_fp8, w_sacle = paddle.incubate.nn.functional.fp8_quant_blockwise(
            weight, output_scale_transpose=False, quant_method="128x128", input_transpose=False
        )
        dx = paddle.empty([ctx.x_t_shape[1], ctx.x_t_shape[0]], dout.dtype)
        deep_gemm.gemm_fp8_fp8_bf16_nt((dout_fp8, dout_scale.T), (w_fp8, w_sacle), dx)
        dx = dx.reshape(dout.shape[:-1] + [ctx.x_t_shape[0]])

        # ===== dw1 = deep_gemm(x_t_fp8, dout_t_fp8)
        if ctx.main_grad_fusion:
            accumulate = not getattr(weight, "overwrite_main_grad", False)
            paddle.incubate.nn.functional.fp8_gemm_blockwise(
                a=x_t_fp8,
                a_decode_scale=x_t_scale,
                b=dout_t_fp8,
                b_decode_scale=dout_t_scale,
                out_dtype=weight.main_grad.dtype,
                out=weight.main_grad,
                accumulate=accumulate,
                use_split_accumulator=True,
                is_a_1d_scaled=True,
                is_b_1d_scaled=True,
            )
            weight.grad_added_to_main_grad = True
            if getattr(weight, "zero_out_wgrad", False):
                dweight = paddle.zeros(weight.shape, dtype=weight.dtype)
            else:
                dweight = paddle.empty(weight.shape, dtype=weight.dtype)
        else:
            dweight = kitchen_fp8_gemm(x_t_fp8, x_t_scale, dout_t_fp8, dout_t_scale, True, True, rtn_dtype=paddle.float32)

        return dx, dweight
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8GroupGemmMlpFunctionNode.backward
_PF_NODE_BACKWARD = """
import paddle
from paddle.distributed.fleet.meta_parallel.zero_bubble_utils import WeightGradStore


class FP8GroupGemmMlpFunctionNode:
    def __init__(self, custom_map, recompute_fwd_gate_up=False, is_split_group_gemm=False):
        self.experts = custom_map.experts
        self.recompute_fwd_gate_up = recompute_fwd_gate_up
        self.is_split_group_gemm = is_split_group_gemm
        self.m_indices = None
        self.input_fp8 = None
        self.input_scale = None
        self.o1 = None
        self.bwd_subbatch = None

    @paddle.no_grad()
    def backward(
        self,
        out_grad,
        unzipped_probs,
        tokens_per_expert,
        input_fp8_slice=None,
        input_scale_slice=None,
        m_indices=None,
        reset_status=False,
    ):
        dtype = paddle.bfloat16
        shape = out_grad[0].shape if isinstance(out_grad, tuple) else out_grad.shape
        if shape[0] == 0:
            return paddle.zeros_like(extract_first_if_tuple(out_grad), dtype=dtype), paddle.zeros_like(unzipped_probs)

        # recompute expert_w2 and expert_w1
        expert_w1 = [x.w1 for x in self.experts if x is not None]
        expert_w2 = [x.w2 for x in self.experts if x is not None]

        if self.recompute_fwd_gate_up:
            o1 = self.fwd_gate_up(None, expert_w1, len(expert_w1), tokens_per_expert, m_indices=m_indices)
        else:
            o1 = self.o1

        do1, o2_s, probs_grad = self.bwd_dowm_input(
            expert_w2, out_grad, o1, tokens_per_expert, m_indices=m_indices, unzipped_probs=unzipped_probs
        )
        del o1
        self.o1 = None

        # dw1
        self.bwd_gate_up_weight(
            do1,
            None,
            expert_w1,
            tokens_per_expert,
            input_fp8_slice=input_fp8_slice,
            input_scale_slice=input_scale_slice,
            clear_input=reset_status,
        )

        # dw2
        self.bwd_down_weight(out_grad, o2_s, expert_w2, tokens_per_expert)

        # dx
        dx = self.bwd_gate_up_input(do1, expert_w1, tokens_per_expert, m_indices=m_indices, dx=out_grad)
        if reset_status:
            self.reset_statue()
        return dx, probs_grad
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8LinearFunctionBase.common_fp8_mlp_bwd, FP8MlpFunction.backward
_PF_MLP_BWD = """
from functools import partial

import paddle
from paddle.distributed.fleet.meta_parallel.zero_bubble_utils import WeightGradStore


class FP8LinearFunctionBase:
    @staticmethod
    def common_fp8_mlp_bwd(
        do3, x_t_fp8, x_t_scale, w1, w2, o1=None, x_fp8=None, x_scale=None, apply_backward_hook=False
    ):
        if o1 is None:
            w1_fp8, w1_scale = weight_quant(w1, True)
            o1 = paddle.empty([x_fp8.shape[0], w1_fp8.shape[0]], dtype=do3.dtype)
            deep_gemm.fp8_gemm_nt((x_fp8, x_scale.T), (w1_fp8, w1_scale), o1)

        o2 = swiglu(o1)

        do2, do3_t_fp8, do3_t_scale = FP8LinearFunctionBase.compute_fp8_linear(
            do3, w2, return_mode="with_input_transpose_quant"
        )

        # dw2 = deep_gemm(o2_t_fp8, do3_t_fp8)
        o2 = FP8LinearFunctionBase.padding(o2, 0)
        o2_t_fp8, o2_t_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
            o2, output_scale_transpose=True, quant_method="1x128", input_transpose=True, return_transpose_only=True
        )
        if apply_backward_hook:
            if WeightGradStore.enabled:
                WeightGradStore.put(
                    partial(
                        FP8LinearFunctionBase.compute_expert_w_grad,
                        o2_t_fp8,
                        o2_t_scale,
                        do3_t_fp8,
                        do3_t_scale,
                        True,
                        True,
                        w2,
                        rtn_dtype=paddle.float32,
                    )
                )
            else:
                FP8LinearFunctionBase.compute_expert_w_grad(
                    o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, w2, rtn_dtype=paddle.float32
                )
        else:
            dw2 = FP8LinearFunctionBase.kitchen_gemm(
                o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, rtn_dtype=paddle.float32
            )

        do1, _ = paddle._C_ops.swiglu_grad(o1, None, do2)

        dx, do1_t_fp8, do1_t_scale = FP8LinearFunctionBase.compute_fp8_linear(
            do1, w1, return_mode="with_input_transpose_quant"
        )

        # dw1 = deep_gemm(x_t_fp8, do1_t_fp8)
        if apply_backward_hook:
            if WeightGradStore.enabled:
                WeightGradStore.put(
                    partial(
                        FP8LinearFunctionBase.compute_expert_w_grad,
                        x_t_fp8,
                        x_t_scale,
                        do1_t_fp8,
                        do1_t_scale,
                        True,
                        True,
                        w1,
                        rtn_dtype=paddle.float32,
                    )
                )
            else:
                FP8LinearFunctionBase.compute_expert_w_grad(
                    x_t_fp8, x_t_scale, do1_t_fp8, do1_t_scale, True, True, w1, rtn_dtype=paddle.float32
                )
        else:
            dw1 = FP8LinearFunctionBase.kitchen_gemm(
                x_t_fp8, x_t_scale, do1_t_fp8, do1_t_scale, True, True, rtn_dtype=paddle.float32
            )

        if apply_backward_hook:
            return dx
        else:
            assert dw1 is not None and dw2 is not None
            return dx, dw1, dw2


class FP8MlpFunction(paddle.autograd.PyLayer):
    @staticmethod
    def forward(ctx, x, w1, w2, recompute_fwd_gate_up):
        x_orig_shape = x.shape
        x = x.reshape([-1, x_orig_shape[-1]])
        o1, x_fp8, x_scale, o3 = FP8LinearFunctionBase.fp8_mlp_fwd(x, w1, w2)
        if len(x_orig_shape) > 2:
            o3 = o3.reshape([x_orig_shape[0], -1, o3.shape[-1]])
        o1 = None if recompute_fwd_gate_up else o1
        ctx.save_for_backward(
            o1, x_fp8, x_scale, w1, w2, paddle.to_tensor(x_orig_shape, dtype="int64", place=paddle.CPUPlace())
        )
        return o3

    @staticmethod
    def backward(ctx, do3):
        do3_orig_shape = do3.shape
        do3 = do3.reshape([-1, do3_orig_shape[-1]])
        o1, x_fp8, x_scale, w1, w2, x_orig_shape = ctx.saved_tensor()

        x_dequant_fp16 = paddle.incubate.nn.functional.fused_act_dequant(x_fp8, x_scale.T.contiguous())
        x_dequant_fp16 = FP8LinearFunctionBase.padding(x_dequant_fp16, 0)
        x_t_fp8, x_t_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
            x_dequant_fp16, output_scale_transpose=True, quant_method="1x128", input_transpose=True, return_transpose_only=True
        )

        if o1 is None:
            dx = FP8LinearFunctionBase.common_fp8_mlp_bwd(
                do3, x_t_fp8, x_t_scale, w1, w2, o1=None, x_fp8=x_fp8, x_scale=x_scale, apply_backward_hook=True
            )
        else:
            dx = FP8LinearFunctionBase.common_fp8_mlp_bwd(
                do3, x_t_fp8, x_t_scale, w1, w2, o1=o1, x_fp8=None, x_scale=None, apply_backward_hook=True
            )
        if len(x_orig_shape) > 2:
            dx = dx.reshape([x_orig_shape[0], -1, dx.shape[-1]])

        return dx, None, None
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FusedNormFP8MLPFunction.forward / .backward
_PF_FUSED_NORM_MLP = """
import paddle


class FusedNormFP8MLPFunction(paddle.autograd.PyLayer):
    @staticmethod
    def forward(ctx, x, norm_w, w1, w2, norm_eps):
        norm_output, invar = paddle.incubate.nn.functional.fused_rms_norm_ext(x, norm_w, norm_eps)
        x_orig_shape = norm_output.shape
        norm_output = norm_output.reshape([-1, x_orig_shape[-1]])
        _, _, _, o3 = FP8LinearFunctionBase.fp8_mlp_fwd(norm_output, w1, w2)
        if len(x_orig_shape) > 2:
            o3 = o3.reshape([x_orig_shape[0], -1, o3.shape[-1]])
        ctx.save_for_backward(
            norm_output,
            invar,
            x,
            norm_w,
            w1,
            w2,
            norm_eps,
            paddle.to_tensor(x_orig_shape, dtype="int64", place=paddle.CPUPlace()),
        )
        return o3

    @staticmethod
    def backward(ctx, do3):
        do3_orig_shape = do3.shape
        do3 = do3.reshape([-1, do3_orig_shape[-1]])

        norm_output, invar, x, norm_w, w1, w2, norm_eps, x_orig_shape = ctx.saved_tensor()

        x_fp8, x_scale, x_t_fp8, x_t_scale = paddle.incubate.nn.functional.fp8_quant_blockwise(
            norm_output, output_scale_transpose=True, quant_method="1x128", input_transpose=True
        )

        d_norm_output, dw1, dw2 = FP8LinearFunctionBase.common_fp8_mlp_bwd(
            do3, x_t_fp8, x_t_scale, w1, w2, o1=None, x_fp8=x_fp8, x_scale=x_scale
        )

        if len(x_orig_shape) > 2:
            d_norm_output = d_norm_output.reshape([x_orig_shape[0], -1, d_norm_output.shape[-1]])

        dx, d_rms_norm_weight = paddle._C_ops.fused_rms_norm_ext_grad(x, norm_w, invar, d_norm_output, norm_eps)

        return dx, d_rms_norm_weight, dw1, dw2
"""

# --- PaddlePaddle/PaddleFormers 1f12fca8 paddleformers/transformers/fp8_utils.py
# FP8LinearFunctionBase.compute_expert_w_grad (class 5: flag before the hook, see the docstring;
# the WeightGradStore branch, which defers the GEMM but fires the hook at once, and the zero-size
# early return are dropped)
_PF_COMPUTE_EXPERT_W_GRAD_FLAGGED = """
import paddle


class FP8LinearFunctionBase:
    @staticmethod
    def compute_expert_w_grad(
        input_t,
        input_t_scale,
        dout_t,
        dout_t_scale,
        is_a_1d_scaled=True,
        is_b_1d_scaled=True,
        weight=None,
        rtn_dtype=paddle.bfloat16,
    ):
        if hasattr(weight, "main_grad"):
            if weight.main_grad is None:
                weight.main_grad = paddle.zeros(shape=weight.shape, dtype=paddle.float32)
            weight.grad_added_to_main_grad = True
            result = FP8LinearFunctionBase.kitchen_gemm(
                input_t,
                input_t_scale,
                dout_t,
                dout_t_scale,
                is_a_1d_scaled,
                is_b_1d_scaled,
                weight.main_grad,
                rtn_dtype,
            )
        else:
            if weight.grad is None:
                weight.grad = paddle.zeros(shape=weight.shape, dtype=paddle.float32)
            result = FP8LinearFunctionBase.kitchen_gemm(
                input_t, input_t_scale, dout_t, dout_t_scale, is_a_1d_scaled, is_b_1d_scaled, weight.grad, rtn_dtype
            )

        if hasattr(weight, "_apply_backward_hook"):
            weight._apply_backward_hook()
        return result
"""

# --- Jetteyc/Megatron-LM-AutoTuner ecd530b2 AutoTuner/testbench/ops/te_grouped_mlp.py
# TEGroupedMLPForTest (adapted: the profiled backward_dw, see the docstring)
_AT_TE_GROUPED_MLP = """
from typing import Optional, Tuple

import torch
from megatron.core.process_groups_config import ProcessGroupCollection
from megatron.core.transformer.mlp import MLPSubmodules
from megatron.core.transformer.moe.experts import TEGroupedMLP
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.utils import nvtx_decorator, nvtx_range_pop, nvtx_range_push

from .common import CommonOpsForTest


class TEGroupedMLPForTest(TEGroupedMLP, CommonOpsForTest):
    def __init__(
        self,
        num_local_experts,
        config: TransformerConfig,
        submodules: MLPSubmodules,
        pg_collection: Optional[ProcessGroupCollection] = None,
        hook_activation: bool = False,
    ):
        TEGroupedMLP.__init__(
            self,
            num_local_experts=num_local_experts,
            config=config,
            submodules=submodules,
            pg_collection=pg_collection,
        )
        CommonOpsForTest.__init__(self, module_name="TEGroupedMLP", hook_activation=hook_activation)

    @nvtx_decorator(message="TEGroupedMLPForward")
    def _forward(self, permuted_local_hidden_states, tokens_per_expert, permuted_probs):
        tokens_per_expert = tokens_per_expert.tolist()
        permuted_probs = permuted_probs.unsqueeze(-1)
        nvtx_range_push(suffix="linear_fc1")
        intermediate_parallel, bias_parallel = self.linear_fc1(permuted_local_hidden_states, tokens_per_expert)
        nvtx_range_pop(suffix="linear_fc1")
        intermediate_parallel = self.activation_func(intermediate_parallel) * permuted_probs
        nvtx_range_push(suffix="linear_fc2")
        output, output_bias = self.linear_fc2(intermediate_parallel, tokens_per_expert)
        nvtx_range_pop(suffix="linear_fc2")
        output = self._apply_bias(output, output_bias, tokens_per_expert, permuted_probs)
        return output, None

    @nvtx_decorator(message="TEGroupedMLPBackwardDW")
    def backward_dw(self):
        nvtx_range_push(suffix="linear_fc2_dw")
        self.linear_fc2.backward_dw()
        nvtx_range_pop(suffix="linear_fc2_dw")
        nvtx_range_push(suffix="linear_fc1_dw")
        self.linear_fc1.backward_dw()
        nvtx_range_pop(suffix="linear_fc1_dw")

    def forward(self, permuted_local_hidden_states, tokens_per_expert, permuted_probs):
        self.activation_hook.clear()
        with torch.autograd.graph.saved_tensors_hooks(
            self.activation_hook.save_hook, self.activation_hook.load_hook
        ):
            ret = self._forward(permuted_local_hidden_states, tokens_per_expert, permuted_probs)
        return ret
"""

# --- Jetteyc/Megatron-LM-AutoTuner cccdd215 AutoTuner/testbench/ops/shared_expert_mlp.py
# SharedExpertMLPForTest (adapted: the profiled backward_dw, see the docstring)
_AT_SHARED_EXPERT = """
import torch
from megatron.core.transformer.mlp import MLPSubmodules
from megatron.core.transformer.moe.shared_experts import SharedExpertMLP
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.utils import nvtx_decorator, nvtx_range_pop, nvtx_range_push
from torch import Tensor

from .common import CommonOpsForTest


class SharedExpertMLPForTest(SharedExpertMLP, CommonOpsForTest):
    def __init__(
        self,
        config: TransformerConfig,
        submodules: MLPSubmodules,
        gate: bool = False,
        hook_activation: bool = False,
    ):
        SharedExpertMLP.__init__(self, config, submodules, gate=gate)
        CommonOpsForTest.__init__(self, hook_activation=hook_activation, module_name="SharedExpertMLP")

        if self.config.moe_shared_expert_overlap:
            self._forward = self._forward_all2all_overlap_part
        else:
            self._forward = self._forward_common

    @nvtx_decorator(message="SharedExpertMLPForward_common")
    def _forward_common(self, hidden_states):
        nvtx_range_push(suffix="expert_forward")
        output, _ = super(SharedExpertMLP, self).forward(hidden_states)
        nvtx_range_pop(suffix="expert_forward")
        if self.use_shared_expert_gate:
            logits = torch.nn.functional.linear(hidden_states, self.gate_weight)
            output = output * torch.nn.functional.sigmoid(logits)
        return output

    @nvtx_decorator(message="SharedExpertMLPForward_all2all_overlap")
    def _forward_all2all_overlap_part(self, hidden_states):
        self.pre_forward_comm(hidden_states)
        self.linear_fc1_forward_and_act(None)
        self.linear_fc2_forward(None)
        self.post_forward_comm()
        return self.get_output()

    @nvtx_decorator(message="SharedExpertMLPBackwardDW")
    def backward_dw(self):
        if self.config.moe_shared_expert_overlap:
            with torch.cuda.stream(self.stream):
                super(SharedExpertMLP, self).backward_dw()
        else:
            super(SharedExpertMLP, self).backward_dw()

    def forward(self, hidden_states: Tensor) -> Tensor:
        self.activation_hook.clear()
        with torch.autograd.graph.saved_tensors_hooks(
            self.activation_hook.save_hook, self.activation_hook.load_hook
        ):
            ret = self._forward(hidden_states)
        return ret
"""

# --- Jetteyc/Megatron-LM-AutoTuner ecd530b2 AutoTuner/testbench/ops_test/te_grouped_mlp_test.py
# TestTEGroupedMLP.__init__ (adapted: main_grad made available on the op that is run)
_AT_TEST_TE_GROUPED_MLP = """
from typing import Optional

import torch
from megatron.core import parallel_state
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec
from megatron.core.process_groups_config import ProcessGroupCollection
from megatron.core.transformer.transformer_config import TransformerConfig

from ..ops.te_grouped_mlp import TEGroupedMLPForTest
from .moe_layer_test import TestMoELayer


def _attach_main_grads(module: torch.nn.Module, config: TransformerConfig) -> None:
    if not config.gradient_accumulation_fusion:
        return
    for param in module.parameters():
        if not param.requires_grad:
            continue
        if getattr(param, "main_grad", None) is None:
            if hasattr(param, "get_main_grad"):
                param.main_grad = param.get_main_grad()
            else:
                param.main_grad = torch.zeros_like(param, dtype=torch.float32)
        param.grad_added_to_main_grad = False


class TestTEGroupedMLP(TestMoELayer):
    def __init__(
        self,
        tf_config: TransformerConfig,
        hf_config,
        tp_group: Optional[torch.distributed.ProcessGroup] = None,
        profile_mode: int = 0,
        warmup_iters: int = 2,
        profile_iters: int = 2,
        layer_number: int = 1,
        tp_comm_overlap_cfg: str = None,
    ):
        super().__init__(
            tf_config=tf_config,
            hf_config=hf_config,
            tp_group=tp_group,
            profile_mode=profile_mode,
            warmup_iters=warmup_iters,
            profile_iters=profile_iters,
            layer_number=layer_number,
            tp_comm_overlap_cfg=tp_comm_overlap_cfg,
        )
        self.moe_layer = self.op
        assert self.moe_layer is not None
        self.module_name = "TEGroupedMLP"

        assert tf_config.num_moe_experts is not None
        num_local_experts = tf_config.num_moe_experts // parallel_state.get_expert_model_parallel_world_size()

        transformer_layer_spec = get_gpt_layer_with_transformer_engine_spec(
            num_experts=tf_config.num_moe_experts, moe_grouped_gemm=True
        )
        self.op = TEGroupedMLPForTest(
            num_local_experts=num_local_experts,
            config=tf_config,
            submodules=transformer_layer_spec.submodules.mlp.submodules.experts.submodules,
            pg_collection=ProcessGroupCollection.use_mpu_process_groups(),
            hook_activation=False,
        )
        _attach_main_grads(self.op, tf_config)
"""

# --- Jetteyc/Megatron-LM-AutoTuner 098ba18e AutoTuner/testbench/ops_test/common.py
# TestCommon.run_micro_batch (adapted: Megatron-FSDP main_grad fetched before the run)
_AT_RUN_MICRO_BATCH = """
import torch
import megatron.core.parallel_state as mpu

from AutoTuner.utils.nvtx import nvtx_range_pop, nvtx_range_push
from AutoTuner.utils.timing import TimerContext
from AutoTuner.utils.tp_overlap import destroy_ub, initialize_tp_communicators


class TestCommon:
    def _expose_main_grads(self):
        if not self.tf_config.gradient_accumulation_fusion:
            return
        for name, param in self.op.named_parameters():
            if not param.requires_grad:
                continue
            if getattr(param, "main_grad", None) is None:
                if not hasattr(param, "get_main_grad"):
                    raise RuntimeError(f"{name} has neither main_grad nor get_main_grad()")
                param.main_grad = param.get_main_grad()

    def run_micro_batch(self, test_case, inputs, tokens):
        if (
            mpu.get_tensor_model_parallel_world_size() > 1
            and self.tf_config.tp_comm_overlap
            and test_case.shape == "thd"
            and tokens is not None
            and tokens > 0
        ):
            initialize_tp_communicators(
                tp_comm_overlap_cfg=self.tp_comm_overlap_cfg,
                tokens=tokens,
                hidden_size=self.hf_config.hidden_size,
            )
        self.micro_batch_results.append({})
        torch.cuda.synchronize()
        if self.warmup_iters > 0:
            for _ in range(self.warmup_iters):
                self._expose_main_grads()
                self.op(*inputs)
        torch.cuda.synchronize()

        self._expose_main_grads()
        with TimerContext() as timer_ctx:
            output = self.op(*inputs)
        self.micro_batch_results[-1]["forward"] = timer_ctx.elapsed_time

        if isinstance(output, tuple):
            output = output[0]
        output.requires_grad_(True)
        with TimerContext() as timer_ctx:
            nvtx_range_push("backward")
            output.sum().backward()
            nvtx_range_pop("backward")
        self.micro_batch_results[-1]["backward"] = timer_ctx.elapsed_time
        if mpu.get_tensor_model_parallel_world_size() > 1 and self.tf_config.tp_comm_overlap:
            destroy_ub()
"""


VARIANTS = (
    # ---------------------------------------------------------------- 1: which object
    Variant(
        1,
        "paddlenlp_fp8_mlp_bwd_hook_taken_from_quantized_w1",
        _swap(
            _PN_FP8_MLP_BWD,
            '    if hasattr(w1, "_apply_backward_hook"):\n        w1._apply_backward_hook()\n',
            '    if hasattr(w1_fp8, "_apply_backward_hook"):  # bug\n'
            "        w1_fp8._apply_backward_hook()  # bug\n",
        ),
        _PN_FP8_MLP_BWD,
    ),
    Variant(
        1,
        "paddlenlp_group_gemm_node_wgrad_into_unfiltered_expert",
        _swap(
            _PN_NODE_GATE_UP,
            "        expert_w1 = [x.w1 for x in self.experts if x is not None]\n",
            "        expert_w1 = [self.experts[i].w1 for i in range(len(self.tokens_per_expert))]  # bug\n",
        ),
        _PN_NODE_GATE_UP,
    ),
    # ---------------------------------------------------------------- 2: parameter rebound
    Variant(
        2,
        "paddleformers_node_backward_on_detached_expert_weights",
        _swap(
            _PF_NODE_BACKWARD,
            "        expert_w1 = [x.w1 for x in self.experts if x is not None]\n"
            "        expert_w2 = [x.w2 for x in self.experts if x is not None]\n",
            "        expert_w1 = [x.w1.detach() for x in self.experts if x is not None]  # bug\n"
            "        expert_w2 = [x.w2.detach() for x in self.experts if x is not None]  # bug\n",
        ),
        _PF_NODE_BACKWARD,
    ),
    Variant(
        2,
        "paddleformers_fp8_mlp_returns_main_grad_as_weight_grad",
        _swap(
            _PF_MLP_BWD,
            "        return dx, None, None\n",
            "        return dx, w1.main_grad, w2.main_grad  # bug\n",
        ),
        _PF_MLP_BWD,
    ),
    # ---------------------------------------------------------------- 3: flags without writes
    Variant(
        3,
        "paddleformers_mlp_bwd_fires_w2_hook_after_scratch_wgrad",
        _swap(
            _PF_MLP_BWD,
            "            else:\n"
            "                FP8LinearFunctionBase.compute_expert_w_grad(\n"
            "                    o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, w2, rtn_dtype=paddle.float32\n"
            "                )\n",
            "            else:\n"
            "                dw2 = FP8LinearFunctionBase.kitchen_gemm(  # bug\n"
            "                    o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, rtn_dtype=paddle.float32  # bug\n"
            "                )  # bug\n"
            "                w2._apply_backward_hook()  # bug\n",
        ),
        _PF_MLP_BWD,
    ),
    Variant(
        3,
        "paddleformers_fused_norm_mlp_writes_main_grad_and_returns_grad",
        _swap(
            _PF_FUSED_NORM_MLP,
            "        dx, d_rms_norm_weight = paddle._C_ops.fused_rms_norm_ext_grad(x, norm_w, invar, d_norm_output, norm_eps)\n",
            "        dx, d_rms_norm_weight = paddle._C_ops.fused_rms_norm_ext_grad(x, norm_w, invar, d_norm_output, norm_eps)\n"
            '        if hasattr(norm_w, "main_grad"):  # bug\n'
            "            norm_w.main_grad += d_rms_norm_weight  # bug\n",
        ),
        _PF_FUSED_NORM_MLP,
    ),
    # ---------------------------------------------------------------- 4: overwrite without asking
    Variant(
        4,
        "paddlenlp_kitchen_gemm_out_given_without_accumulate",
        _swap(
            _PN_FP8_MLP_BWD,
            "    if out is not None:\n        accumulate = True\n        out_dtype = out.dtype\n",
            "    if out is not None:\n"
            "        accumulate = False  # bug\n"
            "        out_dtype = out.dtype\n",
        ),
        _PN_FP8_MLP_BWD,
    ),
    Variant(
        4,
        "paddlenlp_fp8_mlp_bwd_assigns_dw2_to_main_grad",
        _swap(
            _PN_FP8_MLP_BWD,
            "        if w2.main_grad is None:\n"
            "            w2.main_grad = paddle.zeros(shape=w2.shape, dtype=paddle.float32)\n"
            "        kitchen_fp8_gemm(o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, w2.main_grad, paddle.float32)\n",
            "        w2.main_grad = kitchen_fp8_gemm(  # bug\n"
            "            o2_t_fp8, o2_t_scale, do3_t_fp8, do3_t_scale, True, True, rtn_dtype=paddle.float32  # bug\n"
            "        )  # bug\n",
        ),
        _PN_FP8_MLP_BWD,
    ),
    # ---------------------------------------------------------------- 5: hooks without bookkeeping
    Variant(
        5,
        "paddlenlp_node_fires_expert_hook_without_grad_added_flag",
        _swap(
            _PN_NODE_GATE_UP_FLAGGED,
            "                kitchen_fp8_gemm(\n"
            "                    input_x_t_fp8[i], input_x_t_scale[i], do1_t_fp8[i], do1_t_scale[i], True, True, w.main_grad, paddle.float32\n"
            "                )\n"
            '                if hasattr(w, "grad_added_to_main_grad"):\n'
            "                    w.grad_added_to_main_grad = True\n",
            "                kitchen_fp8_gemm(\n"
            "                    input_x_t_fp8[i], input_x_t_scale[i], do1_t_fp8[i], do1_t_scale[i], True, True, w.main_grad, paddle.float32\n"
            "                )  # bug\n",
        ),
        _PN_NODE_GATE_UP_FLAGGED,
    ),
    Variant(
        5,
        "paddleformers_expert_w_grad_flag_only_on_first_microbatch",
        _swap(
            _PF_COMPUTE_EXPERT_W_GRAD_FLAGGED,
            "                weight.main_grad = paddle.zeros(shape=weight.shape, dtype=paddle.float32)\n"
            "            weight.grad_added_to_main_grad = True\n",
            "                weight.main_grad = paddle.zeros(shape=weight.shape, dtype=paddle.float32)\n"
            "                weight.grad_added_to_main_grad = True  # bug\n",
        ),
        _PF_COMPUTE_EXPERT_W_GRAD_FLAGGED,
    ),
    # ---------------------------------------------------------------- 6: delayed wgrad across classes
    Variant(
        6,
        "autotuner_te_grouped_mlp_backward_dw_skips_fc1",
        _swap(
            _AT_TE_GROUPED_MLP,
            '        nvtx_range_pop(suffix="linear_fc2_dw")\n'
            '        nvtx_range_push(suffix="linear_fc1_dw")\n'
            "        self.linear_fc1.backward_dw()\n"
            '        nvtx_range_pop(suffix="linear_fc1_dw")\n',
            '        nvtx_range_pop(suffix="linear_fc2_dw")  # bug\n',
        ),
        _AT_TE_GROUPED_MLP,
    ),
    Variant(
        6,
        "autotuner_shared_expert_backward_dw_returns_early_when_overlapped",
        _swap(
            _AT_SHARED_EXPERT,
            "        if self.config.moe_shared_expert_overlap:\n"
            "            with torch.cuda.stream(self.stream):\n"
            "                super(SharedExpertMLP, self).backward_dw()\n"
            "        else:\n"
            "            super(SharedExpertMLP, self).backward_dw()\n",
            "        if self.config.moe_shared_expert_overlap:\n"
            "            return  # bug\n"
            "        super(SharedExpertMLP, self).backward_dw()\n",
        ),
        _AT_SHARED_EXPERT,
    ),
    # ---------------------------------------------------------------- 7: the seed shape, other syntax
    Variant(
        7,
        "paddlenlp_fp8_linear_grad_added_flag_from_accumulate",
        _swap(
            _PN_FP8_LINEAR_FUSED,
            "            weight.grad_added_to_main_grad = True\n",
            "            weight.grad_added_to_main_grad = accumulate  # bug\n",
        ),
        _PN_FP8_LINEAR_FUSED,
    ),
    Variant(
        7,
        "paddlenlp_fp8_linear_dummy_wgrad_only_when_accumulating",
        _swap(
            _PN_FP8_LINEAR_FUSED,
            "        return dx, dweight\n",
            "        return dx, (dweight if not ctx.main_grad_fusion or accumulate else None)  # bug\n",
        ),
        _PN_FP8_LINEAR_FUSED,
    ),
    # ---------------------------------------------------------------- 8: Megatron-LM #5209
    Variant(
        8,
        "autotuner_grouped_mlp_main_grads_attached_before_op_rebuilt",
        _swap(
            _swap(
                _AT_TEST_TE_GROUPED_MLP,
                "            hook_activation=False,\n"
                "        )\n"
                "        _attach_main_grads(self.op, tf_config)\n",
                "            hook_activation=False,\n        )  # bug\n",
            ),
            "        self.moe_layer = self.op\n",
            "        self.moe_layer = self.op\n"
            "        _attach_main_grads(self.op, tf_config)  # bug\n",
        ),
        _AT_TEST_TE_GROUPED_MLP,
    ),
    Variant(
        8,
        "autotuner_run_micro_batch_skips_fsdp_main_grad_that_is_none",
        _swap(
            _AT_RUN_MICRO_BATCH,
            '            if getattr(param, "main_grad", None) is None:\n',
            '            if not hasattr(param, "main_grad"):  # bug\n',
        ),
        _AT_RUN_MICRO_BATCH,
    ),
)
