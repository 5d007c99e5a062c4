"""The planted Megatron-LM #6357 fixture: a backend whose parameters are all told to overwrite
main_grad before every forward, whatever the engine, as the pre-#6357 Megatron-FSDP code did
"for all sharding strategies".

Under megatron-core DDP (and Megatron-FSDP no_shard/optim) main_grad is one persistent buffer
that accumulates over the microbatches and is reduced once, so a producer that honours the
flag keeps only the last microbatch's weight gradient: ``--megatron real`` must fail it (with
the last-microbatch diagnosis) from two microbatches on, with and without the distributed
optimizer. Usable as ``--fused tests.engines.forced_overwrite:triton``.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from gmlp_check.backends import load


def force_overwrite_main_grad(module: nn.Module, *unused) -> None:
    """The forward pre-hook: every parameter of the module is told to overwrite."""
    for p in module.parameters():
        p.overwrite_main_grad = True


def forcing(spec: str) -> Callable[..., nn.Module]:
    """A factory building ``spec``'s module with the forcing pre-hook installed."""

    def factory(**mlp_kwargs) -> nn.Module:
        module = load(spec).factory(**mlp_kwargs)
        module.register_forward_pre_hook(force_overwrite_main_grad)
        return module

    factory.__name__ = f"forced_{spec.replace('-', '_')}"
    return factory


triton = forcing("triton")
te_ops = forcing("te-ops")
reference = forcing("gmlp_check.refimpl:GroupedMLP")
