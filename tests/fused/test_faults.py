"""Each injectable fault changes the behaviour it names; refimpl, run the same way, gives the
expectation the fault breaks."""

import re
from pathlib import Path

import pytest
import torch

from fused import GroupedMLP, backends
from fused.faults import FAULTS, inject

from .harness import (
    Case,
    MainGrads,
    build_pair,
    initial_main_grads,
    run_pair,
    uninitialized_memory_is_nan,
)

REPO = Path(__file__).resolve().parents[2]
# The repository's copy (linked from the README) or the shared one beside the checkout.
CONTRACTS = [REPO / "CONTRACT.md", REPO.parent / "shared" / "CONTRACT.md"]


def weight_names(obs):
    return [n for n in obs.grads if "weight" in n]


def test_fault_names_and_bug_classes():
    assert set(FAULTS) == {
        "alias-gated-on-local-flag",
        "bookkeeping-gated-on-local-flag",
        "delayed-wgrad-dropped",
        "dummy-not-zeroed",
        "overwrite-accumulate-swapped",
        "fsdp-main-grad-not-fetched",
        "empty-expert-skipped",
        "group-offsets-shifted",
        "no-dummy-grad",
    }
    for name, fault in FAULTS.items():
        assert fault.name == name and fault.description and fault.bug_class


def test_bug_classes_are_cells_of_the_contract_table():
    contract = next((c for c in CONTRACTS if c.is_file()), None)
    if contract is None:
        pytest.skip("CONTRACT.md not found")
    table = contract.read_text().split("## Known bug classes", 1)[1]
    cells = {m.group(1).strip() for m in re.finditer(r"^\|([^|]+)\|", table, re.MULTILINE)}
    for fault in FAULTS.values():
        assert fault.bug_class in cells, fault.name


def test_a_module_has_no_fault_by_default_and_inject_validates():
    _, fused = build_pair(Case())
    assert fused.fault is None
    with pytest.raises(ValueError, match="fault: expected one of"):
        inject(fused, "no-such-fault")
    ref, _ = build_pair(Case())
    with pytest.raises(TypeError, match="triton backend"):
        inject(ref, "no-dummy-grad")
    inject(fused, "no-dummy-grad")
    assert fused.fault == "no-dummy-grad"
    created = backends.create("triton", fault="no-dummy-grad", **Case().kwargs())
    assert isinstance(created, GroupedMLP) and created.fault == "no-dummy-grad"


OVERWRITE_NAN = MainGrads(overwrite=True, fill="nan")


def test_alias_gated_on_local_flag_leaves_sentinels_in_overwrite_mode():
    case = Case(output_into_main_grad=True)
    ref, fused = run_pair(case, OVERWRITE_NAN, fault="alias-gated-on-local-flag")
    for name in weight_names(ref):
        assert not ref.main_grads[name].isnan().any()
        assert fused.main_grads[name].isnan().all(), f"{name}: main_grad was written"
        assert fused.grad_added[name] is True  # bookkeeping still follows the op level


def test_alias_gated_on_local_flag_is_harmless_in_accumulate_mode():
    case = Case(output_into_main_grad=True)
    ref, fused = run_pair(case, MainGrads(), fault="alias-gated-on-local-flag")
    for name in weight_names(ref):
        torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name])


def test_bookkeeping_gated_on_local_flag_doubles_the_gradient_through_ddp():
    case = Case(output_into_main_grad=True)
    how = MainGrads(overwrite=True, fill="nan")
    ref, fused = run_pair(case, how, fault="bookkeeping-gated-on-local-flag", ddp_hooks=True)
    for name in weight_names(ref):
        assert ref.grad_added[name] is True and fused.grad_added[name] is False
        # The real gradient was returned, and the DDP hook added it on top of main_grad.
        torch.testing.assert_close(
            fused.hook_grads[name][0].float(),
            ref.main_grads[name].view(fused.hook_grads[name][0].shape),
        )
        torch.testing.assert_close(fused.main_grads[name], 2 * ref.main_grads[name])


def test_delayed_wgrad_dropped():
    case = Case(output_into_main_grad=True, delay=True)
    ref, fused = run_pair(case, MainGrads(), fault="delayed-wgrad-dropped")
    before = _initial(case, MainGrads())
    assert ref.wgrad_hook_calls == 1 and fused.wgrad_hook_calls == 0
    for name in weight_names(ref):
        assert torch.equal(fused.main_grads[name], before[name]), f"{name} was written"
        if not name.endswith("1"):  # expert 1 has no tokens: nothing to add
            assert not torch.equal(ref.main_grads[name], before[name])
        assert ref.grad_added[name] is True
        assert fused.grad_added[name] is False and fused.grads[name] is None


def test_dummy_not_zeroed_corrupts_main_grad_through_the_ddp_hook():
    case = Case(output_into_main_grad=True)
    how = MainGrads(zero_out=True)
    with uninitialized_memory_is_nan():
        ref, fused = run_pair(case, how, fault="dummy-not-zeroed", ddp_hooks=True)
    for name in weight_names(ref):
        assert torch.count_nonzero(ref.hook_grads[name][0]) == 0
        assert torch.count_nonzero(fused.hook_grads[name][0]) != 0
        assert not ref.main_grads[name].isnan().any()
        assert fused.main_grads[name].isnan().all()


def test_overwrite_accumulate_swapped():
    case = Case(output_into_main_grad=True)
    # Accumulate mode, random main_grad: the swapped GEMM overwrites (only W survives).
    ref, fused = run_pair(case, MainGrads(), fault="overwrite-accumulate-swapped")
    # Overwrite mode, NaN sentinels: the swapped GEMM adds into NaN.
    ref_o, fused_o = run_pair(case, OVERWRITE_NAN, fault="overwrite-accumulate-swapped")
    before = _initial(case, MainGrads())
    for name in weight_names(ref):
        wgrad = ref.main_grads[name] - before[name]
        has_tokens = not name.endswith("1")
        if has_tokens:
            torch.testing.assert_close(fused.main_grads[name], wgrad, atol=1e-5, rtol=1e-4)
            assert not torch.allclose(fused.main_grads[name], ref.main_grads[name])
            assert fused_o.main_grads[name].isnan().all()
        assert not ref_o.main_grads[name].isnan().any()


def _initial(case, how):
    """The main_grad contents run_pair starts from."""
    _, fused = build_pair(case)
    return initial_main_grads(fused, how)


def test_fsdp_main_grad_not_fetched():
    case = Case(output_into_main_grad=True)
    how = MainGrads(fsdp=True, overwrite=True, fill="nan")
    ref, fused = run_pair(case, how, fault="fsdp-main-grad-not-fetched")
    for name in weight_names(ref):
        # The FSDP buffer (what get_main_grad returns) never sees the gradient ...
        assert not ref.main_grads[name].isnan().any()
        assert fused.main_grads[name].isnan().all()
        # ... it went into a fresh buffer assigned to param.main_grad instead.
        assert ref.exposes_buffer[name] and not fused.exposes_buffer[name]
        exposed = fused.exposed_main_grads[name]
        torch.testing.assert_close(exposed.view(-1), ref.main_grads[name])


def test_empty_expert_skipped_in_overwrite_mode():
    case = Case(output_into_main_grad=True)
    ref, fused = run_pair(case, OVERWRITE_NAN, fault="empty-expert-skipped")
    for name in weight_names(ref):
        if name.endswith("1"):  # the expert without tokens
            assert torch.count_nonzero(ref.main_grads[name]) == 0
            assert fused.main_grads[name].isnan().all()
        else:
            torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name])


def test_group_offsets_shifted_hands_expert_g_the_rows_of_expert_g_plus_1():
    # Equal split sizes: with the inclusive scan expert g reads exactly expert g+1's rows.
    case = Case(splits=(6, 6, 6), single=True)
    ref, fused = run_pair(case, fault="group-offsets-shifted")
    for layer in ("fc1", "fc2"):
        r = ref.grads[f"{layer}.weight"]
        f = fused.grads[f"{layer}.weight"]
        torch.testing.assert_close(f[:-1], r[1:])
        assert torch.count_nonzero(f[-1]) == 0  # the last expert's rows lie past the tokens
        assert not torch.allclose(f, r)
    # Dgrad and forward do not use the wgrad kernel: unaffected.
    torch.testing.assert_close(fused.dx[0], ref.dx[0])


def test_no_dummy_grad():
    case = Case(output_into_main_grad=True)
    ref, fused = run_pair(case, MainGrads(), fault="no-dummy-grad")
    for name in weight_names(ref):
        assert ref.grads[name] is not None
        assert fused.grads[name] is None
        torch.testing.assert_close(fused.main_grads[name], ref.main_grads[name])


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_faults_only_in_the_triton_backend(fault):
    with pytest.raises(backends.BackendError, match="triton"):
        backends.create("torch-grouped-mm", fault=fault, **Case().kwargs())
