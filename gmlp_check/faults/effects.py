"""What each surface fault does to a delivered weight gradient (``intercept.Delivery``): the
real backend's effects, rewritten the way one bug class would have left them.

This file is buggy on purpose: gmlp-lint excludes it (pyproject.toml).
"""

from __future__ import annotations

import torch

from .intercept import Delivery


def _nonempty(d: Delivery) -> list[int]:
    return [g for g, n in enumerate(d.splits) if n > 0]


def _empty(d: Delivery) -> list[int]:
    return [g for g, n in enumerate(d.splits) if n == 0]


def _restore(d: Delivery, experts: list[int]) -> None:
    """Those experts' main_grad as it was before the step: their write is lost."""
    if d.region is None or d.before is None:
        return
    for g in experts:
        if g in d.experts:
            d.block(d.region, g).copy_(d.block(d.before, g))


def lose_first_nonempty_expert(d: Delivery) -> None:
    _restore(d, _nonempty(d)[:1])


def lose_first_empty_expert(d: Delivery) -> None:
    if d.overwrite:  # accumulating nothing into an empty expert is what the contract asks
        _restore(d, _empty(d)[:1])


def accumulate_instead_of_overwrite(d: Delivery) -> None:
    if d.overwrite and d.region is not None and d.before is not None:
        d.region.add_(d.before)


def overwrite_instead_of_accumulate(d: Delivery) -> None:
    if not d.overwrite and d.region is not None and d.before is not None:
        d.region.sub_(d.before)


def _wgrad(d: Delivery) -> torch.Tensor:
    experts = d.experts
    if len(experts) == 1:
        return d.written(experts[0])
    return torch.stack([d.written(g) for g in experts])


def hand_wgrad_to_autograd(d: Delivery) -> None:
    if d.region is not None and d.before is not None:
        d.param.grad = _wgrad(d).to(d.param.dtype)


def nonzero_dummy(d: Delivery) -> None:
    if d.param.grad is not None:
        d.param.grad = torch.ones_like(d.param.grad)


def unset_grad_added(d: Delivery) -> None:
    if hasattr(d.param, "grad_added_to_main_grad"):
        d.param.grad_added_to_main_grad = False


def set_grad_added(d: Delivery) -> None:
    if hasattr(d.param, "grad_added_to_main_grad"):
        d.param.grad_added_to_main_grad = True


def alias_grad_to_main_grad(d: Delivery) -> None:
    if d.region is not None and d.region.dtype == d.param.dtype:
        d.param.grad = d.region


def drop_dummy(d: Delivery) -> None:
    d.param.grad = None


def write_unfetched_buffer(d: Delivery) -> None:
    """The FSDP bucket keeps its old contents; the gradient sits in a buffer of its own that
    the path assigned to ``param.main_grad`` instead of calling ``get_main_grad()``."""
    if (
        d.region is None
        or d.before is None
        or not callable(getattr(d.param, "get_main_grad", None))
    ):
        return
    stray = d.region.clone()
    d.region.copy_(d.before)
    d.param.main_grad = stray


def _permute_experts(d: Delivery, source: dict[int, int]) -> None:
    """Expert g's region receives expert source[g]'s gradient."""
    if d.region is None or d.before is None or len(d.experts) < 2:
        return
    grads = {g: d.written(g) for g in d.experts}
    for g, s in source.items():
        d.block(d.region, g).copy_(d.base(g) + grads[s])


def swap_two_experts(d: Delivery) -> None:
    filled = _nonempty(d)
    if not filled or len(d.experts) < 2:
        return
    a = filled[0]
    b = (a + 1) % len(d.experts)
    _permute_experts(d, {a: b, b: a})


def shift_group_offsets(d: Delivery) -> None:
    count = len(d.experts)
    _permute_experts(d, {g: (g + 1) % count for g in range(count)})


def write_through_stand_in(d: Delivery) -> None:
    """The main_grad write and the flag went to a stand-in (a detached or quantized copy of
    the weight carrying its own main_grad): the Parameter sees neither."""
    _restore(d, d.experts)
    unset_grad_added(d)


def _through_quantized_copy(d: Delivery) -> bool:
    """The forward ran under an FP8 recipe with high-precision weights: TE's GEMMs read a
    quantized copy of each weight, an object apart from the Parameter. Without FP8 (or with
    FP8 primary weights, where the Parameter is the quantized tensor) there is no copy, and
    code that reads or writes "the weight the GEMM used" reaches the Parameter itself."""
    return d.case.quantized and not d.case.fp8_weights


def flag_from_quantized_copy(d: Delivery) -> None:
    """overwrite_main_grad read from the quantized copy, which does not carry it: the write
    accumulates where overwrite is asked. Invisible wherever there is no copy."""
    if _through_quantized_copy(d):
        accumulate_instead_of_overwrite(d)


def write_through_quantized_copy(d: Delivery) -> None:
    """main_grad and the flag written on the quantized copy instead of the Parameter.
    Invisible wherever there is no copy."""
    if _through_quantized_copy(d):
        write_through_stand_in(d)
