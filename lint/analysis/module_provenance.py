"""What a file's functions tell about the objects in other functions of the same file, and the
per-unit classifier built from them (provenance.Provenance).

Two module-wide facts feed the classifier of one function: what the file's own helpers
return (``returned_provenance``: a helper that quantizes or gathers the weight it is given
makes its call a stand-in wherever it is called) and what its autograd functions store on
``ctx`` (``ctx_facts``). Each is computed once per file (``context.shared``). They live here,
not in provenance.py, because computing them classifies names with provenance.Provenance:
provenance.py stays the per-function classifier and this module builds on it.
"""

from __future__ import annotations

import libcst as cst

from . import detached_copies, patterns, provenance
from .module import ModuleContext, Unit


def of_unit(unit: Unit) -> provenance.Provenance:
    """The provenance of the names of ``unit``, with its file's helpers and ctx facts."""
    context = unit.context
    return provenance.Provenance(
        unit, context.shared(returned_provenance), context.shared(ctx_facts)
    )


GATHERS_INTO = ("all_gather", "_gather_base")  # calls filling their first argument


def returned_provenance(context: ModuleContext) -> dict[str, str]:
    """For ``context.shared``: the module's functions whose every ``return`` value has one
    known provenance (a helper that quantizes or gathers the weight it is given). Two
    rounds: a helper returning what another helper of the file returns is followed once."""
    returning = []
    for unit in context.units:
        if not isinstance(unit.owner, cst.FunctionDef):
            continue
        values = [
            stmt.value
            for stmt, _ in unit.statements()
            if type(stmt) is cst.Return and stmt.value is not None
        ]
        if values:  # a function returning nothing needs no provenance (and none is built)
            returning.append((unit, values))
    found: dict[str, str] = {}
    for first in (True, False):
        for unit, values in returning:
            if unit.name in found:
                continue
            if not first and not any(
                patterns.callee_name(n) in found for v in values for n in patterns.walk(v)
            ):
                continue  # nothing found in the first round is called here
            names = provenance.Provenance(unit, dict(found), provenance.CtxFacts())
            kinds = {names.of(v) or _filled_by_gather(unit, v) for v in values}
            if len(kinds) == 1 and None not in kinds:
                found[unit.name] = kinds.pop()
    return found


def _filled_by_gather(unit: Unit, value: cst.CSTNode) -> str | None:
    """``buf = torch.empty(...); all_gather_into_tensor(buf, shard); return buf``: the
    returned buffer holds the materialized weight."""
    if type(value) is not cst.Name:
        return None
    for stmt, _ in unit.statements():
        if type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
            name = patterns.callee_name(stmt.value) or ""
            args = patterns.positional_args(stmt.value)
            if (
                any(g in name for g in GATHERS_INTO)
                and args
                and type(args[0].value) is cst.Name
                and args[0].value.value == value.value
            ):
                return provenance.MATERIALIZED
    return None


def ctx_facts(context: ModuleContext) -> provenance.CtxFacts:
    """For ``context.shared``: what the file's functions store on ``ctx`` (provenance.CtxFacts)."""
    facts = provenance.CtxFacts()
    if "ctx." not in context.source:
        return facts
    helpers = context.shared(returned_provenance)
    attrs: dict[str, set[str | None]] = {}
    refs: dict[str, set[str | None]] = {}
    saves: list[tuple[str | None, ...]] = []
    for unit in context.units:
        if not unit.survey.ctx_attrs:
            continue
        names = provenance.Provenance(unit, helpers, provenance.CtxFacts())
        for stmt, _ in unit.statements():
            if isinstance(stmt, cst.Assign):
                for target in stmt.targets:
                    attr = _ctx_attr(target.target)
                    if attr is None:
                        continue
                    referent = provenance.weakref_referent(stmt.value)
                    if referent is not None:
                        refs.setdefault(attr, set()).add(names.of(referent))
                    else:
                        kind = names.of(stmt.value) or detached_copies.detached_value(
                            stmt.value, context.source
                        )
                        attrs.setdefault(attr, set()).add(kind)
            elif isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
                call = stmt.value
                if patterns.callee_name(call) == "save_for_backward" and provenance.on_ctx(
                    call.func
                ):
                    saves.append(
                        tuple(provenance.copy_or_none(names.of(a.value)) for a in call.args)
                    )
    facts.attrs = {a: k.pop() for a, k in attrs.items() if len(k) == 1 and k <= provenance.COPIES}
    facts.refs = {a: k.pop() for a, k in refs.items() if len(k) == 1 and k <= provenance.COPIES}
    if len(set(saves)) == 1:
        facts.saved = saves[0]
    return facts


def _ctx_attr(target: cst.CSTNode) -> str | None:
    if isinstance(target, cst.Attribute) and provenance.on_ctx(target):
        return target.attr.value
    return None
