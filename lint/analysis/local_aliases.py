"""Locals that are another name for one object: ``s = weight``, or ``weight = ctx.weight``
beside ``s = ctx.weight`` (two reads of one attribute, nothing in between rebinding
either name). Rules that compare weights by the name a statement spells (which weight is
marked, whose main_grad is written) ask here before calling two names two weights.

Only locals bound exactly once in the function (no parameter, loop, ``with`` or second
assignment binds them), to a name or a chain of attributes of a name, are followed: a
name bound twice may hold different objects on different paths.
"""

from __future__ import annotations

import libcst as cst

from . import patterns


def _chain(expr) -> str | None:
    """``ctx.fc1.weight`` as text; None for anything but a name or attributes of one."""
    parts = []
    while type(expr) is cst.Attribute:
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is not cst.Name:
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


def _bound_names(target) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in _bound_names(e.value)]
    if type(target) is cst.StarredElement:
        return _bound_names(target.value)
    return []


# Statements and expressions that bind their ``target``.
_TARGETED = (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)


class Aliases:
    """The single plain bindings of one function."""

    def __init__(self, function: cst.FunctionDef) -> None:
        counts: dict[str, int] = {}
        plain: dict[str, str] = {}
        params = function.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                every.append(extra)
        for param in every:
            counts[param.name.value] = counts.get(param.name.value, 0) + 1
        for node in patterns.walk(function.body):
            kind = type(node)
            names: list[str] = []
            if kind is cst.Assign:
                for target in node.targets:
                    names += _bound_names(target.target)
                if len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
                    text = _chain(node.value)
                    if text is not None:
                        plain[node.targets[0].target.value] = text
            elif kind in _TARGETED:
                names = _bound_names(node.target)
            elif kind is cst.WithItem and node.asname is not None:
                names = _bound_names(node.asname.name)
            elif kind in (cst.FunctionDef, cst.ClassDef):
                names = [node.name.value]
            for name in names:
                counts[name] = counts.get(name, 0) + 1
        self._plain = {name: text for name, text in plain.items() if counts.get(name) == 1}

    def resolved(self, name: str) -> str:
        """What ``name`` stands for, following single plain bindings (``s = weight`` ->
        whatever ``weight`` stands for)."""
        seen = {name}
        text = name
        while True:
            head, _, rest = text.partition(".")
            bound = self._plain.get(head)
            if bound is None or bound in seen:
                return text
            seen.add(bound)
            text = bound + ("." + rest if rest else "")

    def same(self, one, other) -> bool:
        """Two expressions (names or attribute chains) surely name one object."""
        first, second = _chain(one), _chain(other)
        if first is None or second is None:
            return False
        return self.resolved(first) == self.resolved(second)
