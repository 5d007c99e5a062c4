"""The differential suite: every case of the default matrix, the reference against the built-in
backends. On CPU the triton kernels run through Triton's interpreter at tiny sizes; the
gpu-marked tests run the CUDA matrix at real sizes."""

import pytest

from gmlp_check.scenarios import DEVICE_DTYPES, default_matrix
from gmlp_check.suite import DiffSuite

CPU_CASES = default_matrix(DEVICE_DTYPES["cpu"])
# torch-grouped-mm is a bf16 backend (torch._grouped_mm on sm90+); triton runs every dtype.
GPU_DTYPES = {"triton": DEVICE_DTYPES["cuda"], "torch-grouped-mm": ("bf16",)}
GPU_CASES = [
    (backend, case) for backend, dtypes in GPU_DTYPES.items() for case in default_matrix(dtypes)
]


@pytest.fixture(scope="module")
def cpu_suite():
    return DiffSuite.create("triton", "cpu")


@pytest.mark.parametrize("case", CPU_CASES, ids=[c.id for c in CPU_CASES])
def test_triton_matches_the_reference_on_cpu(case, cpu_suite):
    result = cpu_suite.run(case)
    assert result.passed, cpu_suite.failure_message(result)


@pytest.fixture(scope="module")
def gpu_suites():
    return {backend: DiffSuite.create(backend, "cuda") for backend in GPU_DTYPES}


@pytest.mark.gpu
@pytest.mark.parametrize(
    "backend, case", GPU_CASES, ids=[f"{backend}-{case.id}" for backend, case in GPU_CASES]
)
def test_backend_matches_the_reference_on_gpu(backend, case, gpu_suites):
    suite = gpu_suites[backend]
    result = suite.run(case)
    assert result.passed, suite.failure_message(result)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", sorted(GPU_DTYPES))
def test_gpu_matrix_is_what_the_cli_runs(backend, gpu_suites):
    # The CLI picks the dtypes a backend does not refuse; the parametrization above must match.
    assert gpu_suites[backend].cases() == default_matrix(GPU_DTYPES[backend])
