"""megatron-core 0.19.2 DistributedDataParallel around a fused side, and its reduced gradients.

Written after (read, not copied) core/distributed/distributed_data_parallel.py,
core/distributed/param_and_grad_buffer.py and core/optimizer/distrib_optimizer.py, and the way
Megatron-LM's training/training.py builds the wrapper (wrap_model_chunks_with_ddp).
"""

from __future__ import annotations

from torch import nn

from .configs import EngineConfig
from .wrapped import Reading, Wrapped, transformer_config

# With overlap_grad_reduce a bucket closes once it holds this many elements. Megatron's default
# (max(4e7, 1e6 * dp), megatron-core 0.19.2 ``DistributedDataParallel.__init__``) puts each real
# expert weight, tens of millions of elements, in a bucket of its own; at the checker's sizes one
# element does the same, so each parameter's reduction is dispatched from its own last hook, as
# in training.
BUCKET_SIZE = 1


def wrap(module: nn.Module, config: EngineConfig, *, delay: bool) -> Wrapped:
    """DDP as Megatron-LM sets it up (megatron-core 0.19.2): fp32 main grads
    (--accumulate-allreduce-grads-in-fp32, ``get_megatron_ddp_config``; without it main_grad has
    the parameter dtype, ``group_params_for_buffers``), mean over the data-parallel ranks by
    pre-scaling 1/dp and a SUM collective (average_in_collective False,
    ``DistributedDataParallel.__init__``), one bucket when overlap is off
    (``resolve_ddp_bucket_size``), the distributed optimizer's parameter layout computed up front
    (``wrap_model_chunks_with_ddp``), delayed weight gradients reduced from backward_dw
    (ddp_config.delay_wgrad_compute, ``DistributedDataParallel.__init__`` registers the hook
    with the module's ``register_wgrad_accumulation_and_reduce_hooks``)."""
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    bucket_size = BUCKET_SIZE if config.overlap_grad_reduce else None
    ddp_config = DistributedDataParallelConfig(
        grad_reduce_in_fp32=True,
        overlap_grad_reduce=config.overlap_grad_reduce,
        use_distributed_optimizer=config.use_distributed_optimizer,
        bucket_size=bucket_size,
        average_in_collective=False,
        delay_wgrad_compute=delay,
    )
    layout = None
    if config.use_distributed_optimizer:
        params = [p for p in module.parameters() if p.requires_grad]
        layout = DistributedOptimizer.compute_full_param_layout(
            params,
            bucket_size,
            parallel_state.get_data_parallel_world_size(with_context_parallel=True),
            ddp_config,
            expert_data_parallel_world_size=parallel_state.get_expert_data_parallel_world_size(),
        )
    params = dict(module.named_parameters())
    # DDP allocates its buffers on torch.cuda.current_device() and, with the distributed
    # optimizer, points param.data into its parameter buffer after copying the values
    # (megatron-core 0.19.2 ``_ParamAndGradBuffer.__init__``): the weights are loaded before this.
    model = DistributedDataParallel(
        transformer_config(), ddp_config, module, full_param_layout=layout
    )
    return Wrapped(
        config,
        model,
        module,
        params,
        lambda: read(model, params, config.use_distributed_optimizer),
        backward_dw_after_backward=delay,
    )


def read(model, params: dict[str, nn.Parameter], distributed_optimizer: bool) -> dict[str, Reading]:
    """Each parameter's reduced main_grad on this rank.

    main_grad is a view of the fp32 gradient buffer shaped like the parameter (megatron-core
    0.19.2 ``_ParamAndGradBuffer.__init__`` through ``_ParamAndGradBuffer._get``). After an
    all-reduce the whole view is the reduced gradient. With the distributed optimizer only this
    rank's shard of each bucket is (reduce-scatter into shard_buffer(bucket.grad_data)[rank],
    ``_ParamAndGradBucketGroup.start_grad_sync``); the optimizer's own map of it is
    ``DistributedOptimizer._build_gbuf_range_map``, whose "param" range is exactly what its
    step() copies into the fp32 main parameter's grad
    (``DistributedOptimizer._copy_model_grads_to_main_grads``). Reading that range is reading the
    optimizer's shard."""
    ranges: dict[int, tuple[int, int]] = {}
    if distributed_optimizer:
        from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

        for buffer in model.buffers + model.expert_parallel_buffers:
            for per_dtype in DistributedOptimizer._build_gbuf_range_map(buffer).values():
                for bucket_map in per_dtype:
                    for p, r in bucket_map["param_map"].items():
                        ranges[id(p)] = (r["param"].start, r["param"].end)
    out = {}
    for name, p in params.items():
        flat = p.main_grad.detach().view(-1)
        if distributed_optimizer:
            lo, hi = ranges.get(id(p), (0, 0))
        else:
            lo, hi = 0, flat.numel()
        out[name] = Reading(flat[lo:hi].float().clone(), lo, hi, flat.numel())
    return out
