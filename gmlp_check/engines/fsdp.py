"""Megatron-FSDP (megatron-fsdp 0.6.1, vendored in megatron-core 0.19.2) around a fused side, and
its reduced gradients.

Written after (read, not copied) megatron-core's core/distributed/fsdp/mcore_fsdp_adapter.py
(FullyShardedDataParallel, Megatron-LM's entry) and megatron_fsdp/megatron_fsdp.py,
megatron_fsdp/param_and_grad_buffer.py. The vendored copy is byte-identical to the
megatron-fsdp 0.6.1 wheel.
"""

from __future__ import annotations

import torch
from torch import nn

from .configs import EngineConfig
from .wrapped import Reading, Wrapped, transformer_config

UNIT_PREFIX = "mlp."


class DelayedWgradBoundary(torch.autograd.Function):
    """Runs the fused side's ``backward_dw()`` inside the backward pass, once its data gradient
    is done, then fires Megatron-FSDP's ``post_wgrad_grad_acc_hook`` of each delayed weight:
    what Megatron's MoE layer does at its dispatch boundary (megatron-core 0.19.2
    ``_RegisterDelayedWgradForExperts`` in moe_layer). It must happen during backward:
    Megatron-FSDP's root post-backward callback reduces every parameter not handled by then
    (megatron-fsdp 0.6.1 ``_root_post_backward`` in ``MegatronFSDP._register_fsdp_hooks``), so a
    backward_dw() after backward() returned would find its gradients already reduced as zeros."""

    @staticmethod
    def forward(ctx, module, x):
        ctx.module = module
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        module = ctx.module
        module.backward_dw()
        for p in module.parameters():
            hook = getattr(p, "post_wgrad_grad_acc_hook", None)
            if hook is not None:
                hook()
        return None, grad


class Unit(nn.Module):
    """The FSDP unit: the whole fused side, behind the delayed-wgrad boundary. As one unit its
    parameters are gathered together before forward and backward under ZeRO-3, so a fused
    forward that never calls its submodules still sees whole weights (with no units, Megatron-
    FSDP gathers per module whose forward runs, megatron-fsdp 0.6.1
    ``_param_list_for_submodule_unshard`` in ``MegatronFSDP._register_fsdp_hooks``)."""

    def __init__(self, mlp: nn.Module, delay: bool) -> None:
        super().__init__()
        self.mlp = mlp
        self.delay = delay

    def forward(self, x, split_sizes, probs=None):
        if self.delay:
            x = DelayedWgradBoundary.apply(self.mlp, x)
        return self.mlp(x, split_sizes, probs)


def wrap(module: nn.Module, config: EngineConfig, *, delay: bool, device: torch.device) -> Wrapped:
    """Megatron-FSDP through megatron-core's adapter, as Megatron-LM's get_model does with
    --use-megatron-fsdp: the distributed optimizer on (megatron-core 0.19.2 ``validate_args``),
    fp32 main grads (--megatron-fsdp-main-grads-dtype; the default None would give the parameter
    dtype, megatron-fsdp 0.6.1 ``ParamAndGradBuffer._resolve_group_grad_dtype``), mean over the
    data-parallel ranks (pre-scale and SUM; NCCL's premul-sum where the backend has it,
    ``gradient_reduce_preprocessing``), the fused side as the one FSDP unit (the adapter's default
    units name Megatron's TransformerLayer classes, ``FullyShardedDataParallel.__init__`` in
    mcore_fsdp_adapter)."""
    from megatron.core.distributed import DistributedDataParallelConfig, FullyShardedDataParallel

    if device.type == "cuda" and device.index is None:
        # Megatron-FSDP compares its device with cuda:{current_device()} (``MegatronFSDP.__init__``)
        # and allocates its buffers on it: name the rank's GPU explicitly.
        device = torch.device("cuda", torch.cuda.current_device())
    unit = Unit(module, delay)
    ddp_config = DistributedDataParallelConfig(
        use_megatron_fsdp=True,
        use_distributed_optimizer=True,
        data_parallel_sharding_strategy=config.sharding,
        # Megatron-FSDP forces it on for optim_grads(_params) (``MegatronFSDP.__init__``).
        overlap_grad_reduce=config.overlap_grad_reduce,
        overlap_param_gather=config.sharding == "optim_grads_params",
        average_in_collective=False,
        megatron_fsdp_main_grads_dtype=torch.float32,
        # NCCL's premul-sum; gloo (CPU) has none, and Megatron-FSDP then scales in place.
        gradient_reduce_div_fusion=device.type == "cuda",
    )
    model = FullyShardedDataParallel(
        transformer_config(), ddp_config, unit, fsdp_unit_modules=[Unit], device=device
    )
    fsdp = model.module  # the MegatronFSDP object
    # Megatron-FSDP replaces the module's parameters by DTensor optimizer parameters after
    # construction and after finish_grad_sync (megatron-fsdp 0.6.1
    # ``MegatronFSDP._replace_param_with_distributed_if_needed``) and swaps the compute
    # parameters back in forward (``MegatronFSDP.forward``): raw_param holds those, by name.
    params = {
        name[len(UNIT_PREFIX) :]: p
        for name, p in fsdp.raw_param.items()
        if name.startswith(UNIT_PREFIX)
    }
    sharded = config.sharding != "no_shard"
    return Wrapped(
        config,
        model,
        module,
        params,
        lambda: read(fsdp, params, sharded),
        backward_dw_after_backward=False,
    )


def read(fsdp, params: dict[str, nn.Parameter], only_shard: bool) -> dict[str, Reading]:
    """The reduced gradient lives in each parameter group's main_grad_buffer
    (megatron-fsdp 0.6.1 ``DataParallelBuffer``): the whole item for no_shard; for the other
    strategies this rank's (virtual) shard, exactly what ``ParamAndGradBuffer.update_main_grads``
    attaches to the optimizer parameters (only_shard = strategy != no_shard). param.main_grad
    itself is None by then (``DataParallelBuffer.reset_param_main_grad``) and is not read."""
    buffers = fsdp.param_and_grad_buffer
    out = {}
    for name, p in params.items():
        gbuf = buffers.parameter_groups[buffers.param_to_param_group[p]].main_grad_buffer
        item = gbuf.param_idx[p]
        values = gbuf.get_item(item, only_shard=only_shard)
        if only_shard:
            # The item's intersection with this rank's shard, in item coordinates
            # (``DataParallelBuffer._get_item_slice_in_shard``);
            # an item that only touches the shard's boundary comes back empty.
            lo, hi = gbuf._get_item_slice_in_shard(item)
            hi = max(lo, hi)
        else:
            lo, hi = 0, p.numel()
        if values.numel() != hi - lo:
            raise RuntimeError(
                f"{name}: Megatron-FSDP's shard holds {values.numel()} elements, its slice "
                f"[{lo}:{hi}] {hi - lo}"
            )
        out[name] = Reading(values.detach().float().reshape(-1).clone(), lo, hi, p.numel())
    return out
