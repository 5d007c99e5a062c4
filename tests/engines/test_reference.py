"""Every rank's data and the reference's data-parallel result (one rank: no collective)."""

import torch

from gmlp_check.engines.reference import promised, rank_data, run_reference
from gmlp_check.inputs import DEVICE_SIZES, case_seed, make_inputs, make_state
from gmlp_check.matrix import Case
from gmlp_check.refimpl import GroupedMLP
from gmlp_check.tolerance import Precision

SIZES = DEVICE_SIZES["cpu"]
CPU = torch.device("cpu")
CASE = Case.from_id(
    "mode=off,delay=0,zero=0,single=0,bias=1,act=swiglu,dtype=fp32,splits=ragged-empty,mb=2"
)


def shapes():
    mlp = GroupedMLP(SIZES.experts, SIZES.hidden, SIZES.ffn, bias=True)
    return {n: p.shape for n, p in mlp.named_parameters()}


def test_weights_are_identical_on_every_rank_and_tokens_differ():
    s0, inputs0 = rank_data(CASE, SIZES, shapes(), CPU, 0, 2)
    s1, inputs1 = rank_data(CASE, SIZES, shapes(), CPU, 1, 2)
    assert s0.keys() == s1.keys() and all(torch.equal(s0[n], s1[n]) for n in s0)
    assert not torch.equal(inputs0[0].xs[0], inputs1[0].xs[0])
    assert not torch.equal(inputs0[0].xs[0], inputs0[1].xs[0])  # each step draws new tokens
    assert inputs0[0].splits == inputs1[0].splits  # the split pattern is the case's


def test_rank_0_first_step_sees_exactly_the_emulated_runs_data():
    generator = torch.Generator().manual_seed(case_seed(SIZES.seed, CASE))
    state = make_state(shapes(), CASE, SIZES, CPU, generator)
    emulated = make_inputs(CASE, SIZES, state, CPU, generator)
    _, inputs = rank_data(CASE, SIZES, shapes(), CPU, 0, 2)
    for a, b in zip(emulated.xs + emulated.dys, inputs[0].xs + inputs[0].dys):
        assert torch.equal(a, b)


def test_the_promise_on_one_rank_is_the_sum_over_microbatches_and_the_last_alone():
    mlp = GroupedMLP(SIZES.experts, SIZES.hidden, SIZES.ffn, bias=True)
    _, inputs = rank_data(CASE, SIZES, shapes(), CPU, 0, 1)
    step = run_reference(mlp, inputs[0], CASE.activation, Precision(torch.float32))
    promise = promised(step)
    assert len(step.grads) == CASE.microbatches
    for name, value in promise.synced.items():
        torch.testing.assert_close(value, step.grads[0][name] + step.grads[1][name])
        assert torch.equal(promise.last_only[name], step.grads[1][name])
    assert promise.slack == {}  # swiglu has no kink
