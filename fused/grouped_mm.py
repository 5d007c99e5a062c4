"""The torch-grouped-mm backend: the same contract built on ``torch._grouped_mm``.

Forward, dgrad and wgrad are bf16 grouped GEMMs (offsets = int32 cumsum of the split sizes,
on the device); the activation runs in plain torch between fc1 and fc2, differentiated by
autograd. torch._grouped_mm returns the weight gradient in bf16, so unlike the triton backend
it cannot write main_grad from its epilogue: a separate fp32 pass adds (or copies) it into the
regions fused.main_grad planned. The bookkeeping is the one the triton backend uses.

Supported where torch._grouped_mm runs its grouped kernels: bf16 on CUDA devices of compute
capability 9.0 or newer, hidden and ffn multiples of 8 (16-byte rows). Elsewhere the
constructor raises NotImplementedError saying so (the checker reports it as unsupported).
"""

from __future__ import annotations

import torch

from .grouped_linear import Splits
from .main_grad import WgradPlan
from .mlp_base import FusedGroupedMLPBase

BACKEND = "torch-grouped-mm"


def check_supported(dtype: torch.dtype, device: torch.device | str) -> None:
    if not hasattr(torch, "_grouped_mm"):
        raise NotImplementedError(
            f"backend {BACKEND!r}: needs torch._grouped_mm (PyTorch 2.8 or newer), "
            f"this is torch {torch.__version__}"
        )
    device = torch.device(device)
    supported = (
        dtype == torch.bfloat16
        and device.type == "cuda"
        and torch.cuda.is_available()
        and torch.cuda.get_device_capability(device) >= (9, 0)
    )
    if not supported:
        where = str(device)
        if device.type == "cuda" and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(device)
            where += f" (compute capability {major}.{minor})"
        raise NotImplementedError(
            f"backend {BACKEND!r}: expected dtype=torch.bfloat16 on a CUDA device of compute "
            f"capability 9.0 or newer (sm90+), got dtype={dtype} on {where}; "
            f"use backend 'triton' there"
        )


def check_aligned(hidden: int, ffn: int) -> None:
    if hidden % 8 or ffn % 8:
        raise NotImplementedError(
            f"backend {BACKEND!r}: expected hidden and ffn to be multiples of 8 (torch._grouped_mm "
            f"needs 16-byte aligned bf16 rows), got hidden={hidden}, ffn={ffn}"
        )


def _offsets(splits: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(splits, 0, dtype=torch.int32)


def _stacked_weights(layer) -> torch.Tensor:
    """[G, out, in]: the single grouped weight itself, or the discrete weights stacked."""
    if layer.single_grouped_weight:
        return layer.weight.detach()
    return torch.stack(layer.expert_weights())


def _expert_of_row(splits: torch.Tensor, num_tokens: int) -> torch.Tensor:
    experts = torch.arange(splits.shape[0], device=splits.device)
    # output_size keeps repeat_interleave from reading the sizes back to the host.
    return torch.repeat_interleave(experts, splits.long(), output_size=num_tokens)


def _rows_times_experts(a: torch.Tensor, b: torch.Tensor, splits: torch.Tensor) -> torch.Tensor:
    """[T, n]: rows of expert g of a [T, k] times b[g] ([G, k, n])."""
    if a.shape[0] == 0:
        return a.new_zeros((0, b.shape[-1]))
    return torch._grouped_mm(a, b, offs=_offsets(splits))


class TorchGroupedMMMLP(FusedGroupedMLPBase):
    """The reference's interface on torch._grouped_mm (bf16, sm90+)."""

    backend = BACKEND

    @classmethod
    def check_supported(
        cls, *, dtype: torch.dtype, device: torch.device, hidden: int, ffn: int
    ) -> None:
        check_supported(dtype, device)
        check_aligned(hidden, ffn)

    def _forward(self, x: torch.Tensor, splits: Splits, probs: torch.Tensor | None) -> torch.Tensor:
        h = _GroupedMMLinear.apply(x, self, self.fc1, splits, *self._params(self.fc1))
        a = self.activation(h, probs).to(h.dtype)
        return _GroupedMMLinear.apply(a, self, self.fc2, splits, *self._params(self.fc2))

    @staticmethod
    def _params(layer) -> list[torch.nn.Parameter]:
        return [*layer.weight_params(), *layer.bias_params()]

    def _compute_wgrads(
        self, plan: WgradPlan, x: torch.Tensor, dy: torch.Tensor, all_splits: Splits
    ) -> None:
        splits = all_splits.device
        num_experts = splits.shape[0]
        if x.shape[0] == 0:
            wgrad = x.new_zeros((num_experts, dy.shape[1], x.shape[1]))
        else:
            wgrad = torch._grouped_mm(dy.t(), x, offs=_offsets(splits))
            # An expert without tokens has an exactly zero gradient, whatever the GEMM left
            # there. In place: every [G, out, in] temporary counts on DeepSeek-sized layers.
            wgrad.masked_fill_((splits == 0)[:, None, None], 0)
        # The bf16 gradient is added (or copied) straight into the fp32 regions, promoted on
        # the fly: no fp32 copy of the whole gradient in between.
        grouped = plan.grouped_destination()
        if grouped is not None:  # one [G, out, in] destination: one launch, not G
            pairs = [(grouped[0], wgrad, grouped[1])]
        else:
            pairs = [(e.region, wgrad[e.expert], e.accumulate) for e in plan.experts]
        for region, grad, accumulate in pairs:
            if accumulate:
                region.add_(grad)
            else:
                region.copy_(grad)


class _GroupedMMLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mlp: TorchGroupedMMMLP, layer, all_splits: Splits, *params):
        splits = all_splits.device
        weights = _stacked_weights(layer)
        y = _rows_times_experts(x, weights.transpose(-2, -1), splits)
        if layer.use_bias:
            biases = torch.stack(layer.expert_biases())
            y = y + biases[_expert_of_row(splits, x.shape[0])]
        ctx.mlp = mlp
        ctx.layer = layer
        ctx.splits = all_splits
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, dy):
        mlp: TorchGroupedMMMLP = ctx.mlp
        layer = ctx.layer
        all_splits: Splits = ctx.splits
        splits = all_splits.device
        (x,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = _rows_times_experts(dy, _stacked_weights(layer), splits)
        weight_grads = mlp.wgrads_for_backward(layer, x, dy, all_splits)
        bias_grads = []
        if layer.use_bias:
            sums = torch.zeros(
                (layer.num_groups, layer.out_features), dtype=torch.float32, device=dy.device
            )
            # index_put_ with accumulate has a deterministic CUDA implementation; index_add_ not.
            sums.index_put_((_expert_of_row(splits, dy.shape[0]),), dy.float(), accumulate=True)
            bias_grads = layer.bias_grads(sums)
        return (dx, None, None, None, *weight_grads, *bias_grads)
