"""Kink slack: an activation whose derivative jumps gets extra tolerance exactly where a
pre-activation lies within rounding distance of the jump, and nowhere else."""

import pytest
import torch

import gmlp_check.pair as pair
from gmlp_check.backends import Backend
from gmlp_check.inputs import Sizes
from gmlp_check.kinks import KINKED_ACTIVATIONS, derivative_jumps, kink_slack
from gmlp_check.matrix import Case
from gmlp_check.refimpl import ACTIVATIONS, GroupedMLP
from gmlp_check.refimpl.activations import QGEGLU_LIMIT
from gmlp_check.session import Checker
from gmlp_check.tolerance import Precision

ACTIVATION_NAMES = tuple(ACTIVATIONS)


def test_relu_jumps_only_near_zero():
    h = torch.tensor([[-1.0, -1e-4, 0.0, 2e-4, 0.5]])
    da = torch.tensor([[3.0, -2.0, 5.0, 7.0, 11.0]])
    window = torch.full_like(h, 1e-3)
    assert derivative_jumps("relu", h, da, window).tolist() == [[0.0, 2.0, 5.0, 7.0, 0.0]]


def test_clamped_qgeglu_jumps_at_its_limits():
    gate = torch.tensor([[QGEGLU_LIMIT - 1e-4, 1.0, 1.0, 1.0]])
    linear = torch.tensor([[0.5, QGEGLU_LIMIT + 1e-4, -QGEGLU_LIMIT, 3.0]])
    h = torch.cat([gate, linear], dim=-1)
    da = torch.ones(1, 4)
    jumps = derivative_jumps("clamped_qgeglu", h, da, torch.full_like(h, 1e-3))
    gate_jumps, linear_jumps = jumps.chunk(2, dim=-1)
    assert (gate_jumps[0] > 0).tolist() == [True, False, False, False]
    assert (linear_jumps[0] > 0).tolist() == [False, True, True, False]


@pytest.mark.parametrize("activation", sorted(set(ACTIVATION_NAMES) - set(KINKED_ACTIVATIONS)))
def test_smooth_activations_get_no_slack(activation):
    ref = GroupedMLP(2, 4, 3, activation=activation)
    x, dy = torch.randn(5, 4), torch.randn(5, 4)
    assert kink_slack(activation, Precision(torch.bfloat16), ref, [x], [dy], [[2, 3]]) is None


def test_slack_lands_on_the_rows_of_the_tokens_near_a_kink():
    torch.manual_seed(0)
    ref = GroupedMLP(2, 4, 3, activation="relu", bias=True)
    x, dy = torch.randn(6, 4), torch.randn(6, 4)
    with torch.no_grad():  # token 4 (expert 1's second row) sits on the kink of feature 0
        w = ref.fc1.weight1
        x[4] = 0.0
        ref.fc1.bias1[0] = 0.0
    slack = kink_slack("relu", Precision(torch.float16), ref, [x], [dy], [[3, 3]])
    dx = slack.input_grads[0]
    assert dx[4].abs().sum() > 0
    assert torch.equal(slack.params[0]["fc1.bias1"][0:1] > 0, torch.tensor([True]))
    assert slack.params[0]["fc1.weight0"].abs().sum() == 0  # expert 0's tokens are clear
    assert w.shape == slack.params[0]["fc1.weight1"].shape


def test_half_precision_relu_with_bias_needs_the_slack_and_passes_with_it(monkeypatch):
    """refimpl run in fp16 rounds h = x @ W1 + b twice (GEMM, then bias) like a torch
    implementation between grouped GEMMs; near h = 0 that flips relu's derivative."""
    case = Case.from_id(
        "mode=off,delay=0,zero=0,single=0,bias=1,act=relu,dtype=fp16,splits=ragged-empty,mb=1"
    )
    sizes = Sizes(experts=4, hidden=32, ffn=128, tokens=1000)
    checker = Checker(Backend("reference", GroupedMLP), torch.device("cpu"), sizes)
    assert checker.run(case).passed
    monkeypatch.setattr(pair, "kink_slack", lambda *args: None)
    without = checker.run(case)
    assert not without.passed
    assert "grad.input" in without.failed_observables


def test_tf32_widens_the_kink_window_as_it_widens_the_tolerance():
    torch.manual_seed(0)
    ref = GroupedMLP(2, 4, 3, activation="relu", bias=True)
    x, dy = torch.randn(6, 4), torch.randn(6, 4)
    with torch.no_grad():
        # Token 4 (expert 1) makes feature 0 cancel to 1e-4 of its magnitude: within TF32's
        # rounding window of the kink, far outside fp32's.
        w = ref.fc1.weight1[0]
        row = torch.randn(4)
        row -= (row @ w) / (w @ w) * w
        row += 1e-4 * row.norm() / w.norm() * w
        x[4] = row
        ref.fc1.bias1.zero_()
    args = (ref, [x], [dy], [[3, 3]])
    ieee = kink_slack("relu", Precision(torch.float32), *args)
    tf32 = kink_slack("relu", Precision(torch.float32, "tf32"), *args)
    assert ieee.input_grads[0][4].abs().sum() == 0
    assert tf32.input_grads[0][4].abs().sum() > 0
