"""The functions of one file by name, and which of them (or of another file of the run) a
call reaches: what ``delayed_work`` and ``hook_firing`` ask of every helper call, up to
HELPER_DEPTH helpers deep, each answer kept per file (``FileFacts``).

A call is answered by the name it spells: any definition of that name counts (a yes from one
is a yes), and helpers of other files are reached through the file's imports. Where a call
must bind its arguments to one definition's parameters (a weight handed to a helper),
``file_functions`` resolves it instead."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from . import hook_containers, imports, patterns
from .module import ModuleContext, Unit

BACKWARD_DW = "backward_dw"
# How deep helper calls are followed (a helper of a helper of a helper).
HELPER_DEPTH = 3


@dataclass
class FileFacts:
    """What the functions of one file do, by name (a name defined twice: any of them)."""

    functions: dict[str, list[Unit]] = field(default_factory=dict)
    registered: frozenset[str] = frozenset()  # callables handed to ``register_*hook*``
    called: frozenset[str] = frozenset()  # names called somewhere in the file
    # Helpers of other files called here: the name a ``from`` import binds -> the name
    # defined, and the names bound to whole modules (``import m``: ``m.f()``).
    imported: dict[str, str] = field(default_factory=dict)
    modules: frozenset[str] = frozenset()
    run_work: frozenset[str] = frozenset()  # ``RunFacts.wgrad_work``
    run_fires: frozenset[str] = frozenset()  # ``RunFacts.hook_firing``
    containers: frozenset[str] = frozenset()  # containers the file fills with hooks
    _work: dict[str, bool] = field(default_factory=dict)
    _fires: dict[str, bool] = field(default_factory=dict)
    _writes: dict[str, bool] = field(default_factory=dict)


def file_facts(context: ModuleContext) -> FileFacts:
    """The file's functions by name, and the callables it registers as hooks (shared by the
    rules through ``context.shared``)."""
    functions: dict[str, list[Unit]] = {}
    registered: set[str] = set()
    called: set[str] = set()
    for unit in context.units:
        if type(unit.owner) is cst.FunctionDef:
            functions.setdefault(unit.name, []).append(unit)
        if type(unit.owner) is not cst.Module:
            called |= unit.survey.calls
        if not any(_registers(name) for name in unit.survey.calls):
            continue
        for root in flat_roots(unit):
            for sub in patterns.walk(root):
                if type(sub) is cst.Call and _registers(patterns.callee_name(sub) or ""):
                    # ``register_wgrad_accumulation_and_reduce_hooks(self._start_reduce)``,
                    # ``p.register_grad_accum_hook(node, finish)``: calling that callable
                    # later is firing the hook, whatever it is called.
                    for arg in sub.args:
                        word = last_name(arg.value)
                        if word:
                            registered.add(word)
    facts = FileFacts(functions, frozenset(registered), frozenset(called))
    facts.containers = context.shared(hook_containers.file_containers).any
    run_work, run_fires = context.wgrad_work_helpers, context.hook_firing_helpers
    # The file's imports are read only where it spells a helper of the run.
    if any(name in context.source for name in run_work | run_fires):
        facts.imported = imports.imported_names(context)
        facts.modules = imports.imported_modules(context)
        facts.run_work, facts.run_fires = run_work, run_fires
    return facts


def _registers(name: str) -> bool:
    lowered = name.lower()
    return "register" in lowered and ("hook" in lowered or "callback" in lowered)


def last_name(expr: cst.CSTNode) -> str:
    """The last name of ``a.b.c`` or ``a.b[i]`` (``c``, ``b``), as spelled."""
    while type(expr) is cst.Subscript:
        expr = expr.value
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute:
        return expr.attr.value
    return ""


def flat_roots(unit: Unit):
    """The code ``unit.expression_roots`` yields, without the control-flow graph: most
    functions are asked only whether they do work or fire hooks, and building a graph for
    each of them was most of this analysis' time."""
    for stmt, _ in unit.statements():
        kind = type(stmt)
        if kind is cst.If or kind is cst.While:
            yield stmt.test
        elif kind is cst.For:
            yield stmt.iter
        elif kind is cst.With:
            yield from (item.item for item in stmt.items)
        elif not isinstance(stmt, cst.BaseCompoundStatement):
            yield stmt


def imported_function(node: cst.CSTNode, facts: FileFacts) -> str | None:
    """The name (as defined) of the function of another file that ``node`` calls: ``g()``
    after ``from m import f as g``, ``m.f()`` after ``import m`` or ``from p import m``;
    None for any other node. A method is never one: ``self.f()`` names no import."""
    if type(node) is not cst.Call:
        return None
    func = node.func
    if type(func) is cst.Name:
        return facts.imported.get(func.value)
    if type(func) is cst.Attribute:
        # ``import m`` / ``from . import m`` (a module bound by a ``from`` import), then
        # ``m.f()``.
        root = _root_name(func.value)
        if root in facts.modules or root in facts.imported:
            return func.attr.value
    return None


def _root_name(expr: cst.BaseExpression) -> str:
    """``a`` of ``a.b.c`` (an imported package's module: ``a.b.f()``)."""
    while type(expr) is cst.Attribute:
        expr = expr.value
    return expr.value if type(expr) is cst.Name else ""


def own_function(node: cst.CSTNode, facts: FileFacts) -> str | None:
    """The name of the function of this file that ``node`` calls (``f()``, ``self.f()``,
    ``module.f()``), never ``backward_dw``; None for any other node."""
    if type(node) is not cst.Call:
        return None
    func = node.func
    if type(func) is cst.Name:
        name = func.value
    elif type(func) is cst.Attribute and type(func.value) is cst.Name:
        name = func.attr.value
    else:
        return None
    return name if name != BACKWARD_DW and name in facts.functions else None


def memo(cache: dict[str, bool], name: str, depth: int, facts: FileFacts, ask) -> bool:
    if name in cache:
        return cache[name]
    if depth > HELPER_DEPTH:
        return False
    cache[name] = False  # a recursive helper asks itself no further
    answer = any(ask(unit, facts, depth) for unit in facts.functions.get(name, ()))
    cache[name] = answer
    return answer
