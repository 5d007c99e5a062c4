"""gmlp_check.faults' policy faults: each changes exactly the behaviour it names, on every
backend that takes its main_grad decisions from a policy; refimpl, run the same way, gives the
expectation the fault breaks. Which fault may go where is decided here, in one place, and the
fused path knows nothing of faults (surface faults: test_surface_faults.py)."""

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import gmlp_check.fused
from gmlp_check.faults import BUG_CLASSES, FAULTS, POLICY_FAULTS, FaultError, get, inject, refusal
from gmlp_check.fused.grouped_mm import TorchGroupedMMMLP
from gmlp_check.fused.main_grad import MainGradPolicy
from gmlp_check.refimpl import GroupedMLP as ReferenceMLP
from gmlp_check.refimpl.sentinels import uninitialized_memory_as_nan

from ..fused.harness import (
    GMM_CASE,
    Case,
    allow_grouped_mm_on_cpu,
    build_pair,
    run_pair,
    tolerance,
)
from ..harness import MainGrads, nonempty

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "CONTRACT.md"
FUSED_SOURCES = Path(gmlp_check.fused.__file__).resolve().parent

POLICY = [f.name for f in POLICY_FAULTS]
# The main_grad decisions of the contract: what a fault may get wrong.
DECISIONS = sorted(name for name in vars(MainGradPolicy) if not name.startswith("_"))


def weight_names(obs):
    return nonempty((n for n in obs.grads if "weight" in n), "weights")


# -- the catalogue ------------------------------------------------------------------------------


def test_policy_fault_names_and_bug_classes():
    assert set(POLICY) == {
        "alias-gated-on-local-flag",
        "bookkeeping-gated-on-local-flag",
        "delayed-wgrad-dropped",
        "dummy-not-zeroed",
        "overwrite-accumulate-swapped",
        "fsdp-main-grad-not-fetched",
        "no-dummy-grad",
    }
    for name, fault in FAULTS.items():
        assert fault.name == name and fault.description and fault.bug_class


def test_bug_classes_are_declared_and_name_cells_of_the_contract_table():
    table = CONTRACT.read_text().split("## Known bug classes", 1)[1]
    cells = {m.group(1).strip() for m in re.finditer(r"^\|([^|]+)\|", table, re.MULTILINE)}
    for fault in FAULTS.values():
        assert fault.bug_class in BUG_CLASSES, fault.name
    for bug in BUG_CLASSES.values():
        assert bug.contract == "" or bug.contract in cells, bug.name


@pytest.mark.parametrize("name", POLICY)
def test_each_fault_gets_exactly_one_decision_wrong(name):
    policy = FAULTS[name].policy
    assert issubclass(policy, MainGradPolicy)
    overridden = [d for d in DECISIONS if d in vars(policy)]
    assert len(overridden) == 1, overridden


# -- validation, in one place -------------------------------------------------------------------


@pytest.mark.parametrize("name", FAULTS)
def test_get_returns_the_fault_of_each_name(name):
    assert get(name) is FAULTS[name]


def test_an_unknown_fault_name_names_inject_and_every_fault():
    assert issubclass(FaultError, ValueError)
    with pytest.raises(FaultError) as err:
        get("no-such-fault")
    message = str(err.value)
    assert message.startswith("--inject: expected one of ")
    assert message.endswith(", got 'no-such-fault'")
    assert all(name in message for name in FAULTS)


def test_a_module_takes_the_contracts_policy_until_a_fault_is_injected():
    _, fused = build_pair(Case())
    assert type(fused.main_grad_policy) is MainGradPolicy
    fault = get("no-dummy-grad")
    assert refusal(fault, fused) is None
    assert inject(fused, fault) is fused
    assert type(fused.main_grad_policy) is fault.policy
    _, other = build_pair(Case())
    assert type(other.main_grad_policy) is MainGradPolicy  # per module, not per class


class _NotAPolicy(ReferenceMLP):
    main_grad_policy = "the contract"


@pytest.mark.parametrize("module_class", [ReferenceMLP, _NotAPolicy], ids=["none", "not-a-policy"])
@pytest.mark.parametrize("name", POLICY)
def test_inject_refuses_a_module_without_a_main_grad_policy(module_class, name):
    module = module_class(**Case().kwargs())
    expected = (
        f"--inject {name}: {module_class.__qualname__} takes no main_grad_policy "
        f"(gmlp_check.fused.main_grad.MainGradPolicy), so policy faults cannot reach its decisions"
    )
    with pytest.raises(FaultError, match=f"^{re.escape(expected)}$"):
        inject(module, FAULTS[name])
    untouched = getattr(module_class, "main_grad_policy", None)
    assert getattr(module, "main_grad_policy", None) == untouched


@pytest.fixture
def grouped_mm_module(monkeypatch):
    allow_grouped_mm_on_cpu(monkeypatch)
    return TorchGroupedMMMLP(**GMM_CASE.kwargs())


@pytest.mark.parametrize("name", POLICY)
def test_policy_faults_go_into_torch_grouped_mm(grouped_mm_module, name):
    inject(grouped_mm_module, FAULTS[name])
    assert type(grouped_mm_module.main_grad_policy) is FAULTS[name].policy


# -- the fused path knows no fault --------------------------------------------------------------


def _policy_name(fault) -> list[str]:
    return [fault.policy.__name__] if fault.kind == "policy" else []


def fault_mentions(text: str) -> list[str]:
    """Fault names (as spelled in FAULTS, in snake case, or as their policy class) and lint
    suppression comments in ``text``."""
    words = {
        spelled
        for fault in FAULTS.values()
        for spelled in (fault.name, fault.name.replace("-", "_"), *_policy_name(fault))
    }
    found = sorted(word for word in words if word in text)
    return found + re.findall(r"#\s*gmlp:\s*ignore\b", text)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("if fault == 'no-dummy-grad':", ["no-dummy-grad"]),
        ("skip = policy.empty_expert_skipped", ["empty_expert_skipped"]),
        ("class DummyNotZeroed(MainGradPolicy):", ["DummyNotZeroed"]),
        ("return x  # gmlp: ignore[GMLP003] on purpose", ["# gmlp: ignore"]),
        ("skip_empty_tiles: bool = False  # a kernel switch", []),
    ],
)
def test_the_scan_finds_fault_names_and_suppressions(text, found):
    assert fault_mentions(text) == found


def test_the_fused_path_names_no_fault_and_suppresses_no_finding():
    sources = nonempty(sorted(FUSED_SOURCES.rglob("*.py")), "fused/ sources")
    assert FUSED_SOURCES / "main_grad.py" in sources
    mentions = [
        f"{path.relative_to(FUSED_SOURCES)}: {word}"
        for path in sources
        for word in fault_mentions(path.read_text())
    ]
    assert mentions == []


# -- each fault changes the behaviour it names --------------------------------------------------


@dataclass(frozen=True)
class Target:
    backend: str
    case: Case


@pytest.fixture(params=["triton", "torch-grouped-mm"])
def target(request, monkeypatch):
    """A backend that takes policy faults, with its smallest CPU case."""
    if request.param == "torch-grouped-mm":
        allow_grouped_mm_on_cpu(monkeypatch)
        return Target("torch-grouped-mm", GMM_CASE)
    return Target("triton", Case())


OVERWRITE_NAN = MainGrads(overwrite=True, fill="nan")


def test_alias_gated_on_local_flag_leaves_sentinels_in_overwrite_mode(target):
    case = target.case.with_(accumulate_into_main_grad=True)
    ref, fused = run_pair(
        case, OVERWRITE_NAN, backend=target.backend, fault="alias-gated-on-local-flag"
    )
    for name in weight_names(ref):
        assert not ref.main_grads[name].isnan().any()
        assert fused.main_grads[name].isnan().all(), f"{name}: main_grad was written"
        assert fused.grad_added[name] is True  # bookkeeping still follows the op level


def test_alias_gated_on_local_flag_is_harmless_in_accumulate_mode(target):
    case = target.case.with_(accumulate_into_main_grad=True)
    ref, fused = run_pair(
        case, MainGrads(), backend=target.backend, fault="alias-gated-on-local-flag"
    )
    for name in weight_names(ref):
        torch.testing.assert_close(
            fused.main_grads[name], ref.main_grads[name], **tolerance(case.dtype)
        )


def test_bookkeeping_gated_on_local_flag_doubles_the_gradient_through_ddp(target):
    case = target.case.with_(accumulate_into_main_grad=True)
    how = MainGrads(overwrite=True, fill="nan")
    ref, fused = run_pair(
        case,
        how,
        backend=target.backend,
        fault="bookkeeping-gated-on-local-flag",
        engine_hooks=True,
    )
    tol = tolerance(case.dtype)
    for name in weight_names(ref):
        assert ref.grad_added[name] is True and fused.grad_added[name] is False
        # The real gradient was returned, and the DDP hook added it on top of main_grad.
        torch.testing.assert_close(
            fused.hook_grads[name][0].float(),
            ref.main_grads[name].view(fused.hook_grads[name][0].shape),
            **tol,
        )
        torch.testing.assert_close(fused.main_grads[name], 2 * ref.main_grads[name], **tol)


def test_delayed_wgrad_dropped(target):
    case = target.case.with_(accumulate_into_main_grad=True, delay=True)
    ref, fused = run_pair(case, MainGrads(), backend=target.backend, fault="delayed-wgrad-dropped")
    before = fused.main_grads_before
    assert ref.wgrad_hook_calls == 1 and fused.wgrad_hook_calls == 0
    for name in weight_names(ref):
        assert torch.equal(fused.main_grads[name], before[name]), f"{name} was written"
        if not name.endswith("1"):  # expert 1 has no tokens: nothing to add
            assert not torch.equal(ref.main_grads[name], before[name])
        assert ref.grad_added[name] is True
        assert fused.grad_added[name] is False and fused.grads[name] is None


def test_dummy_not_zeroed_corrupts_main_grad_through_the_ddp_hook(target):
    case = target.case.with_(accumulate_into_main_grad=True)
    how = MainGrads(zero_out=True)
    with uninitialized_memory_as_nan():
        ref, fused = run_pair(
            case, how, backend=target.backend, fault="dummy-not-zeroed", engine_hooks=True
        )
    for name in weight_names(ref):
        assert torch.count_nonzero(ref.hook_grads[name][0]) == 0
        assert torch.count_nonzero(fused.hook_grads[name][0]) != 0
        assert not ref.main_grads[name].isnan().any()
        assert fused.main_grads[name].isnan().all()


def test_overwrite_accumulate_swapped(target):
    case = target.case.with_(accumulate_into_main_grad=True)
    fault = "overwrite-accumulate-swapped"
    # Accumulate mode, random main_grad: the swapped GEMM overwrites (only W survives).
    ref, fused = run_pair(case, MainGrads(), backend=target.backend, fault=fault)
    # Overwrite mode, NaN sentinels: the swapped GEMM adds into NaN.
    ref_o, fused_o = run_pair(case, OVERWRITE_NAN, backend=target.backend, fault=fault)
    # fp32: W recovered as (before + W) - before, a few ulps of |before| off.
    tol = {"atol": 1e-5, "rtol": 1e-4} if case.dtype == torch.float32 else tolerance(case.dtype)
    for name in weight_names(ref):
        wgrad = ref.main_grads[name] - ref.main_grads_before[name]
        has_tokens = not name.endswith("1")
        if has_tokens:
            torch.testing.assert_close(fused.main_grads[name], wgrad, **tol)
            assert not torch.allclose(fused.main_grads[name], ref.main_grads[name])
            assert fused_o.main_grads[name].isnan().all()
        assert not ref_o.main_grads[name].isnan().any()


def test_fsdp_main_grad_not_fetched(target):
    case = target.case.with_(accumulate_into_main_grad=True)
    how = MainGrads(fsdp=True, overwrite=True, fill="nan")
    ref, fused = run_pair(case, how, backend=target.backend, fault="fsdp-main-grad-not-fetched")
    for name in weight_names(ref):
        # The FSDP buffer (what get_main_grad returns) never sees the gradient ...
        assert not ref.main_grads[name].isnan().any()
        assert fused.main_grads[name].isnan().all()
        # ... it went into a fresh buffer assigned to param.main_grad instead.
        assert ref.exposes_buffer[name] and not fused.exposes_buffer[name]
        exposed = fused.exposed_main_grads[name]
        torch.testing.assert_close(exposed.view(-1), ref.main_grads[name], **tolerance(case.dtype))


def test_no_dummy_grad(target):
    case = target.case.with_(accumulate_into_main_grad=True)
    ref, fused = run_pair(case, MainGrads(), backend=target.backend, fault="no-dummy-grad")
    for name in weight_names(ref):
        assert ref.grads[name] is not None
        assert fused.grads[name] is None
        torch.testing.assert_close(
            fused.main_grads[name], ref.main_grads[name], **tolerance(case.dtype)
        )
