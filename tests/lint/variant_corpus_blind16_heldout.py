"""The sixteenth blind corpus, held-out part (H-blind16, third variant of each class).

Sources (repo, commit, path, function); the twins are shared with variant_corpus_blind16:
- PaddlePaddle/PaddleFleet 9f9bd7b9 src/paddlefleet/transformer/moe/moe_shared_expert.py
  StandardMLPSharedExpert._quantize_weights / _fp8_forward
- PaddlePaddle/PaddleFleet 021152f8 src/paddlefleet/tensor_parallel/layers.py
  LinearWithGradAccumulationAndAsyncCommunication.forward / .backward
- ServiceNow/Fast-LLM 7d61a1ba fast_llm/functional/triton/mlp.py ChunkWeight / ChunkWeightPost
- PaddlePaddle/Paddle 02a5e4e0 python/paddle/distributed/fleet/meta_parallel/zero_bubble_utils.py
  grad_weight_fn, SplitBWMatmul.backward
"""

# ruff: noqa: E501
from __future__ import annotations

from .variant_corpus import Variant
from .variant_corpus_blind16 import (
    _FL_CHUNK,
    _PD_ZB,
    _PF_LINEAR_BWD,
    _PF_LINEAR_FWD,
    _PF_SHARED_CALLER,
    _swap,
)

# 8c twin: PaddleFleet's forward with the main_grad fetch that Paddle's FSDP fusion buffer
# needs (it registers param.get_main_grad(), a view into the unsharded grad buffer, and the
# main_grad attribute may still be None). HEAD reads weight.main_grad only; whether HEAD's FSDP
# path reaches this layer with main_grad None could not be told, so the twin is the fetching form.
_PF_LINEAR_FWD_FETCH = _swap(
    _PF_LINEAR_FWD,
    "            main_grad = weight.main_grad\n",
    "            main_grad = weight.main_grad\n"
    '            if main_grad is None and hasattr(weight, "get_main_grad"):\n'
    "                main_grad = weight.main_grad = weight.get_main_grad()\n",
)

VARIANTS = (
    # Class 1. PaddleFleet 9f9bd7b9 moe_shared_expert.py StandardMLPSharedExpert._fp8_forward
    # (+ _quantize_weights). Regression: the caller passes a quantized stand-in where the
    # PyLayer expects the Parameter; the down-proj weight gradient never reaches main_grad.
    Variant(
        1,
        "blind16-paddlefleet-shared-expert-caller-fp8",
        bug=_swap(
            _PF_SHARED_CALLER,
            "            w1, w2,\n",
            "            w1, w2.fp8_weight_stacked,  # bug\n",
        ),
        twin=_PF_SHARED_CALLER,
    ),
    # Class 2. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.backward (shortened). Regression: a dtype
    # copy of the weight replaces the restored Parameter view before the fused wgrad.
    Variant(
        2,
        "blind16-paddlefleet-linear-backward-weight-copy",
        bug=_swap(
            _PF_LINEAR_BWD,
            "    if input is not None and input.dtype != weight.dtype:\n        input = input.astype(weight.dtype)\n\n    if ctx.gradient_accumulation_fusion:\n        weight.main_grad = main_grad\n",
            "    if ctx.gradient_accumulation_fusion:\n        weight.main_grad = main_grad\n\n    if input is not None and input.dtype != weight.dtype:\n        weight = weight.astype(input.dtype)  # bug\n",
        ),
        twin=_PF_LINEAR_BWD,
    ),
    # Class 3. Fast-LLM 7d61a1ba functional/triton/mlp.py ChunkWeight.backward / ChunkWeightPost.
    # Regression: a chunk (expert) that received no write keeps its stale buffer although the
    # parent's param_grad_is_zero was already unset (claimed written).
    Variant(
        3,
        "blind16-fastllm-chunk-weight-unzeroed",
        bug=_swap(
            _FL_CHUNK,
            "            if weight_chunk.param_grad_is_zero:\n",
            "            if weight_chunk.param_grad_is_zero and weight_chunk.grad is not None:  # bug\n",
        ),
        twin=_FL_CHUNK,
    ),
    # Class 4. Paddle 02a5e4e0 zero_bubble_utils.py grad_weight_fn. Regression: the main_grad
    # write replaces its contents.
    Variant(
        4,
        "blind16-paddle-grad-weight-fn-assign",
        bug=_swap(
            _PD_ZB,
            "                weight.main_grad.add_(weight_grad)\n",
            "                paddle.assign(weight_grad.cast(paddle.float32), output=weight.main_grad)  # bug\n",
        ),
        twin=_PD_ZB,
    ),
    # Class 5. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.backward (shortened), fused branch.
    Variant(
        5,
        "blind16-paddlefleet-linear-flag-value-guard",
        bug=_swap(
            _PF_LINEAR_BWD,
            '        if hasattr(weight, "grad_added_to_main_grad"):\n            if getattr(weight, "zero_out_wgrad", False):\n',
            '        if getattr(weight, "grad_added_to_main_grad", False):  # bug\n            if getattr(weight, "zero_out_wgrad", False):\n',
        ),
        twin=_PF_LINEAR_BWD,
    ),
    # Class 6. Paddle 02a5e4e0 zero_bubble_utils.py SplitBWMatmul.backward / WeightGradStore.
    Variant(
        6,
        "blind16-paddle-split-bw-matmul-cache-rebound",
        bug=_swap(
            _PD_ZB,
            "            WeightGradStore.put(partial(grad_weight_fn, input, weight, out_grad))\n",
            "            WeightGradStore.cache = [partial(grad_weight_fn, input, weight, out_grad)]  # bug\n",
        ),
        twin=_PD_ZB,
    ),
    # Class 7. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.backward (shortened), sequence-parallel return.
    Variant(
        7,
        "blind16-paddlefleet-linear-sp-return-gated",
        bug=_swap(
            _PF_LINEAR_BWD,
            "        return sub_grad_input, grad_weight, grad_bias\n",
            "        return sub_grad_input, (grad_weight if input_needs_grad else None), grad_bias  # bug\n",
        ),
        twin=_PF_LINEAR_BWD,
    ),
    # Class 8. PaddleFleet 021152f8 tensor_parallel/layers.py
    # LinearWithGradAccumulationAndAsyncCommunication.forward; twin is the fetching form (above).
    Variant(
        8,
        "blind16-paddlefleet-linear-no-get-main-grad",
        bug=_swap(
            _PF_LINEAR_FWD_FETCH,
            '            main_grad = weight.main_grad\n            if main_grad is None and hasattr(weight, "get_main_grad"):\n                main_grad = weight.main_grad = weight.get_main_grad()\n',
            "            main_grad = weight.main_grad  # bug\n",
        ),
        twin=_PF_LINEAR_FWD_FETCH,
    ),
)
