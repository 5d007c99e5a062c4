"""GMLP061: a record of each parameter's flag put back as True for every parameter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
recorded_flags = LazyModule("..analysis.recorded_flags", __package__)

CODE = "GMLP061"
RULE = Rule(
    code=CODE,
    classes=(3,),
    name="recorded-flags-restored-as-true",
    summary=(
        "A record of each parameter's `grad_added_to_main_grad` (taken when a CUDA graph was "
        "captured) is walked by its keys and every parameter is set True: parameters whose "
        "captured gradient was a real one are flagged too, and their gradient is never "
        "added to main_grad."
    ),
    flags=(
        "`for p in R:` / `for p in R.keys():` setting `p.grad_added_to_main_grad = True`, "
        "where the file fills `R[k] = <a read of the flag>` or binds `R` to a dict "
        "comprehension of flag reads, or `R`'s own name holds `grad_added_to_main_grad`"
    ),
    explanation="""
        Issue #19, class 3 (flags without writes). Megatron-LM's CUDA-graph runner records,
        when it captures the backward graph, each parameter's `grad_added_to_main_grad`:
        True only where the captured backward wrote main_grad, False where it produced a
        real gradient. After each replay it puts the recorded values back
        (`for param, added in record.items(): param.grad_added_to_main_grad = added`).
        Blind corpus 14 walked the record by its keys and set True: every parameter is
        flagged, the runner hands back dummies for the real gradients, and the DDP hook,
        told the gradient is in main_grad already, never adds them.

        Seen: a record is an expression (as written) that the file fills with
        `R[k] = ...` from a read of the flag (`p.grad_added_to_main_grad`, `getattr`), or
        binds to a dict comprehension whose values read it, or whose last name holds
        `grad_added_to_main_grad`. Reported at the assignment, in a loop over `R` or
        `R.keys()`, that sets the loop variable's flag to `True`. Setting False for every
        key is left alone (resetting every flag is what a new step does).

        Not seen: a record kept in a list of pairs, or filled by a helper of another file
        under another name; a constant set through another name than the loop variable.
    """,
    fix="""
        Put back the recorded values: `for p, added in R.items(): p.grad_added_to_main_grad
        = added`. No automatic fix.
    """,
    fix_summary="none (restore the recorded values)",
    valid=(
        Example(
            """
            class Runner:
                def capture(self):
                    self.record = {}
                    for param in self.module.parameters():
                        self.record[param] = param.grad_added_to_main_grad

                def after_replay(self):
                    for param, added in self.record.items():
                        param.grad_added_to_main_grad = added
            """
        ),
        Example(
            """
            def zero_grad(self):
                for param in self.recorded_grad_added_to_main_grad:
                    param.grad_added_to_main_grad = False
            """
        ),
    ),
    invalid=(
        Example(
            """
            class Runner:
                def capture(self):
                    self.record = {}
                    for param in self.module.parameters():
                        self.record[param] = param.grad_added_to_main_grad

                def after_replay(self):
                    for param in self.record:
                        param.grad_added_to_main_grad = True
            """,
            line=9,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{record}` records each parameter's `grad_added_to_main_grad`, but the loop around "
    "this walks its keys and sets every flag True: parameters whose gradient was a real one "
    "are flagged too, get a dummy, and the DDP hook never adds their gradient; put back "
    "the recorded values (`for p, added in {record}.items(): p.grad_added_to_main_grad = added`)"
)


def check(context: ModuleContext, out: Collector) -> None:
    if "grad_added_to_main_grad" not in context.source:
        return
    known = recorded_flags.records(context)
    code = context.code
    for _, record, assignment in recorded_flags.constant_restores(context, known):
        out.report(CODE, assignment, MESSAGE.format(record=code(record).strip()))
