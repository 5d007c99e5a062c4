"""A weight-gradient pass gated on a switch that is on only inside another function (issue
#19, class 6).

A split backward turns its store on around the backward it splits and off after it
(DualPipe's ``WeightGradStore.enabled = enable_zb; ...backward...; WeightGradStore.enabled =
False``): outside that window the switch is always off. The W pass that drains the store
runs later, from the schedule, outside the window. Gating it on the switch (``if
self.forward_only or not WeightGradStore.enabled: return``) makes it return every time: the
queued weight-gradient work is never run and the weights get no gradient, silently.

A *window switch* is an attribute every function of the file that turns it on also turns
off at its own end: a top-level statement (or a ``finally`` at top level) sets it to a false
constant after every other write in that function. Writes are grouped by the attribute's
name, whatever the object (``cls.enabled`` inside the store's class counts as a write of
``WeightGradStore.enabled``), and ``setattr`` with that name counts as a write that turns it
on. A *gated pass*: in another function, a test read before taking work out of a store
named for weight gradients (``WeightGradStore.pop()``, ``flush``), whose outcome requires
the switch on to reach the take: an early ``if T: return`` with ``T`` false only when the
switch is on (``not S``, ``A or not S``), or an ``if T:`` around the take with ``T`` true
only when it is (``S``, ``S and B``), where some window's reset writes the object the gate
reads (by its code, or ``cls.`` / ``self.`` inside the class of that name: a profiler's
``self.profiler.enabled`` window says nothing of ``WeightGradStore.enabled``). Left alone: a
gated function that code inside a window may run (named in a window function, as a callee,
a callback or a ``getattr`` string, or in turn in a function so named; every function where
one calls through a table or ``getattr(...)()``), and a generator's window
(``@contextmanager``: the caller's ``with`` block runs inside it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from . import patterns, store_calls
from .module import ModuleContext, suite_body


@dataclass(frozen=True)
class GatedPass:
    test: cst.BaseExpression  # the test that needs the switch on
    switch: str  # its code (``WeightGradStore.enabled``)
    reset: cst.CSTNode  # a write turning it off at a window's end
    take: cst.Call  # the store take it gates


def gated_passes(context: ModuleContext) -> list[GatedPass]:
    functions = [u.owner for u in context.units if type(u.owner) is cst.FunctionDef]
    windows = _window_switches(functions)
    if not windows:
        return []
    found = []
    for function in functions:
        if any(function is w for resets in windows.values() for w, _ in resets):
            continue
        for test, switch, take in _gates(function.body, windows):
            attr = switch.attr.value
            resets = [r for w, r in windows[attr] if _same_switch(context, switch, r)]
            if not resets:
                continue  # a window of another object's attribute of that name
            window_functions = [w for w, _ in windows[attr]]
            if function.name.value in _reached_from(window_functions, functions):
                continue
            code = context.code(switch)
            found.append(GatedPass(test, code, resets[0], take))
    return found


def _same_switch(context: ModuleContext, read: cst.Attribute, reset: cst.CSTNode) -> bool:
    """The reset writes the attribute the gate reads: the same object by its code, or
    ``cls.X`` / ``self.X`` inside the class whose name the read's object ends in
    (``WeightGradStore.enabled`` and ``cls.enabled`` in ``class WeightGradStore``)."""
    target = reset.targets[0].target
    owner = context.code(target.value)
    if owner == context.code(read.value):
        return True
    if owner not in ("cls", "self"):
        return False
    cls = next((c for c in _classes_around(context, reset)), None)
    return cls is not None and cls == patterns.last_word(read.value)


def _classes_around(context: ModuleContext, node: cst.CSTNode):
    start, end = context.offsets(node)
    for unit in context.units:
        owner = unit.owner
        if type(owner) is cst.ClassDef:
            first, last = context.offsets(owner)
            if first <= start and end <= last:
                yield owner.name.value


def _reached_from(
    starts: Sequence[cst.FunctionDef], functions: Sequence[cst.FunctionDef]
) -> set[str]:
    """The names of the file's functions that code inside the windows may run: named
    (called, handed on as a callback, looked up by ``getattr``) in a window function or,
    in turn, in a function so named; all of them where one calls through a table or a
    ``getattr``."""
    by_name = {f.name.value: f for f in functions}
    reached: set[str] = set()
    stack = list(starts)
    while stack:
        function = stack.pop()
        for node in patterns.walk(function.body):
            if type(node) is cst.Call and type(node.func) in (cst.Subscript, cst.Call):
                # ``self._ops[op]()``, ``getattr(self, name)()``: it may run any of them
                return set(by_name)
            word = _named(node)
            if word in by_name and word not in reached:
                reached.add(word)
                stack.append(by_name[word])
    return reached


def _named(node: cst.CSTNode) -> str | None:
    if type(node) is cst.SimpleString:
        return patterns.string_value(node)
    return patterns.last_word(node)


def _window_switches(
    functions: Sequence[cst.FunctionDef],
) -> dict[str, list[tuple[cst.FunctionDef, cst.CSTNode]]]:
    """Attribute name -> the functions that turn it on and off, each with its final reset."""
    windows: dict[str, list[tuple[cst.FunctionDef, cst.CSTNode]]] = {}
    spoiled: set[str] = set()
    for function in functions:
        top = suite_body(function.body)
        writes = _writes(function.body)
        # a generator (``@contextmanager``) yields inside its window: its caller's block
        # runs with the switch on
        generator = any(type(n) is cst.Yield for n in patterns.walk(function.body))
        for attr in {a for a, _, _ in writes}:
            if attr in spoiled:
                continue
            turns_on = any(a == attr and not off for a, _, off in writes)
            if not turns_on:
                continue  # only turned off here (``__init__``, a reset helper)
            reset = None if generator else _final_reset(top, attr)
            if reset is None:
                spoiled.add(attr)
                windows.pop(attr, None)
            else:
                windows.setdefault(attr, []).append((function, reset))
    return windows


def _writes(code: cst.CSTNode) -> list[tuple[str, cst.CSTNode, bool]]:
    """(attribute, write, whether it writes a false constant) for every attribute write of
    a function's body or statement, nested blocks included."""
    found = []
    for node in patterns.walk(code):
        kind = type(node)
        if kind is cst.Assign:
            for target in node.targets:
                if type(target.target) is cst.Attribute:
                    off = patterns.is_false_literal(node.value)
                    found.append((target.target.attr.value, node, off))
        elif kind is cst.AugAssign or kind is cst.AnnAssign:
            if type(node.target) is cst.Attribute:
                found.append((node.target.attr.value, node, False))
        elif kind is cst.Call and patterns.callee_name(node) == "setattr":
            args = patterns.positional_args(node)
            name = patterns.string_value(args[1].value) if len(args) == 3 else None
            if name:
                found.append((name, node, patterns.is_false_literal(args[2].value)))
    return found


def _final_reset(top: Sequence[cst.CSTNode], attr: str) -> cst.CSTNode | None:
    """The top-level write of ``attr`` to a false constant that no later statement of the
    function writes again (in the ``finally`` of a top-level ``try`` too)."""
    for index in range(len(top) - 1, -1, -1):
        stmt = top[index]
        reset = _reset_in(stmt, attr)
        if reset is not None:
            if _returns_while_on(top[:index], attr):
                return None  # a return between turning it on and off leaves it on
            return reset
        if any(a == attr for a, _, _ in _writes(stmt)):
            return None
    return None


def _returns_while_on(before: Sequence[cst.CSTNode], attr: str) -> bool:
    """A ``return`` at or after the first statement turning ``attr`` on."""
    on = False
    for stmt in before:
        on = on or any(a == attr and not off for a, _, off in _writes(stmt))
        if on and any(type(node) is cst.Return for node in patterns.walk(stmt)):
            return True
    return False


def _reset_in(stmt: cst.CSTNode, attr: str) -> cst.CSTNode | None:
    if type(stmt) is cst.SimpleStatementLine:
        found = None
        for small in stmt.body:
            if (
                type(small) is cst.Assign
                and any(patterns.last_word(t.target) == attr for t in small.targets)
                and type(small.targets[0].target) is cst.Attribute
            ):
                found = small if patterns.is_false_literal(small.value) else None
        return found
    if type(stmt) is cst.Try and stmt.finalbody is not None:
        final = suite_body(stmt.finalbody.body)
        return _final_reset(final, attr)
    return None


def _gates(
    body: cst.BaseSuite, windows: dict
) -> Iterator[tuple[cst.BaseExpression, cst.Attribute, cst.Call]]:
    statements = suite_body(body)
    for index, stmt in enumerate(statements):
        if type(stmt) is not cst.If:
            continue
        if stmt.orelse is None and _returns(suite_body(stmt.body)):
            switch = _needed(stmt.test, windows, when=False)
            take = _take(statements[index + 1 :])
            if switch is not None and take is not None:
                yield stmt.test, switch, take
                return
        switch = _needed(stmt.test, windows, when=True)
        take = _take(suite_body(stmt.body))
        if switch is not None and take is not None:
            yield stmt.test, switch, take


def _returns(statements: Sequence[cst.CSTNode]) -> bool:
    last = statements[-1] if statements else None
    if type(last) is cst.SimpleStatementLine:
        last = last.body[-1]  # an indented body; a one-line ``if T: return`` holds the return
    return type(last) is cst.Return and (last.value is None or patterns.is_none_like(last.value))


def _needed(test: cst.BaseExpression, windows: dict, *, when: bool) -> cst.Attribute | None:
    """The window switch that must be on for ``test`` to come out ``when``."""
    kind = type(test)
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _needed(test.expression, windows, when=not when)
    if kind is cst.BooleanOperation:
        # ``A and B`` true needs both true; ``A or B`` false needs both false: either
        # operand's need is the whole test's. The other way round, both operands must need it.
        either = (type(test.operator) is cst.And) == when
        left = _needed(test.left, windows, when=when)
        right = _needed(test.right, windows, when=when)
        if either:
            return left or right
        return left if left is not None and right is not None else None
    if kind is cst.Attribute and test.attr.value in windows and when:
        return test
    return None


def _take(statements: Sequence[cst.CSTNode]) -> cst.Call | None:
    return next(
        (node for stmt in statements for node in patterns.walk(stmt) if store_calls.takes(node)),
        None,
    )
