"""The configuration of a grouped MLP, declared once.

Every implementation (the reference, the fused paths, the Transformer Engine and Megatron
adapters), the checker's cases and the benchmark build their modules from one ``MLPConfig``.
A user's ``module:factory`` receives its fields as keyword arguments (``as_kwargs``), so
factories stay plain functions of documented names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class MLPConfig:
    num_experts: int  # G
    hidden: int
    ffn: int  # per expert; GLU activations make fc1 2*ffn wide
    activation: str = "swiglu"
    bias: bool = False
    single_grouped_weight: bool = False  # one [G, out, in] weight (and bias) instead of G
    # Weight gradients go into param.main_grad (fp32) instead of autograd's .grad; TE's
    # accumulate_into_main_grad / fuse_wgrad_accumulation, Megatron's
    # gradient_accumulation_fusion.
    accumulate_into_main_grad: bool = False
    delay_wgrad_compute: bool = False  # weight gradients in backward_dw(), not backward
    dtype: torch.dtype = torch.float32
    device: torch.device | str = "cpu"

    def __post_init__(self) -> None:
        for name in ("num_experts", "hidden", "ffn"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")

    @classmethod
    def of(cls, *args: object, **kwargs: object) -> MLPConfig:
        """A constructor's arguments as a config: one MLPConfig, or MLPConfig's fields
        (positional or by keyword, as the module:factory protocol passes them)."""
        if len(args) == 1 and not kwargs and isinstance(args[0], MLPConfig):
            return args[0]
        return cls(*args, **kwargs)

    def as_kwargs(self) -> dict[str, object]:
        """The keyword arguments a ``module:factory`` receives."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: object) -> MLPConfig:
        return dataclasses.replace(self, **changes)

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device)
