"""The sixteenth blind corpus (H-blind16): main_grad bookkeeping variants of the eight classes
of issue #19, grounded in code from repositories no earlier blind corpus used: PaddlePaddle's
Megatron-style PaddleFleet (`main_grad`, `grad_added_to_main_grad`, `_apply_backward_hook`),
Paddle's zero-bubble `WeightGradStore`, and ServiceNow Fast-LLM (`grad_buffer`,
`param_grad_is_zero` standing in for main_grad and the overwrite flag).

Sources (repo, commit, path, function):
- PaddlePaddle/PaddleFleet 021152f8 src/paddlefleet/tensor_parallel/layers.py
  LinearWithGradAccumulationAndAsyncCommunication.forward / .backward
- PaddlePaddle/PaddleFleet 9f9bd7b9 src/paddlefleet/transformer/moe/moe_shared_expert.py
  SharedExpertFP8PyLayer.forward / .backward, StandardMLPSharedExpert._fp8_forward
- PaddlePaddle/PaddleFleet 009ddc49 src/paddlefleet/transformer/moe/fp8_utils.py
  kitchen_gemm, ExpertsGroupGemmContiguousNode.bwd_down_weight
- PaddlePaddle/Paddle 02a5e4e0 python/paddle/distributed/fleet/meta_parallel/zero_bubble_utils.py
  WeightGradStore.flush, grad_weight_fn, SplitBWMatmul.backward, SplitBWLinear.forward
- ServiceNow/Fast-LLM 7d61a1ba fast_llm/functional/linear.py update_linear_gradients,
  fast_llm/tensor.py accumulate_gradient, fast_llm/engine/multi_stage/stage.py _accumulate_grad_hook

Twins are the real code shortened (real names and idioms; helpers such as `_fp8_dgrad`,
`_quant_1x128` and `_reduce_scatter_input_grad` stand for elided inline code). Bugs are
written as `_swap(twin, old, new)`: one passage of the twin replaced, the bug line carrying
`# bug`. In Paddle the main_grad hook of MixPrecisionLayer adds a parameter's `.grad` into
`main_grad`, so a real `.grad` handed on after a main_grad write is counted twice.
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant


def _swap(twin: str, old: str, new: str) -> str:
    """The bug is the twin with one passage replaced; the passage must occur once."""
    assert twin.count(old) == 1, old
    return twin.replace(old, new)


# --- PaddlePaddle/PaddleFleet 021152f8 src/paddlefleet/tensor_parallel/layers.py
# LinearWithGradAccumulationAndAsyncCommunication.forward/backward (shortened: fp8 dgrad,
# sequence-parallel gathers and AMP casts of dgrad dropped; wgrad and bookkeeping kept).
_PF_LINEAR_FWD = """
class LinearWithGradAccumulationAndAsyncCommunication(paddle.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion,
                allreduce_dgrad, sequence_parallel, grad_output_buffer,
                wgrad_deferral_limit, tp_group, use_accuracy_compatible=False,
                fp8=False, fp8_wgrad=False, inp_quant_func=None, weight_quant_func=None):
        if gradient_accumulation_fusion and hasattr(weight, "main_grad"):
            main_grad = weight.main_grad
        else:
            main_grad = None
        ctx.input_dtype = input.dtype
        ctx.main_grad = main_grad
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.grad_output_buffer = grad_output_buffer
        ctx.wgrad_deferral_limit = wgrad_deferral_limit
        ctx.fp8_wgrad = fp8_wgrad
        output, fp8_meta = general_gemm(
            input, weight, bias=bias, fp8=fp8,
            inp_quant_func=inp_quant_func, weight_quant_func=weight_quant_func,
        )
        ctx.save_for_backward(input._new_shared_tensor(), weight)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensor()
        main_grad = ctx.main_grad
        if ctx.gradient_accumulation_fusion:
            weight.main_grad = main_grad
        total_input = input
        grad_input, _ = general_gemm(grad_output, weight.t())
        if ctx.gradient_accumulation_fusion:
            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                total_input, grad_output, weight.main_grad
            )
            if hasattr(weight, "grad_added_to_main_grad"):
                make = paddle.zeros if getattr(weight, "zero_out_wgrad", False) else paddle.empty
                grad_weight = make(weight.main_grad.shape, dtype=ctx.input_dtype)
                weight.grad_added_to_main_grad = True
            else:
                grad_weight = None
        else:
            grad_weight, _ = general_gemm(total_input.t(), grad_output)
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
        return grad_input, grad_weight, grad_bias
"""

_PF_LINEAR_BWD = """
def backward(ctx, grad_output):
    saved = ctx.saved_tensor()
    input, weight = saved[0], saved[1]
    main_grad = ctx.main_grad
    grad_output_buffer = ctx.grad_output_buffer
    wgrad_deferral_limit = ctx.wgrad_deferral_limit
    fp8_wgrad = ctx.fp8_wgrad
    input_needs_grad = not ctx.input_stop_gradient

    if input is not None and input.dtype != weight.dtype:
        input = input.astype(weight.dtype)

    if ctx.gradient_accumulation_fusion:
        weight.main_grad = main_grad

    wgrad_compute = True
    if grad_output_buffer is not None:
        if wgrad_deferral_limit == 0 or len(grad_output_buffer) < wgrad_deferral_limit:
            grad_output_buffer.append(grad_output)
            wgrad_compute = False

    total_input = input
    grad_input = general_gemm(grad_output, weight.t())[0] if input_needs_grad else None

    if fp8_wgrad and wgrad_compute:
        grad_out_t_fp8, grad_out_t_scale = _bwd_quant_blockwise_1x128(grad_output.T.contiguous(), ctx.use_pow2_scale, ctx.use_ue8m0)
        inp_t_fp8, inp_t_scale = _bwd_quant_blockwise_1x128(total_input.T.contiguous(), ctx.use_pow2_scale, ctx.use_ue8m0)
        grad_weight, _ = general_gemm(
            (inp_t_fp8, inp_t_scale), (grad_out_t_fp8, grad_out_t_scale),
            fp8=True, recipe=(1, 1, 128),
        )
    elif ctx.gradient_accumulation_fusion:
        if wgrad_compute:
            fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(
                total_input, grad_output, weight.main_grad
            )
        if hasattr(weight, "grad_added_to_main_grad"):
            if getattr(weight, "zero_out_wgrad", False):
                grad_weight = paddle.zeros(weight.main_grad.shape, dtype=ctx.input_dtype)
            else:
                grad_weight = paddle.empty(weight.main_grad.shape, dtype=ctx.input_dtype)
            weight.grad_added_to_main_grad = True
        else:
            grad_weight = None
    elif (
        wgrad_compute
        and ctx.use_accuracy_compatible
        and getattr(weight, "is_expert_param", False)
        and getattr(weight, "main_grad", None) is not None
    ):
        wgrad = paddle.matmul(grad_output.astype("float32"), total_input.astype("float32"), transpose_x=True).t()
        weight.main_grad.add_(wgrad)
        if hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
        grad_weight = paddle.zeros(weight.shape, dtype=input.dtype)
    elif wgrad_compute:
        grad_weight, _ = general_gemm(total_input.t(), grad_output)
    else:
        grad_weight = None
    grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None

    if ctx.sequence_parallel:
        sub_grad_input = _reduce_scatter_input_grad(grad_input, ctx.tp_group)
        return sub_grad_input, grad_weight, grad_bias
    return grad_input, grad_weight, grad_bias
"""

# --- PaddlePaddle/PaddleFleet 9f9bd7b9 src/paddlefleet/transformer/moe/moe_shared_expert.py
# SharedExpertFP8PyLayer.forward/backward (quantisation and clamp branches shortened).
_PF_SHARED = """
class SharedExpertFP8PyLayer(paddle.autograd.PyLayer):
    @staticmethod
    def forward(ctx, hidden_states, w1, w2, w1_fp8, w1_scale, w2_fp8, w2_scale, clamp_value):
        x_fp8, x_scale = _quant_1x128(hidden_states)
        intermediate = paddle.empty([x_fp8.shape[0], w1_fp8.shape[0]], dtype=hidden_states.dtype)
        paddlefleet_deep_gemm.fp8_gemm_nt((x_fp8, x_scale), (w1_fp8.contiguous(), w1_scale.contiguous()), intermediate)
        ones = paddle.ones([intermediate.shape[0], 1], dtype="float32")
        i_fp8, i_scale = fuse_weighted_swiglu_fp8_quant(intermediate, ones, using_pow2_scaling=True, use_ue8m0=False)
        output = paddle.empty([i_fp8.shape[0], w2_fp8.shape[0]], dtype=hidden_states.dtype)
        paddlefleet_deep_gemm.fp8_gemm_nt((i_fp8, i_scale), (w2_fp8.contiguous(), w2_scale.contiguous()), output)
        ctx.save_for_backward(hidden_states, intermediate)
        ctx.w1 = w1
        ctx.w2 = w2
        ctx.clamp_value = clamp_value
        return output

    @staticmethod
    def backward(ctx, grad_output):
        hidden_states, o1 = ctx.saved_tensor()
        w1, w2 = ctx.w1, ctx.w2
        M = grad_output.shape[0]
        do2_s = _fp8_dgrad(grad_output, w2)
        ones = paddle.ones([M, 1], dtype="float32")
        do1, _, o2_s = paddle.incubate.nn.functional.fused_swiglu_weighted_bwd(o1, do2_s, ones)

        # Step C: dW2 = o2_s^T @ grad_output (BF16 weight grad)
        if hasattr(w2, "main_grad"):
            if w2.main_grad is None:
                w2.main_grad = paddle.zeros(w2.shape, dtype=paddle.float32)
            paddle._C_ops.fused_linear_param_grad_add(
                o2_s, grad_output, w2.main_grad, None, True, False
            )
        if hasattr(w2, "_apply_backward_hook") and not w2.stop_gradient:
            w2._apply_backward_hook()

        # Step D: dW1 = hidden_states^T @ do1 (BF16 weight grad)
        if hasattr(w1, "main_grad"):
            if w1.main_grad is None:
                w1.main_grad = paddle.zeros(w1.shape, dtype=paddle.float32)
            paddle._C_ops.fused_linear_param_grad_add(
                hidden_states, do1, w1.main_grad, None, True, False
            )
        if hasattr(w1, "_apply_backward_hook") and not w1.stop_gradient:
            w1._apply_backward_hook()

        dx = _fp8_dgrad(do1, w1)
        # Return grads for: hidden_states, w1, w2, w1_fp8, w1_scale, w2_fp8, w2_scale
        return dx, None, None, None, None, None, None
"""

_PF_SHARED_CALLER = """
class StandardMLPSharedExpert(MLP):
    def _quantize_weights(self):
        w1 = self.up_gate_proj.weight
        w1_fp8, w1_scale = fused_stack_quant_without_cache([w1], transpose=True, use_ue8m0=False)
        w1.fp8_weight_stacked = w1_fp8
        w1.fp8_scale_stacked = w1_scale
        w2 = self.down_proj.weight
        w2_fp8, w2_scale = fused_stack_quant_without_cache([w2], transpose=True, use_ue8m0=False)
        w2.fp8_weight_stacked = w2_fp8
        w2.fp8_scale_stacked = w2_scale

    def _fp8_forward(self, hidden_states):
        if paddlefleet_deep_gemm is None:
            raise RuntimeError("deep_gemm is not available for FP8 shared expert forward")
        orig_shape = hidden_states.shape
        if len(orig_shape) == 3:
            hidden_states = hidden_states.reshape([-1, hidden_states.shape[-1]])
        self._quantize_weights()
        w1 = self.up_gate_proj.weight
        w2 = self.down_proj.weight
        clamp_value = getattr(self.config, "activation_func_clamp_value", None)
        output = SharedExpertFP8PyLayer.apply(
            hidden_states,
            w1, w2,
            w1.fp8_weight_stacked, w1.fp8_scale_stacked,
            w2.fp8_weight_stacked, w2.fp8_scale_stacked,
            clamp_value,
        )
        if len(orig_shape) == 3:
            output = output.reshape(orig_shape)
        return output, None
"""

# --- PaddlePaddle/PaddleFleet 009ddc49 src/paddlefleet/transformer/moe/fp8_utils.py
# kitchen_gemm and ExpertsGroupGemmContiguousNode.bwd_down_weight.
_PF_KITCHEN = """
def kitchen_gemm(x_fp8, x_scale, w_fp8, w_scale, is_a_1d_scaled, is_b_1d_scaled,
                 out=None, rtn_dtype=paddle.bfloat16):
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

_PF_DOWN_WEIGHT = """
class ExpertsGroupGemmContiguousNode:
    def bwd_down_weight(self, do3, o2, expert_w2):
        o2_t_fp8, o2_t_scale = self.fused_transpose_split_quant(o2, None, self.tokens_per_expert, True)
        do3_t_fp8, do3_t_scale = self.fused_transpose_split_quant(do3, None, self.tokens_per_expert, True)

        for i in range(len(expert_w2)):
            if hasattr(expert_w2[i], "main_grad"):
                if expert_w2[i].main_grad is None:
                    expert_w2[i].main_grad = paddle.zeros(
                        shape=expert_w2[i].shape, dtype=paddle.float32
                    )
                kitchen_gemm(
                    o2_t_fp8[i], o2_t_scale[i], do3_t_fp8[i], do3_t_scale[i],
                    True, True, expert_w2[i].main_grad, paddle.float32,
                )
            else:
                if expert_w2[i].grad is None:
                    expert_w2[i].grad = paddle.zeros(shape=expert_w2[i].shape, dtype=paddle.float32)
                kitchen_gemm(
                    o2_t_fp8[i], o2_t_scale[i], do3_t_fp8[i], do3_t_scale[i],
                    True, True, expert_w2[i].grad, paddle.float32,
                )
            if hasattr(expert_w2[i], "_apply_backward_hook") and not expert_w2[i].stop_gradient:
                expert_w2[i]._apply_backward_hook()
"""

# --- PaddlePaddle/Paddle 02a5e4e0 python/paddle/distributed/fleet/meta_parallel/zero_bubble_utils.py
# WeightGradStore, grad_weight_fn, SplitBWMatmul, SplitBWLinear (adapted from DualPipe).
_PD_ZB = """
class WeightGradStore:
    enabled = False
    cache = []
    funcs_queue = queue.Queue()

    @classmethod
    def put(cls, func) -> None:
        cls.cache.append(func)

    @classmethod
    def flush(cls) -> None:
        cls.funcs_queue.put(cls.cache)
        cls.cache = []

    @classmethod
    def pop(cls) -> None:
        funcs = cls.funcs_queue.get()
        for func in funcs:
            func()


def grad_weight_fn(input, weight, out_grad, inplace_update_grad=True):
    if weight.stop_gradient:
        return
    with paddle.no_grad():
        weight_grad = paddle.matmul(
            x=fold_init_dims(input), y=fold_init_dims(out_grad),
            transpose_x=True, transpose_y=False,
        )
        if hasattr(weight, "main_grad"):
            if weight.main_grad is None:
                weight.main_grad = paddle.base.framework.core.eager.Tensor(
                    value=weight_grad.cast(paddle.float32).value(),
                    place=weight_grad.place,
                    name="main_grad@" + weight.name,
                )
            else:
                weight.main_grad.add_(weight_grad)
            weight_grad._clear_data()
        else:
            if weight.grad is None:
                weight.grad = paddle.zeros_like(weight, dtype=weight.dtype)
            weight.grad = paddle.add(weight.grad, weight_grad)


class SplitBWMatmul(PyLayer):
    @staticmethod
    def forward(ctx, input, weight, bias):
        ctx.save_for_backward(input, weight, bias)
        return F.linear(x=input, weight=weight, bias=bias)

    @staticmethod
    def backward(ctx, out_grad):
        input, weight, bias = ctx.saved_tensor()
        if WeightGradStore.enabled:
            WeightGradStore.put(partial(grad_weight_fn, input, weight, out_grad))
        else:
            grad_weight_fn(input, weight, out_grad)
        input_grad = None
        if not input.stop_gradient:
            input_grad = paddle.matmul(x=out_grad, y=weight, transpose_x=False, transpose_y=True)
        if bias is not None:
            bias_grad = None if bias.stop_gradient else paddle.sum(fold_init_dims(out_grad), axis=0)
            return input_grad, None, bias_grad
        return input_grad, None


class SplitBWLinear(nn.Linear):
    def forward(self, input):
        return SplitBWMatmul.apply(input, self.weight, bias=self.bias)
"""

# --- ServiceNow/Fast-LLM 7d61a1ba fast_llm/functional/linear.py update_linear_gradients
# with fast_llm/tensor.py param_get_and_unset_is_zero / accumulate_gradient.
_FL_LINEAR = """
def param_get_and_unset_is_zero(param):
    is_zero = param.param_grad_is_zero
    param.param_grad_is_zero = False
    return is_zero


def accumulate_gradient(param, grad):
    if param_get_and_unset_is_zero(param):
        triton_copy(grad, param.grad_buffer)  # noqa
    else:
        triton_add(grad, param.grad_buffer, out=param.grad_buffer)  # noqa


def update_linear_gradients(input_, weight, bias, grad_output, transposed_weight, sparse_map):
    grad_output = grad_output.flatten(0, -2)
    input_ = input_.flatten(0, -2)
    lhs, rhs = (input_.t(), grad_output) if transposed_weight else (grad_output.t(), input_)

    if not weight.requires_grad:
        pass
    elif TritonConfig.TRITON_LINEAR or sparse_map is not None:
        input_row_sparse_matmul(
            lhs, rhs, sparse_map,
            out=weight.grad_buffer,  # noqa
            accumulate=not param_get_and_unset_is_zero(weight),
        )
    elif weight.grad_buffer.dtype == grad_output.dtype:  # noqa
        beta = 1 - param_get_and_unset_is_zero(weight)
        torch.addmm(weight.grad_buffer, lhs, rhs, beta=beta, alpha=1, out=weight.grad_buffer)  # noqa
    else:
        accumulate_gradient(weight, torch.mm(lhs, rhs))
    if bias is not None and bias.requires_grad:
        accumulate_gradient(bias, grad_output.sum(dim=0))
"""

# --- ServiceNow/Fast-LLM 7d61a1ba fast_llm/functional/triton/mlp.py ChunkWeight / ChunkWeightPost
_FL_CHUNK = """
class ChunkWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight, num_chunks):
        with torch.no_grad():
            weight_chunked = weight.chunk(num_chunks)
            grad_buffer_chunked = weight.grad_buffer.chunk(num_chunks)  # noqa
            for weight_chunk, grad_buffer_chunk in zip(weight_chunked, grad_buffer_chunked):
                weight_chunk.requires_grad_(weight.requires_grad)
                weight_chunk.grad_buffer = grad_buffer_chunk
        ctx.weight = weight
        ctx.weight_chunked = weight_chunked
        return input_, weight_chunked

    @staticmethod
    def backward(ctx, grad_input, dummy):
        for weight_chunk in ctx.weight_chunked:
            # Check for runaway grads.
            assert weight_chunk.grad is None
            # Make sure all grads are computed.
            if weight_chunk.param_grad_is_zero:
                weight_chunk.grad_buffer.zero_()
        return grad_input, None, None


class ChunkWeightPost(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, weight, weight_chunked):
        ctx.weight, ctx.weight_chunked = weight, weight_chunked
        return input_

    @staticmethod
    def backward(ctx, grad_input):
        is_zero = param_get_and_unset_is_zero(ctx.weight)
        for weight_chunk in ctx.weight_chunked:
            weight_chunk.param_grad_is_zero = is_zero
        return grad_input, None, None
"""

# --- ServiceNow/Fast-LLM 7d61a1ba fast_llm/engine/multi_stage/stage.py _accumulate_grad_hook + Stage.setup
_FL_HOOK = """
def _accumulate_grad_hook(buffer, meta):
    def hook(grad_inputs, grad_outputs):  # noqa
        if buffer.grad is not None:
            accumulate_gradient(buffer, buffer.grad)
            buffer.grad = None

    return hook


class Stage(StageBase):
    def setup(self, *, distributed, weight_shards=None, grad_shards=None, weight_buffers=None,
              grad_buffers=None, mode=StageMode.training):
        super().setup(distributed=distributed, weight_shards=weight_shards, grad_shards=grad_shards,
                      weight_buffers=weight_buffers, grad_buffers=grad_buffers, mode=mode)
        self._accumulators = []
        if self._mode.support_backward:
            for fsdp in self._fsdps:
                for buffer, meta in zip(fsdp._parameter_buffers.values(), fsdp._parameter_metas.values()):
                    # We get the AccumulateGrad object through the grad function of a dummy tensor.
                    accumulator = buffer.expand_as(buffer).grad_fn.next_functions[0][0]
                    accumulator.register_hook(_accumulate_grad_hook(buffer, meta))
                    # We keep a pointer to the AccumulateGrad object, otherwise it will be garbage collected.
                    self._accumulators.append(accumulator)
"""

VARIANTS = (
    # Class 1. PaddleFleet 9f9bd7b9 moe_shared_expert.py SharedExpertFP8PyLayer.forward/backward.
    # Dropped: quant details, clamp branch. Regression: forward stores the FP8 stand-in
    # (w2_fp8) as ctx.w2, so backward looks for main_grad on the quantized tensor, finds none
    # and computes no dW2 at all; the down_proj Parameter's main_grad never gets its gradient.
    Variant(
        1,
        "blind16-paddlefleet-shared-expert-ctx-fp8-weight",
        bug=_swap(
            _PF_SHARED,
            "        ctx.w2 = w2\n",
            "        ctx.w2 = w2_fp8 if w2_fp8 is not None else w2  # bug\n",
        ),
        twin=_PF_SHARED,
    ),
    # Class 1. Paddle 02a5e4e0 zero_bubble_utils.py SplitBWLinear.forward + SplitBWMatmul/grad_weight_fn.
    # Dropped: fold_init_dims, clear/queue helpers. Regression: the layer hands the PyLayer an
    # AMP-materialized copy of its weight; grad_weight_fn sees no main_grad on the copy, writes
    # `.grad` of the copy, and the PyLayer returns None for it: the Parameter gets nothing.
    Variant(
        1,
        "blind16-paddle-zero-bubble-cast-weight",
        bug=_swap(
            _PD_ZB,
            "        return SplitBWMatmul.apply(input, self.weight, bias=self.bias)\n",
            "        return SplitBWMatmul.apply(input, self.weight.astype(input.dtype), bias=self.bias)  # bug\n",
        ),
        twin=_PD_ZB,
    ),
    # Class 2. Paddle 02a5e4e0 zero_bubble_utils.py SplitBWMatmul.backward.
    # Regression: the bias-free return hands main_grad itself back as the weight's gradient;
    # autograd accumulates it into .grad and the main_grad hook adds it into main_grad again.
    Variant(
        2,
        "blind16-paddle-zero-bubble-return-main-grad",
        bug=_swap(
            _PD_ZB,
            "        return input_grad, None\n\n\nclass SplitBWLinear",
            '        return input_grad, getattr(weight, "main_grad", None)  # bug\n\n\nclass SplitBWLinear',
        ),
        twin=_PD_ZB,
    ),
    # Class 2. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.forward/backward (sequence parallel,
    # fp8 saving and dgrad collectives dropped). Regression: forward rebinds `weight` to a dtype
    # copy before capturing main_grad, so ctx.main_grad is None and the backward restores None
    # onto the saved copy: the fused wgrad never reaches the Parameter's main_grad.
    Variant(
        2,
        "blind16-paddlefleet-linear-forward-weight-copy",
        bug=_swap(
            _PF_LINEAR_FWD,
            '        if gradient_accumulation_fusion and hasattr(weight, "main_grad"):\n',
            "        weight = weight if weight.dtype == input.dtype else weight.astype(input.dtype)  # bug\n"
            '        if gradient_accumulation_fusion and hasattr(weight, "main_grad"):\n',
        ),
        twin=_PF_LINEAR_FWD,
    ),
    # Class 3. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.backward (shortened).
    # Regression: the fp8-wgrad branch, which returns the real wgrad and writes no main_grad,
    # marks grad_added_to_main_grad; the DDP hook then skips the real .grad: the gradient is lost.
    Variant(
        3,
        "blind16-paddlefleet-linear-fp8-wgrad-flag",
        bug=_swap(
            _PF_LINEAR_BWD,
            "            fp8=True, recipe=(1, 1, 128),\n        )\n",
            "            fp8=True, recipe=(1, 1, 128),\n        )\n"
            '        weight.grad_added_to_main_grad = hasattr(weight, "grad_added_to_main_grad")  # bug\n',
        ),
        twin=_PF_LINEAR_BWD,
    ),
    # Class 3 (converse). PaddleFleet 9f9bd7b9 moe_shared_expert.py SharedExpertFP8PyLayer.backward.
    # Regression: after fused_linear_param_grad_add wrote dW1/dW2 into main_grad, the PyLayer
    # also returns real dW1/dW2 for w1/w2; Paddle's main_grad hook adds them again: doubled.
    Variant(
        3,
        "blind16-paddlefleet-shared-expert-real-grad-returned",
        bug=_swap(
            _PF_SHARED,
            "        return dx, None, None, None, None, None, None\n",
            "        return dx, paddle.matmul(hidden_states, do1, transpose_x=True), paddle.matmul(o2_s, grad_output, transpose_x=True), None, None, None, None  # bug\n",
        ),
        twin=_PF_SHARED,
    ),
    # Class 4. Fast-LLM 7d61a1ba functional/linear.py update_linear_gradients (+ tensor.py helpers).
    # Fast-LLM's "overwrite" switch is param_grad_is_zero (first write of the step copies,
    # later ones add). Regression: the dense branch still reads and unsets the flag but ignores
    # it: mm(out=grad_buffer) replaces the buffer, losing earlier microbatches and tied uses.
    Variant(
        4,
        "blind16-fastllm-linear-mm-out-grad-buffer",
        bug=_swap(
            _FL_LINEAR,
            "        torch.addmm(weight.grad_buffer, lhs, rhs, beta=beta, alpha=1, out=weight.grad_buffer)  # noqa\n",
            "        torch.mm(lhs, rhs, out=weight.grad_buffer)  # bug\n",
        ),
        twin=_FL_LINEAR,
    ),
    # Class 4. PaddleFleet 009ddc49 moe/fp8_utils.py kitchen_gemm (the wgrad GEMM the expert
    # nodes call with out=main_grad). Regression: the accumulate switch is folded into one
    # conditional expression that is False on both arms: every expert's main_grad is
    # overwritten by this microbatch's wgrad, though nothing here asked for overwrite.
    Variant(
        4,
        "blind16-paddlefleet-kitchen-gemm-no-accumulate",
        bug=_swap(
            _PF_KITCHEN,
            "    if out is not None:\n        accumulate = True\n        out_dtype = out.dtype\n    else:\n        accumulate = False\n        out_dtype = rtn_dtype\n",
            "    accumulate, out_dtype = (False, out.dtype) if out is not None else (False, rtn_dtype)  # bug\n",
        ),
        twin=_PF_KITCHEN,
    ),
    # Class 5. Fast-LLM 7d61a1ba engine/multi_stage/stage.py _accumulate_grad_hook / Stage.setup.
    # The AccumulateGrad hook moves .grad into grad_buffer and clears .grad. Regression: the
    # hook detaches instead of clearing, so .grad survives; the next backward accumulates on
    # top of it and the hook adds the old gradient into grad_buffer again.
    Variant(
        5,
        "blind16-fastllm-accumulate-hook-keeps-grad",
        bug=_swap(
            _FL_HOOK,
            "            buffer.grad = None\n",
            "            buffer.grad.detach_()  # bug\n",
        ),
        twin=_FL_HOOK,
    ),
    # Class 5. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.backward (shortened).
    # Regression: expert parameters (is_expert_param) skip the fused bookkeeping: their main_grad
    # is written, but no grad_added_to_main_grad and no dummy grad, so the DDP grad-ready hook
    # never fires for them (None grad) and their bucket is never reduced.
    Variant(
        5,
        "blind16-paddlefleet-linear-expert-no-dummy",
        bug=_swap(
            _PF_LINEAR_BWD,
            '        if hasattr(weight, "grad_added_to_main_grad"):\n            if getattr(weight, "zero_out_wgrad", False):\n',
            '        if hasattr(weight, "grad_added_to_main_grad") and not getattr(weight, "is_expert_param", False):  # bug\n            if getattr(weight, "zero_out_wgrad", False):\n',
        ),
        twin=_PF_LINEAR_BWD,
    ),
    # Class 6. Paddle 02a5e4e0 zero_bubble_utils.py WeightGradStore.flush/pop + SplitBWMatmul.
    # Regression: flush queues the cache list and then clears that same list in place, so pop()
    # (the W pass) finds an empty list: no delayed weight gradient is ever computed.
    Variant(
        6,
        "blind16-paddle-weight-grad-store-flush-clears",
        bug=_swap(_PD_ZB, "        cls.cache = []\n", "        cls.cache.clear()  # bug\n"),
        twin=_PD_ZB,
    ),
    # Class 6. Paddle 02a5e4e0 zero_bubble_utils.py SplitBWMatmul.backward.
    # Regression: the enabled/disabled arms are swapped in a conditional expression: with the
    # store disabled (no zero-bubble schedule, nobody calls flush/pop) the wgrad closure is
    # queued and never run, so main_grad never receives the weight gradient.
    Variant(
        6,
        "blind16-paddle-split-bw-matmul-swapped-store",
        bug=_swap(
            _PD_ZB,
            "        if WeightGradStore.enabled:\n            WeightGradStore.put(partial(grad_weight_fn, input, weight, out_grad))\n        else:\n            grad_weight_fn(input, weight, out_grad)\n",
            "        grad_weight_fn(input, weight, out_grad) if WeightGradStore.enabled else WeightGradStore.put(partial(grad_weight_fn, input, weight, out_grad))  # bug\n",
        ),
        twin=_PD_ZB,
    ),
    # Class 7. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.backward (shortened).
    # Regression: the dummy is chosen on the local wgrad_compute (switched off by the deferred
    # embedding-wgrad buffer) instead of the op-level fusion setting: on the deferred path the
    # flag is set but None is returned, so the grad-ready hook never fires for the weight.
    Variant(
        7,
        "blind16-paddlefleet-linear-dummy-on-wgrad-compute",
        bug=_swap(
            _PF_LINEAR_BWD,
            '            if getattr(weight, "zero_out_wgrad", False):\n                grad_weight = paddle.zeros(weight.main_grad.shape, dtype=ctx.input_dtype)\n            else:\n                grad_weight = paddle.empty(weight.main_grad.shape, dtype=ctx.input_dtype)\n',
            '            grad_weight = (paddle.zeros if getattr(weight, "zero_out_wgrad", False) else paddle.empty)(weight.main_grad.shape, dtype=ctx.input_dtype) if wgrad_compute else None  # bug\n',
        ),
        twin=_PF_LINEAR_BWD,
    ),
    # Class 7. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.backward, accuracy-compatible expert branch.
    # Regression: dummy-vs-real is chosen on whether the parameter carries the DDP flag: with
    # Paddle-native main_grad (no grad_added_to_main_grad) the real wgrad is returned after
    # main_grad.add_ already took it: counted twice.
    Variant(
        7,
        "blind16-paddlefleet-linear-expert-real-or-dummy",
        bug=_swap(
            _PF_LINEAR_BWD,
            "        grad_weight = paddle.zeros(weight.shape, dtype=input.dtype)\n",
            '        grad_weight = paddle.zeros(weight.shape, dtype=input.dtype) if hasattr(weight, "grad_added_to_main_grad") else wgrad.astype(input.dtype)  # bug\n',
        ),
        twin=_PF_LINEAR_BWD,
    ),
    # Class 8. PaddleFleet 009ddc49 moe/fp8_utils.py ExpertsGroupGemmContiguousNode.bwd_down_weight.
    # The real loop makes main_grad available (allocates it on the Parameter when None) before
    # the GEMM writes it. Regression: the fallback buffer is a local that is never attached to
    # the Parameter, so with main_grad not yet materialized the expert's wgrad is written into
    # a temporary and lost, and the hook then reduces a missing main_grad.
    Variant(
        8,
        "blind16-paddlefleet-expert-down-main-grad-local",
        bug=_swap(
            _PF_DOWN_WEIGHT,
            "                if expert_w2[i].main_grad is None:\n                    expert_w2[i].main_grad = paddle.zeros(\n                        shape=expert_w2[i].shape, dtype=paddle.float32\n                    )\n                kitchen_gemm(\n                    o2_t_fp8[i], o2_t_scale[i], do3_t_fp8[i], do3_t_scale[i],\n                    True, True, expert_w2[i].main_grad, paddle.float32,\n",
            "                main_grad = expert_w2[i].main_grad if expert_w2[i].main_grad is not None else paddle.zeros(shape=expert_w2[i].shape, dtype=paddle.float32)  # bug\n                kitchen_gemm(\n                    o2_t_fp8[i], o2_t_scale[i], do3_t_fp8[i], do3_t_scale[i],\n                    True, True, main_grad, paddle.float32,\n",
        ),
        twin=_PF_DOWN_WEIGHT,
    ),
    # Class 8. PaddleFleet 9f9bd7b9 moe_shared_expert.py SharedExpertFP8PyLayer.backward.
    # Regression: step C only writes dW2 when main_grad already exists; a parameter whose
    # main_grad is still None (released by sharding, first microbatch) is skipped instead of
    # being given a buffer, yet the backward hook still fires: dW2 is lost.
    Variant(
        8,
        "blind16-paddlefleet-shared-expert-skip-none-main-grad",
        bug=_swap(
            _PF_SHARED,
            '        if hasattr(w2, "main_grad"):\n            if w2.main_grad is None:\n                w2.main_grad = paddle.zeros(w2.shape, dtype=paddle.float32)\n            paddle._C_ops.fused_linear_param_grad_add(\n                o2_s, grad_output, w2.main_grad, None, True, False\n            )\n',
            '        if (mg := getattr(w2, "main_grad", None)) is not None:  # bug\n            paddle._C_ops.fused_linear_param_grad_add(\n                o2_s, grad_output, mg, None, True, False\n            )\n',
        ),
        twin=_PF_SHARED,
    ),
)
