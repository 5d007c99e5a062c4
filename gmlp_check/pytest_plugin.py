"""Pytest plugin: run gmlp-check's differential suite against your own fused grouped MLP.

    pytest --gmlp-fused mypkg.mlp:make_grouped_mlp

from any directory adds ``gmlp_check/pytest_suite.py`` to the run: one test per case of the
scenario matrix, each failing with the checks that differ and the ``gmlp-check diff``
command that reruns it. Without ``--gmlp-fused`` the plugin does nothing.

The factory takes ``refimpl.GroupedMLP``'s keyword arguments (num_experts, hidden, ffn,
activation, bias, single_grouped_weight, accumulate_into_main_grad, delay_wgrad_compute,
dtype, device) and returns a module with the same forward / backward_dw /
register_wgrad_accumulation_and_reduce_hooks and parameter names.

The plugin is loaded by every pytest run in an environment where gmlp-check is installed,
so it imports torch and the checker only once ``--gmlp-fused`` asks for them; option values
are validated then, too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_SUITE_KEY = pytest.StashKey["object"]()
SUITE_MODULE = Path(__file__).with_name("pytest_suite.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gmlp-check", "gmlp-check differential suite")
    group.addoption(
        "--gmlp-fused",
        metavar="SPEC",
        help="run gmlp-check's differential suite against SPEC: triton, torch-grouped-mm or "
        "package.module:factory",
    )
    group.addoption(
        "--gmlp-device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="device of the suite (default auto: the GPU if there is one)",
    )
    group.addoption(
        "--gmlp-dtype",
        action="append",
        default=[],
        help="dtype to run: fp32, fp16, bf16 (repeatable; default fp32, fp16 on CPU; bf16, "
        "fp16, fp32 on CUDA)",
    )
    group.addoption(
        "--gmlp-mode",
        action="append",
        default=[],
        help="mode to run: off, accumulate-ddp, overwrite-fsdp, accumulate-fsdp (repeatable)",
    )
    group.addoption(
        "--gmlp-activation",
        action="append",
        default=[],
        help="activation to run (repeatable; default all)",
    )
    group.addoption(
        "--gmlp-k",
        metavar="EXPR",
        help="gmlp-check -k expression on case ids (e.g. 'mode=overwrite and delay=1')",
    )
    for name, what in (
        ("experts", "experts G"),
        ("hidden", "hidden size"),
        ("ffn", "ffn size"),
        ("tokens", "tokens per microbatch"),
    ):
        group.addoption(f"--gmlp-{name}", type=int, help=f"{what} (default by device)")
    group.addoption("--gmlp-seed", type=int, default=0, help="data seed (default 0)")


def pytest_configure(config: pytest.Config) -> None:
    spec = config.getoption("gmlp_fused")
    if not spec:
        return
    from .runner import UsageError
    from .selection import SelectionError
    from .suite import DiffSuite

    opt = config.getoption
    try:
        suite = DiffSuite.create(
            spec,
            opt("gmlp_device"),
            experts=opt("gmlp_experts"),
            hidden=opt("gmlp_hidden"),
            ffn=opt("gmlp_ffn"),
            tokens=opt("gmlp_tokens"),
            seed=opt("gmlp_seed"),
        )
        cases = suite.cases(
            opt("gmlp_dtype"), opt("gmlp_activation"), opt("gmlp_mode"), opt("gmlp_k")
        )
    except (UsageError, SelectionError, ValueError) as exc:
        raise pytest.UsageError(f"--gmlp-*: {exc}") from None
    if not cases:
        raise pytest.UsageError(f"--gmlp-k {opt('gmlp_k')!r}: no case of the matrix matches")
    config.stash[_SUITE_KEY] = (suite, cases)
    # The suite is collected like a test file given on the command line. When the user named
    # no paths, it is the only thing collected (not every test under the current directory).
    suite_path = str(SUITE_MODULE)
    from_user = getattr(config, "args_source", None) == pytest.Config.ArgsSource.ARGS
    if from_user:
        config.args.append(suite_path)
    else:
        config.args[:] = [suite_path]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gmlp_case" not in metafunc.fixturenames:
        return
    stash = metafunc.config.stash.get(_SUITE_KEY, None)
    if stash is None:
        return
    _, cases = stash
    metafunc.parametrize("gmlp_case", cases, ids=[c.id for c in cases])


@pytest.fixture(scope="session")
def gmlp_suite(request: pytest.FixtureRequest):
    """The DiffSuite configured by the --gmlp-* options."""
    stash = request.config.stash.get(_SUITE_KEY, None)
    if stash is None:
        pytest.skip("gmlp-check suite: run with --gmlp-fused SPEC")
    return stash[0]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector):
    """Give the suite the node id ``gmlp-check`` (tests read ``gmlp-check::test_gmlp_diff[id]``)
    wherever the package is installed; outside the rootdir pytest would give it an empty one."""
    if module_path == SUITE_MODULE and _SUITE_KEY in parent.config.stash:
        return pytest.Module.from_parent(parent, path=module_path, nodeid="gmlp-check")
    return None
