"""The fused kernels on every Triton the project declares (3.4 and newer), and under
TRITON_INTERPRET=1, Triton's own switch that makes triton.jit interpret every kernel.

CI runs the whole suite on the newest and the oldest declared Triton; these tests hold what
differs between versions and modes, and would fail where a kernel relies on one of them.
"""

import ast
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys

import pytest
import torch
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import gmlp_check.fused.kernels as kernel_package
from gmlp_check.fused.dual_jit import dual_jit

KERNEL_MODULES = sorted(m.name for m in pkgutil.iter_modules(kernel_package.__path__))


def constexpr_globals(module) -> set[str]:
    return {name for name, value in vars(module).items() if isinstance(value, tl.constexpr)}


def compile_time(node: ast.expr, constants: set[str]) -> bool:
    """Whether ``node`` is a value known before the kernel runs: a literal, a constexpr global,
    or arithmetic of those."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.UnaryOp):
        return compile_time(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return compile_time(node.left, constants) and compile_time(node.right, constants)
    return False


def constexpr_valued(node: ast.expr, constants: set[str]) -> bool:
    """Whether ``node`` evaluates to a tl.constexpr in Python: a constexpr global, or
    compile-time arithmetic with one (``3.0 * _C`` is a constexpr too)."""
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.UnaryOp):
        return constexpr_valued(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return compile_time(node, constants) and (
            constexpr_valued(node.left, constants) or constexpr_valued(node.right, constants)
        )
    return False


def constexpr_leading_runtime_operand(module) -> list[str]:
    """Arithmetic ``C op x`` with C a constexpr (global) and x a runtime value (a tensor).

    The compiler handles it, but the interpreter runs it as Python: constexpr.__mul__ returns
    a constexpr wrapping the tensor, which Triton 3.7 and newer refuse wherever a tensor is
    expected (tl.abs, tl.exp: "cannot convert ... to tensor"). ``x op C`` is the same value."""
    constants = constexpr_globals(module)
    found = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if (
            isinstance(node, ast.BinOp)
            and constexpr_valued(node.left, constants)
            and not compile_time(node.right, constants)
        ):
            found.append((node.lineno, f"{module.__name__}:{node.lineno}: {ast.unparse(node)}"))
    return [text for _, text in sorted(found)]


def test_some_kernel_module_has_constexpr_constants():
    # The check below means something only where kernels read constexpr globals.
    modules = [importlib.import_module(f"{kernel_package.__name__}.{m}") for m in KERNEL_MODULES]
    assert any(constexpr_globals(m) for m in modules)


@pytest.mark.parametrize("name", KERNEL_MODULES)
def test_constexpr_constants_follow_the_tensor_they_scale(name):
    module = importlib.import_module(f"{kernel_package.__name__}.{name}")
    assert constexpr_leading_runtime_operand(module) == []


def test_the_check_finds_a_constexpr_leading_a_tensor_product(tmp_path, monkeypatch):
    # The pattern that broke clamped_qgeglu on Triton 3.9, in a module of its own.
    (tmp_path / "scaled_sigmoid.py").write_text(
        "import triton.language as tl\n"
        "_ALPHA: tl.constexpr = tl.constexpr(1.702)\n"
        "def f(g):\n"
        "    return tl.sigmoid(_ALPHA * g) + g * _ALPHA * 2.0 + 2.0 * g\n"
        "def f_prime(g):\n"
        "    return tl.exp(-_ALPHA * 2.0 * g) + g * (-_ALPHA * 2.0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("scaled_sigmoid")
    assert constexpr_leading_runtime_operand(module) == [
        "scaled_sigmoid:4: _ALPHA * g",
        "scaled_sigmoid:6: -_ALPHA * 2.0 * g",
    ]


@dual_jit
def _copy_tile_kernel(X_DESC, OUT, stride_om, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tile = X_DESC.load([0, tl.program_id(0) * BLOCK_N])
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(OUT + rows[:, None] * stride_om + cols[None, :], tile)


def test_interpreter_takes_descriptors_whose_rows_are_16_bytes_not_16_elements():
    """fp16 rows of 24 elements (48 bytes) meet TMA's alignment; the interpreters of Triton 3.4
    and 3.5 wanted multiples of 16 elements. The 16-bit interpreter launches take descriptors,
    so such hidden sizes (the checker's 12 and 24) must load."""
    x = torch.randn(4, 24).to(torch.float16)
    assert x.stride(0) * x.element_size() % 16 == 0 and x.stride(0) % 16 != 0
    out = torch.zeros_like(x)
    _copy_tile_kernel[(3,)](TensorDescriptor(x, [4, 24], [24, 1], [4, 8]), out, 24, 4, 8)
    assert torch.equal(out, x)


# Run in a fresh interpreter: triton.jit reads TRITON_INTERPRET when a kernel is defined.
_INTERPRET_EVERYTHING = """
from gmlp_check.fused.dual_jit import DualKernel
from gmlp_check.fused.kernels import activation_gemm, grouped_gemm, wgrad

modules = (activation_gemm, grouped_gemm, wgrad)
kernels = [v for m in modules for v in vars(m).values() if isinstance(v, DualKernel)]
assert kernels and all(k.compiled is None for k in kernels), "triton.jit compiled a kernel"
"""


def run_with_triton_interpret(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _INTERPRET_EVERYTHING + script],
        env={**os.environ, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_whole_fused_step_runs_with_triton_interpret_set():
    """Forward and backward of every kernel (fp32 pointer loads, fp16 descriptor loads) with
    TRITON_INTERPRET=1, checked against the reference by gmlp-check diff."""
    run = run_with_triton_interpret(
        "from gmlp_check.cli import main\n"
        'main(["diff", "--device", "cpu", "--format", "json", "-k", "act=clamped_qgeglu"])\n'
    )
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    report = json.loads(run.stdout)
    summary = report["summary"]
    assert summary["cases"] >= 1 and summary["passed"] == summary["cases"], summary
    assert {case["config"]["dtype"] for case in report["cases"]} >= {"fp32", "fp16"}


def test_non_cpu_tensors_are_refused_with_triton_interpret_set():
    """The interpreter would dereference the kernels' tables of device addresses on the host;
    a launch on any tensor but a CPU one says so instead (meta tensors stand in for CUDA)."""
    run = run_with_triton_interpret(
        "import torch\n"
        "x = torch.empty(4, 4, device='meta')\n"
        "wgrad.grouped_bias_grad_kernel[(1, 1)](x, 4, 1, x, 4, 1, x, 1, 4, 4, 4, 2)\n"
    )
    assert run.returncode == 1
    last_line = run.stderr.strip().splitlines()[-1]
    assert last_line.startswith("RuntimeError: TRITON_INTERPRET=1 makes Triton interpret")
    assert "meta tensors" in last_line


def test_under_triton_interpret_the_triton_backend_refuses_gpu_devices_with_a_reason():
    # The refusal is asked of the backend (NotImplementedError: a skip, or exit 2 on the
    # CLI), before a kernel ever sees a device tensor. "meta" stands in for a GPU device.
    out = run_with_triton_interpret(
        "import torch\n"
        "from gmlp_check.fused import TritonGroupedMLP\n"
        "try:\n"
        "    TritonGroupedMLP(2, 8, 4, device='meta')\n"
        "except NotImplementedError as e:\n"
        "    print('refused:', e)\n"
    )
    assert out.returncode == 0, out.stderr
    assert "refused: TRITON_INTERPRET=1" in out.stdout and "--device cpu" in out.stdout
