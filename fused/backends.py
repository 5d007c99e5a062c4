"""Backends registry: build a fused grouped MLP by name, or anyone's by "module:factory".

A backend is a factory taking refimpl.GroupedMLP's keyword arguments (num_experts, hidden,
ffn, activation, bias, single_grouped_weight, accumulate_into_main_grad,
delay_wgrad_compute, dtype, device) and returning a torch.nn.Module with the same
forward(x, split_sizes, probs=None), backward_dw(),
register_wgrad_accumulation_and_reduce_hooks(hook) and parameter names (fc1.weight0.., or
fc1.weight [G, out, in] with single_grouped_weight; likewise biases and fc2).

    "triton"             fused.GroupedMLP: Triton kernels (CUDA compiled, CPU interpreted)
    "torch-grouped-mm"   torch._grouped_mm GEMMs (bf16, sm90+)
    "pkg.module:factory" imports pkg.module and calls its attribute ``factory``
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

import torch

from .faults import FAULTS, inject

BUILTIN_BACKENDS = ("triton", "torch-grouped-mm")

_EXPECTED = (
    f"one of {', '.join(repr(b) for b in BUILTIN_BACKENDS)} or a 'package.module:factory' string"
)
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_NAME = re.compile(r"[A-Za-z_]\w*")


class BackendError(ValueError):
    """A backend spec that cannot be loaded or built, or a backend this machine cannot run."""


def load_factory(spec: str) -> Callable[..., torch.nn.Module]:
    """The factory named by ``spec``; raises BackendError naming the spec and the expected form."""
    if spec == "triton":
        from .mlp import GroupedMLP

        return GroupedMLP
    if spec == "torch-grouped-mm":
        from .grouped_mm import TorchGroupedMMMLP

        return TorchGroupedMMMLP
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise BackendError(f"backend: expected {_EXPECTED}, got {spec!r}")
    module_name, attribute = spec.split(":")
    if not _DOTTED_NAME.fullmatch(module_name) or not _NAME.fullmatch(attribute):
        raise BackendError(f"backend: expected {_EXPECTED}, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any failure to import is the same user-facing problem
        raise BackendError(
            f"backend {spec!r}: cannot import module {module_name!r} ({type(e).__name__}: {e})"
        ) from e
    if not hasattr(module, attribute):
        raise BackendError(
            f"backend {spec!r}: module {module_name!r} has no attribute {attribute!r} "
            f"(expected a factory taking refimpl.GroupedMLP's keyword arguments)"
        )
    factory = getattr(module, attribute)
    if not callable(factory):
        raise BackendError(
            f"backend {spec!r}: {module_name}.{attribute} is a {type(factory).__name__}, "
            f"expected a callable factory taking refimpl.GroupedMLP's keyword arguments"
        )
    return factory


def create(spec: str, *, fault: str | None = None, **mlp_kwargs) -> torch.nn.Module:
    """Build the grouped MLP of backend ``spec``; ``fault`` (triton only) injects a known bug."""
    if fault is not None:
        if spec != "triton":
            raise BackendError(
                f"fault: faults can only be injected into backend 'triton', got backend {spec!r}"
            )
        if fault not in FAULTS:
            raise BackendError(f"fault: expected one of {', '.join(FAULTS)}, got {fault!r}")
    factory = load_factory(spec)
    module = factory(**mlp_kwargs)
    if not isinstance(module, torch.nn.Module):
        raise BackendError(
            f"backend {spec!r}: the factory returned a {type(module).__name__}, "
            f"expected a torch.nn.Module"
        )
    if fault is not None:
        inject(module, fault)
    return module
