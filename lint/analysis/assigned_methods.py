"""Methods a class defines by assignment in its body (issue #19, class 6): ``backward_dw =
lambda self: None``, ``need_backward_dw = lambda self: False``, ``backward_dw = _no_op``
(a function of the same file, or a method of the class defined above). Python calls them
like any ``def`` of the class, so a rule that reads a class's overrides reads them too.

Each is given as a ``def`` of the same body: a lambda as a function returning its
expression, an alias as the function it names. The name the class binds (the assignment's
target) is kept beside it for reporting: the alias's ``def`` may lie elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .module import ModuleContext, suite_body


@dataclass(frozen=True)
class Assigned:
    method: cst.FunctionDef  # the body Python runs when the class's method is called
    target: cst.Name  # the name the class body binds


def assigned_methods(node: cst.ClassDef, context: ModuleContext) -> dict[str, Assigned]:
    """The class-level assignments of ``node`` that bind a callable of known body."""
    functions = {
        stmt.name.value: stmt for stmt in context.module.body if isinstance(stmt, cst.FunctionDef)
    }
    found: dict[str, Assigned] = {}
    for stmt in suite_body(node.body):
        if isinstance(stmt, cst.FunctionDef):
            functions[stmt.name.value] = stmt  # a method defined above can be aliased
            continue
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if type(small) is not cst.Assign or len(small.targets) != 1:
                continue
            target = small.targets[0].target
            if type(target) is not cst.Name:
                continue
            method = _as_function(small.value, target, functions)
            if method is not None:
                found[target.value] = Assigned(method, target)
    return found


def _as_function(value, target: cst.Name, functions) -> cst.FunctionDef | None:
    if type(value) is cst.Lambda:
        # ``lambda self: expr`` runs as ``def name(self): return expr``
        body = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Return(value.body)])])
        return cst.FunctionDef(name=target, params=value.params, body=body)
    if type(value) is cst.Name:
        return functions.get(value.value)
    return None
