"""te-ops: Transformer Engine's op fuser, ``ops.Sequential(GroupedLinear, <activation>,
GroupedLinear)``, the pipeline Megatron's TEGroupedMLP builds for its fused path
(megatron/core/transformer/moe/experts.py ``_make_fused_ops``).

How TE 2.20.2 takes its inputs (ops/basic/grouped_linear.py):

* split sizes are an *extra input* of each GroupedLinear (``num_extra_inputs = 1``, read at
  ``fuser_forward``: a tensor of G integers, cast to int64 and moved to the weights' device);
  ScaledSwiGLU takes the probs as its extra input. ``Sequential(x, *extra)`` hands them out in
  op order: ``(splits, [probs], splits)``.
* ``accumulate_into_main_grad``, ``single_grouped_weight`` (+ ``single_grouped_bias``) and
  ``delay_wgrad_compute`` are GroupedLinear constructor arguments; single grouped parameters
  also need ``NVTE_GROUPED_LINEAR_SINGLE_PARAM=1`` at construction, and TE's grouped-tensor
  GEMM path (bf16/fp16, sm90+, cuBLASLt >= 13.4 on Hopper).
* delayed weight gradients run from ``GroupedLinear.backward_dw()`` on each op (Megatron calls
  fc2's, then fc1's); each op runs its ``register_wgrad_accumulation_and_reduce_hooks`` hooks at
  the end of its backward_dw. The hooks are registered on fc1's op, whose backward_dw runs last.

Two factories:

* ``make``: TE alone. Under Megatron-FSDP ``main_grad`` is None until fetched, and
  ``GroupedLinear.fuser_forward`` raises "MAIN GRAD IS NONE"; TE fetches through
  ``get_main_grad()`` only in backward (``get_main_grad_from_param`` in ops/_common.py).
* ``make_exposed``: the same, with main_grad exposed from ``get_main_grad()`` before forward,
  as Megatron's pre-forward hook does (megatron-core 0.19.2
  ``TEGroupedMLP._ensure_main_grad``), but without Megatron forcing
  ``overwrite_main_grad=True``: it checks TE's op in both FSDP modes as TE sees them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..refimpl.config import MLPConfig
from .te_common import (
    TE_ACTIVATIONS,
    TEAdapter,
    check_target,
    import_te,
    lookup,
    make_activation_op,
    refuse_fp32_grouped_tensor,
    require_grouped_tensor_path,
    require_kwargs,
    single_param_env,
    split_tensor,
)

ADAPTER = "te-ops"

GROUPED_LINEAR_KWARGS = (
    "bias",
    "device",
    "dtype",
    "accumulate_into_main_grad",
    "single_grouped_weight",
    "single_grouped_bias",
    "delay_wgrad_compute",
)


class TEOpsGroupedMLP(TEAdapter):
    def __init__(self, config: MLPConfig, *, expose_fsdp_main_grad: bool = False) -> None:
        adapter = ADAPTER if not expose_fsdp_main_grad else f"{ADAPTER} (main_grad exposed)"
        super().__init__(adapter, config)
        self.expose_fsdp_main_grad = expose_fsdp_main_grad
        row = lookup(adapter, TE_ACTIVATIONS, config.activation)
        if config.single_grouped_weight:
            refuse_fp32_grouped_tensor(
                adapter,
                "single_grouped_weight",
                config.dtype,
                "is_op_fuser_grouped_tensor_path_supported in ops/basic/grouped_linear.py",
            )
        device = check_target(adapter, config.device, config.dtype)
        te = import_te(adapter)
        ops = te.ops
        require_kwargs(adapter, ops.GroupedLinear, GROUPED_LINEAR_KWARGS)
        # Which GroupedLinear path runs: the cuBLASLt grouped-tensor GEMM or the legacy
        # split-quantize + multi-stream cuBLAS GEMMs (``GroupedLinear.fuser_forward``).
        if config.single_grouped_weight:
            require_grouped_tensor_path(
                adapter,
                "single_grouped_weight",
                bool(ops.is_op_fuser_grouped_tensor_path_supported(None, config.dtype)),
            )
        linear = {
            "bias": config.bias,
            "device": device,
            "dtype": config.dtype,
            "accumulate_into_main_grad": config.accumulate_into_main_grad,
            "single_grouped_weight": config.single_grouped_weight,
            "single_grouped_bias": config.single_grouped_weight and config.bias,
            "delay_wgrad_compute": config.delay_wgrad_compute,
        }
        fc1_out = self.activation.fc1_out_features(config.ffn)
        with single_param_env(config.single_grouped_weight):
            fc1 = ops.GroupedLinear(config.num_experts, config.hidden, fc1_out, **linear)
            fc2 = ops.GroupedLinear(config.num_experts, config.ffn, config.hidden, **linear)
        for op in (fc1, fc2):
            if op.single_grouped_weight != config.single_grouped_weight:
                raise RuntimeError(
                    f"{adapter}: TE built GroupedLinear with single_grouped_weight="
                    f"{op.single_grouped_weight}, asked for {config.single_grouped_weight}"
                )
        act = make_activation_op(adapter, te, row)
        self._scaled = row.scaled
        # A tuple keeps TE's objects out of the module tree (and their _extra_state out of the
        # state dict); their Parameters are bound under refimpl's names below.
        self._te = (ops.Sequential(fc1, act, fc2), fc1, fc2)
        self.bind_grouped("fc1", fc1, single=config.single_grouped_weight, bias=config.bias)
        self.bind_grouped("fc2", fc2, single=config.single_grouped_weight, bias=config.bias)
        self.set_hook_owner(fc1)

    def forward(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        sizes = self.check_call(x, split_sizes, probs)
        if self.expose_fsdp_main_grad:
            expose_main_grads(self.weight_params())
        sequential = self._te[0]
        splits = split_tensor(sizes, x.device)
        extra = (splits, probs, splits) if self._scaled else (splits, splits)
        return sequential(x, *extra)

    def backward_dw(self) -> None:
        _, fc1, fc2 = self._te
        fc2.backward_dw()
        fc1.backward_dw()


def expose_main_grads(params: list[torch.nn.Parameter]) -> None:
    """What Megatron's pre-forward hook does for Megatron-FSDP parameters (megatron-core 0.19.2
    ``TEGroupedMLP._ensure_main_grad``), minus its ``overwrite_main_grad = True``: fetch the lazy
    buffer so TE finds it at forward."""
    for p in params:
        get_main_grad = getattr(p, "get_main_grad", None)
        if get_main_grad is not None and getattr(p, "main_grad", None) is None:
            p.main_grad = get_main_grad()


def make(**mlp_kwargs) -> TEOpsGroupedMLP:
    """``module:factory`` entry point: TE's op fuser alone."""
    return TEOpsGroupedMLP(MLPConfig(**mlp_kwargs))


def make_exposed(**mlp_kwargs) -> TEOpsGroupedMLP:
    """``module:factory`` entry point: TE's op fuser with Megatron-FSDP's main_grad exposed."""
    return TEOpsGroupedMLP(MLPConfig(**mlp_kwargs), expose_fsdp_main_grad=True)
