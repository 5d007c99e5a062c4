"""The harness and the checks, on the reference against itself and against planted bugs.

The fused side here is the reference with one decision changed (tests/gmlp_check/planted.py),
so these tests run in seconds and say which observable catches which bug class, and that the
checker blames only the cases where the bug can show.
"""

import pytest
import torch

from gmlp_check.backends import Backend
from gmlp_check.inputs import case_seed
from gmlp_check.matrix import Case
from gmlp_check.observables import NAMES, OBSERVABLES, markdown_table
from gmlp_check.pair import run_pair
from gmlp_check.refimpl import GroupedMLP

from .planted import BUGS, planted
from .support import CPU, MATRIX, SIZES, checker_for, overwrite_case_id


def run_matrix(factory):
    return checker_for(factory).run_all(MATRIX)


def pair(case, factory=GroupedMLP):
    return run_pair(case, SIZES, CPU, Backend("test", factory))


@pytest.fixture(scope="module")
def clean_results():
    return run_matrix(GroupedMLP)


def test_the_reference_against_itself_is_clean(clean_results):
    assert len(clean_results) == len(MATRIX) > 0
    failing = [(r.case.id, r.failed_observables) for r in clean_results if not r.passed]
    assert failing == []
    for r in clean_results:
        assert {c.observable for c in r.checks} <= set(NAMES)
        names = [c.observable for c in r.checks]
        assert "output" in names and "guard_bands" in names and "ddp_hook" in names


def test_the_observables_table_is_generated_from_the_registry():
    table = markdown_table()
    assert len(OBSERVABLES) == len(set(NAMES)) > 10
    for o in OBSERVABLES:
        assert f"| `{o.name}` | {o.doc} |" in table


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
        lambda c: c.zero_out and c.mode_spec.accumulate_into_main_grad,
    ),
    "overwrite-accumulate-swapped": (
        "main_grad.at_hook",
        lambda c: c.mode_spec.accumulate_into_main_grad,
    ),
    "fsdp-main-grad-not-fetched": ("run", lambda c: c.mode_spec.fsdp),
    "empty-expert-skipped": (
        "main_grad.at_hook",
        lambda c: c.mode == "overwrite-fsdp" and c.splits != "ragged",  # T=0: all empty
    ),
    "group-offsets-shifted": ("main_grad.at_hook", lambda c: c.mode_spec.accumulate_into_main_grad),
    "no-dummy-grad": ("ddp_hook", lambda c: c.mode_spec.accumulate_into_main_grad),
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
    ragged = [r for r in results if r.case.splits == "ragged"]
    assert ragged
    assert [r.case.id for r in ragged if not r.passed] == []


def test_failures_say_where_and_what():
    case = Case.from_id(overwrite_case_id(single="1"))
    result = checker_for(planted("empty-expert-skipped")).run(case)
    check = next(c for c in result.checks if c.observable == "main_grad.at_hook")
    assert not check.passed
    assert "mb 1" in check.detail and "NaN where the reference is finite" in check.detail


def test_both_sides_get_identical_main_grad_contents_in_separate_buffers():
    run = pair(MATRIX[0])
    ref, fused = run.reference, run.fused
    assert ref.before
    for name, before in ref.before.items():
        assert torch.equal(before.view(torch.int32), fused.before[name].view(torch.int32))
        assert before.data_ptr() != fused.before[name].data_ptr()


def test_main_grad_is_shaped_like_its_parameter_as_megatron_hands_it_out():
    seen = {}

    def recording(**kwargs):
        mlp = GroupedMLP(**kwargs)
        original = mlp.forward

        def forward(x, splits, probs=None):
            for name, p in mlp.named_parameters():
                buffer = getattr(p, "main_grad", None)
                if buffer is None:  # Megatron-FSDP: absent until fetched, None after reduction
                    buffer = p.get_main_grad()
                seen[name] = (tuple(buffer.shape), tuple(p.shape))
            return original(x, splits, probs)

        mlp.forward = forward
        return mlp

    for mode in ("accumulate-ddp", "overwrite-fsdp"):
        seen.clear()
        pair(Case.from_id(overwrite_case_id(mode=mode, single="1", bias="1")), recording)
        assert seen and all(buffer == param for buffer, param in seen.values()), seen


def test_sentinels_where_every_element_must_be_written_random_values_elsewhere():
    checked = 0
    for case in MATRIX[::8]:
        run = pair(case)
        for name, before in run.reference.before.items():
            weight = "weight" in name.rsplit(".", 1)[-1]
            if weight and case.mode == "overwrite-fsdp":
                assert before.isnan().all(), (case.id, name)
            else:
                assert torch.isfinite(before).all() and before.std() > 0.5, (case.id, name)
            checked += 1
    assert checked


def test_a_case_sees_the_same_data_alone_as_in_the_matrix():
    case = MATRIX[40]
    assert case_seed(0, case) == case_seed(0, Case.from_id(case.id))
    assert case_seed(0, case) != case_seed(1, case)
    first = pair(case)
    pair(MATRIX[3])  # other cases in between
    again = pair(case)
    assert first.reference.outputs
    for a, b in zip(first.reference.outputs, again.reference.outputs):
        assert torch.equal(a, b)


def test_a_side_that_cannot_be_built_is_reported_not_raised():
    def broken(**kwargs):
        raise RuntimeError("no such kernel")

    result = checker_for(broken).run(MATRIX[0])
    assert result.failed_observables == ["construct"]
    assert "RuntimeError: no such kernel" in result.checks[0].detail


def test_a_factory_that_cannot_build_a_case_skips_it_with_its_reason():
    def no_single(**kwargs):
        if kwargs["single_grouped_weight"]:
            raise NotImplementedError("no single grouped weight here")
        return GroupedMLP(**kwargs)

    checker = checker_for(no_single)
    single = Case.from_id(overwrite_case_id(single="1"))
    skipped = checker.run(single)
    assert skipped.status == "skipped" and skipped.ok and not skipped.checks
    assert skipped.skip_reason == "no single grouped weight here"
    assert checker.run(Case.from_id(overwrite_case_id())).status == "passed"


def test_wrong_parameter_names_are_a_construct_failure_naming_the_parameter():
    class Renamed(torch.nn.Module):
        def __init__(self, **kwargs):
            super().__init__()
            self.inner = GroupedMLP(**kwargs)

        def forward(self, x, splits, probs=None):
            return self.inner(x, splits, probs)

        def backward_dw(self):
            self.inner.backward_dw()

        def register_wgrad_accumulation_and_reduce_hooks(self, hook):
            self.inner.register_wgrad_accumulation_and_reduce_hooks(hook)

    result = checker_for(Renamed).run(MATRIX[0])
    assert result.failed_observables == ["construct"]
    assert "inner.fc1.weight0" in result.checks[0].detail


def test_state_entries_that_are_not_parameters_play_no_part():
    def with_extra_state(**kwargs):
        mlp = GroupedMLP(**kwargs)
        mlp.register_buffer("_extra_state", torch.zeros(3))  # like TE's FP8 metadata
        return mlp

    assert checker_for(with_extra_state).run(MATRIX[0]).status == "passed"


def test_a_module_without_the_delay_attribute_still_gets_its_hooks_from_backward_dw():
    # Third-party modules need not expose TE's delay_wgrad_compute attribute; the harness
    # tells the hooks from the case instead.
    class WithoutAttribute(GroupedMLP):
        @property
        def delay_wgrad_compute(self):  # reads as absent: getattr falls back, hasattr is False
            raise AttributeError("delay_wgrad_compute")

    def without_attribute(**kwargs):
        mlp = WithoutAttribute(**kwargs)
        assert not hasattr(mlp, "delay_wgrad_compute")
        return mlp

    delayed = [c for c in MATRIX if c.delay and c.mode_spec.accumulate_into_main_grad][:3]
    assert delayed
    checker = checker_for(without_attribute)
    for case in delayed:
        result = checker.run(case)
        assert result.passed, (case.id, result.failed_observables)
