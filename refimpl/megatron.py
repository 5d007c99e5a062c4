"""The other side of the contract: parameters set up, and gradients received, the way Megatron's
data-parallel engines do it. An emulation, written after these upstream files:

* megatron-core 0.19.2, ``megatron/core/distributed/distributed_data_parallel.py``
  (``_make_backward_post_hook``, lines 468-501) and ``param_and_grad_buffer.py`` (main_grad is
  a view of the parameter's slice of the fp32 gradient buffer, shaped like the parameter);
* megatron-fsdp 0.6.1, ``megatron_fsdp/megatron_fsdp.py`` (``_grad_acc``, lines 633-678; the
  unshard path, lines 500-511, sets ``overwrite_main_grad = True`` for every strategy but
  ``no_shard``: the emulation models the sharded ones, optim_grads and optim_grads_params,
  where that is right; for ``optim`` it is Megatron-LM #6357, which ``--megatron real
  --engine-configs fsdp-optim`` shows) and ``param_and_grad_buffer.py`` (``get_main_grad``,
  lines 3086-3115, ends in ``.view(param.shape)``; ``reset_param_main_grad``, lines
  1419-1426, sets ``main_grad`` to None after each reduction).

The emulation models DDP with ``overlap_grad_reduce`` on, the setting Megatron-LM runs with and
the one under which DDP's hook asserts that a gradient arrived; ``--megatron real`` runs both.

The two post-backward hooks differ, and whether a fused side's bug shows depends on it: DDP adds
``param.grad`` into main_grad unless the fused side set ``grad_added_to_main_grad`` (and adds it
anyway under ``zero_out_wgrad``); Megatron-FSDP with sharded gradients *copies* ``.grad`` into
a fresh main_grad bucket (or zeroes the bucket when no gradient came) unless the fused side set
the flag, ignores ``zero_out_wgrad``, and resets the flag after every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class MissingGradError(AssertionError):
    """DDP's hook found param.grad None under overlap_grad_reduce (TE #2097)."""


def ddp_post_backward_hook(param: torch.Tensor, *, overlap_grad_reduce: bool = True) -> None:
    """megatron-core 0.19.2 DDP: add .grad into main_grad unless the fused side already did.
    The assertion on a missing ``.grad`` exists only with ``overlap_grad_reduce``
    (``DistributedDataParallel._make_backward_post_hook``)."""
    if overlap_grad_reduce and param.grad is None:
        raise MissingGradError(
            "param.grad being None is not safe when overlap_grad_reduce is True "
            "(a fused op must return a dummy gradient)"
        )
    if param.grad is not None and (
        not getattr(param, "grad_added_to_main_grad", False)
        or getattr(param, "zero_out_wgrad", False)
    ):
        param.main_grad.add_(param.grad.data)
    param.grad = None


def fsdp_post_backward_hook(param: torch.Tensor, *, sharded: bool) -> None:
    """megatron-fsdp 0.6.1 ``_grad_acc``. With sharded gradients the bucket that
    get_main_grad() returns is copied into (or zeroed); without, .grad is added to it."""
    if not param.grad_added_to_main_grad:
        if sharded:
            param.main_grad = param.get_main_grad()
            if param.grad is not None:
                param.main_grad.copy_(param.grad)
            else:
                param.main_grad.zero_()
        elif param.grad is not None:
            param.main_grad = param.get_main_grad()
            param.main_grad.add_(param.grad)
    param.grad = None
    param.grad_added_to_main_grad = False


def setup_ddp_param(
    param: torch.Tensor, main_grad: torch.Tensor, *, zero_out_wgrad: bool = False
) -> None:
    """Megatron DDP: main_grad (shaped like the parameter) exists from the start;
    grad_added_to_main_grad is reset per step."""
    param.main_grad = main_grad.view(param.shape)
    param.grad_added_to_main_grad = False
    if zero_out_wgrad:
        param.zero_out_wgrad = True


def setup_fsdp_param(
    param: torch.Tensor,
    main_grad: torch.Tensor,
    *,
    sharded: bool = True,
    zero_out_wgrad: bool = False,
) -> None:
    """Megatron-FSDP: main_grad is None until fetched through get_main_grad(); the sharded
    strategies (optim_grads, optim_grads_params) ask the fused side to overwrite it. (Before the
    first fetch the real engine has no ``main_grad`` attribute at all: ``hide_main_grad``.)"""
    param.main_grad = None
    param.get_main_grad = lambda: main_grad.view(param.shape)
    param.__fsdp_param__ = True
    param.grad_added_to_main_grad = False
    if sharded:
        param.overwrite_main_grad = True
    if zero_out_wgrad:
        param.zero_out_wgrad = True


def hide_main_grad(param: torch.Tensor) -> None:
    """Megatron-FSDP never sets ``main_grad`` when it wraps a module: the attribute is absent
    until its post-backward hook or a fused side sets it (megatron-fsdp 0.6.1:
    ``MegatronFSDP.__init__`` sets only the flags; the ``_grad_acc`` hook of
    ``MegatronFSDP._register_fsdp_hooks`` assigns it), so a fused side testing ``hasattr(p,
    "main_grad")`` meets the absent state in the first microbatch."""
    if "main_grad" in vars(param):
        del param.main_grad


def release_main_grad(param: torch.Tensor) -> None:
    """Megatron-FSDP after reducing a bucket: ``param.main_grad = None`` where the attribute
    exists (megatron-fsdp 0.6.1 ``DataParallelBuffer.reset_param_main_grad``). With sharded
    gradients that happens every microbatch, so each microbatch fetches its bucket anew."""
    if hasattr(param, "main_grad"):
        param.main_grad = None


def mark_delayed_weights(module: torch.nn.Module) -> None:
    """What Transformer Engine does for the weights whose gradients it delays
    (TE 2.20.2 ``GroupedLinear._apply_delay_wgrad_param_hooks``): mark them
    ``skip_backward_post_hook``, which is what megatron-core DDP routes through
    ``register_wgrad_accumulation_and_reduce_hooks`` (megatron-core 0.19.2
    ``DistributedDataParallel.__init__``)."""
    for p in weight_params(module):
        p.skip_backward_post_hook = True


def reset_for_step(params: Iterable[torch.Tensor]) -> None:
    """What DDP does before each step: no gradient added yet, no .grad held."""
    for p in params:
        if hasattr(p, "grad_added_to_main_grad"):
            p.grad_added_to_main_grad = False
        p.grad = None


def is_weight(name: str) -> bool:
    """Transformer Engine's names: weight, weight0, weight1, ... (biases: bias, bias0, ...)."""
    return name.rsplit(".", 1)[-1].startswith("weight")


def weight_params(module: torch.nn.Module) -> list[torch.Tensor]:
    """The weight parameters, by Transformer Engine's names (weight, weight0, weight1, ...)."""
    return [p for n, p in module.named_parameters() if is_weight(n)]


def install_hooks(
    module: torch.nn.Module,
    params: Iterable[torch.Tensor],
    hook: Callable[[torch.Tensor], None],
    *,
    delay_wgrad_compute: bool | None = None,
) -> list:
    """Register ``hook(param)`` as each parameter's post-backward hook, the way both engines do.

    It fires when autograd accumulates a gradient, and, for modules with delayed weight
    gradients, from ``backward_dw()`` through the module's
    ``register_wgrad_accumulation_and_reduce_hooks``: megatron-core 0.19.2 routes there every
    parameter marked ``skip_backward_post_hook`` when ``ddp_config.delay_wgrad_compute`` is on
    (``DistributedDataParallel.__init__``; Transformer Engine marks its delayed weights, and
    its GroupedLinear module its biases too, and the checker marks the weights of every
    delayed case the same way: ``mark_delayed_weights``). A module that delays but carries no
    mark at all has its weights routed there (biases still go through autograd).
    ``delay_wgrad_compute`` None reads the module's attribute, which a third-party module may
    not have. Returns the handles of the autograd hooks."""
    params = list(params)
    if delay_wgrad_compute is None:
        delay_wgrad_compute = bool(getattr(module, "delay_wgrad_compute", False))
    delayed: list[torch.Tensor] = []
    if delay_wgrad_compute:
        delayed = [p for p in params if getattr(p, "skip_backward_post_hook", False)]
        if not delayed:
            delayed = [p for p in weight_params(module) if any(p is q for q in params)]

        def after_backward_dw() -> None:
            for p in delayed:
                hook(p)

        module.register_wgrad_accumulation_and_reduce_hooks(after_backward_dw)
    return [
        p.register_post_accumulate_grad_hook(hook)
        for p in params
        if not any(p is d for d in delayed)
    ]
