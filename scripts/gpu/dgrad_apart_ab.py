"""A/B on a GPU: fc2's dgrad with the activation's derivative in the GEMM's epilogue against
the derivative in a kernel of its own after a row GEMM storing da (fused.grouped_ops,
``apart``). For every preset shape (bf16, SwiGLU, uniform load, discrete weights as the
module passes them: one tensor per expert), both paths are checked against torch
(torch._grouped_mm, then autograd of SwiGLU in fp32) by ||out - ref|| / ||ref||, then timed
with triton.testing.do_bench (median ms, L2 cleared before each call), in two passes
(epilogue, apart, epilogue, apart) to see the machine's drift. torch._grouped_mm's plain
GEMM of the same product is the yardstick. Writes one JSON object to stdout.

    python scripts/gpu/dgrad_apart_ab.py [--shapes mixtral,qwen3,deepseek]
"""

from __future__ import annotations

from itertools import accumulate

import probe_shapes  # beside this file
import torch
import triton

from gmlp_check.bench.shapes import PRESETS, split_sizes
from gmlp_check.fused import grouped_ops
from gmlp_check.fused.kernels.activations import ACTIVATION_CODES

SWIGLU = ACTIVATION_CODES["swiglu"]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref).norm() / ref.norm()).item()


def swiglu_backward(h: torch.Tensor, da: torch.Tensor) -> torch.Tensor:
    hf = h.float().requires_grad_()
    ffn = h.shape[1] // 2
    (torch.nn.functional.silu(hf[:, :ffn]) * hf[:, ffn:]).backward(da.float())
    return hf.grad


def measure(name: str) -> dict:
    shape = PRESETS[name]
    sizes = split_sizes(shape, "uniform")
    rows = sum(sizes)
    g = torch.Generator(device="cuda").manual_seed(0)
    dy = torch.randn(rows, shape.hidden, generator=g, device="cuda").to(torch.bfloat16)
    h = torch.randn(rows, 2 * shape.ffn, generator=g, device="cuda").to(torch.bfloat16)
    w2 = torch.randn(shape.experts, shape.hidden, shape.ffn, generator=g, device="cuda") * 0.05
    w2 = w2.to(torch.bfloat16)
    experts = [w.clone() for w in w2.unbind(0)]  # discrete: one allocation per expert
    splits = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    offs = torch.tensor(list(accumulate(sizes)), dtype=torch.int32, device="cuda")
    da = torch._grouped_mm(dy, w2, offs=offs)
    ref = swiglu_backward(h, da)
    del da

    def call(apart: bool):
        return lambda: grouped_ops.fc2_dgrad_activation(
            dy, splits, experts, h, activation=SWIGLU, glu=True, probs=None, apart=apart
        )

    doc: dict = {"shape": name, "rows": rows, "experts": shape.experts}
    for label, apart in (("epilogue", False), ("apart", True)):
        doc[f"{label}_rel_error"] = rel_error(call(apart)()[0], ref)
    del ref
    for label, apart in (("epilogue", False), ("apart", True)) * 2:
        doc.setdefault(f"{label}_ms", []).append(round(triton.testing.do_bench(call(apart)), 3))
    doc["torch_grouped_mm_gemm_ms"] = round(
        triton.testing.do_bench(lambda: torch._grouped_mm(dy, w2, offs=offs)), 3
    )
    return doc


if __name__ == "__main__":
    probe_shapes.run(measure)
