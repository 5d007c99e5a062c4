"""The one registry: every rule module is what the registry says it is, and the codes list,
the checks that run, the documentation and the README's rule table all come from it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from gmlp_check.lint import registry
from gmlp_check.lint.config import expand_codes
from gmlp_check.lint.lazy import LazyModule

README = Path(__file__).resolve().parents[2] / "docs" / "lint.md"
RULES_DIRECTORY = Path(registry.__file__).parent / "rules"


def test_every_rule_module_is_registered_under_its_own_name():
    modules = {p.stem for p in RULES_DIRECTORY.glob("*.py")} - {"__init__"}
    assert modules == set(registry.RULE_MODULES.values())
    for code, module in registry.RULE_MODULES.items():
        rule = registry.rule(code)
        assert rule.code == code
        assert module == rule.name.replace("-", "_")  # files are named by rule, as ruff's
        assert rule.scope in (registry.MODULE, registry.SUPPRESSIONS)
        assert callable(registry.check_of(code))


def test_unknown_codes_are_refused():
    with pytest.raises(KeyError):
        registry.rule("GMLP999")


def test_exactly_one_rule_judges_suppressions():
    code = registry.suppression_code()
    assert registry.codes_in_scope(registry.SUPPRESSIONS) == {code}
    assert registry.codes_in_scope(registry.MODULE) == set(registry.CODES) - {code}


def test_only_enabled_module_rules_run_in_registry_order():
    enabled = frozenset({"GMLP004", "GMLP001", registry.suppression_code()})
    assert registry.module_checks(enabled) == [
        registry.check_of("GMLP001"),
        registry.check_of("GMLP004"),
    ]


def test_configuration_accepts_exactly_the_registered_codes():
    assert expand_codes(["ALL"], "test") == set(registry.CODES)
    assert expand_codes(["GMLP"], "test") == set(registry.CODES)


@pytest.mark.parametrize("code", registry.CODES)
def test_fix_summary_names_the_applicabilities_of_the_examples(code):
    rule = registry.rule(code)
    stated = set(re.findall(r"\b(safe|unsafe)\b", rule.fix_summary))
    shown = {e.applicability for e in rule.invalid if e.applicability is not None}
    assert stated == shown


def test_markdown_table_has_one_row_per_rule_from_its_own_words():
    lines = registry.markdown_table().splitlines()
    assert lines[:2] == ["| code | what it flags | classes | fix |", "|---|---|---|---|"]
    rows = [line.split(" | ") for line in lines[2:]]
    assert [row[0] for row in rows] == [f"| {code}" for code in registry.CODES]
    for code, row in zip(registry.CODES, rows):
        rule = registry.rule(code)
        assert row[1] == " ".join(rule.flags.split())
        assert row[2] == (", ".join(map(str, rule.classes)) or "-")
        assert row[3] == " ".join(rule.fix_summary.split()) + " |"


def test_every_issue_class_is_caught_by_some_rule():
    declared = {number for rule in registry.all_rules() for number in rule.classes}
    assert declared == set(registry.ISSUE_CLASSES)


@pytest.mark.parametrize("code", registry.CODES)
def test_a_class_the_explanation_claims_is_declared_and_on_the_page(code):
    """Prose that says "issue #19, class N" and the declared classes agree, and the page
    names each declared class by its number and its name."""
    rule = registry.rule(code)
    claimed = {
        int(n)
        for n in re.findall(r"[Ii]ssue #19,? class(?:es)? (\d)", " ".join(rule.explanation.split()))
    }
    assert claimed <= set(rule.classes)
    page = rule.documentation()
    for number in rule.classes:
        assert f"{number} ({registry.ISSUE_CLASSES[number]})" in page
    if not rule.classes:
        assert "Classes caught (issue #19): none" in page


@pytest.mark.parametrize("code", registry.CODES)
def test_every_page_says_what_the_rule_cannot_see(code):
    """Issue #19: each rule's page names what it misses, in a paragraph of its own."""
    page = registry.rule(code).documentation()
    paragraphs = [p.strip() for p in page.split("\n\n")]
    assert any(p.startswith("Not seen:") and len(p.split()) > 8 for p in paragraphs)


def test_a_rule_naming_an_unknown_class_is_refused():
    rule = registry.rule(registry.CODES[0])
    with pytest.raises(ValueError, match="not in ISSUE_CLASSES"):
        registry.Rule(**{**vars(rule), "classes": (len(registry.ISSUE_CLASSES) + 1,)})


def test_readme_rule_table_is_the_generated_one():
    assert registry.markdown_table() in README.read_text(encoding="utf-8")


def test_lazy_module_imports_on_first_use_and_keeps_what_it_found(tmp_path, monkeypatch):
    (tmp_path / "gmlp_lazy_probe.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "gmlp_lazy_probe", raising=False)
    stand_in = LazyModule("gmlp_lazy_probe")
    assert "gmlp_lazy_probe" not in sys.modules
    assert stand_in.VALUE == 42
    assert "gmlp_lazy_probe" in sys.modules
    assert vars(stand_in)["VALUE"] == 42  # later look-ups are plain attribute reads
    with pytest.raises(AttributeError):
        stand_in._private  # noqa: B018
