"""A flag that ``overwrite_main_grad`` can switch off, carried out of the function that
computes it: into a helper of the same module as an argument (``finish(w, wgrad,
accumulate)``), and from an autograd Function's forward to its backward on ``ctx``
(``ctx.fc1_accumulate = not getattr(fc1_weight, "overwrite_main_grad", False)``).

Found before the rules run, with throw-away taint analyses of the functions that can see
such a flag: a few rounds, since a helper may pass the flag on. What comes out feeds the
real analyses: the tainted parameters of each function, and the ``ctx`` attributes that
count as sources wherever they are read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from . import patterns
from .dataflow import Taint

if TYPE_CHECKING:
    from .module import ModuleContext, Unit

ROUNDS = 3  # helpers passing the flag on to helpers: deeper chains are not followed


@dataclass
class Carried:
    params: dict[str, frozenset[str]] = field(default_factory=dict)
    ctx_attrs: frozenset[str] = frozenset()
    # (function, parameter) -> the arguments that hand it a tainted flag, in source order:
    # where a report about the parameter points, since the helper is right given a right
    # argument and the caller is what to fix.
    sites: dict[tuple[str, str], list[cst.Arg]] = field(default_factory=dict)


def carried(context: ModuleContext, is_source: Callable[[cst.CSTNode], bool]) -> Carried:
    """What leaves its function in ``context``; ``is_source`` is the plain source test."""
    functions: dict[str, list[Unit]] = {}
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            functions.setdefault(unit.name, []).append(unit)
    params: dict[str, set[str]] = {}
    attrs: set[str] = set()
    sites: dict[tuple[str, str], list[cst.Arg]] = {}

    def source(node: cst.CSTNode) -> bool:
        return is_source(node) or (bool(attrs) and is_ctx_attr(node, attrs))

    # Only functions that can hand a flag on: they call one of the module's functions or
    # store something on ctx.
    senders = [
        unit
        for unit in context.units
        if unit.survey.calls.intersection(functions) or _stores_on_ctx(unit)
    ]
    for _ in range(ROUNDS if senders else 0):
        changed = False
        for unit in senders:
            if not _may_see_flag(unit, params, attrs, context):
                continue
            taint = Taint(
                unit.graph,
                unit.reaching,
                unit.control,
                source,
                None,
                frozenset(params.get(unit.name, ())),
            )
            for root, node in unit.expression_roots():
                for sub in patterns.walk(root):
                    if type(sub) is cst.Call:
                        changed |= _note_call(sub, node, taint, functions, params, sites)
                if type(root) is cst.Assign and taint.expr(root.value, node):
                    for target in root.targets:
                        attr = ctx_attr(target.target)
                        if attr is not None and attr not in attrs:
                            attrs.add(attr)
                            changed = True
        if not changed:
            break
    return Carried({k: frozenset(v) for k, v in params.items()}, frozenset(attrs), sites)


def ctx_attr(node: cst.CSTNode) -> str | None:
    """A for ``ctx.A``."""
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "ctx":
        return node.attr.value
    return None


def is_ctx_attr(node: cst.CSTNode, attrs) -> bool:
    attr = ctx_attr(node)
    return attr is not None and attr in attrs


def _stores_on_ctx(unit: Unit) -> bool:
    if not unit.survey.ctx_attrs:
        return False
    return any(
        type(stmt) is cst.Assign and any(ctx_attr(t.target) is not None for t in stmt.targets)
        for stmt, _ in unit.statements()
    )


def _may_see_flag(unit: Unit, params, attrs, context: ModuleContext) -> bool:
    survey = unit.survey
    return bool(
        survey.spells_overwrite
        or survey.spells_first_microbatch
        or survey.calls & context.overwrite_helpers
        or unit.name in params
        or (attrs and survey.ctx_attrs & attrs)
    )


def _note_call(call: cst.Call, node, taint: Taint, functions, params, sites) -> bool:
    """Mark the parameters of the module's function ``call`` names that receive a tainted
    argument; whether anything new was marked."""
    name = patterns.callee_name(call)
    targets = functions.get(name or "")
    if not targets:
        return False
    tainted = [arg for arg in call.args if not arg.star and taint.expr(arg.value, node)]
    if not tainted:
        return False
    through_attribute = type(call.func) is cst.Attribute  # self.helper(...): skip self
    changed = False
    for target in targets:
        names = _parameter_names(target.owner.params)
        if through_attribute and names and names[0] in ("self", "cls"):
            names = names[1:]
        positional = [id(a) for a in call.args if a.keyword is None and not a.star]
        for arg in tainted:
            if arg.keyword is not None:
                param = arg.keyword.value
            elif id(arg) in positional and positional.index(id(arg)) < len(names):
                param = names[positional.index(id(arg))]
            else:
                continue
            seen = sites.setdefault((target.name, param), [])
            if not any(a is arg for a in seen):
                seen.append(arg)
            marked = params.setdefault(target.name, set())
            if param not in marked:
                marked.add(param)
                changed = True
    return changed


def _parameter_names(params: cst.Parameters) -> list[str]:
    return [p.name.value for p in (*params.posonly_params, *params.params)]
