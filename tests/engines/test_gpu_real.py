"""The real engines on a GPU (one rank, in this process): the Megatron-LM #6357 demonstration
and a smoke run of every default engine configuration. Skipped without CUDA or megatron-core;
scripts/gpu_validate.sh runs these and the 2-GPU command line."""

import pytest
import torch

from gmlp_check.engines.configs import DEFAULT_CONFIGS, LAST_MICROBATCH_ONLY
from gmlp_check.matrix import Case
from gmlp_check.options import RunOptions
from gmlp_check.session import Checker

pytestmark = pytest.mark.gpu

CASE = (
    "mode={mode},delay={delay},zero=0,single={single},bias=1,act=swiglu,dtype={dtype},"
    "splits={splits},mb=2"
)
ZERO1 = ("ddp-distopt", "ddp-overlap-distopt")  # DDP with the distributed optimizer


@pytest.fixture(scope="module", autouse=True)
def megatron():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return pytest.importorskip("megatron.core")


def checker(fused: str, configs=(), inject=None) -> Checker:
    options = RunOptions(
        fused=fused, device="cuda", megatron="real", engine_configs=tuple(configs), inject=inject
    )
    return Checker.from_options(options)


def case(mode="accumulate-ddp", delay=0, single=0, dtype="bf16", splits="ragged") -> Case:
    """Every expert gets tokens in every microbatch with ``ragged``: the last microbatch's
    gradient alone then differs from the sum everywhere, the clearest #6357 signature."""
    return Case.from_id(
        CASE.format(mode=mode, delay=delay, single=single, dtype=dtype, splits=splits)
    )


def synced(result):
    return next(c for c in result.checks if c.observable == "main_grad.synced")


@pytest.mark.parametrize("delay", [0, 1])
def test_forcing_overwrite_under_ddp_with_zero1_fails_with_the_6357_diagnosis(delay):
    result = checker("tests.engines.forced_overwrite:triton", ZERO1).run(case(delay=delay))
    assert result.status == "failed", result.explanation()
    assert result.failed_observables == ["main_grad.synced"], result.explanation()
    assert LAST_MICROBATCH_ONLY in synced(result).detail


@pytest.mark.parametrize("delay", [0, 1])
def test_the_same_path_without_forcing_passes(delay):
    result = checker("triton", ZERO1).run(case(delay=delay))
    assert result.status == "passed", result.explanation()
    run = next(c for c in result.checks if c.observable == "run")
    assert "ddp overlap=0 distopt=1, ddp overlap=1 distopt=1" in run.detail


def test_forcing_overwrite_fails_transformer_engines_op_fuser_too():
    pytest.importorskip("transformer_engine")
    result = checker("tests.engines.forced_overwrite:te_ops", ZERO1).run(case())
    assert result.status == "failed", result.explanation()
    assert "main_grad.synced" in result.failed_observables
    assert LAST_MICROBATCH_ONLY in synced(result).detail


def test_the_ddp_overlap_assertion_on_a_missing_dummy_is_a_finding():
    result = checker("triton", ["ddp-overlap"], inject="no-dummy-grad").run(case())
    assert result.failed_observables == ["run"], result.explanation()
    detail = result.checks[0].detail
    assert "param.grad being None is not safe when overlap_grad_reduce is True" in detail


@pytest.mark.parametrize(
    "mode, delay, single",
    [
        (m, d, s)
        for m in ("off", "accumulate-ddp", "overwrite-fsdp", "accumulate-fsdp")
        for d, s in ((0, 0), (1, 1))
    ],
)
def test_every_default_config_runs_a_correct_producer(mode, delay, single):
    """The reference as the producer: every configuration runs (none refused), and the case
    passes, or is xfailed where megatron-fsdp 0.6.1's single-rank deviation applies."""
    result = checker("gmlp_check.refimpl:GroupedMLP").run(
        case(mode, delay, single, "fp32", "ragged-empty")
    )
    assert result.status in ("passed", "xfailed"), result.explanation()
    run = next(c for c in result.checks if c.observable == "run")
    assert "skipped" not in run.detail, run.detail
    assert result.checks and all(
        c.passed or c.observable == "main_grad.synced" for c in result.checks
    )
    assert set(DEFAULT_CONFIGS)  # the mapping is not empty
