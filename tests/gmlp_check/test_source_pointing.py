"""Source pointing: a diagnosed failure of a Python backend names the line of the backend's
own source where gmlp-lint finds the diagnosed class, among the files the backend ran."""

import inspect
import json
import sys
from pathlib import Path

from click.testing import CliRunner

from gmlp_check import source_pointing
from gmlp_check.backends import load
from gmlp_check.cli import main
from gmlp_check.faults.classes import BUG_CLASSES
from gmlp_check.pair import build_fused

from ..thirdparty import buggy_mlp
from .support import CPU, SIZES
from .test_repro import CASE

GATING = "tests.thirdparty.buggy_mlp:make_gating_bookkeeping_on_local_flag"
BUGGY_SOURCE = Path(__file__).resolve().parents[1] / "thirdparty" / "buggy_mlp.py"
GATED_LINE = 'if accumulate and hasattr(weight, "grad_added_to_main_grad"):'
HANDING_BACK = "tests.thirdparty.buggy_mlp:make_handing_main_grad_back"
BASIC_LINEAR_GATE = "if accumulate_into_main_grad:"


def test_a_diagnosed_failure_points_at_the_gated_bookkeeping_line():
    result = CliRunner().invoke(
        main, ["diff", "--fused", GATING, "--device", "cpu", "-k", CASE.id, "--point-source",
               "--format", "json"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (case,) = json.loads(result.stdout)["cases"]
    assert case["diagnosis"]["classes"][0] == "bookkeeping-not-set"
    stripped = [text.strip() for text in BUGGY_SOURCE.read_text().splitlines()]
    line = stripped.index(GATED_LINE) + 1
    (pointer,) = case["source"]
    label = BUG_CLASSES["bookkeeping-not-set"].contract
    assert pointer.startswith(f"source: {label}: {BUGGY_SOURCE}:{line} (GMLP002) ")


def test_main_grad_handed_back_with_the_flag_unset_is_explained_as_the_gated_bookkeeping():
    """TE 2.20.2's BasicLinear pattern in overwrite mode, from a real module shaped like its
    op_backward (tests/thirdparty/buggy_mlp.py): .grad aliases main_grad and the flag is unset.
    The likely class is the bookkeeping gated on the downgraded local flag, aliasing second,
    and the pointer names the gate of the dummy and the flag (GMLP002), not the op-level gate
    of the main_grad fetch above it nor the other planted class in the same file."""
    result = CliRunner().invoke(
        main, ["diff", "--fused", HANDING_BACK, "--device", "cpu", "-k", CASE.id,
               "--point-source", "--format", "json"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (case,) = json.loads(result.stdout)["cases"]
    # What the H200 showed for te-sequential (docs/gpu-runs/h200-session-2026-12-01).
    failed = {check["observable"] for check in case["checks"] if not check["passed"]}
    assert failed == {"param.grad.alias", "grad_added_to_main_grad"}
    assert case["diagnosis"]["classes"] == ["bookkeeping-not-set", "grad-aliases-main-grad"]
    lines, start = inspect.getsourcelines(buggy_mlp.HandsMainGradBackOnLocalFlag)
    # The last of the two `if accumulate_into_main_grad:`: the first gates the fetch of
    # main_grad, on the op-level value, before the local is downgraded.
    gate = max(i for i, text in enumerate(lines) if text.strip() == BASIC_LINEAR_GATE)
    label = BUG_CLASSES["bookkeeping-not-set"].contract
    assert case["source"] == [
        pointer
        for pointer in case["source"]
        if pointer.startswith(f"source: {label}: {BUGGY_SOURCE}:{start + gate} (GMLP002) ")
    ]
    assert len(case["source"]) == 1


def test_the_files_are_those_the_backend_ran():
    module = build_fused(load(GATING), CASE, SIZES, CPU, None)
    ran = source_pointing.executed_sources(module, CASE, SIZES)
    names = {p.name for p in ran}
    assert names == {"buggy_mlp.py", "per_expert_mlp.py"}  # its classes and its Function
    assert all(not str(p).startswith(str(Path(sys.modules["torch"].__file__).parent)) for p in ran)


def test_without_libcst_pointing_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "libcst", None)
    why = source_pointing.lint_unavailable()
    assert why is not None and "libcst" in why
    lines = source_pointing.point_case(load(GATING), CASE, SIZES, CPU, ("bookkeeping-not-set",))
    assert lines == [f"source: not pointed ({why})"]


def test_modules_an_adapter_keeps_out_of_the_tree_are_followed():
    module = build_fused(load(GATING), CASE, SIZES, CPU, None)
    held = (module.fc1, module.fc2)  # the layers whose class buggy_mlp.py defines
    del module.fc1, module.fc2
    module._held = held  # a tuple, as our Transformer Engine adapters hold TE's modules
    ran = source_pointing.executed_sources(module, CASE, SIZES)
    assert BUGGY_SOURCE in ran
