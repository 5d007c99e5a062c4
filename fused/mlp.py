"""The triton backend: a grouped MLP whose GEMMs are each one Triton launch over all experts.

Forward:  fc1 grouped GEMM with the activation (and probs scale) in its epilogue, saving the
          pre-activation h and the activation a; fc2 grouped GEMM (+ bias).
Backward: fc2 dgrad with the activation derivative in its epilogue (dh, and the probs
          gradient); fc2 bias and weight gradients from (a, dy); fc1 dgrad; fc1 bias and weight
          gradients from (x, dh). Weight gradients are written by the wgrad kernel directly
          into the regions fused.main_grad planned (main_grad itself in output-into-main-grad
          mode), or deferred to backward_dw() with delay_wgrad_compute. Few experts with long
          reductions (fused.tiles.wgrad_by_cublas) take cuBLAS instead, one GEMM per expert
          into the same regions (fused/cublas_wgrad.py).
"""

from __future__ import annotations

import torch

from . import grouped_ops
from .cublas_wgrad import has_fp32_output_gemms, per_expert_wgrad
from .dual_jit import compiles
from .grouped_linear import Splits
from .kernels.activations import ACTIVATION_CODES
from .main_grad import WgradPlan
from .mlp_base import FusedGroupedMLPBase
from .tiles import Tiles, wgrad_by_cublas, wgrad_tiles


class TritonGroupedMLP(FusedGroupedMLPBase):
    """Same constructor, forward(x, split_sizes, probs=None), backward_dw() and parameters as
    refimpl.GroupedMLP; runs on CUDA tensors compiled and on CPU tensors interpreted."""

    backend = "triton"

    @classmethod
    def check_supported(
        cls, *, dtype: torch.dtype, device: torch.device, hidden: int, ffn: int
    ) -> None:
        if device.type == "cpu" and dtype == torch.bfloat16:
            raise NotImplementedError(
                "triton on CPU runs Triton's interpreter, whose bf16 dot products are wrong; "
                "use fp32 or fp16 on CPU and bf16 on a GPU"
            )
        if device.type != "cpu" and not compiles():
            raise NotImplementedError(
                f"TRITON_INTERPRET=1 makes Triton interpret every kernel, which the fused path "
                f"does only for CPU tensors, not {device.type} ones; unset it or use --device cpu"
            )

    def _forward(self, x: torch.Tensor, splits: Splits, probs: torch.Tensor | None) -> torch.Tensor:
        params = [
            *self.fc1.weight_params(),
            *self.fc1.bias_params(),
            *self.fc2.weight_params(),
            *self.fc2.bias_params(),
        ]
        return _FusedGroupedMLPFunction.apply(x, probs, self, splits, *params)

    def _wgrads_by_cublas(self, splits: Splits, dy: torch.Tensor, x: torch.Tensor) -> bool:
        """Whether this layer's weight gradients go to cuBLAS per expert (fused.tiles)."""
        return wgrad_by_cublas(splits.host, dy.shape[1], x.shape[1], dy.device, dy.dtype)

    def _compute_wgrads(
        self, plan: WgradPlan, x: torch.Tensor, dy: torch.Tensor, splits: Splits
    ) -> None:
        if self._wgrads_by_cublas(splits, dy, x):
            per_expert_wgrad(dy, x, splits.host, plan)
            return
        sizes = splits.host

        def tiles(accumulate: bool) -> Tiles:  # heavy-light pairs need the sizes (fused.tiles)
            return wgrad_tiles(
                dy.device,
                dy.dtype,
                rows=sum(sizes),
                experts=len(sizes),
                heaviest=max(sizes, default=0),
                accumulate=accumulate,
            )

        grouped = plan.grouped_destination()
        if grouped is not None:
            destination, accumulate = grouped
            grouped_ops.grouped_wgrad(
                dy, x, splits.device, destination, accumulate=accumulate, tiles=tiles(accumulate)
            )
            return
        for accumulate in (False, True):
            regions = [(e.expert, e.region) for e in plan.experts if e.accumulate == accumulate]
            grouped_ops.grouped_wgrad(
                dy, x, splits.device, regions, accumulate=accumulate, tiles=tiles(accumulate)
            )


class TritonCublasWgradMLP(TritonGroupedMLP):
    """The triton backend with every weight gradient by cuBLAS per expert, whatever the
    experts' sizes. The triton backend takes that route only for few large experts (Mixtral),
    far above every case of the checker's matrix; this backend puts the route itself through
    the matrix, the mutants and the engines."""

    backend = "triton-cublas-wgrad"

    @classmethod
    def check_supported(
        cls, *, dtype: torch.dtype, device: torch.device, hidden: int, ffn: int
    ) -> None:
        super().check_supported(dtype=dtype, device=device, hidden=hidden, ffn=ffn)
        if device.type != "cuda" or dtype == torch.float32:
            raise NotImplementedError(
                "the cuBLAS weight-gradient route runs 16-bit operands on CUDA only "
                "(fp32 output from bf16/fp16 GEMMs); use --fused triton elsewhere"
            )
        if not has_fp32_output_gemms():
            raise NotImplementedError(
                f"torch {torch.__version__} has no fp32-output GEMMs from 16-bit operands "
                f"(torch.addmm(..., out_dtype=torch.float32), torch >= 2.11)"
            )

    def _wgrads_by_cublas(self, splits: Splits, dy: torch.Tensor, x: torch.Tensor) -> bool:
        return True


class _FusedGroupedMLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, probs, mlp: TritonGroupedMLP, splits: Splits, *params):
        activation = mlp.activation
        h, a = grouped_ops.fc1_forward(
            x,
            splits.device,
            mlp.fc1.expert_weights(),
            mlp.fc1.expert_biases(),
            activation=ACTIVATION_CODES[activation.name],
            glu=activation.glu,
            probs=probs,
        )
        y = grouped_ops.grouped_gemm(
            a,
            splits.device,
            mlp.fc2.expert_weights(),
            transpose=True,
            biases=mlp.fc2.expert_biases(),
        )
        ctx.mlp = mlp
        ctx.splits = splits
        ctx.save_for_backward(x, probs, h, a)
        return y

    @staticmethod
    def backward(ctx, dy):
        mlp: TritonGroupedMLP = ctx.mlp
        splits: Splits = ctx.splits
        x, probs, h, a = ctx.saved_tensors
        dy = dy.contiguous()
        activation = mlp.activation
        dh, dprobs = grouped_ops.fc2_dgrad_activation(
            dy,
            splits.device,
            mlp.fc2.expert_weights(),
            h,
            activation=ACTIVATION_CODES[activation.name],
            glu=activation.glu,
            probs=probs,
        )
        fc2_weight_grads = mlp.wgrads_for_backward(mlp.fc2, a, dy, splits)
        fc2_bias_grads = (
            mlp.fc2.bias_grads(grouped_ops.grouped_bias_grad(dy, splits.device))
            if mlp.fc2.use_bias
            else []
        )
        dx = grouped_ops.grouped_gemm(dh, splits.device, mlp.fc1.expert_weights(), transpose=False)
        fc1_weight_grads = mlp.wgrads_for_backward(mlp.fc1, x, dh, splits)
        fc1_bias_grads = (
            mlp.fc1.bias_grads(grouped_ops.grouped_bias_grad(dh, splits.device))
            if mlp.fc1.use_bias
            else []
        )
        return (
            dx,
            dprobs.to(probs.dtype) if dprobs is not None else None,
            None,
            None,
            *fc1_weight_grads,
            *fc1_bias_grads,
            *fc2_weight_grads,
            *fc2_bias_grads,
        )
