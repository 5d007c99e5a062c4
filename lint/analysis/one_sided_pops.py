"""A ``backward_dw`` that pops its store on one side of a where-it-goes switch only (issue
#19, class 6; GMLP067).

``if not self.accumulate_into_main_grad: wgrad_list, _ = self.wgrad_store.pop()`` (blind
corpus 25, a DeepGEMM grouped linear): the store holds the work in every mode, and where
the gradient goes into main_grad the popped function is the GEMM that writes it. With the
switch on, nothing pops, and main_grad never gets the weight gradient.

Seen: in a ``backward_dw``, an ``if`` on a switch spelling ``accumulat`` with ``fuse`` /
``fusion`` / ``main_grad`` (or its negation) whose body pops the layer's store, while the
other side (the ``else``, or with none the statements after the ``if``) pops nothing and
calls no method of the object or its base (``super().backward_dw()``,
``self._run_stored()``: they may pop). Left alone when the file defers only on one side of
that switch: a function that puts work into a store and tests the same switch in an ``if``
that returns or raises, or holds the put (review 28: an op that writes main_grad at once
and stores only the unfused work).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import patterns, store_calls
from .module import ModuleContext, Unit, suite_body
from .skipped_pieces import _negated, _pops_store, _switch, _word_of

WHERE_WORDS = ("fuse", "fusion", "main_grad")


def one_sided_pops(context: ModuleContext) -> list[cst.Call]:
    """For ``context.shared``: the pops of every ``backward_dw`` of the file taken on one side
    only."""
    found: list[cst.Call] = []
    for unit in context.units:
        owner = unit.owner
        if type(owner) is not cst.FunctionDef or owner.name.value != "backward_dw":
            continue
        if context.class_of(unit) is None:
            continue
        for pop, word in _candidates(unit):
            if not _defers_on_one_side(context, word):
                found.append(pop)
    return found


def _candidates(unit: Unit) -> Iterator[tuple[cst.Call, str]]:
    for stmt, suite in unit.statements():
        if type(stmt) is not cst.If:
            continue
        switch = _negated(stmt.test) or _switch(stmt.test)
        word = _where_word(switch) if switch is not None else None
        if word is None:
            continue
        pops = [n for n in patterns.walk(stmt.body) if type(n) is cst.Call and _pops_store(n)]
        if not pops:
            continue
        if stmt.orelse is not None:
            other = [stmt.orelse]
        else:
            # (an ``elif`` is no statement of the suite it is walked with: nothing after it)
            index = next((i for i, s in enumerate(suite) if s is stmt), len(suite))
            other = list(suite[index + 1 :])
        if not any(_may_pop(n) for part in other for n in patterns.walk(part)):
            yield pops[0], word


def _where_word(switch) -> str | None:
    for sub in (switch, *patterns.walk(switch)):
        word = _word_of(sub) or ""
        lowered = word.lower()
        if "accumulat" in lowered and any(w in lowered for w in WHERE_WORDS):
            return word
    return None


def _may_pop(node) -> bool:
    """A pop of a store, or a call of a method of the object or its base."""
    if type(node) is not cst.Call:
        return False
    if _pops_store(node):
        return True
    func = node.func
    if type(func) is not cst.Attribute:
        return False
    receiver = func.value
    if type(receiver) is cst.Name and receiver.value == "self":
        return True
    return type(receiver) is cst.Call and patterns.callee_name(receiver) == "super"


def _defers_on_one_side(context: ModuleContext, word: str) -> bool:
    """A function of the file puts work into a store and tests ``word`` in an ``if`` that
    holds the put or leaves (``return`` / ``raise``)."""
    for unit in context.units:
        puts = [
            stmt
            for stmt, _ in unit.statements()
            if type(stmt) is not cst.If and any(store_calls.puts(n) for n in patterns.walk(stmt))
        ]
        if not puts:
            continue
        for stmt, _ in unit.statements():
            if type(stmt) is not cst.If or word not in context.code(stmt.test):
                continue
            body = suite_body(stmt.body)
            leaves = bool(body) and _leaves(body[-1])
            holds = any(store_calls.puts(n) for n in patterns.walk(stmt))
            if leaves or holds:
                return True
    return False


def _leaves(stmt) -> bool:
    if type(stmt) is cst.SimpleStatementLine:
        return any(type(s) in (cst.Return, cst.Raise) for s in stmt.body)
    return False
