"""backward_dw launches every deferred weight-gradient GEMM before any weight's bookkeeping,
and the parameter lists the fused path reads are the module's parameters."""

import torch

from gmlp_check.fused import grouped_ops
from gmlp_check.fused.main_grad import MainGradPolicy
from gmlp_check.refimpl.megatron import weight_params

from .harness import Case, build_fused, make_inputs


class RecordingPolicy(MainGradPolicy):
    """The production policy, noting when a weight's bookkeeping is decided."""

    def __init__(self, events):
        self.events = events

    def bookkeeps(self, accumulate_into_main_grad, accumulate):
        self.events.append("bookkeeping")
        return super().bookkeeps(accumulate_into_main_grad, accumulate)


def test_every_gemm_is_launched_before_any_bookkeeping(monkeypatch):
    """Two microbatches deferred for fc1 and fc2: four GEMM launches, then the bookkeeping of
    every weight (with many experts it is host time the last GEMM hides, not time between
    two GEMMs). The main_grads still get what the GEMMs wrote (test_contract holds the
    values to the reference)."""
    case = Case(accumulate_into_main_grad=True, delay=True, dtype=torch.float16)
    fused = build_fused(case)
    events = []
    fused.main_grad_policy = RecordingPolicy(events)
    launch = grouped_ops.grouped_wgrad

    def recording_launch(*args, **kwargs):
        events.append("gemm")
        return launch(*args, **kwargs)

    monkeypatch.setattr(grouped_ops, "grouped_wgrad", recording_launch)
    for p in weight_params(fused):
        p.main_grad = torch.zeros(p.shape, dtype=torch.float32)
        p.grad_added_to_main_grad = False
    for batch in make_inputs(case)[:1] * 2:
        fused(batch.x, list(case.splits)).backward(batch.dy)
    assert events == []  # delayed: nothing ran in backward
    fused.backward_dw()
    gemms = events.count("gemm")
    assert gemms >= 4  # fc1 and fc2, two microbatches (one launch per region layout)
    assert events[:gemms] == ["gemm"] * gemms, events
    assert events[gemms:] == ["bookkeeping"] * (len(events) - gemms)
    assert all(p.grad_added_to_main_grad for p in weight_params(fused))
    for layer in (fused.fc1, fused.fc2):  # written, but for the expert without tokens
        written = [bool(torch.count_nonzero(p.main_grad)) for p in layer.weight_params()]
        assert written == [rows > 0 for rows in case.splits]


def test_a_parameter_set_as_a_plain_attribute_is_still_the_one_read():
    """An engine may take a weight out of the module's registry and set its own tensor under
    the same name: weight_params() returns what the attribute holds, as getattr does."""
    fused = build_fused(Case())
    replacement = torch.zeros_like(fused.fc1.weight1)
    del fused.fc1.weight1
    fused.fc1.weight1 = replacement
    params = fused.fc1.weight_params()
    assert params[1] is replacement
    assert params[0] is fused.fc1.weight0 and params[2] is fused.fc1.weight2
