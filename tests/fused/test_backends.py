"""fused.backends: built-in names, "module:factory" specs, and their errors."""

import pytest
import torch

from fused import GroupedMLP, grouped_mm
from fused.backends import BUILTIN_BACKENDS, BackendError, create, load_factory

from .harness import Case, MainGrads, assert_outputs_match, run_pair, tolerance


def test_builtin_names():
    assert BUILTIN_BACKENDS == ("triton", "torch-grouped-mm")
    assert load_factory("triton") is GroupedMLP
    assert load_factory("torch-grouped-mm") is grouped_mm.TorchGroupedMMMLP
    assert issubclass(BackendError, ValueError)


def test_module_factory_spec_builds_and_matches_reference():
    factory = load_factory("tests.fused.example_backend:wrapped_triton")
    assert callable(factory)
    ref, fused = run_pair(Case(), backend="tests.fused.example_backend:wrapped_triton")
    assert_outputs_match(ref, fused, torch.float32)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cuda", "expected one of 'triton', 'torch-grouped-mm' or a 'package.module:factory'"),
        ("a:b:c", "expected one of"),
        ("pkg.:factory", "expected one of"),
        ("pkg:", "expected one of"),
        (":factory", "expected one of"),
        (None, "expected one of"),
        ("no_such_package_xyz.mod:factory", "cannot import module 'no_such_package_xyz.mod'"),
        ("tests.fused.broken_backend:factory", "a_module_that_does_not_exist"),
        ("tests.fused.example_backend:missing", "has no attribute 'missing'"),
        ("tests.fused.example_backend:NOT_CALLABLE", "is a int, expected a callable factory"),
    ],
)
def test_bad_specs_are_clear_errors(spec, message):
    with pytest.raises(BackendError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        load_factory(spec)
    assert repr(spec) in str(err.value)


def test_factory_must_return_a_module():
    with pytest.raises(BackendError, match=r"expected a torch\.nn\.Module"):
        create("tests.fused.example_backend:not_a_module", **Case().kwargs())


def test_create_with_fault_validates_the_fault_name():
    with pytest.raises(BackendError, match="fault: expected one of"):
        create("triton", fault="no-such-fault", **Case().kwargs())
    with pytest.raises(BackendError, match="only be injected into backend 'triton'"):
        create("tests.fused.example_backend:wrapped_triton", fault="no-dummy-grad")


# -- torch-grouped-mm ---------------------------------------------------------------------------


def test_torch_grouped_mm_refuses_what_it_cannot_run():
    with pytest.raises(BackendError) as err:
        create("torch-grouped-mm", **Case(dtype=torch.float32, device="cpu").kwargs())
    message = str(err.value)
    for part in ("torch-grouped-mm", "torch.bfloat16", "CUDA", "9.0", "torch.float32", "cpu"):
        assert part in message


@pytest.fixture
def grouped_mm_on_cpu(monkeypatch):
    """Run the torch-grouped-mm backend on CPU through torch._grouped_mm's CPU fallback.

    Only the device/dtype gate is lifted: every GEMM, the activation and the main_grad
    bookkeeping run for real."""
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("this torch has no torch._grouped_mm")
    monkeypatch.setattr(grouped_mm, "check_supported", lambda dtype, device: None)


GMM_CASE = Case(hidden=16, ffn=8, dtype=torch.bfloat16)


def test_torch_grouped_mm_needs_aligned_sizes(grouped_mm_on_cpu):
    with pytest.raises(BackendError, match="multiples of 8"):
        create("torch-grouped-mm", **GMM_CASE.with_(hidden=20).kwargs())


@pytest.mark.parametrize(
    ("how", "delay", "single"),
    [
        (None, False, False),
        (MainGrads(), False, True),
        (MainGrads(overwrite=True, fill="nan"), False, False),
        (MainGrads(fsdp=True, overwrite=True, fill="nan"), True, True),
        (MainGrads(zero_out=True), True, False),
    ],
    ids=["plain", "accumulate", "overwrite", "fsdp-delayed", "zero-out-delayed"],
)
def test_torch_grouped_mm_contract(grouped_mm_on_cpu, how, delay, single):
    case = GMM_CASE.with_(
        activation="scaled_swiglu",
        output_into_main_grad=how is not None,
        delay=delay,
        single=single,
    )
    ref, fused = run_pair(case, how, backend="torch-grouped-mm")
    assert_outputs_match(ref, fused, case.dtype)
    assert fused.wgrad_hook_calls == ref.wgrad_hook_calls
    for name, r in ref.grads.items():
        if "bias" in name or how is None:
            torch.testing.assert_close(fused.grads[name], r, **tolerance(case.dtype), msg=name)
        else:
            assert fused.grads[name].shape == r.shape and fused.grads[name].dtype == r.dtype
            if how.zero_out:
                assert torch.count_nonzero(fused.grads[name]) == 0
    for name, r in ref.main_grads.items():
        assert not fused.main_grads[name].isnan().any(), name
        torch.testing.assert_close(fused.main_grads[name], r, **tolerance(case.dtype), msg=name)
        assert fused.grad_added[name] == ref.grad_added[name]
    if how is not None and how.overwrite:
        empty = (
            fused.main_grads["fc1.weight"].view(3, -1)[1]
            if single
            else fused.main_grads["fc1.weight1"]
        )
        assert torch.count_nonzero(empty) == 0


def test_torch_grouped_mm_zero_tokens(grouped_mm_on_cpu):
    case = GMM_CASE.with_(output_into_main_grad=True, splits=(0, 0, 0))
    ref, fused = run_pair(case, MainGrads(overwrite=True, fill="nan"), backend="torch-grouped-mm")
    assert fused.y[0].shape == (0, case.hidden)
    for name in ref.main_grads:
        assert torch.count_nonzero(fused.main_grads[name]) == 0
