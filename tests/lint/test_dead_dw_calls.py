"""A layer's ``backward_dw`` named in a class's ``backward_dw`` where it never runs (after a
``return``, or named without the call) leaves that layer's weight gradient uncomputed
(GMLP014): only statements that may run and do something count as reaching a layer."""

from __future__ import annotations

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES

INIT = """\
class Experts(MegatronModule):
    def __init__(self, config):
        super().__init__(config)
        self.linear_fc1 = TEGroupedLinear(config.experts, 8, 16, delay_wgrad_compute=True)
        self.linear_fc2 = TEGroupedLinear(config.experts, 16, 8, delay_wgrad_compute=True)

"""

FC1, FC2 = "self.linear_fc1.backward_dw()", "self.linear_fc2.backward_dw()"
NL = "\n        "
# (the body of backward_dw, the lines GMLP014 reports: where a missed layer is built)
BODIES = [
    (FC1 + NL + FC2, set()),
    (FC1 + NL + "return" + NL + FC2, {5}),
    ("self.linear_fc2.backward_dw" + NL + FC1, {5}),
    (
        "for m in (self.linear_fc1, self.linear_fc2):"
        + NL
        + "    m.backward_dw()"
        + NL
        + "    continue"
        + NL
        + "    self.unused()",
        set(),
    ),
    ("try:" + NL + "    " + FC1 + NL + "finally:" + NL + "    " + FC2, set()),
]


@pytest.mark.parametrize(
    ("body", "lines"), BODIES, ids=[b.split("\n")[-1].strip() for b, _ in BODIES]
)
def test_only_calls_that_may_run_reach_a_layer(body, lines):
    source = INIT + f"    def backward_dw(self):\n        {body}\n"
    found = {f.line for f in engine.lint_source(source, "m.py", ALL_CODES) if f.code == "GMLP014"}
    assert found == lines
