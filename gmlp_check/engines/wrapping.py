"""Hands a module under test to the real engine of its configuration's flavour.

Apart from ``wrapped`` (the types both engines return) so that ``ddp`` and ``fsdp`` import
``wrapped`` and this module imports them, with no import cycle between them.
"""

from __future__ import annotations

import torch
from torch import nn

from . import ddp, fsdp
from .configs import EngineConfig
from .wrapped import Wrapped


def wrap(module: nn.Module, config: EngineConfig, *, delay: bool, device: torch.device) -> Wrapped:
    """Wrap ``module`` (weights loaded and identical on every rank, parameters marked) as
    Megatron-LM's ``training.get_model`` does through ``wrap_model_chunks_with_ddp`` (the
    Megatron-LM release of megatron-core 0.19.2)."""
    if config.flavour == "ddp":
        return ddp.wrap(module, config, delay=delay)
    return fsdp.wrap(module, config, delay=delay, device=device)
