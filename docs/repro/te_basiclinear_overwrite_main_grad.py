"""Transformer Engine's BasicLinear skips Megatron's main_grad bookkeeping when overwrite_main_grad
is set, and under Megatron-FSDP's unsharded gradient buffer the weight gradient is then added twice.

Standalone: needs torch, a CUDA GPU and transformer_engine (checked with 2.20.2); part 2 also
needs megatron-core (checked with 0.19.2, whose Megatron-FSDP is megatron-fsdp 0.6.1). It does
not import gmlp-check. Run: python te_basiclinear_overwrite_main_grad.py   (exit 1 = bug seen)

Part 1, TE alone. Megatron's wgrad fusion contract: an op that wrote a weight's gradient into
``weight.main_grad`` sets ``weight.grad_added_to_main_grad = True`` and hands autograd a dummy
gradient, so that the data-parallel engine's hook does not add the gradient again.
``overwrite_main_grad=True`` (what Megatron-FSDP sets on every parameter) asks the op to replace
main_grad's contents instead of adding to them: it changes *how* main_grad is written, not
*whether*. ``BasicLinear.op_backward`` reads ``accumulate_into_main_grad`` from the op, then
re-assigns the same local from ``get_accumulate_flag_in_param`` (False under overwrite), and
gates the dummy and the flag on the re-assigned local. So under overwrite it writes main_grad
correctly, leaves grad_added_to_main_grad False, and returns main_grad itself as the weight's
gradient (for an fp32 weight, ``.grad`` is then the main_grad tensor). With overwrite off the
same op sets the flag: the control below shows only overwrite breaks it. TE's GroupedLinear op
gates the same bookkeeping on ``self._accumulate_into_main_grad`` (the fix of TE #2936).

Part 2, what that does under Megatron-FSDP on one rank (``optim_grads``, the ZeRO-2 strategy).
With one data-parallel rank the gradient buffer is not distributed, so Megatron-FSDP's
post-accumulate-grad hook takes its *unsharded* branch: if grad_added_to_main_grad is False it
adds ``.grad`` into main_grad. BasicLinear has just overwritten main_grad with this microbatch's
gradient W and handed over ``.grad`` = W, so the buffer holds 2 W. (Megatron-FSDP also forces
overwrite_main_grad=True on this unsharded buffer, so even a correct op keeps only the last
microbatch: a separate, Megatron-side issue, shown here as the reference line.) With two or
more ranks the buffer is sharded and the hook *copies* ``.grad`` over the bucket, so the value
survives there; the bookkeeping is still wrong.
"""

from __future__ import annotations

import os
import socket
import sys

import torch

DEVICE = "cuda"
IN, OUT, ROWS = 64, 32, 48


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def make_op(dtype: torch.dtype, overwrite: bool):
    import transformer_engine.pytorch as te

    op = te.ops.BasicLinear(IN, OUT, device=DEVICE, dtype=dtype, accumulate_into_main_grad=True)
    w = op.weight
    w.main_grad = torch.full((OUT, IN), 7.0, device=DEVICE, dtype=torch.float32)
    w.grad_added_to_main_grad = False
    w.overwrite_main_grad = overwrite
    return op


def part1() -> list[str]:
    """BasicLinear's own bookkeeping, with overwrite_main_grad off (control) and on."""
    failures = []
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for overwrite in (False, True):
            op = make_op(dtype, overwrite)
            w = op.weight
            before = w.main_grad.clone()
            x = torch.randn(ROWS, IN, device=DEVICE, dtype=dtype)
            dy = torch.randn(ROWS, OUT, device=DEVICE, dtype=dtype)
            op(x).backward(dy)
            wgrad = dy.double().T @ x.double()  # [OUT, IN]
            expected = wgrad if overwrite else before.double() + wgrad
            value_err = rel(w.main_grad, expected)
            flag = getattr(w, "grad_added_to_main_grad", None)
            aliased = w.grad is not None and w.grad.data_ptr() == w.main_grad.data_ptr()
            tag = f"dtype={str(dtype)[6:]} overwrite_main_grad={overwrite}"
            print(
                f"part 1 {tag}: main_grad rel. error {value_err:.1e}; "
                f"grad_added_to_main_grad={flag}; .grad "
                f"{'None' if w.grad is None else str(w.grad.dtype)[6:]}"
                f"{' (IS main_grad)' if aliased else ''}"
            )
            if value_err > 2e-2:
                failures.append(f"{tag}: main_grad wrong (rel. error {value_err:.1e})")
            if flag is not True:
                failures.append(f"{tag}: main_grad written but grad_added_to_main_grad={flag}")
            if aliased:
                failures.append(f"{tag}: the weight's .grad is the main_grad tensor itself")
    return failures


def part2() -> list[str]:
    """Two microbatches of BasicLinear under megatron-core's Megatron-FSDP, one rank."""
    try:
        from megatron.core import parallel_state
        from megatron.core.distributed import (
            DistributedDataParallelConfig,
            FullyShardedDataParallel,
        )
        from megatron.core.transformer.transformer_config import TransformerConfig
    except ImportError as exc:
        print(f"part 2 not run: megatron-core is not importable ({exc})")
        return []
    import transformer_engine.pytorch as te

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.distributed.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1
    )
    parallel_state.initialize_model_parallel(create_gloo_process_groups=False)

    class Unit(torch.nn.Module):  # the FSDP unit: one BasicLinear
        def __init__(self) -> None:
            super().__init__()
            self.seq = te.ops.Sequential(
                te.ops.BasicLinear(
                    IN, OUT, device=DEVICE, dtype=torch.bfloat16, accumulate_into_main_grad=True
                )
            )

        def forward(self, x):
            return self.seq(x)

    torch.manual_seed(1)
    unit = Unit()
    config = DistributedDataParallelConfig(
        use_megatron_fsdp=True,
        use_distributed_optimizer=True,
        data_parallel_sharding_strategy="optim_grads",
        overlap_grad_reduce=True,
        average_in_collective=False,
        megatron_fsdp_main_grads_dtype=torch.float32,
    )
    model = FullyShardedDataParallel(
        TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=1),
        config,
        unit,
        fsdp_unit_modules=[Unit],
        device=torch.device(DEVICE, torch.cuda.current_device()),
    )
    fsdp = model.module
    (name, param), *_ = [(n, p) for n, p in fsdp.raw_param.items() if n.endswith("weight")]
    xs = [torch.randn(ROWS, IN, device=DEVICE, dtype=torch.bfloat16) for _ in range(2)]
    dys = [torch.randn(ROWS, OUT, device=DEVICE, dtype=torch.bfloat16) for _ in range(2)]
    model.zero_grad_buffer()
    with model.no_sync():
        model(xs[0]).backward(dys[0])
    model(xs[1]).backward(dys[1])
    model.finish_grad_sync()
    buffers = fsdp.param_and_grad_buffer
    gbuf = buffers.parameter_groups[buffers.param_to_param_group[param]].main_grad_buffer
    synced = gbuf.get_item(gbuf.param_idx[param], only_shard=False).float().reshape(OUT, IN)
    w = [dy.double().T @ x.double() for x, dy in zip(xs, dys)]
    print(f"part 2 Megatron-FSDP optim_grads, 1 rank, {name}, 2 microbatches W1, W2:")
    print(f"  is the buffer distributed: {gbuf.is_data_distributed}")
    references = (
        ("W1 + W2 (the step's gradient)", w[0] + w[1]),
        ("W2 (last microbatch)", w[1]),
        ("2 W2", 2 * w[1]),
    )
    for label, ref in references:
        print(f"  synced vs {label}: rel. error {rel(synced, ref):.2e}")
    parallel_state.destroy_model_parallel()
    torch.distributed.destroy_process_group()
    if rel(synced, 2 * w[1]) < 2e-2:
        return ["Megatron-FSDP, 1 rank: the synced gradient is 2 W2 (BasicLinear's W added again)"]
    return []


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    failures = part1() + part2()
    for f in failures:
        print("FAIL:", f)
    print("bug reproduced" if failures else "no failure: the bug is fixed in this TE")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
