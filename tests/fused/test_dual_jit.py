"""One process runs kernels interpreted (CPU tensors) without disturbing compiled Triton."""

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.jit import JITFunction

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.dual_jit import DualKernel, dual_jit

from .gpu_compile import captured_launches, compile_for_gpu


@triton.jit
def _double(x):
    return x * 2


@dual_jit
def _scale_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.sum(tl.load(X + offs, mask=mask, other=0.0), 0)
    for _ in range(0, n, BLOCK):  # a loop with a runtime bound (numpy >= 2.4 scalars)
        total += 0.0
    tl.store(Y + offs, _double(tl.load(X + offs, mask=mask)) + total * 0.0, mask=mask)


def language_state():
    """Attributes of triton.language, and of the interpreter where dual_jit fixes it for a
    launch (the hook that patches tl.tensor, the descriptor check)."""
    state = {
        (id(obj), name): value
        for obj in (tl, tl.core, tl.standard, tl.math, tl.core.tensor, tl.core.dtype)
        for name, value in vars(obj).items()
    }
    state["_patch_lang_tensor"] = interpreter._patch_lang_tensor
    state["validate"] = interpreter.TensorDescHandle.validate
    return state


def test_interpreted_launch_with_helpers_leaves_triton_language_as_it_was():
    before = language_state()
    x = torch.arange(20, dtype=torch.float32)
    y = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(20, 8),)](x, y, 20, BLOCK=8)
    torch.testing.assert_close(y, 2 * x)
    after = language_state()
    assert before.keys() == after.keys()
    assert all(after[k] is v for k, v in before.items())
    assert isinstance(tl.sum, JITFunction) and isinstance(_double, JITFunction)


def test_launch_needs_a_tensor():
    with pytest.raises(TypeError, match="tensor argument"):
        _scale_kernel[(1,)](1, 2, 3, BLOCK=8)


def test_every_fused_kernel_is_dual():
    import importlib
    import pkgutil

    import gmlp_check.fused.kernels as package

    modules = [
        importlib.import_module(f"{package.__name__}.{m.name}")
        for m in pkgutil.iter_modules(package.__path__)
    ]
    kernels = [v for m in modules for v in vars(m).values()]
    launched = (
        "grouped_gemm",
        "fc1_activation",
        "fc2_dgrad_activation",
        "activation_backward",
        "wgrad",
        "bias_grad",
    )
    for name in launched:  # every kernel the launchers (grouped_ops.py) use
        assert any(isinstance(k, DualKernel) and name in k.fn.__name__ for k in kernels), name


# gpu_compile drives Triton's compiler the way a CUDA launch does, through internals that
# Triton 3.4 lacks (they came with 3.5).
needs_pack_args = pytest.mark.skipif(
    not hasattr(JITFunction, "_pack_args"),
    reason="compiling without a GPU needs JITFunction._pack_args (Triton 3.5 and newer)",
)


@needs_pack_args
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_kernels_compile_for_sm90_and_pipeline(monkeypatch, dtype):
    """The real launches of one MLP step, compiled for the H100/H200 without a GPU.

    16-bit kernels must use wgmma and cp.async with several pipeline stages; that needs unit
    strides known at compile time and 16-byte alignment of the table pointers (ALIGNED)."""
    from gmlp_check.fused.kernels.activations import ACTIVATION_CODES

    g, hidden, ffn, tokens = 4, 256, 128, 300
    splits = torch.tensor([100, 0, 150, 50], dtype=torch.int32)
    x = torch.randn(tokens, hidden).to(dtype)
    w1 = torch.randn(g, 2 * ffn, hidden).to(dtype)
    w2 = [torch.randn(hidden, ffn).to(dtype) for _ in range(g)]
    b1 = [torch.randn(2 * ffn).to(dtype) for _ in range(g)]
    probs = torch.rand(tokens).to(dtype)
    code = ACTIVATION_CODES["scaled_swiglu"]
    with captured_launches(monkeypatch) as launches:
        h, a = grouped_ops.fc1_forward(
            x, splits, list(w1), b1, activation=code, glu=True, probs=probs
        )
        grouped_ops.grouped_gemm(a, splits, w2, transpose=True, biases=[b[:hidden] for b in b1])
        grouped_ops.fc2_dgrad_activation(x, splits, w2, h, activation=code, glu=True, probs=probs)
        grouped_ops.grouped_gemm(h, splits, list(w1), transpose=False)
        main_grad = torch.zeros(w1.numel()).view(w1.shape)
        grouped_ops.grouped_wgrad(h, x, splits, list(enumerate(main_grad)), accumulate=True)
        grouped_ops.grouped_bias_grad(x, splits)
    # 16-bit: fc2's dgrad is a row GEMM and the derivative's own kernel (fused.tiles).
    assert len(launches) == (7 if dtype == torch.bfloat16 else 6)
    elementwise = ("grouped_bias_grad_kernel", "activation_backward_kernel")
    for launch in launches:
        name = launch.kernel.fn.__name__
        kernel = compile_for_gpu(launch)
        assert kernel.metadata.shared <= 227 * 1024, name
        if dtype == torch.bfloat16 and name not in elementwise:
            ptx = kernel.asm["ptx"]
            assert "wgmma" in ptx and "cp.async" in ptx, name
            # Every operand tile of the K loop is buffered num_stages deep.
            stages = launch.kwargs["num_stages"]
            assert kernel.metadata.shared >= stages * operand_bytes(launch), name


def operand_bytes(launch) -> int:
    """Bytes of the 16-bit operand tiles one K-loop iteration of a launch loads."""
    kw = launch.kwargs
    if launch.kernel.fn.__name__ == "grouped_wgrad_kernel":
        elements = kw["BLOCK_N"] * kw["BLOCK_T"] + kw["BLOCK_T"] * kw["BLOCK_K"]
    else:
        b_tiles = 2 if kw.get("GLU") and launch.kernel.fn.__name__ == "fc1_activation_kernel" else 1
        elements = kw["BLOCK_M"] * kw["BLOCK_K"] + b_tiles * kw["BLOCK_K"] * kw["BLOCK_N"]
    return 2 * elements
