"""The harness and the checks, on the reference against itself and against planted bugs.

The fused side here is refimpl with one decision changed (tests/gmlp_check/planted.py), so
these tests run in seconds and say which observable catches which bug class, and that the
checker blames only the cases where the bug can show.
"""

import pytest
import torch

from gmlp_check.compare import OBSERVABLES
from gmlp_check.harness import case_seed, run_both, uninitialized_memory_as_nan
from gmlp_check.runner import run_case
from gmlp_check.scenarios import DEVICE_DTYPES, DEVICE_SIZES, Case, default_matrix
from refimpl import GroupedMLP

from .planted import BUGS, planted

CPU = torch.device("cpu")
SIZES = DEVICE_SIZES["cpu"]
MATRIX = default_matrix(DEVICE_DTYPES["cpu"])


def run_matrix(factory):
    return [run_case(case, SIZES, CPU, factory) for case in MATRIX]


@pytest.fixture(scope="module")
def clean_results():
    return run_matrix(GroupedMLP)


def test_the_reference_against_itself_is_clean(clean_results):
    failing = [(r.case.id, r.failed_observables) for r in clean_results if not r.passed]
    assert failing == []
    for r in clean_results:
        assert {c.observable for c in r.checks} <= set(OBSERVABLES)
        names = [c.observable for c in r.checks]
        assert "output" in names and "guard_bands" in names and "ddp_hook" in names


# bug -> (an observable that must catch it, the only cases where it can show)
EXPECTED = {
    "alias-gated-on-local-flag": ("main_grad.at_hook", lambda c: c.mode == "overwrite-fsdp"),
    "bookkeeping-gated-on-local-flag": (
        "grad_added_to_main_grad",
        lambda c: c.mode == "overwrite-fsdp",
    ),
    "delayed-wgrad-dropped": ("ddp_hook", lambda c: c.delay),
    "dummy-not-zeroed": (
        "param.grad.zero",
        lambda c: c.zero_out and c.mode_spec.output_into_main_grad,
    ),
    "overwrite-accumulate-swapped": (
        "main_grad.at_hook",
        lambda c: c.mode_spec.output_into_main_grad,
    ),
    "fsdp-main-grad-not-fetched": ("run", lambda c: c.mode_spec.fsdp),
    "empty-expert-skipped": (
        "main_grad.at_hook",
        lambda c: c.mode == "overwrite-fsdp" and c.splits != "ragged",  # T=0: all empty
    ),
    "group-offsets-shifted": ("main_grad.at_hook", lambda c: c.mode_spec.output_into_main_grad),
    "no-dummy-grad": ("ddp_hook", lambda c: c.mode_spec.output_into_main_grad),
}


@pytest.mark.parametrize("bug", BUGS)
def test_each_planted_bug_is_caught_where_it_can_show_and_nowhere_else(bug):
    observable, can_show = EXPECTED[bug]
    results = run_matrix(planted(bug))
    failing = [r for r in results if not r.passed]
    assert failing, f"{bug} was not caught"
    assert any(observable in r.failed_observables for r in failing)
    blamed_wrongly = [r.case.id for r in failing if not can_show(r.case)]
    assert blamed_wrongly == []


def test_empty_expert_bug_is_caught_only_with_empty_experts():
    results = run_matrix(planted("empty-expert-skipped"))
    for r in results:
        if r.case.splits in ("ragged",):
            assert r.passed, r.case.id


def test_failures_say_where_and_what():
    case = Case.from_id(
        "mode=overwrite-fsdp,delay=0,zero=0,single=1,bias=0,act=swiglu,dtype=fp32,"
        "splits=ragged-empty,mb=2"
    )
    result = run_case(case, SIZES, CPU, planted("empty-expert-skipped"))
    check = next(c for c in result.checks if c.observable == "main_grad.at_hook")
    assert not check.passed
    assert "mb 1" in check.detail and "NaN where the reference is finite" in check.detail


def test_both_sides_get_identical_main_grad_contents_in_separate_buffers():
    case = MATRIX[0]
    with uninitialized_memory_as_nan():
        run = run_both(case, SIZES, CPU, GroupedMLP)
    ref, fused = run.reference, run.fused
    for name, before in ref.before.items():
        assert torch.equal(before.view(torch.int32), fused.before[name].view(torch.int32))
    (r0, r1), (f0, f1) = ref.arena_span, fused.arena_span
    assert r1 <= f0 or f1 <= r0


def test_sentinels_where_every_element_must_be_written_random_values_elsewhere():
    for case in MATRIX[::8]:
        with uninitialized_memory_as_nan():
            run = run_both(case, SIZES, CPU, GroupedMLP)
        for name, before in run.reference.before.items():
            weight = "weight" in name.rsplit(".", 1)[-1]
            if weight and case.mode == "overwrite-fsdp":
                assert before.isnan().all(), (case.id, name)
            else:
                assert torch.isfinite(before).all() and before.std() > 0.5, (case.id, name)


def test_a_case_sees_the_same_data_alone_as_in_the_matrix():
    case = MATRIX[40]
    assert case_seed(0, case) == case_seed(0, Case.from_id(case.id))
    assert case_seed(0, case) != case_seed(1, case)
    with uninitialized_memory_as_nan():
        first = run_both(case, SIZES, CPU, GroupedMLP)
        run_both(MATRIX[3], SIZES, CPU, GroupedMLP)  # other cases in between
        again = run_both(case, SIZES, CPU, GroupedMLP)
    for a, b in zip(first.reference.outputs, again.reference.outputs):
        assert torch.equal(a, b)


def test_uninitialized_memory_is_nan_inside_and_settings_restored_after():
    torch.use_deterministic_algorithms(False)
    fill = torch.utils.deterministic.fill_uninitialized_memory
    with uninitialized_memory_as_nan():
        assert torch.empty(64).isnan().all()
        assert torch.empty_like(torch.ones(3, 5, dtype=torch.float16)).isnan().all()
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.utils.deterministic.fill_uninitialized_memory == fill


def test_a_side_that_cannot_be_built_is_reported_not_raised():
    def broken(**kwargs):
        raise RuntimeError("no such kernel")

    result = run_case(MATRIX[0], SIZES, CPU, broken)
    assert result.failed_observables == ["construct"]
    assert "no such kernel" in result.checks[0].detail


def test_wrong_parameter_names_are_a_construct_failure():
    class Renamed(torch.nn.Module):
        def __init__(self, **kwargs):
            super().__init__()
            self.inner = GroupedMLP(**kwargs)

    result = run_case(MATRIX[0], SIZES, CPU, Renamed)
    assert result.failed_observables == ["construct"]


def test_a_module_without_the_delay_attribute_still_gets_its_hooks_from_backward_dw():
    # Third-party modules need not expose TE's delay_wgrad_compute attribute; the harness
    # tells the emulated DDP hooks from the case instead.
    def without_attribute(**kwargs):
        mlp = GroupedMLP(**kwargs)
        del mlp.delay_wgrad_compute
        return mlp

    delayed = [c for c in MATRIX if c.delay and c.mode_spec.output_into_main_grad][:3]
    assert delayed
    for case in delayed:
        result = run_case(case, SIZES, CPU, without_attribute)
        assert result.passed, (case.id, result.failed_observables)
