"""What --fix --unsafe-fixes wrote into a head that H-review3 fixed (AMD-AGI/Primus-Turbo's
grouped GEMM functions, a6a16cdce46b): the fixed file must still run the path the finding
was not about. Shape of primus_turbo/pytorch/ops/grouped_gemm_fp8.py: ``ctx.main_grad`` is
None unless gradient-accumulation fusion is on, and the wgrad GEMM is given
``out=ctx.main_grad`` on both paths; GMLP012's fix writes ``out_dtype=ctx.main_grad.dtype``,
which raises AttributeError on every unfused backward."""

from __future__ import annotations

import importlib.util

import torch

from .support import run_cli, write

GROUPED_GEMM = """
import torch


def grouped_gemm(a, b, out_dtype, inplace_add_to_out=False, out=None):
    product = (a.t() @ b).to(out_dtype)
    if out is None:
        return product
    if inplace_add_to_out:
        out.add_(product)
    else:
        out.copy_(product)
    return out


def _setup_fused_grad_accum(weight, pattern):
    if pattern is None:
        return False, None
    return True, weight.main_grad


class GroupedGemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, weight, out_dtype, fuse_pattern=None):
        fused, main_grad = _setup_fused_grad_accum(weight, fuse_pattern)
        ctx.fuse_bgrad_accum = fused
        ctx.main_grad = main_grad
        ctx.out_dtype = out_dtype
        ctx.save_for_backward(a)
        return a @ weight

    @staticmethod
    def backward(ctx, grad_out):
        (a,) = ctx.saved_tensors
        grad_weight = grouped_gemm(
            a,
            grad_out,
            out_dtype=ctx.out_dtype,
            inplace_add_to_out=ctx.fuse_bgrad_accum,
            out=ctx.main_grad,
        )
        return None, grad_weight, None, None
"""


def _load(path):
    spec = importlib.util.spec_from_file_location("fixed_grouped_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_unsafe_fix_keeps_the_unfused_backward_running(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "grouped_gemm.py", GROUPED_GEMM)
    result = run_cli("--fix", "--unsafe-fixes", "--no-cache", "--no-progress", "grouped_gemm.py")
    assert "Found" in result.stdout and path.read_text() != GROUPED_GEMM  # a fix was written
    fixed = _load(path)
    a = torch.randn(4, 3)
    weight = torch.randn(3, 2, requires_grad=True)
    fixed.GroupedGemm.apply(a, weight, torch.float32).sum().backward()  # no fusion: no main_grad
    assert weight.grad is not None
