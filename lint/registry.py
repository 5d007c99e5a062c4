"""The one registry of gmlp-lint's rules: everything that lists, documents or runs rules is
derived from ``CODES`` and the rule modules it names.

A rule is one module under ``rules/`` named after the rule (``rules/main_grad_truthiness.py``
for GMLP004 main-grad-truthiness) that holds
``RULE`` (its documentation, its VALID / INVALID examples and the README table's wording)
and its check. Derived from here: the codes that selectors and configuration accept, which
checks run for a file, ``gmlp-lint rule``, the SARIF rule metadata, the README's rule table
(``markdown_table``) and the example-driven tests, which hold every rule to its examples:
each INVALID example yields exactly one finding of its rule on ``line`` and, after fixes,
becomes ``fixed``.

Rule modules load without libcst (their checks import the parser on first use, see
``lazy.py``), so documentation, configuration checks and runs over files that never need
parsing do not pay for it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from types import ModuleType

# Every rule, in the order they are listed and run: its code and the module under rules/
# that holds it, named after the rule (as ruff names its rule files). Adding a rule: write
# rules/<name>.py and add its code and module name here.
RULE_MODULES = {
    "GMLP001": "main_grad_destination_on_downgraded_flag",
    "GMLP002": "main_grad_bookkeeping_on_downgraded_flag",
    "GMLP003": "dummy_wgrad_not_zeroed",
    "GMLP004": "main_grad_truthiness",
    "GMLP005": "main_grad_without_dummy_grad",
    "GMLP006": "main_grad_step_on_unrelated_switch",
    "GMLP007": "main_grad_flag_from_other_weight",
    "GMLP008": "main_grad_written_before_fsdp_fetch",
    "GMLP009": "overwrite_main_grad_always_true",
    "GMLP010": "main_grad_offloaded",
    "GMLP011": "backward_dw_without_hooks",
    "GMLP012": "main_grad_gemm_out_dtype",
    "GMLP013": "main_grad_destination_never_written",
    "GMLP014": "delayed_wgrad_layer_not_computed",
    "GMLP015": "weight_rebound_before_main_grad",
    "GMLP016": "main_grad_replaced_without_asking",
    "GMLP017": "hook_fired_without_bookkeeping",
    "GMLP018": "dummy_wgrad_discarded",
    "GMLP019": "delayed_wgrad_without_hook",
    "GMLP020": "inherited_backward_dw_misses_layer",
    "GMLP021": "delay_mode_mismatch",
    "GMLP022": "dummy_wgrad_copied_as_real",
    "GMLP023": "wgrad_queued_on_every_path",
    "GMLP024": "deferred_wgrad_handed_back_as_none",
    "GMLP025": "delayed_wgrad_piece_empty",
    "GMLP026": "grad_hook_reduces_dummy",
    "GMLP027": "delayed_wgrad_flushed_before_backward",
    "GMLP028": "grad_ready_hook_ignores_delayed_wgrad",
    "GMLP030": "main_grad_on_stand_in",
    "GMLP031": "main_grad_handed_on_as_grad",
    "GMLP032": "grad_added_without_write",
    "GMLP033": "main_grad_written_grad_handed_on",
    "GMLP034": "main_grad_through_saved_tensors",
    "GMLP035": "delayed_wgrad_replaces_grad",
    "GMLP036": "wgrad_delivered_twice",
    "GMLP037": "copy_handed_as_weight",
    "GMLP038": "delayed_wgrad_override_drops_work",
    "GMLP039": "slot_module_without_backward_dw",
    "GMLP040": "delayed_wgrad_layer_never_run",
    "GMLP041": "main_grad_write_once_per_step",
    "GMLP042": "grad_ready_hook_skipped",
    "GMLP043": "delayed_wgrad_list_misses_alternative",
    "GMLP046": "main_grad_fetch_not_exposed",
    "GMLP048": "main_grad_bookkeeping_on_raw_switch",
    "GMLP049": "flag_set_only_when_set",
    "GMLP050": "main_grad_fetch_misses_module",
    "GMLP051": "main_grad_gemm_then_real_wgrad",
    "GMLP052": "wgrad_taken_not_handed_on",
    "GMLP053": "main_grad_rebound_out_of_place",
    "GMLP054": "backward_dw_bypasses_layer",
    "GMLP055": "forward_hook_replay_incomplete",
    "GMLP056": "hook_before_delayed_wgrad",
    "GMLP057": "mark_without_requires_grad",
    "GMLP058": "main_grad_set_up_after_backward",
    "GMLP059": "delayed_layer_left_out_of_flush",
    "GMLP060": "flag_read_before_set",
    "GMLP061": "recorded_flags_restored_as_true",
    "GMLP062": "wgrad_dropped_in_mode_arm",
    "GMLP063": "main_grad_fallback_dropped",
    "GMLP064": "grad_kept_after_accumulating",
    "GMLP065": "wgrad_pass_gated_on_window_switch",
    "GMLP066": "grad_folded_without_flag",
    "GMLP067": "backward_dw_skipped_on_switch",
    "GMLP068": "model_changed_after_ddp_wrap",
    "GMLP100": "unused_suppression",
}
CODES = tuple(RULE_MODULES)

# What a rule's ``check`` looks at:
MODULE = "module"  # check(context, out): a parsed file that names one of triggers.TRIGGERS
SUPPRESSIONS = "suppressions"  # check(suppressions, path, enabled): the suppression comments


@dataclass(frozen=True)
class Example:
    source: str
    line: int | None = None  # INVALID: the line of the one expected finding
    fixed: str | None = None  # INVALID: the source after fixes (None: no fix is offered)
    applicability: str | None = None  # INVALID: "safe" or "unsafe" when fixed is given
    # Other files of the run the example is linted with, as (path, source): a rule about
    # classes whose bases sit in another file needs that file, one gated on a run fact
    # (``project.RunFacts``) the file that gives it.
    others: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", _dedent(self.source))
        if self.fixed is not None:
            object.__setattr__(self, "fixed", _dedent(self.fixed))


# Issue #19's classes of main_grad bugs, by number: what each rule's ``classes`` names (its
# page and the rule table say which it catches; a rule with none checks the contract itself).
ISSUE_CLASSES = {
    1: "which object",
    2: "a parameter rebound",
    3: "flags without writes",
    4: "overwrite without asking",
    5: "hooks without bookkeeping",
    6: "delayed wgrad across classes",
    7: "the seed shape in other syntax",
    8: "main_grad not made available before the op runs",
}


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str  # one sentence: SARIF's short description, the documentation's lead
    flags: str  # what it flags, as a phrase for the README's rule table
    explanation: str
    fix: str
    fix_summary: str  # the fixes and their applicability, for the README's rule table
    valid: tuple[Example, ...]
    invalid: tuple[Example, ...]
    scope: str = MODULE
    # Also run on a file that names no trigger but subclasses a delayed-wgrad class of
    # another file of the run (``class_facts``).
    reads_subclasses: bool = False
    # Also run on a file that names no trigger but defines a class the run plugs into a
    # slot whose backward_dw it calls (``slot_facts``).
    reads_slots: bool = False
    # The numbers of ``ISSUE_CLASSES`` this rule catches (none: a check of the contract
    # itself, outside the eight).
    classes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        unknown = [number for number in self.classes if number not in ISSUE_CLASSES]
        if unknown:
            raise ValueError(f"{self.code}: classes {unknown} are not in ISSUE_CLASSES")

    def classes_caught(self) -> str:
        """The classes as a phrase: ``3 (flags without writes)``, or what a rule of none
        checks."""
        if not self.classes:
            return "none of the eight (a check of the contract itself)"
        return ", ".join(f"{number} ({ISSUE_CLASSES[number]})" for number in self.classes)

    def documentation(self) -> str:
        """Markdown: what the rule flags, the issue #19 classes it catches, why (with what
        it cannot see), the fix, and a bad and a good example."""
        bad = self.invalid[0]
        good = self.valid[0]
        return (
            f"# {self.code} ({self.name})\n\n{self.summary}\n\n"
            f"Classes caught (issue #19): {self.classes_caught()}.\n\n"
            f"## Why\n\n{_dedent(self.explanation).strip()}\n\n"
            f"## Fix\n\n{_dedent(self.fix).strip()}\n\n"
            f"## Bad\n\n```python\n{bad.source}```\n\n"
            f"## Good\n\n```python\n{good.source}```\n"
        )


def _dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@cache
def _module(code: str) -> ModuleType:
    if code not in CODES:
        raise KeyError(code)
    return import_module(f".rules.{RULE_MODULES[code]}", __package__)


def rule(code: str) -> Rule:
    """The documentation and examples of ``code``; KeyError for an unknown code."""
    return _module(code).RULE


def all_rules() -> list[Rule]:
    return [rule(code) for code in CODES]


def check_of(code: str) -> Callable:
    """The check function of ``code`` (its arguments depend on the rule's ``scope``)."""
    return _module(code).check


@cache
def codes_in_scope(scope: str) -> frozenset[str]:
    return frozenset(code for code in CODES if rule(code).scope == scope)


@cache
def codes_reading_subclasses() -> frozenset[str]:
    return frozenset(code for code in CODES if rule(code).reads_subclasses)


@cache
def codes_reading_slots() -> frozenset[str]:
    return frozenset(code for code in CODES if rule(code).reads_slots)


def module_checks(enabled: frozenset[str]) -> list[Callable]:
    """The checks to run on a parsed file for the ``enabled`` codes, in registry order."""
    return [check_of(code) for code in CODES if code in enabled and rule(code).scope == MODULE]


@cache
def suppression_code() -> str:
    """The code of the rule that judges suppression comments (reports unused ones)."""
    (code,) = codes_in_scope(SUPPRESSIONS)
    return code


def markdown_table() -> str:
    """The README's rule table (code | what it flags | issue #19 classes | fix), one row per
    rule."""
    rows = ["| code | what it flags | classes | fix |", "|---|---|---|---|"]
    for r in all_rules():
        classes = ", ".join(map(str, r.classes)) or "-"
        rows.append(f"| {r.code} | {_cell(r.flags)} | {classes} | {_cell(r.fix_summary)} |")
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
