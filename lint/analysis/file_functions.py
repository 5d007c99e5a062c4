"""The functions a file defines, and which of them a call in the same file runs: the one
vocabulary the across-function analyses share (a weight copy handed to a helper,
``callee_weights``; provenance through calls, ``call_provenance``; a main_grad write moved
into a helper, ``writing_helpers``).

Unlike ``helper_facts`` (which answers by name, any definition of it, and follows imports
into the run's other files), a call is resolved here only when its name picks one definition
of the file, so that its arguments can be bound to that definition's parameters: ``f(...)``,
``self.f(...)`` / ``cls.f(...)``, or ``Cls.f(...)`` for a class of the file. Two functions of
one name (methods of two classes) leave it unresolved: guessing would lend one method's
facts to the other."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns, provenance
from .module import ModuleContext

RECEIVERS = frozenset({"self", "cls"})


def parameters(function: cst.FunctionDef) -> list[str]:
    """The names of ``function``'s parameters that an argument can bind, in order (the
    positional ones first, then the keyword-only ones)."""
    p = function.params
    return [param.name.value for param in (*p.posonly_params, *p.params, *p.kwonly_params)]


def is_static(function: cst.FunctionDef) -> bool:
    return _decorated(function, "staticmethod")


def is_classmethod(function: cst.FunctionDef) -> bool:
    """Its first parameter is the class, not the instance."""
    return _decorated(function, "classmethod")


def _decorated(function: cst.FunctionDef, name: str) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == name for d in function.decorators
    )


def by_name(context: ModuleContext) -> dict[str, list[cst.FunctionDef]]:
    """Every function of the file (nested ones and methods too) under its name."""
    found: dict[str, list[cst.FunctionDef]] = {}
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            found.setdefault(unit.name, []).append(unit.owner)
    return found


def class_names(context: ModuleContext) -> set[str]:
    return {n.name.value for n in patterns.walk(context.module) if isinstance(n, cst.ClassDef)}


def callee(call: cst.Call, functions, classes: set[str]) -> cst.FunctionDef | None:
    """The function of the file that ``call`` runs, when its name picks exactly one."""
    func = call.func
    if isinstance(func, cst.Name):
        name = func.value
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        if func.value.value not in RECEIVERS and func.value.value not in classes:
            return None
        name = func.attr.value
    else:
        return None
    defs = functions.get(name, ())
    return defs[0] if len(defs) == 1 else None


def resolved(context: ModuleContext, call: cst.Call) -> cst.FunctionDef | None:
    """``callee`` with the file's functions and classes, read once per file."""
    return callee(call, context.shared(by_name), context.shared(class_names))


def rebound_names(function: cst.FunctionDef) -> set[str]:
    """The names ``function``'s own code binds (a parameter among them may name another
    object somewhere in the body)."""
    return {name for node in own_nodes(function.body.body) for name in provenance.bound_names(node)}


def bound_arguments(
    call: cst.Call, function: cst.FunctionDef
) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(parameter, argument) for the arguments of ``call`` that ``function`` names; stops at
    a starred argument, whose positions are unknown."""
    params = parameters(function)
    if isinstance(call.func, cst.Attribute) and not is_static(function) and params:
        params = params[1:]  # ``self`` / ``cls`` is bound by the attribute
    position = 0
    for arg in call.args:
        if arg.star:
            return
        if arg.keyword is not None:
            yield arg.keyword.value, arg.value
        elif position < len(params):
            yield params[position], arg.value
            position += 1


def own_nodes(body) -> Iterator[cst.CSTNode]:
    """The nodes of a function body, not entering nested functions or classes."""
    for stmt in body:
        if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            yield from patterns.walk(stmt)


def node_of(unit, call: cst.Call):
    """The graph node of ``unit`` whose expression holds ``call``; None if none does."""
    for root, node in unit.expression_roots():
        if any(sub is call for sub in patterns.walk(root)):
            return node
    return None
