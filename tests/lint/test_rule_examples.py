"""Every rule's own VALID and INVALID examples (lint/rules/*.py), run by one generic test."""

from __future__ import annotations

import libcst
import pytest

from gmlp_check.lint import engine
from gmlp_check.lint.class_facts import class_facts
from gmlp_check.lint.project import NO_RUN_FACTS, run_facts
from gmlp_check.lint.registry import all_rules
from gmlp_check.lint.slot_facts import slot_facts

from .support import ALL_CODES

VALID = [
    pytest.param(rule, example, id=f"{rule.code}-valid-{i}")
    for rule in all_rules()
    for i, example in enumerate(rule.valid)
]
INVALID = [
    pytest.param(rule, example, id=f"{rule.code}-invalid-{i}")
    for rule in all_rules()
    for i, example in enumerate(rule.invalid)
]


def _classes(example):
    """The delayed-wgrad classes of the other files the example is linted with, as the
    engine gives them to the example's file."""
    files = [(path, text.encode()) for path, text in example.others]
    return class_facts([*files, ("example.py", example.source.encode())]).get("example.py", ())


def _facts(example):
    """What the run knows of the functions of the example and its other files
    (``project.run_facts``), as the engine gives it to the example's file."""
    files = [(path, text.encode()) for path, text in example.others]
    return run_facts([*files, ("example.py", example.source.encode())]) if files else NO_RUN_FACTS


def _slots(example):
    """The example's classes that its other files plug into a slot whose backward_dw they
    call (``slot_facts``), as the engine gives them to the example's file."""
    files = [(path, text.encode()) for path, text in example.others]
    facts = slot_facts([*files, ("example.py", example.source.encode())])
    return facts.get("example.py", ())


def _run(example):
    """The keyword arguments that lint the example as the engine lints it with its others."""
    return {"facts": _facts(example), "classes": _classes(example), "slots": _slots(example)}


def test_every_rule_has_examples_both_ways():
    for rule in all_rules():
        assert rule.valid, rule.code
        assert rule.invalid, rule.code
        # A rule that offers a fix shows it; one whose summary says "none" offers none.
        offers_fix = not rule.fix_summary.startswith("none")
        shown = any(example.fixed is not None for example in rule.invalid)
        assert shown == offers_fix, f"{rule.code}: fix summary and examples disagree"


@pytest.mark.parametrize(("rule", "example"), VALID)
def test_valid_example_is_not_flagged(rule, example):
    assert engine.lint_source(example.source, "example.py", ALL_CODES, **_run(example)) == []


@pytest.mark.parametrize(("rule", "example"), INVALID)
def test_invalid_example_is_flagged_on_its_line(rule, example):
    findings = engine.lint_source(example.source, "example.py", ALL_CODES, **_run(example))
    assert [(f.code, f.line) for f in findings] == [(rule.code, example.line)]
    assert findings[0].message


@pytest.mark.parametrize(("rule", "example"), INVALID)
def test_invalid_example_fix(rule, example):
    (finding,) = engine.lint_source(example.source, "example.py", ALL_CODES, **_run(example))
    if example.fixed is None:
        assert finding.fix is None
        return
    assert finding.fix is not None
    assert finding.fix.applicability == example.applicability
    fixed, applied, remaining = engine.fix_source(
        example.source, "example.py", ALL_CODES, unsafe=True, **_run(example)
    )
    assert fixed == example.fixed
    assert applied == 1
    libcst.parse_module(fixed)  # the fixed file parses
    assert remaining == []
    assert engine.lint_source(fixed, "example.py", ALL_CODES, **_run(example)) == []


@pytest.mark.parametrize(("rule", "example"), INVALID)
def test_safe_fix_mode_leaves_unsafe_fixes_alone(rule, example):
    fixed, applied, remaining = engine.fix_source(
        example.source, "example.py", ALL_CODES, unsafe=False, **_run(example)
    )
    if example.applicability == "safe":
        assert (fixed, applied, remaining) == (example.fixed, 1, [])
    else:
        assert (fixed, applied) == (example.source, 0)
        assert [f.code for f in remaining] == [rule.code]
