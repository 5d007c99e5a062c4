"""Switches that are off by a class constant: ``self.X`` where the class says ``X = False``.

A mixin may hold a GEMM's switch as a class attribute (``wgrad_accumulate = False``) and
pass ``accumulate=self.wgrad_accumulate`` into main_grad: the write then replaces the
buffer as surely as ``accumulate=False`` (issue #19, class 4), only spelled through the
class. The value is constant when every binding of that attribute the file makes is an off
literal at class level: no method, caller or subclass of the file sets it otherwise
(``self.X = config...``, ``obj.X = ...``, ``setattr(obj, "X", ...)``, ``X = True`` in a
subclass). Not seen: a subclass or caller in another file that turns it on (then the
finding is wrong and suppressed with that reason), constants read through the class name
or ``type(self)``.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from . import patterns
from .module import ModuleContext, suite_body

OWNERS = frozenset({"self", "cls"})


def off_constants(
    context: ModuleContext, literal_off: Callable[[cst.CSTNode], bool]
) -> dict[int, frozenset[str]]:
    """id(method) -> the attributes ``self.X`` / ``cls.X`` in it reads as constant off
    switches: defined at class level in its class or a base class of the file, every
    binding of X in the file an off literal."""
    classes = [u.owner for u in context.units if type(u.owner) is cst.ClassDef]
    if not classes:
        return {}
    values: dict[str, list[cst.CSTNode]] = {}  # X -> every value the file binds to X
    defined: dict[str, set[str]] = {}  # class name -> X defined at its class level
    for cls in classes:
        own = defined.setdefault(cls.name.value, set())
        for stmt in suite_body(cls.body):
            if type(stmt) is not cst.SimpleStatementLine:
                continue
            for small in stmt.body:
                for target, value in _bindings(small):
                    if type(target) is cst.Name:
                        own.add(target.value)
                        values.setdefault(target.value, []).append(value)
    # every unit's own statements (``walk`` enters no nested function or class)
    nodes = (n for u in context.units for stmt in u.body for n in patterns.walk(stmt))
    for node in nodes:
        for target, value in _bindings(node):
            if type(target) is cst.Attribute:
                values.setdefault(target.attr.value, []).append(value)
        if type(node) is cst.Call and patterns.callee_name(node) == "setattr":
            args = patterns.positional_args(node)
            word = patterns.string_value(args[1].value) if len(args) == 3 else None
            if word is not None:
                values.setdefault(word, []).append(args[2].value)
            elif len(args) == 3:
                return {}  # a setattr of a computed name may set any of them
    constant = {x for x, vs in values.items() if all(v is not None and literal_off(v) for v in vs)}
    found: dict[int, frozenset[str]] = {}
    by_name = {cls.name.value: cls for cls in classes}
    for cls in classes:
        reachable = _with_bases(cls, by_name, defined)
        if not reachable & constant:
            continue
        for stmt in suite_body(cls.body):
            if type(stmt) is cst.FunctionDef:
                found[id(stmt)] = frozenset(reachable & constant)
    return found


def _with_bases(cls: cst.ClassDef, by_name, defined) -> set[str]:
    """The attributes defined at class level in ``cls`` or its bases of the file."""
    found: set[str] = set()
    pending, seen = [cls], set()
    while pending:
        current = pending.pop()
        if current.name.value in seen:
            continue
        seen.add(current.name.value)
        found |= defined.get(current.name.value, set())
        for base in current.bases:
            if type(base.value) is cst.Name and base.value.value in by_name:
                pending.append(by_name[base.value.value])
    return found


def _bindings(node):
    """(target, value) of an assignment (value None for an augmented one: not constant)."""
    kind = type(node)
    if kind is cst.Assign:
        for t in node.targets:
            if type(t.target) in (cst.Tuple, cst.List):
                # unpacked: each element's value is unknown here
                yield from ((e.value, None) for e in t.target.elements)
            else:
                yield t.target, node.value
    elif kind is cst.AnnAssign:
        yield node.target, node.value
    elif kind is cst.AugAssign:
        yield node.target, None
