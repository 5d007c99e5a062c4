"""What every grouped MLP implementation shares: the constructor, the parameter layout and the
input checks.

Parameters carry Transformer Engine's names (``weight0``.. or one ``weight`` [G, out, in] with
``single_grouped_weight``; biases likewise), registered in the same order and initialised the
same way, so state dicts move between implementations and one seed gives the same weights.
The layout is the protocol: implementations subclass these classes for their compute.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from .activations import get_activation
from .config import MLPConfig
from .validation import check_input, check_main_grad_source, check_probs, normalize_split_sizes


class GroupedLinearParams(nn.Module):
    """The parameters of one grouped linear layer (fc1 or fc2) and its per-op settings."""

    def __init__(self, name: str, in_features: int, out_features: int, config: MLPConfig) -> None:
        super().__init__()
        self.name = name
        self.in_features = in_features
        self.out_features = out_features
        self.config = config
        groups = config.num_experts
        factory = {"dtype": config.dtype, "device": config.device}
        if config.single_grouped_weight:
            shape = (groups, out_features, in_features)
            self.weight = nn.Parameter(torch.empty(shape, **factory))
            if config.bias:
                self.bias = nn.Parameter(torch.empty(groups, out_features, **factory))
        else:
            for g in range(groups):
                weight = nn.Parameter(torch.empty(out_features, in_features, **factory))
                self.register_parameter(f"weight{g}", weight)
            for g in range(groups if config.bias else 0):
                bias_g = nn.Parameter(torch.empty(out_features, **factory))
                self.register_parameter(f"bias{g}", bias_g)
        self.reset_parameters()

    # The per-op settings, read from the one configuration.
    @property
    def num_groups(self) -> int:
        return self.config.num_experts

    @property
    def use_bias(self) -> bool:
        return self.config.bias

    @property
    def single_grouped_weight(self) -> bool:
        return self.config.single_grouped_weight

    @property
    def accumulate_into_main_grad(self) -> bool:
        return self.config.accumulate_into_main_grad

    @property
    def delay_wgrad_compute(self) -> bool:
        return self.config.delay_wgrad_compute

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-bound, bound)

    def weight_names(self) -> list[str]:
        if self.single_grouped_weight:
            return ["weight"]
        return [f"weight{g}" for g in range(self.num_groups)]

    def bias_names(self) -> list[str]:
        if not self.use_bias:
            return []
        if self.single_grouped_weight:
            return ["bias"]
        return [f"bias{g}" for g in range(self.num_groups)]

    def weight_params(self) -> list[nn.Parameter]:
        return self._named(self.weight_names())

    def bias_params(self) -> list[nn.Parameter]:
        return self._named(self.bias_names())

    def _named(self, names: list[str]) -> list[nn.Parameter]:
        # What getattr(self, name) gives, without nn.Module.__getattr__'s microsecond per name:
        # with 256 experts that was a quarter of backward_dw's host time. A name an engine
        # re-registered elsewhere (deleted and set as a plain attribute) goes through getattr.
        registered = self._parameters
        return [registered[n] if n in registered else getattr(self, n) for n in names]

    def per_expert(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Split per-parameter tensors (one [G, ...] or G of [...]) into one per expert."""
        if self.single_grouped_weight:
            return list(tensors[0].unbind(0))
        return list(tensors)


class GroupedMLPParams(nn.Module):
    """fc1 -> activation -> fc2: constructor, parameters, input checks and wgrad hooks.

    Subclasses set ``linear_class`` (their grouped linear layer) and implement ``forward``
    (calling :meth:`check_call` first) and ``backward_dw``."""

    linear_class: type[GroupedLinearParams] = GroupedLinearParams

    def __init__(self, *args: object, **kwargs: object) -> None:
        """Takes an ``MLPConfig``, or its fields (positional or keyword, as the module:factory
        protocol passes them)."""
        super().__init__()
        config = MLPConfig.of(*args, **kwargs)
        self.check_supported(
            dtype=config.dtype, device=config.torch_device, hidden=config.hidden, ffn=config.ffn
        )
        self.config = config
        self.activation = get_activation(config.activation)
        fc1_out = self.activation.fc1_out_features(config.ffn)
        self.fc1 = self.linear_class("fc1", config.hidden, fc1_out, config)
        self.fc2 = self.linear_class("fc2", config.ffn, config.hidden, config)
        self._wgrad_hooks: list[Callable[[], None]] = []

    @property
    def num_experts(self) -> int:
        return self.config.num_experts

    @property
    def hidden(self) -> int:
        return self.config.hidden

    @property
    def ffn(self) -> int:
        return self.config.ffn

    @property
    def accumulate_into_main_grad(self) -> bool:
        return self.config.accumulate_into_main_grad

    @property
    def delay_wgrad_compute(self) -> bool:
        return self.config.delay_wgrad_compute

    @classmethod
    def check_supported(
        cls, *, dtype: torch.dtype, device: torch.device, hidden: int, ffn: int
    ) -> None:
        """Raise NotImplementedError (with the reason) for a configuration this implementation
        cannot compute correctly, before any parameter is allocated. The reference runs all."""

    def check_call(
        self,
        x: torch.Tensor,
        split_sizes: Sequence[int] | torch.Tensor,
        probs: torch.Tensor | None,
    ) -> list[int]:
        """Check forward's arguments; return the split sizes as G Python ints."""
        weight = self.fc1.weight_params()[0]
        check_input(x, self.hidden, weight.dtype, weight.device)
        sizes = normalize_split_sizes(split_sizes, self.num_experts, x.shape[0])
        check_probs(probs, x.shape[0], self.activation.uses_probs, self.activation.name)
        if self.accumulate_into_main_grad:
            # Fail at forward, not deep inside backward, when a buffer can never be found.
            for layer in (self.fc1, self.fc2):
                for name, p in zip(layer.weight_names(), layer.weight_params()):
                    check_main_grad_source(f"{layer.name}.{name}", p)
        return sizes

    def register_wgrad_accumulation_and_reduce_hooks(self, hook: Callable[[], None]) -> None:
        """Hooks run by backward_dw() once delayed weight gradients are in place (TE's name)."""
        self._wgrad_hooks.append(hook)

    def run_wgrad_hooks(self) -> None:
        for hook in self._wgrad_hooks:
            hook()
