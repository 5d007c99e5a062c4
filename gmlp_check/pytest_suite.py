"""The differential suite that ``pytest --gmlp-fused SPEC`` collects (see pytest_plugin.py).

One test per case of the scenario matrix; ``gmlp_case`` is parametrized by the plugin.
"""

import pytest

from gmlp_check.errors import UsageError


def test_gmlp_diff(gmlp_case, gmlp_checker):
    try:
        result = gmlp_checker.run(gmlp_case)
    except UsageError as exc:  # e.g. a factory that breaks the protocol for this case only
        pytest.fail(f"gmlp-check: {exc}", pytrace=False)
    if result.status == "skipped":
        pytest.skip(f"unsupported by the fused side: {result.skip_reason}")
    if result.status == "xfailed":
        pytest.xfail(f"known deviation: {result.deviation.reason}")
    if not result.ok:
        pytest.fail(gmlp_checker.failure_message(result), pytrace=False)
