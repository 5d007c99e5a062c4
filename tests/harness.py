"""What the tests of the reference and of the fused path share: main_grad buffers attached the
way Megatron's engines attach them (through gmlp_check.refimpl.megatron), those engines'
post-backward hooks, bit-level comparisons, and a guard for tests that assert inside loops.

It imports nothing of gmlp_check but the reference: the oracle's tests use it and must not
depend on the checker they judge (tests/refimpl/test_isolation.py holds both to that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import torch
from torch import nn

from gmlp_check.refimpl import megatron

T = TypeVar("T")


def nonempty(items: Iterable[T], what: str) -> list[T]:
    """``items`` as a list, failing when there are none: a test that asserts only inside a
    loop over them would otherwise pass having checked nothing."""
    items = list(items)
    assert items, f"no {what}: the checks over them would check nothing"
    return items


def named_weights(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """(name, parameter) of the module's weights (TE's weight, weight0, weight1, ...); never
    empty."""
    weights = [
        (n, p) for n, p in module.named_parameters() if n.rsplit(".", 1)[-1].startswith("weight")
    ]
    return nonempty(weights, "weight parameters")


# -- main_grad ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MainGrads:
    """How main_grad is attached: Megatron DDP or FSDP, overwrite or not, initial contents."""

    fsdp: bool = False
    # DDP: the parameter asks producers to overwrite. FSDP: sharded gradients, which ask the same.
    overwrite: bool = False
    zero_out: bool = False
    fill: str = "random"  # or "nan": a sentinel that must not survive an overwrite


def main_grad_buffers(module: nn.Module, how: MainGrads, seed: int = 2) -> dict[str, torch.Tensor]:
    """A flat fp32 buffer per weight, as Megatron's gradient buffer holds them; the same
    contents for every module with the same weight names and sizes."""
    if how.fill not in ("random", "nan"):
        raise ValueError(f"fill: expected 'random' or 'nan', got {how.fill!r}")
    gen = torch.Generator().manual_seed(seed)
    buffers = {}
    for name, p in named_weights(module):
        if how.fill == "nan":
            buf = torch.full((p.numel(),), float("nan"))
        else:
            buf = torch.randn(p.numel(), generator=gen)
        buffers[name] = buf.to(p.device)
    return buffers


def attach_main_grads(module: nn.Module, how: MainGrads, buffers: dict[str, torch.Tensor]) -> None:
    """Set up each weight of ``buffers`` as Megatron DDP or Megatron-FSDP would."""
    params = dict(module.named_parameters())
    for name, buf in buffers.items():
        p = params[name]
        if how.fsdp:
            megatron.setup_fsdp_param(p, buf, sharded=how.overwrite, zero_out_wgrad=how.zero_out)
        else:
            megatron.setup_ddp_param(p, buf, zero_out_wgrad=how.zero_out)
            if how.overwrite:
                p.overwrite_main_grad = True


def attach(module: nn.Module, how: MainGrads, seed: int = 2) -> dict[str, torch.Tensor]:
    """Give every weight a main_grad as ``how`` says; return the buffers by parameter name."""
    buffers = main_grad_buffers(module, how, seed)
    attach_main_grads(module, how, buffers)
    return buffers


def engine_hook(how: MainGrads) -> Callable[[torch.Tensor], None]:
    """The post-backward hook of the engine ``how`` stands for."""
    if how.fsdp:
        return partial(megatron.fsdp_post_backward_hook, sharded=how.overwrite)
    return megatron.ddp_post_backward_hook


# -- comparisons and memory ---------------------------------------------------------------------


def same_memory(a: object, b: torch.Tensor) -> bool:
    """Whether ``a`` is a tensor over exactly ``b``'s elements (``b`` itself or a view of it,
    as main_grad is a param-shaped view of the engine's buffer)."""
    return (
        isinstance(a, torch.Tensor)
        and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and a.data_ptr() == b.data_ptr()
        and a.numel() == b.numel()
    )


_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality, so that NaN sentinels compare equal to themselves."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    as_int = _SAME_SIZE_INT[a.element_size()]
    return torch.equal(a.contiguous().view(as_int), b.contiguous().view(as_int))
