"""Calls deferred to the end of a block that surely runs: ``stack.callback(f, *args)`` inside
``with ExitStack() as stack:`` (or ``AsyncExitStack``, ``contextlib.`` or not) calls
``f(*args)`` when the block ends, on every way out of it (issue #19, class 5).

A ``backward_dw`` that queues its grad-accumulation hooks this way fires them after the
delayed GEMMs of the block, whatever order the statements are in:

    with contextlib.ExitStack() as stack:
        stack.callback(self._trigger_wgrad_accumulation_and_reduce_hooks)
        (_, _, _), tensors = self.wgrad_store.pop()
        ...

So the firing is not at the registration: the graph (cfg.py) has a node of kind "close"
where such a block ends on the normal way out, and a ``return`` (or a ``break`` /
``continue`` to a loop outside the block) inside it runs the callbacks as it leaves. The
arguments are evaluated at the registration: ``stack.callback(hooks[w])`` in a loop over
``w`` queues the hook of each ``w``, fired with the others at the end.

Not read as a firing: a stack that is never a ``with`` item (``stack = ExitStack()`` and no
``close()``: nothing runs), one whose callbacks are moved out (``stack.pop_all()`` in the
block), ``weakref.finalize`` and ``atexit`` (they run at collection or interpreter exit, at
no point of the function), ``stack.push`` (an exit handler called with the exception).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import paths
from .exit_stacks import REGISTER, stack_names
from .walking import children, walk

if TYPE_CHECKING:
    from .cfg import Graph, Node
    from .module import Unit

# Methods of the stack that take its callbacks away from the block's end.
MOVED_OUT = frozenset({"pop_all"})


@dataclass(frozen=True)
class Deferred:
    """``stack.callback(f, *args)``: ``call`` is ``f(*args)`` (a node of its own, made here),
    run at each of ``ends``; ``registration`` is the ``stack.callback(...)`` call, evaluated
    at ``node``."""

    registration: cst.Call
    node: Node
    call: cst.Call
    ends: tuple[Node, ...]
    # The ends that no path reaches without the registration (or a loop of the block that
    # registers, as a loop over the hooks: an empty one has nobody to notify). Where the
    # callable surely runs: an early ``return`` before ``stack.callback`` runs nothing.
    sure: tuple[Node, ...]


def deferred_calls(unit: Unit) -> list[Deferred]:
    """Every callable handed to ``stack.callback`` in a ``with`` block of ``unit`` whose
    stack is that block's own, with the nodes where it runs."""
    if REGISTER not in unit.context.source:
        return []
    found = []
    for stmt, _ in unit.statements():
        if type(stmt) is not cst.With:
            continue
        names = stack_names(stmt)
        if not names or _moved_out(stmt, names):
            continue
        ends = _ends(unit, stmt)
        for call, node in _registrations(unit, stmt, names):
            args = call.args
            if not args or args[0].star or args[0].keyword is not None:
                continue
            deferred = cst.Call(func=args[0].value, args=args[1:])
            sites = {node.index} | set(_loops_around(unit, stmt, call))
            sure = tuple(e for e in ends if not paths.reachable_avoiding(unit.graph, e, sites))
            found.append(Deferred(call, node, deferred, ends, sure))
    return found


def reached_avoiding(graph: Graph, node: Node, ends: tuple[Node, ...], blocked) -> bool:
    """Some path from the entry passes ``node`` and then (when ``ends`` are given: a call
    deferred at ``node``) reaches one of ``ends``, passing no node of ``blocked``: the books
    kept for a hook may come after its registration, before the block ends."""
    stop = {n.index for n in blocked}
    if not paths.reachable_avoiding(graph, node, stop):
        return False
    return not ends or paths.reaches(node, {end.index for end in ends} - stop, stop)


def _loops_around(unit: Unit, stmt: cst.With, call: cst.Call) -> Iterator[int]:
    """The nodes of the loop headers of the block ``stmt`` whose body holds ``call``."""
    for loop in walk(stmt.body):
        if type(loop) in (cst.For, cst.While) and any(sub is call for sub in walk(loop.body)):
            node = unit.node_for(loop)
            if node is not None:
                yield node.index


def _registrations(unit: Unit, stmt: cst.With, names: tuple[str, ...]):
    """(``S.callback(...)`` call, its node) in the block, with ``S`` still the block's stack
    (its one reaching binding is this ``with``)."""
    inside = {id(sub) for sub in walk(stmt.body)}
    for root, node in unit.expression_roots():
        if id(root) not in inside:
            continue
        for sub in walk(root):
            func = getattr(sub, "func", None)
            if type(sub) is not cst.Call or type(func) is not cst.Attribute:
                continue
            receiver = func.value
            if func.attr.value != REGISTER or type(receiver) is not cst.Name:
                continue
            if receiver.value not in names:
                continue
            defs = unit.reaching.reaching(receiver.value, node)
            if len(defs) == 1 and defs[0].kind == "with" and defs[0].node.owner is stmt:
                yield sub, node


def _moved_out(stmt: cst.With, names: tuple[str, ...]) -> bool:
    for sub in walk(stmt.body):
        func = getattr(sub, "func", None)
        if type(sub) is cst.Call and type(func) is cst.Attribute:
            receiver = func.value
            if func.attr.value in MOVED_OUT and getattr(receiver, "value", None) in names:
                return True
    return False


def _ends(unit: Unit, stmt: cst.With) -> tuple[Node, ...]:
    """The nodes where the block ends: its close node, and each ``return`` in it, and each
    ``break`` / ``continue`` in it that is not inside a loop of the block."""
    found = []
    close = unit.graph.closes.get(id(stmt))
    if close is not None:
        found.append(close)
    for leaving in _leaving(stmt.body.body, in_loop=False):
        node = unit.node_for(leaving)
        if node is not None:
            found.append(node)
    return tuple(found)


_ARMS = (cst.If, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


def _leaving(statements, in_loop: bool) -> Iterator[cst.CSTNode]:
    """The ``return`` statements among ``statements`` at any depth (not in nested functions),
    and the ``break`` / ``continue`` statements that are in no loop of theirs."""
    for stmt in statements:
        kind = type(stmt)
        if kind is cst.SimpleStatementLine:
            yield from _leaving(stmt.body, in_loop)
        elif kind is cst.Return or (not in_loop and kind in (cst.Break, cst.Continue)):
            yield stmt
        elif kind is not cst.FunctionDef and kind is not cst.ClassDef:
            loop = in_loop or kind in (cst.For, cst.While)
            for child in children(stmt):
                if isinstance(child, cst.BaseSuite):
                    yield from _leaving(child.body, loop)
                elif isinstance(child, _ARMS):
                    yield from _leaving([child], loop)
