"""Pytest plugin: run gmlp-check's differential suite against your own fused grouped MLP.

    pytest --gmlp-fused mypkg.mlp:make_grouped_mlp

from any directory adds ``gmlp_check/pytest_suite.py`` to the run: one test per case of the
scenario matrix, each failing with the checks that differ and the ``gmlp-check diff``
command that reruns it; unsupported cases are skipped and known deviations xfail. Without
``--gmlp-fused`` the plugin does nothing. The options are those of ``gmlp-check diff``
(gmlp_check.options), spelled ``--gmlp-<name>``.

The plugin is loaded by every pytest run in an environment where gmlp-check is installed,
so it imports torch and the checker only once ``--gmlp-fused`` asks for them; option values
are validated then, too, and a bad one is a pytest usage error (exit 4), never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .options import DIFF, FUSED, add_pytest_options, values_from_pytest

_SUITE_KEY = pytest.StashKey["object"]()
SUITE_MODULE = Path(__file__).with_name("pytest_suite.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gmlp-check", "gmlp-check differential suite")
    # --gmlp-fused has no default: it is what switches the suite on.
    add_pytest_options(group, DIFF, no_default=FUSED)


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("gmlp_fused", None):
        return
    from .errors import UsageError
    from .options import RunOptions
    from .session import Checker

    try:
        options = RunOptions.from_values(values_from_pytest(config, DIFF))
        checker = Checker.from_options(options)
        cases = checker.select(options)
    except UsageError as exc:
        raise pytest.UsageError(f"gmlp-check: {exc}") from None
    config.stash[_SUITE_KEY] = (checker, cases)
    # The suite is collected like a test file given on the command line. When the user named
    # no paths, it is the only thing collected (not every test under the current directory).
    suite_path = str(SUITE_MODULE)
    if getattr(config, "args_source", None) == pytest.Config.ArgsSource.ARGS:
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
def gmlp_checker(request: pytest.FixtureRequest):
    """The Checker configured by the --gmlp-* options."""
    stash = request.config.stash.get(_SUITE_KEY, None)
    if stash is None:
        pytest.skip("gmlp-check suite: run with --gmlp-fused SPEC")
    return stash[0]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector):
    """Give the suite the node id ``gmlp-check`` (tests read ``gmlp-check::test_gmlp_diff[id]``)
    wherever the package is installed; outside the rootdir pytest would give it an empty one."""
    if Path(os.path.abspath(module_path)) == SUITE_MODULE and _SUITE_KEY in parent.config.stash:
        return pytest.Module.from_parent(parent, path=module_path, nodeid="gmlp-check")
    return None
