"""te-grouped-linear: two ``transformer_engine.pytorch.GroupedLinear`` modules (fc1, fc2) with
``fuse_wgrad_accumulation``, the path Megatron's TEGroupedMLP takes without the op fuser
(megatron/core/extensions/transformer_engine.py ``TEGroupedLinear``). The activation between
them is TE's own kernel: the same op as te-ops, run standalone in a one-op ``ops.Sequential``.

What TE 2.20.2's module does (module/grouped_linear.py):

* ``forward(inp, m_splits)``: split sizes as an int64 tensor (a list is converted to a CPU
  tensor in ``GroupedLinear.forward``); ``is_first_microbatch`` is left None, so fused wgrad
  accumulates into main_grad on every microbatch (Megatron passes True on the first microbatch
  of a step, which makes that one overwrite: ``_GroupedLinear.backward`` and
  ``_GroupedLinear._backward_grouped_tensor``).
* two GEMM paths, chosen by ``use_grouped_tensor`` (constructor; None reads the deprecated
  NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM, default off, which is what Megatron gets): the
  legacy split-quantize + multi-stream cuBLAS path, or the native cuBLASLt grouped-tensor path
  (bf16/fp16, sm90+, cuBLASLt >= 13.4 on Hopper: ``is_module_grouped_tensor_path_supported``).
  ``make`` takes TE's and Megatron's
  default; ``make_grouped_tensor`` asks for the native path.
* single grouped weight: supported, but only on the native path (``GroupedLinear.forward``
  raises otherwise) and with NVTE_GROUPED_LINEAR_SINGLE_PARAM=1 at construction; Megatron
  itself refuses it without the op fuser (megatron-core 0.19.2
  ``TransformerConfig.__post_init__``).
* ``backward_dw()`` pops one deferred GEMM per call and runs the module's
  ``register_wgrad_accumulation_and_reduce_hooks`` hooks (``GroupedLinear.backward_dw``); the
  hooks are registered
  on fc1, whose backward_dw runs last.
"""

from __future__ import annotations

import importlib
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

ADAPTER = "te-grouped-linear"

MODULE_KWARGS = (
    "bias",
    "device",
    "params_dtype",
    "fuse_wgrad_accumulation",
    "delay_wgrad_compute",
    "single_grouped_weight",
    "single_grouped_bias",
    "use_grouped_tensor",
)


class TEGroupedLinearMLP(TEAdapter):
    def __init__(self, config: MLPConfig, *, use_grouped_tensor: bool = False) -> None:
        adapter = f"{ADAPTER} (grouped tensor)" if use_grouped_tensor else ADAPTER
        super().__init__(adapter, config)
        row = lookup(adapter, TE_ACTIVATIONS, config.activation)
        # A single grouped weight exists only on the native grouped-tensor path.
        what = "single_grouped_weight" if config.single_grouped_weight else "use_grouped_tensor"
        use_grouped_tensor = use_grouped_tensor or config.single_grouped_weight
        if use_grouped_tensor:
            refuse_fp32_grouped_tensor(
                adapter,
                what,
                config.dtype,
                "is_module_grouped_tensor_path_supported in module/grouped_linear.py",
            )
        device = check_target(adapter, config.device, config.dtype)
        te = import_te(adapter)
        require_kwargs(adapter, te.GroupedLinear, MODULE_KWARGS)
        module = importlib.import_module("transformer_engine.pytorch.module")
        if use_grouped_tensor:
            require_grouped_tensor_path(
                adapter,
                what,
                bool(module.is_module_grouped_tensor_path_supported(None, config.dtype)),
            )
        common = {
            "bias": config.bias,
            "device": device,
            "params_dtype": config.dtype,
            "fuse_wgrad_accumulation": config.accumulate_into_main_grad,
            "delay_wgrad_compute": config.delay_wgrad_compute,
            "single_grouped_weight": config.single_grouped_weight,
            "single_grouped_bias": config.single_grouped_weight and config.bias,
            "use_grouped_tensor": use_grouped_tensor,
        }
        fc1_out = self.activation.fc1_out_features(config.ffn)
        with single_param_env(config.single_grouped_weight):
            fc1 = te.GroupedLinear(config.num_experts, config.hidden, fc1_out, **common)
            fc2 = te.GroupedLinear(config.num_experts, config.ffn, config.hidden, **common)
        for linear in (fc1, fc2):
            if linear.single_grouped_weight != config.single_grouped_weight:
                raise RuntimeError(
                    f"{adapter}: TE built GroupedLinear with single_grouped_weight="
                    f"{linear.single_grouped_weight}, asked for {config.single_grouped_weight}"
                )
        act = te.ops.Sequential(make_activation_op(adapter, te, row))
        self._scaled = row.scaled
        self._te = (fc1, act, fc2)  # a tuple: out of the module tree and the state dict
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
        fc1, act, fc2 = self._te
        splits = split_tensor(sizes, x.device)
        h = fc1(x, splits)
        a = act(h, probs) if self._scaled else act(h)
        return fc2(a, splits)

    def backward_dw(self) -> None:
        fc1, _, fc2 = self._te
        fc2.backward_dw()
        fc1.backward_dw()


def make(**mlp_kwargs) -> TEGroupedLinearMLP:
    """``module:factory`` entry point: TE's GroupedLinear module on its default GEMM path."""
    return TEGroupedLinearMLP(MLPConfig(**mlp_kwargs))


def make_grouped_tensor(**mlp_kwargs) -> TEGroupedLinearMLP:
    """``module:factory`` entry point: the same on TE's native cuBLASLt grouped-tensor path."""
    return TEGroupedLinearMLP(MLPConfig(**mlp_kwargs), use_grouped_tensor=True)
