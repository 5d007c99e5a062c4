"""A module under test wrapped by a real engine, and what the engine holds after a step.

``mark_params`` marks the parameters the way Megatron's layers do before the engine sees them;
``engines.wrapping.wrap`` hands the module to ``ddp.wrap`` or ``fsdp.wrap``, which import this
module (never the other way round) and return a ``Wrapped``: the engine
object the training loop drives (``zero_grad_buffer``, ``no_sync``, ``finish_grad_sync`` via
``finalize_model_grads``), the fused side itself, its parameters by the reference's names, and
how to read each parameter's reduced gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..inputs import is_weight
from .configs import EngineConfig


@dataclass
class Reading:
    """Elements [lo, hi) of a flattened parameter that this rank holds reduced (a copy)."""

    values: torch.Tensor  # fp32, hi - lo elements
    lo: int
    hi: int
    numel: int


@dataclass
class Wrapped:
    config: EngineConfig
    model: nn.Module  # DistributedDataParallel / FullyShardedDataParallel
    module: nn.Module  # the fused side under test
    params: dict[str, nn.Parameter]  # the parameters the fused side sees, by its names
    read: Callable[[], dict[str, Reading]]
    backward_dw_after_backward: bool  # DDP: the schedule calls backward_dw() itself

    def forward(self, x, split_sizes, probs=None):
        return self.model(x, split_sizes, probs)


def mark_params(module: nn.Module, *, delay: bool, zero_out: bool) -> None:
    """What Megatron's layers put on parameters before the engine wraps them.

    * ``skip_backward_post_hook`` on delayed weights, which Transformer Engine sets itself
      (TE 2.20.2 ``GroupedLinear._apply_delay_wgrad_param_hooks``). Megatron-core DDP then
      hooks them through ``register_wgrad_accumulation_and_reduce_hooks`` (megatron-core 0.19.2
      ``DistributedDataParallel.__init__``) and Megatron-FSDP leaves them to
      ``post_wgrad_grad_acc_hook`` (megatron-fsdp 0.6.1 ``setup_delayed_wgrad_acc_hook``; its
      ``MegatronFSDP._register_fsdp_hooks`` skips them). A fused side that marks its own
      parameters keeps its marks.
    * ``zero_out_wgrad``: Megatron's shared weights (DDP adds ``.grad`` anyway under it,
      ``DistributedDataParallel._make_backward_post_hook``).
    * ``need_backward_dw()`` on the module, which TE modules have: Megatron-FSDP wires
      ``post_wgrad_grad_acc_hook`` only for modules that say they need it
      (``setup_delayed_wgrad_acc_hook``).
    """
    for name, p in module.named_parameters():
        if delay and is_weight(name):
            p.skip_backward_post_hook = True
        if zero_out:
            p.zero_out_wgrad = True
    if delay and not callable(getattr(module, "need_backward_dw", None)):
        module.need_backward_dw = _needs_backward_dw


def _needs_backward_dw() -> bool:
    return True


def transformer_config(calculate_per_token_loss: bool = False):
    """The TransformerConfig the engines read: DDP its calculate_per_token_loss
    (megatron-core 0.19.2 ``DistributedDataParallel.__init__``) and cuda_graph_impl
    (``DistributedDataParallel.zero_grad_buffer``), the FSDP adapter
    gradient_accumulation_fusion, fp8_recipe and friends
    (``FullyShardedDataParallel.__init__`` in mcore_fsdp_adapter), finalize_model_grads whatever
    ``get_model_config`` finds. The sizes are placeholders: nothing here builds a transformer."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    return TransformerConfig(
        num_layers=1,
        hidden_size=8,
        num_attention_heads=1,
        calculate_per_token_loss=calculate_per_token_loss,
    )
