"""fused.TritonGroupedMLP has refimpl.GroupedMLP's constructor, parameters, state dict and
errors."""

import pytest
import torch

from gmlp_check import refimpl
from gmlp_check.fused import TritonGroupedMLP

from ..harness import nonempty
from .harness import Case, build_pair, make_inputs, run


@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_same_parameters_and_initialisation_for_one_seed(single, bias):
    kwargs = Case(single=single, bias=bias).kwargs()
    torch.manual_seed(7)
    ref = refimpl.GroupedMLP(**kwargs)
    torch.manual_seed(7)
    fused = TritonGroupedMLP(**kwargs)
    ref_state, fused_state = ref.state_dict(), fused.state_dict()
    assert list(ref_state) == list(fused_state)
    for name, value in nonempty(ref_state.items(), "state entries"):
        assert torch.equal(fused_state[name], value), name


@pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])
def test_state_dict_round_trip_both_ways(single):
    case = Case(single=single, activation="gelu")
    kwargs = case.kwargs()
    torch.manual_seed(1)
    ref = refimpl.GroupedMLP(**kwargs)
    torch.manual_seed(2)
    fused = TritonGroupedMLP(**kwargs)
    fused.load_state_dict(ref.state_dict())  # refimpl -> fused
    batch = make_inputs(case)
    torch.testing.assert_close(
        run(fused, batch, list(case.splits)).y[0], run(ref, batch, list(case.splits)).y[0]
    )
    torch.manual_seed(3)
    other = TritonGroupedMLP(**kwargs)
    ref2 = refimpl.GroupedMLP(**kwargs)
    ref2.load_state_dict(other.state_dict())  # fused -> refimpl
    for name, value in nonempty(other.state_dict().items(), "state entries"):
        assert torch.equal(ref2.state_dict()[name], value), name


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_experts": 0},
        {"hidden": -1},
        {"ffn": 2.0},
        {"activation": "tanh"},
    ],
    ids=["experts", "hidden", "ffn", "activation"],
)
def test_constructor_errors_match_reference(kwargs):
    full = {**Case().kwargs(), **kwargs}
    with pytest.raises(ValueError) as ref_err:
        refimpl.GroupedMLP(**full)
    with pytest.raises(ValueError) as fused_err:
        TritonGroupedMLP(**full)
    assert str(fused_err.value) == str(ref_err.value)


def _bad_inputs(case):
    tokens = sum(case.splits)
    x = torch.randn(tokens, case.hidden)
    good = list(case.splits)
    return {
        "x-shape": (torch.randn(tokens, case.hidden + 1), good, None),
        "x-dtype": (x.double(), good, None),
        "x-type": (x.tolist(), good, None),
        "splits-count": (x, good[:-1], None),
        "splits-sum": (x, [s + 1 for s in good], None),
        "splits-negative": (x, [good[0] + 1, -1, good[2]], None),
        "splits-float-tensor": (x, torch.tensor(good, dtype=torch.float32), None),
        "splits-type": (x, 3, None),
        "probs-unexpected": (x, good, torch.rand(tokens)),
    }


@pytest.mark.parametrize("which", list(_bad_inputs(Case())))
def test_forward_errors_match_reference(which):
    case = Case()
    ref, fused = build_pair(case)
    x, splits, probs = _bad_inputs(case)[which]
    errors = []
    for mlp in (ref, fused):
        with pytest.raises((ValueError, TypeError)) as err:
            mlp(x, splits, probs)
        errors.append(err)
    assert type(errors[1].value) is type(errors[0].value)
    assert str(errors[1].value) == str(errors[0].value)


def test_probs_errors_match_reference():
    case = Case(activation="scaled_swiglu")
    ref, fused = build_pair(case)
    x = torch.randn(sum(case.splits), case.hidden)
    for probs in (None, torch.rand(3), torch.rand(sum(case.splits), 1)):
        messages = []
        for mlp in (ref, fused):
            with pytest.raises(ValueError) as err:
                mlp(x, list(case.splits), probs)
            messages.append(str(err.value))
        assert messages[0] == messages[1]


def test_bf16_on_cpu_is_not_implemented():
    """Triton's interpreter computes bf16 dot products wrongly: the constructor refuses
    (NotImplementedError, which the checker reports as unsupported), and only that dtype."""
    with pytest.raises(NotImplementedError, match=r"bf16 dot products are wrong"):
        TritonGroupedMLP(**Case(device="cpu", dtype=torch.bfloat16).kwargs())
    TritonGroupedMLP(**Case(device="cpu", dtype=torch.float16).kwargs())


def test_backward_dw_without_delay_is_a_no_op():
    case = Case()
    _, fused = build_pair(case)
    calls = []
    fused.register_wgrad_accumulation_and_reduce_hooks(lambda: calls.append(1))
    fused.backward_dw()
    assert calls == []
