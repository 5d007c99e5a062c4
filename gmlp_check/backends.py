"""Which fused grouped MLP the checker runs: a built-in name or anyone's "package.module:factory".

A backend is a factory taking the reference's keyword arguments (num_experts, hidden, ffn,
activation, bias, single_grouped_weight, accumulate_into_main_grad, delay_wgrad_compute,
dtype, device) and returning a torch.nn.Module with forward(x, split_sizes, probs=None),
backward_dw(), register_wgrad_accumulation_and_reduce_hooks(hook) and the reference's
parameter names. The built-in names are only aliases of such specs, loaded the same way.

A factory that cannot build a configuration (a dtype, a device, a weight layout) raises
NotImplementedError with the reason: the checker reports that as unsupported (a skip), never
as a failure. A module may declare ``fp32_matmul = "tf32"`` when it runs fp32 GEMMs in TF32.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .deviations import (
    BASIC_LINEAR_DELAYED_SCALING,
    BASIC_LINEAR_OVERWRITE_BUGS,
    TE_EARLY_GRAD_ADDED,
    TE_OPS_BLOCK_SCALING,
    Deviation,
)
from .errors import not_an_exception, short

if TYPE_CHECKING:
    import torch

    from gmlp_check.refimpl.config import MLPConfig


@dataclass(frozen=True)
class BackendEntry:
    """A built-in backend, with what is known about it (as an OpInfo entry carries its skips
    and xfails): where it runs, and its known deviations and bugs, from runs against the real
    stacks on an H200 (README: "What gmlp-check finds in Transformer Engine 2.20.2 and
    megatron-core 0.19.2"). Its factory refuses what it cannot run (NotImplementedError);
    ``devices`` and ``dtypes`` say the same for readers and the README's table."""

    target: str  # module:factory
    doc: str
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]  # on CUDA; the CPU runs those of DEVICE_DTYPES it supports
    known: tuple[Deviation, ...] = ()
    # Compiles kernels on first use (Triton JIT): a cold run warms the compile cache in
    # parallel first (gmlp_check.warmup).
    compiles_on_first_use: bool = False


_TE = ("fp32", "fp16", "bf16")

# name -> entry. Order is the order of --help and the README table.
BUILTIN: dict[str, BackendEntry] = {
    "triton": BackendEntry(
        "gmlp_check.fused.mlp:TritonGroupedMLP",
        "our Triton fused path (CUDA compiled, CPU interpreted)",
        ("cpu", "cuda"),
        ("fp32", "fp16", "bf16"),
        compiles_on_first_use=True,
    ),
    "triton-cublas-wgrad": BackendEntry(
        "gmlp_check.fused.mlp:TritonCublasWgradMLP",
        "our Triton fused path with every weight gradient by cuBLAS per expert (the route "
        "the triton backend takes for few large experts)",
        ("cuda",),
        ("fp16", "bf16"),
        compiles_on_first_use=True,
    ),
    "torch-grouped-mm": BackendEntry(
        "gmlp_check.fused.grouped_mm:TorchGroupedMMMLP",
        "the same contract on torch._grouped_mm (bf16, sm90+)",
        ("cuda",),
        ("bf16",),
    ),
    "te-ops": BackendEntry(
        "gmlp_check.adapters.te_ops:make_exposed",
        "Transformer Engine's op fuser, ops.Sequential(GroupedLinear, activation, "
        "GroupedLinear), with Megatron's pre-forward fetch of lazy FSDP main_grads",
        ("cuda",),
        _TE,
        (TE_EARLY_GRAD_ADDED, TE_OPS_BLOCK_SCALING),
    ),
    "te-grouped-linear": BackendEntry(
        "gmlp_check.adapters.te_grouped_linear:make",
        "Transformer Engine's GroupedLinear module with fuse_wgrad_accumulation",
        ("cuda",),
        _TE,
        (TE_EARLY_GRAD_ADDED,),
    ),
    "te-sequential": BackendEntry(
        "gmlp_check.adapters.te_sequential:make",
        "one Transformer Engine ops.Sequential(BasicLinear, activation, BasicLinear) per expert",
        ("cuda",),
        _TE,
        (BASIC_LINEAR_DELAYED_SCALING, *BASIC_LINEAR_OVERWRITE_BUGS),
    ),
    "megatron-te-grouped-mlp": BackendEntry(
        "gmlp_check.adapters.megatron_te:make",
        "megatron-core's TEGroupedMLP (op-fuser path) with its main_grad layer",
        ("cuda",),
        _TE,
        (TE_EARLY_GRAD_ADDED, TE_OPS_BLOCK_SCALING),
    ),
}


def known_deviations(spec: str) -> tuple[Deviation, ...]:
    """The known deviations and bugs of a built-in backend (none for anyone's factory)."""
    entry = BUILTIN.get(spec)
    return entry.known if entry is not None else ()


# The methods the checker calls besides forward (README: the module:factory protocol).
PROTOCOL_METHODS = ("backward_dw", "register_wgrad_accumulation_and_reduce_hooks")

_EXPECTED = f"one of {', '.join(BUILTIN)} or a 'package.module:factory' string"
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_NAME = re.compile(r"[A-Za-z_]\w*")


class BackendError(ValueError):
    """A backend spec that cannot be loaded, or a factory that breaks the protocol."""


def _import(module_name: str):
    """Import like ``python -m`` does: a package in the working directory is found too (console
    scripts do not put it on sys.path). The directory goes last, so it shadows nothing."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = module_name.split(".")[0]
        if exc.name != top or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)


def resolve(spec: str) -> str:
    """The module:factory target of a spec (a built-in name or the spec itself)."""
    if isinstance(spec, str) and spec in BUILTIN:
        return BUILTIN[spec].target
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise BackendError(f"--fused: expected {_EXPECTED}, got {spec!r}")
    module_name, attribute = spec.split(":")
    if not _DOTTED_NAME.fullmatch(module_name) or not _NAME.fullmatch(attribute):
        raise BackendError(f"--fused: expected {_EXPECTED}, got {spec!r}")
    return spec


@dataclass(frozen=True)
class Backend:
    """A loaded backend: the spec the user gave and its factory."""

    spec: str
    factory: Callable[..., torch.nn.Module]

    def build(self, config: MLPConfig) -> torch.nn.Module:
        """Call the factory with the configuration's fields as keyword arguments.
        NotImplementedError (unsupported configuration), any other Exception and
        KeyboardInterrupt pass through; a factory that leaves by another BaseException
        (sys.exit, GeneratorExit) or returns something that is not a module with the
        protocol's methods is a BackendError."""
        # torch here, not at the top: the pytest plugin reads the table above in every pytest
        # run, and must not import torch unless a run asks for it.
        import torch

        try:
            module = self.factory(**config.as_kwargs())
        except (Exception, KeyboardInterrupt):  # a failure or a refusal; an interrupt
            raise
        except BaseException as exc:  # sys.exit, GeneratorExit, a class of its own
            raise BackendError(
                f"--fused {self.spec}: the factory {not_an_exception(exc)}; a factory must "
                "return a module or raise an Exception"
            ) from None
        if not isinstance(module, torch.nn.Module):
            raise BackendError(
                f"--fused {self.spec}: the factory returned {type(module).__name__}, "
                f"expected a torch.nn.Module"
            )
        missing = [m for m in PROTOCOL_METHODS if not callable(getattr(module, m, None))]
        if missing:
            raise BackendError(
                f"--fused {self.spec}: the module ({type(module).__qualname__}) has no "
                f"{' or '.join(f'{m}()' for m in missing)}, which the module:factory protocol "
                f"requires (a no-op when weight gradients are not delayed)"
            )
        return module


def load(spec: str) -> Backend:
    """The backend named by ``spec``; BackendError naming the spec and the expected form."""
    target = resolve(spec)
    module_name, attribute = target.split(":")
    try:
        module = _import(module_name)
    except KeyboardInterrupt:  # Ctrl-C while it loads: an interrupt, not a bad module
        raise
    # Any other failure to import is the same user-facing problem: an exception, a module
    # calling sys.exit, or any BaseException of its own.
    except BaseException as exc:
        raise BackendError(
            f"--fused {spec}: cannot import module {module_name!r} ({short(exc)})"
        ) from None
    try:
        factory = getattr(module, attribute)
    except AttributeError:
        raise BackendError(
            f"--fused {spec}: module {module_name!r} has no attribute {attribute!r} "
            f"(expected a factory taking the reference's keyword arguments)"
        ) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a module-level __getattr__ is user code too
        raise BackendError(
            f"--fused {spec}: reading {module_name}.{attribute} failed ({short(exc)})"
        ) from None
    if not callable(factory):
        raise BackendError(
            f"--fused {spec}: {module_name}.{attribute} is a {type(factory).__name__}, "
            f"expected a callable factory taking the reference's keyword arguments"
        )
    return Backend(spec, factory)
