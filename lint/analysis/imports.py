"""What a file imports, for the rules that follow helpers of other files of the run (their
facts are kept by the names the helpers are defined with, ``project.RunFacts``): the name
a ``from ... import`` binds, with the name imported, and the names ``import`` binds to a
module (``import x``, ``import a.b as m``: a helper is then called as ``x.f()``)."""

from __future__ import annotations

import libcst as cst

from .module import ModuleContext, iter_statements


def imported_names(context: ModuleContext) -> dict[str, str]:
    """The names ``from ... import`` binds anywhere in the file, with the name imported
    (``from helpers import mark as finish``: finish -> mark)."""
    names = {}
    for unit in context.units:
        for stmt, _ in iter_statements(unit.body):
            if isinstance(stmt, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
                for alias in stmt.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(bound, cst.Name) and isinstance(alias.name, cst.Name):
                        names[bound.value] = alias.name.value
    return names


def imported_modules(context: ModuleContext) -> frozenset[str]:
    """The names ``import`` statements bind anywhere in the file (``import a.b`` binds
    ``a``, ``import a.b as m`` binds ``m``)."""
    names = set()
    for unit in context.units:
        for stmt, _ in iter_statements(unit.body):
            if isinstance(stmt, cst.Import):
                for alias in stmt.names:
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        names.add(alias.asname.name.value)
                    else:
                        names.add(_first_name(alias.name))
    return frozenset(names)


def _first_name(expr: cst.BaseExpression) -> str:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else ""
