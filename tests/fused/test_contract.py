"""Every row of CONTRACT.md on the triton backend (CPU, interpreter), against refimpl."""

import itertools

import pytest
import torch

from gmlp_check.buffers import memory_span

from ..harness import MainGrads, attach, named_weights, nonempty, same_bits
from .harness import (
    Case,
    assert_bias_grads_match,
    assert_outputs_match,
    build_pair,
    make_inputs,
    run,
    run_pair,
    tolerance,
)

SINGLE = pytest.mark.parametrize("single", [False, True], ids=["discrete", "single"])


def weight_names(obs):
    """The weights an observation saw; never empty."""
    return nonempty((n for n in obs.grads if "weight" in n), "weights")


@pytest.mark.parametrize(
    "activation",
    ["swiglu", "scaled_swiglu", "clamped_qgeglu", "geglu", "gelu", "relu", "srelu"],
)
def test_plain_mode_matches_reference_for_every_activation(activation):
    case = Case(activation=activation, single=activation == "geglu", bias=activation != "relu")
    ref, fused = run_pair(case, MainGrads(fill="nan"))
    assert_outputs_match(ref, fused, case.dtype)
    for name, r in nonempty(ref.grads.items(), "parameters"):
        f = fused.grads[name]
        assert f.dtype == r.dtype and f.shape == r.shape, name
        torch.testing.assert_close(f, r, msg=name)
    for name in weight_names(ref):
        # Plain mode: main_grad untouched bit for bit, grad_added_to_main_grad untouched.
        assert same_bits(fused.main_grads[name], ref.main_grads[name]), name
        assert fused.grad_added[name] is False


def test_fp16_matches_reference():
    case = Case(activation="scaled_swiglu", dtype=torch.float16)
    ref, fused = run_pair(case, MainGrads(), microbatches=1)
    assert_outputs_match(ref, fused, case.dtype)
    for name, r in nonempty(ref.grads.items(), "parameters"):
        assert fused.grads[name].dtype == torch.float16
        torch.testing.assert_close(fused.grads[name], r, **tolerance(case.dtype), msg=name)


@pytest.mark.parametrize("zero_out", [False, True], ids=["dummy", "zero-dummy"])
@SINGLE
def test_accumulate_adds_into_every_element(single, zero_out):
    case = Case(single=single, accumulate_into_main_grad=True)
    how = MainGrads(zero_out=zero_out)
    ref, fused = run_pair(case, how)
    assert_outputs_match(ref, fused, case.dtype)
    assert_bias_grads_match(ref, fused, case.dtype)
    params = dict(build_pair(case)[1].named_parameters())
    for name in weight_names(ref):
        torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name], msg=name)
        assert fused.grad_added[name] is True
        dummy = fused.grads[name]
        assert dummy.shape == params[name].shape and dummy.dtype == params[name].dtype
        # The dummy never aliases main_grad.
        assert dummy.data_ptr() != fused.exposed_main_grads[name].data_ptr()
        if zero_out:
            assert torch.count_nonzero(dummy) == 0


def test_dummies_overlap_nothing_and_are_zero_under_zero_out_wgrad():
    """Each weight's dummy is memory of its own: it overlaps neither main_grad nor another
    weight's dummy (they may be slices of one allocation), and is zero under zero_out_wgrad."""
    case = Case(accumulate_into_main_grad=True)
    _, fused = build_pair(case)
    batch = make_inputs(case)[0]
    buffers = {}
    for name, p in named_weights(fused):
        buffers[name] = torch.zeros(p.numel())
        p.main_grad = buffers[name]
        p.zero_out_wgrad = True
    fused(batch.x, list(case.splits)).backward(batch.dy)
    spans = [memory_span(b) for b in buffers.values()]
    for _, p in named_weights(fused):
        assert torch.count_nonzero(p.grad) == 0
        spans.append(memory_span(p.grad))
    spans.sort()
    overlapping = [(a, b) for a, b in itertools.pairwise(spans) if a[1] > b[0]]
    assert not overlapping, f"dummies overlap main_grad or each other: {overlapping}"


@pytest.mark.parametrize("fsdp", [False, True], ids=["ddp", "fsdp"])
@SINGLE
def test_overwrite_writes_every_element_including_empty_experts(single, fsdp):
    case = Case(single=single, accumulate_into_main_grad=True)
    ref, fused = run_pair(case, MainGrads(fsdp=fsdp, overwrite=True, fill="nan"))
    assert_outputs_match(ref, fused, case.dtype)
    for name in weight_names(ref):
        assert not fused.main_grads[name].isnan().any(), f"{name}: a NaN sentinel survived"
        torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name], msg=name)
        assert fused.grad_added[name] is True
    # Expert 1 had no tokens: its region is exactly zero, as in the reference.
    empty = (
        fused.main_grads["fc1.weight"].view(3, -1)[1] if single else fused.main_grads["fc1.weight1"]
    )
    assert torch.count_nonzero(empty) == 0


@SINGLE
def test_fsdp_fetches_main_grad_lazily(single):
    case = Case(single=single, accumulate_into_main_grad=True)
    ref, fused = run_pair(case, MainGrads(fsdp=True, overwrite=False, fill="random"))
    for name in weight_names(ref):
        # get_main_grad() was called and its buffer exposed as param.main_grad ...
        assert ref.exposes_buffer[name] and fused.exposes_buffer[name], name
        # ... and the FSDP buffer received the gradient, as in the reference.
        torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name], msg=name)


def test_missing_main_grad_source_is_a_clear_error_before_anything_runs():
    case = Case(accumulate_into_main_grad=True)
    ref, fused = build_pair(case)
    batch = make_inputs(case)[0]
    messages = []
    for mlp in (ref, fused):
        with pytest.raises(ValueError) as err:
            mlp(batch.x, list(case.splits))
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "fc1.weight0" in messages[1]


def test_invalid_main_grad_fails_before_any_write():
    case = Case(accumulate_into_main_grad=True)
    ref, fused = build_pair(case)
    batch = make_inputs(case)[0]
    messages = []
    for mlp in (ref, fused):
        buffers = {}
        for name, p in named_weights(mlp):
            buffers[name] = torch.randn(p.numel())
            p.main_grad = buffers[name]
        # One fc2 weight (delivered first) has a buffer of the wrong dtype.
        mlp.fc2.weight2.main_grad = torch.zeros(mlp.fc2.weight2.numel(), dtype=torch.float64)
        before = {n: b.clone() for n, b in buffers.items()}
        with pytest.raises(ValueError) as err:
            mlp(batch.x, list(case.splits)).backward(batch.dy)
        messages.append(str(err.value))
        for name, buf in buffers.items():
            assert same_bits(buf, before[name]), f"{name} was written before the error"
    assert messages[0] == messages[1]


@pytest.mark.parametrize(
    "how",
    [MainGrads(), MainGrads(overwrite=True, fill="nan"), None],
    ids=["accumulate", "overwrite", "plain"],
)
@SINGLE
def test_delayed_wgrad_lands_in_backward_dw_and_fires_hooks_once(single, how):
    case = Case(single=single, accumulate_into_main_grad=how is not None, delay=True)
    ref, fused = run_pair(case, how)
    assert_outputs_match(ref, fused, case.dtype)
    assert_bias_grads_match(ref, fused, case.dtype)
    assert fused.backward_dw_hook_calls_before == 0
    assert fused.wgrad_hook_calls == ref.wgrad_hook_calls == 1
    for name in weight_names(ref):
        if how is not None:
            assert not fused.main_grads[name].isnan().any()
            torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name], msg=name)
            assert fused.grad_added[name] is True
            assert fused.grads[name] is not None
        else:
            torch.testing.assert_close(fused.grads[name], ref.grads[name], msg=name)


def test_delay_leaves_main_grad_unchanged_until_backward_dw():
    case = Case(accumulate_into_main_grad=True, delay=True)
    _, fused = build_pair(case)
    batch = make_inputs(case)[0]
    buffers = {n: torch.randn(p.numel()) for n, p in named_weights(fused)}
    for name, p in named_weights(fused):
        p.main_grad = buffers[name]
    before = {n: b.clone() for n, b in buffers.items()}
    fused(batch.x, list(case.splits)).backward(batch.dy)
    for name, buf in buffers.items():
        assert same_bits(buf, before[name]), name
        assert dict(fused.named_parameters())[name].grad is None
    fused.backward_dw()
    for name, buf in buffers.items():
        if name.endswith("1"):  # expert 1 has no tokens: accumulate leaves it untouched
            assert same_bits(buf, before[name]), name
        else:
            assert not torch.equal(buf, before[name]), name


def test_output_and_dgrad_identical_with_and_without_delay():
    base = Case(activation="scaled_swiglu", accumulate_into_main_grad=True)
    observed = []
    for delay in (False, True):
        _, fused = build_pair(base.with_(delay=delay))
        buffers = attach(fused, MainGrads())
        observed.append(run(fused, make_inputs(base), list(base.splits), main_grads=buffers))
    for name in ("y", "dx", "dprobs"):
        assert torch.equal(getattr(observed[0], name)[0], getattr(observed[1], name)[0]), name


@pytest.mark.parametrize("overwrite", [False, True], ids=["accumulate", "overwrite"])
@pytest.mark.parametrize("delay", [False, True], ids=["immediate", "delayed"])
def test_two_microbatches(overwrite, delay):
    """Accumulate: before + W1 + W2. Overwrite: W2 (the last)."""
    case = Case(accumulate_into_main_grad=True, delay=delay, single=overwrite)
    ref, fused = run_pair(
        case, MainGrads(overwrite=overwrite, fill="nan" if overwrite else "random"), microbatches=2
    )
    assert_outputs_match(ref, fused, case.dtype)
    for name in weight_names(ref):
        assert not fused.main_grads[name].isnan().any()
        torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name], msg=name)


def test_grad_added_to_main_grad_is_set_only_if_the_attribute_exists():
    case = Case(accumulate_into_main_grad=True)
    _, fused = build_pair(case)
    batch = make_inputs(case)[0]
    for _, p in named_weights(fused):
        p.main_grad = torch.zeros(p.numel())  # a bare buffer: no DDP attributes
    fused(batch.x, list(case.splits)).backward(batch.dy)
    for name, p in named_weights(fused):
        assert not hasattr(p, "grad_added_to_main_grad"), name


def test_ddp_hook_sees_dummy_and_does_not_add_it_again():
    """Through the emulated Megatron DDP hook: main_grad = before + W, exactly once."""
    case = Case(accumulate_into_main_grad=True)
    ref, fused = run_pair(case, MainGrads(zero_out=False), engine_hooks=True)
    for name in weight_names(ref):
        torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name], msg=name)
        assert fused.hook_grads[name][0] is not None  # a dummy reached the hook (TE #2097)


def test_mixed_overwrite_settings_across_discrete_experts():
    """overwrite_main_grad is per parameter: each expert follows its own weight's flag."""
    case = Case(accumulate_into_main_grad=True)
    ref, fused = build_pair(case)
    batch = make_inputs(case)[0]
    observed = []
    for mlp in (ref, fused):
        buffers = {}
        gen = torch.Generator().manual_seed(5)
        for name, p in named_weights(mlp):
            buffers[name] = torch.randn(p.numel(), generator=gen)
            p.main_grad = buffers[name]
            p.overwrite_main_grad = name.endswith("0")
        mlp(batch.x, list(case.splits)).backward(batch.dy)
        observed.append(buffers)
    for name in nonempty(observed[0], "weights"):
        torch.testing.assert_close(observed[1][name], observed[0][name], msg=name)


def test_zero_tokens():
    case = Case(accumulate_into_main_grad=True, splits=(0, 0, 0))
    ref, fused = run_pair(case, MainGrads(overwrite=True, fill="nan"))
    assert fused.y[0].shape == (0, case.hidden)
    assert fused.dx[0].shape == (0, case.hidden)
    for name in weight_names(ref):
        assert torch.count_nonzero(fused.main_grads[name]) == 0, name
    assert_bias_grads_match(ref, fused, case.dtype)


def test_split_sizes_as_device_tensor():
    case = Case(activation="gelu")
    splits = torch.tensor(case.splits, dtype=torch.int64)
    ref, fused = run_pair(case, splits=splits)
    assert_outputs_match(ref, fused, case.dtype)
    for name, r in nonempty(ref.grads.items(), "parameters"):
        torch.testing.assert_close(fused.grads[name], r, msg=name)
