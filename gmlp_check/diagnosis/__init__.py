"""Which bug class a failing case most likely shows, from the pattern of its symptoms.

``RULES`` is the declared mapping, tried in order; the first whose required symptoms are all
present (and whose excluded ones are all absent) names the classes: the likely one first, then
any the same observations cannot tell apart (``why`` says why). The mapping is calibrated by
the faults themselves (tests/gmlp_check/test_diagnosis.py): each fault's failures must be
diagnosed as its own class. docs/faults.md shows the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import Check, Context
from ..faults.classes import BUG_CLASSES
from .symptoms import SYMPTOMS, symptoms


@dataclass(frozen=True)
class Rule:
    requires: frozenset[str]
    classes: tuple[str, ...]  # the likely class first
    excludes: frozenset[str] = frozenset()
    why: str = ""  # why several classes: what the observations cannot tell apart

    def matches(self, present: frozenset[str]) -> bool:
        return self.requires <= present and not self.excludes & present


def _rule(requires: str, *classes: str, excludes: str = "", why: str = "") -> Rule:
    return Rule(frozenset(requires.split()), classes, frozenset(excludes.split()), why)


RULES: tuple[Rule, ...] = (
    _rule("hook.extra", "reduce-hook-fired-twice"),
    _rule("hook.missing grad.left_set", "reduce-hook-not-fired"),
    _rule("hook.missing", "delayed-wgrad-dropped"),
    _rule(
        "hook.grad_none hook.in_backward_dw at_hook.unwritten.all",
        "reduce-hook-fired-early",
        "delayed-wgrad-dropped",
        why="DDP's hook stopped the run at a .grad backward_dw() had not delivered and a "
        "main_grad it had not written: fired before the delivery, or no delivery at all",
    ),
    _rule(
        "hook.grad_none hook.in_backward_dw at_hook.no_write_expected",
        "delayed-wgrad-dropped",
        "reduce-hook-fired-early",
        "no-dummy-grad",
        why="nothing is written into main_grad before the hook here, so a gradient never "
        "delivered, delivered after the hook, or delivered without a dummy look alike",
    ),
    _rule("hook.grad_none", "no-dummy-grad"),
    _rule("error.main_grad", "fsdp-main-grad-not-fetched"),
    # Before aliasing alone: main_grad handed back as .grad *and* the flag left unset is what a
    # dummy and a flag gated on a downgraded local flag leave (TE 2.20.2's BasicLinear in
    # overwrite mode: its GEMM's output, main_grad itself, goes back as the gradient). A path
    # that merely aliases keeps its flag set (the grad-aliases-main-grad fault does).
    _rule(
        "grad.alias flag.unset",
        "bookkeeping-not-set",
        "grad-aliases-main-grad",
        why="main_grad itself came back as .grad, which is what a dummy skipped with the flag "
        "leaves when the wgrad GEMM wrote into main_grad",
    ),
    _rule("grad.alias", "grad-aliases-main-grad"),
    _rule("at_hook.unwritten.all final.ok", "reduce-hook-fired-early"),
    _rule("fetch.missing", "fsdp-main-grad-not-fetched"),
    _rule("at_hook.unwritten.all flag.unset", "stand-in-copy"),
    _rule("flag.unset", "bookkeeping-not-set"),
    _rule("flag.spurious", "bookkeeping-without-write"),
    _rule("dummy.is_wgrad", "wgrad-returned-as-grad"),
    _rule("dummy.nonzero", "dummy-not-zeroed"),
    _rule("at_hook.neighbour", "wrong-group-offsets"),
    _rule(
        "at_hook.unwritten.all at_hook.unwritten.empty_only",
        "empty-expert-skipped",
        "main-grad-write-lost",
        "overwrite-accumulate-swapped",
        why="no expert had tokens, so every way of not writing looks the same",
    ),
    _rule("at_hook.unwritten.empty_only", "empty-expert-skipped"),
    _rule("at_hook.delta_only", "overwrite-accumulate-swapped"),
    _rule("at_hook.stale_kept", "overwrite-accumulate-swapped"),
    _rule(
        "at_hook.unwritten.all",
        "main-grad-write-lost",
        "overwrite-accumulate-swapped",
        why="in overwrite mode main_grad starts as a NaN sentinel: accumulating onto it "
        "leaves it NaN, exactly as not writing does",
    ),
    _rule("at_hook.unwritten.some", "main-grad-write-lost"),
)


@dataclass(frozen=True)
class Diagnosis:
    classes: tuple[str, ...]  # empty: no rule matched
    symptoms: frozenset[str]
    why: str = ""

    @property
    def likely(self) -> str | None:
        return self.classes[0] if self.classes else None

    def describe(self) -> str:
        if not self.classes:
            seen = ", ".join(sorted(self.symptoms)) or "none"
            return f"no known bug class matches (symptoms: {seen})"
        text = f"likely {self.classes[0]}: {BUG_CLASSES[self.classes[0]].title}"
        if len(self.classes) > 1:
            text += f"; or {', '.join(self.classes[1:])} ({self.why})"
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "classes": list(self.classes),
            "symptoms": sorted(self.symptoms),
            "why": self.why or None,
        }


def diagnose(ctx: Context, checks: list[Check]) -> Diagnosis | None:
    """The diagnosis of a case whose fused side ran and failed; None otherwise."""
    failed = frozenset(c.observable for c in checks if not c.passed)
    if not failed or ctx.run.fused is None or failed & {"reference", "construct"}:
        return None
    present = symptoms(ctx, failed)
    for rule in RULES:
        if rule.matches(present):
            return Diagnosis(rule.classes, present, rule.why)
    return Diagnosis((), present)


def markdown_rules() -> str:
    """docs/faults.md's diagnosis table, generated from RULES and SYMPTOMS."""
    lines = ["| symptoms present | symptoms absent | diagnosis |", "|---|---|---|"]
    for rule in RULES:
        present = ", ".join(f"`{s}`" for s in sorted(rule.requires))
        absent = ", ".join(f"`{s}`" for s in sorted(rule.excludes)) or "-"
        classes = rule.classes[0] + (
            f" (or {', '.join(rule.classes[1:])}: {rule.why})" if len(rule.classes) > 1 else ""
        )
        lines.append(f"| {present} | {absent} | {classes} |")
    lines += ["", "| symptom | meaning |", "|---|---|"]
    lines += [f"| `{s.name}` | {s.doc} |" for s in SYMPTOMS]
    return "\n".join(lines)
