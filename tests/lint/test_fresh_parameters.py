"""A module's weight rebound to a fresh Parameter on the way into forward (GMLP015), in the
spellings of a fresh Parameter: the class itself, the class of the weight called again, a
local bound to one, one side of a conditional expression."""

from __future__ import annotations

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES

REBINDINGS = [
    ("self.weight = nn.Parameter(self.weight.to(x.device))", True),
    ("self.weight = type(self.weight)(self.weight.cuda())", True),
    ("self.weight = self.weight.__class__(self.weight.cuda())", True),
    ("self.weight = nn.Parameter(self.weight.cuda()) if self.offloaded else self.weight", True),
    ("object.__setattr__(self, 'weight', nn.Parameter(self.weight.cuda()))", True),
    # lazy creation on the first forward, before any wrapping: not a rebinding to report
    (
        "self.weight = nn.Parameter(torch.empty(n, m)) if self.weight is None else self.weight",
        False,
    ),
    ("self.weight.data = self.weight.data.to(x.device)", False),
]


@pytest.mark.parametrize(("statement", "reported"), REBINDINGS, ids=[s for s, _ in REBINDINGS])
def test_a_fresh_parameter_in_any_spelling_is_a_rebinding(statement, reported):
    source = (
        "class M(nn.Module):\n"
        "    def forward(self, x):\n"
        f"        {statement}\n"
        "        return fused_linear(x, self.weight)  # writes weight.main_grad\n"
    )
    found = [f for f in engine.lint_source(source, "m.py", ALL_CODES) if f.code == "GMLP015"]
    assert bool(found) == reported
    assert all(f.line == 3 for f in found)
