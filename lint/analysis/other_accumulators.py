"""GMLP016 in a file that never spells main_grad: a gradient accumulator under another name
(a grad shard, an output buffer handed in), judged by the function's own overwrite-or-add
choice on a switch the caller hands in, by a per-micro-step consumer that copies into
gradient storage and adds into nothing (both found by overwrite_findings), and by the record
it keeps of holding a gradient (accumulation_records). Kept apart from
the rule's module (lint/rules/main_grad_replaced_without_asking.py), which holds the
documentation and asks this only of files that never spell main_grad."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import accumulation_records, overwrite_findings, overwrite_switch

if TYPE_CHECKING:
    from .collector import Collector
    from .module import ModuleContext


def check(context: ModuleContext, out: Collector) -> None:
    # Only a choice on a switch the caller hands in counts here: a choice on the
    # function's own state may be a dict's or a counter's, not a gradient's.
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            switches = overwrite_switch.Switches(unit)
            switches.governed = {
                key: choice
                for key, choice in switches.governed.items()
                if choice.by_argument or overwrite_switch.handed_in(unit, choice.terms, key)
            }
            overwrite_findings.check_unheeded_switch(unit, switches, set(), out, tensors_only=True)
            overwrite_findings.check_step_consumer(unit, out)
            for node, message in accumulation_records.findings(unit):
                out.report(overwrite_findings.CODE, node, message)
