"""The differential suite: every case of the default matrix, the reference against the built-in
backends. On CPU the triton kernels run through Triton's interpreter at tiny sizes; the
gpu-marked tests run the CUDA matrix at real sizes."""

import pytest

from gmlp_check.matrix import DEVICE_DTYPES, MatrixSelection, default_matrix
from gmlp_check.options import RunOptions
from gmlp_check.session import Checker

from .support import MATRIX

# torch-grouped-mm is a bf16 backend (torch._grouped_mm on sm90+); triton runs every dtype;
# triton-cublas-wgrad the 16-bit ones (its weight gradients are fp32-output cuBLAS GEMMs).
GPU_DTYPES = {
    "triton": DEVICE_DTYPES["cuda"],
    "triton-cublas-wgrad": ("bf16", "fp16"),
    "torch-grouped-mm": ("bf16",),
}
GPU_CASES = [
    (backend, case)
    for backend, dtypes in GPU_DTYPES.items()
    for case in default_matrix(MatrixSelection(dtypes))
]


@pytest.fixture(scope="module")
def cpu_checker():
    return Checker.from_options(RunOptions(fused="triton", device="cpu"))


@pytest.mark.parametrize("case", MATRIX, ids=[c.id for c in MATRIX])
def test_triton_matches_the_reference_on_cpu(case, cpu_checker):
    result = cpu_checker.run(case)
    assert result.passed, cpu_checker.failure_message(result)


@pytest.fixture(scope="module")
def gpu_checkers():
    # The emulated engine: the real ones have their own tests (tests/engines).
    options = {b: RunOptions(fused=b, device="cuda", megatron="emulated") for b in GPU_DTYPES}
    return {b: Checker.from_options(o) for b, o in options.items()}


@pytest.mark.gpu
@pytest.mark.parametrize(
    "backend, case", GPU_CASES, ids=[f"{backend}-{case.id}" for backend, case in GPU_CASES]
)
def test_backend_matches_the_reference_on_gpu(backend, case, gpu_checkers):
    checker = gpu_checkers[backend]
    result = checker.run(case)
    assert result.passed, checker.failure_message(result)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", sorted(GPU_DTYPES))
def test_gpu_matrix_is_what_the_cli_runs(backend, gpu_checkers):
    # The CLI picks the dtypes a backend does not refuse; the parametrization above must match.
    options = RunOptions(fused=backend, device="cuda", megatron="emulated")
    assert gpu_checkers[backend].select(options) == default_matrix(
        MatrixSelection(GPU_DTYPES[backend])
    )
