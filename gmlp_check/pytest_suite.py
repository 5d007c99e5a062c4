"""The differential suite that ``pytest --gmlp-fused SPEC`` collects (see pytest_plugin.py).

One test per case of the scenario matrix; ``gmlp_case`` is parametrized by the plugin.
"""

import pytest


def test_gmlp_diff(gmlp_case, gmlp_suite):
    result = gmlp_suite.run(gmlp_case)
    if not result.passed:
        pytest.fail(gmlp_suite.failure_message(result), pytrace=False)
