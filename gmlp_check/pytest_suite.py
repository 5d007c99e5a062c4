"""The differential suite that ``pytest --gmlp-fused SPEC`` collects (see pytest_plugin.py).

One test per case of the scenario matrix; ``gmlp_case`` is parametrized by the plugin.
"""

import pytest


def test_gmlp_diff(gmlp_case, gmlp_checker):
    result = gmlp_checker.run(gmlp_case)
    if result.status == "skipped":
        pytest.skip(f"unsupported by the fused side: {result.skip_reason}")
    if result.status == "xfailed":
        pytest.xfail(f"known deviation: {result.deviation.reason}")
    if not result.ok:
        pytest.fail(gmlp_checker.failure_message(result), pytrace=False)
