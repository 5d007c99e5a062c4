"""Where a backward pass hands its weight-gradient work to somebody else (issue #19, class 6).

A split backward (zero-bubble pipelines, ``delay_wgrad_compute``) queues the wgrad work, a
callable that writes ``main_grad``, into a store that a later step pops. Whether to queue is
a mode of the step: a pipeline's warm-up, or a layer built without delay, computes the
weight gradient at once. This module finds, in each ``backward``, the calls that hand such a
callable to an object (``store.put(..., partial(process_wgrad, w))``,
``queue.append(lambda: w.main_grad.add_(g))``) and whether some path of the function does
the work itself instead: an enclosing ``if`` (or ``elif``/``else``) whose other branch calls
something, or an earlier ``if`` in an enclosing block that calls something and returns.

What "the callable writes main_grad" means here: the lambda, the ``partial``'s arguments,
or the body of the function it names (nested in the backward or defined at the top of the
file) spell an identifier holding ``main_grad`` (``main_grad``, ``main_grads``,
``w.main_grad``), or assign a tensor's ``.grad`` (``w.grad = ...``, ``w.grad += ...``: the
weight gradient delivered outside autograd, Megatron-DeepSpeed #428), following names bound
in the function and functions called by name, a few levels deep.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from ..wgrad_words import names_store_on_switch
from . import patterns, store_calls
from .module import ModuleContext, compound_suites, suite_body

MAIN_GRAD = "main_grad"
# The text of a file whose backward may hand work to a store named for weight gradients
# (``WeightGradStore``: zero-bubble pipelines with no main_grad, ColossalAI's).
WEIGHT_GRAD_STORE = "WeightGradStore"
GRAD = "grad"
BACKWARD = "backward"
PARTIALS = frozenset({"partial"})
# How many names (bindings, functions called by name) are followed from a callable.
MAX_FOLLOWED = 3


@dataclass(frozen=True)
class Handoff:
    call: cst.Call  # the call that hands the wgrad work on
    alternative: bool  # some path of the function does the work itself
    # The test that says the store receiving the work is off, when the hand-off runs only
    # where it says so (``if store.enabled: compute() else: store.put(work)``): the work is
    # queued exactly when nobody will pop it, and computed at once when a later step would.
    off: cst.BaseExpression | None = None
    # The callable's work was read and writes main_grad or ``.grad`` (False: only the
    # store's name says it takes weight-gradient work; the callable is imported). Whether
    # some path does the work itself is then not known either.
    work_seen: bool = True


def handoffs(context: ModuleContext) -> list[Handoff]:
    """Every hand-off of wgrad work in the file's ``backward`` functions."""
    if MAIN_GRAD not in context.source and WEIGHT_GRAD_STORE not in context.source:
        return []
    top = {
        stmt.name.value: stmt for stmt in context.module.body if isinstance(stmt, cst.FunctionDef)
    }
    found: list[Handoff] = []
    for unit in context.units:
        owner = unit.owner
        if isinstance(owner, cst.FunctionDef) and owner.name.value == BACKWARD:
            scope = _Scope(owner, top)
            for call, alternative, branch in _calls(suite_body(owner.body), False, ()):
                seen = any(scope.writes_main_grad(arg.value) for arg in call.args)
                if seen or store_calls.puts(call):
                    found.append(Handoff(call, alternative, _store_off(call, branch), seen))
    return found


class _Scope:
    """The names of one backward: its nested functions, its local bindings, and the file's
    top-level functions."""

    def __init__(self, function: cst.FunctionDef, top: dict[str, cst.FunctionDef]) -> None:
        self.functions = dict(top)
        self.bindings: dict[str, list[cst.CSTNode]] = {}
        for node in _walk_with_nested(function.body):
            if isinstance(node, cst.FunctionDef):
                self.functions[node.name.value] = node
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        self.bindings.setdefault(target.target.value, []).append(node.value)

    def writes_main_grad(self, arg: cst.CSTNode, depth: int = 0) -> bool:
        """``arg`` is a callable (lambda, ``partial(f, ...)``, the name of a function) whose
        work spells main_grad."""
        if isinstance(arg, cst.Lambda):
            return self._spells(arg.body)
        if isinstance(arg, cst.Call) and patterns.callee_name(arg) in PARTIALS and arg.args:
            named = arg.args[0].value
            return self._names_function(named, depth) or any(
                self._spells(a.value) for a in arg.args
            )
        return self._names_function(arg, depth)

    def _names_function(self, node: cst.CSTNode, depth: int) -> bool:
        """The name of a function, or of a local bound to a lambda or ``partial``."""
        if not isinstance(node, cst.Name) or depth > MAX_FOLLOWED:
            return False
        if node.value in self.functions:
            return self._spells(self.functions[node.value].body)
        return any(
            self.writes_main_grad(value, depth + 1)
            for value in self.bindings.get(node.value, ())
            if isinstance(value, (cst.Lambda, cst.Call))
            and (isinstance(value, cst.Lambda) or patterns.callee_name(value) in PARTIALS)
        )

    def _spells(self, node: cst.CSTNode) -> bool:
        pending, seen = [node], set()
        while pending:
            current = pending.pop()
            for sub in _walk_with_nested(current):
                if isinstance(sub, cst.Attribute) and MAIN_GRAD in sub.attr.value:
                    return True
                if patterns.callee_name(sub) == "getattr" and any(
                    MAIN_GRAD in (patterns.string_value(a.value) or "") for a in sub.args
                ):
                    return True
                if _assigns_grad(sub):
                    return True
                if isinstance(sub, cst.Name):
                    word = sub.value
                    if MAIN_GRAD in word:
                        return True
                    if word not in seen and len(seen) < MAX_FOLLOWED * 4:
                        seen.add(word)
                        if word in self.functions:
                            pending.append(self.functions[word].body)
                        pending.extend(self.bindings.get(word, ()))
            if len(seen) > MAX_FOLLOWED * 4:
                break
        return False


def _assigns_grad(node: cst.CSTNode) -> bool:
    """``x.grad = ...`` or ``x.grad += ...``: a gradient written outside autograd."""
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, cst.AugAssign):
        targets = [node.target]
    else:
        return False
    return any(isinstance(t, cst.Attribute) and t.attr.value == GRAD for t in targets)


def _walk_with_nested(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(patterns.children(current))


# The tests a hand-off runs under: (test, True when the hand-off runs where it holds).
Tests = tuple[tuple[cst.BaseExpression, bool], ...]


def _calls(
    body: Sequence[cst.CSTNode], alternative: bool, tests: Tests
) -> Iterator[tuple[cst.Call, bool, Tests]]:
    """Method calls made as statements in ``body`` (``x.put(...)``, ``h = x.put(...)``, an
    arm of ``compute() if mode else x.put(...)``), with whether another path of the
    function does work instead (see the module's text) and the tests they run under."""
    for index, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                value = getattr(small, "value", None)
                if isinstance(small, (cst.Expr, cst.Assign)):
                    yield from _expression_calls(value, alternative, tests)
        elif isinstance(stmt, cst.If):
            yield from _branches(stmt, alternative, body[index + 1 :], tests)
            if stmt.orelse is None and _does_work_and_returns(stmt.body):
                alternative = True  # the rest of this block runs only when that path did not
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        else:
            for suite in compound_suites(stmt):
                yield from _calls(suite_body(suite), alternative, tests)


def _expression_calls(
    value, alternative: bool, tests: Tests
) -> Iterator[tuple[cst.Call, bool, Tests]]:
    """The method call a statement's value is, or those of the arms of a conditional
    expression (each arm's other is another path when it calls something)."""
    if _is_method_call(value):
        yield value, alternative, tests
    elif isinstance(value, cst.IfExp):
        arms = ((value.body, value.orelse, True), (value.orelse, value.body, False))
        for arm, other, holds in arms:
            here = alternative or any(isinstance(n, cst.Call) for n in patterns.walk(other))
            yield from _expression_calls(arm, here, (*tests, (value.test, holds)))


def _branches(
    stmt: cst.If, alternative: bool, rest: Sequence[cst.CSTNode], tests: Tests
) -> Iterator[tuple[cst.Call, bool, Tests]]:
    """The calls of each arm; ``rest``, the statements after the ``if`` in its block, is
    another path for an arm that ends in a jump (``if delay: put(...); return``) when some
    path gets past the ``if`` (no ``else``, or an arm that does not jump)."""
    arms: list[cst.BaseSuite] = [stmt.body]
    current: cst.CSTNode | None = stmt.orelse
    while current is not None:
        arms.append(current.body)
        current = current.orelse if isinstance(current, cst.If) else None
    jumps = [_ends_in_jump(suite_body(arm)) for arm in arms]
    falls_through = not isinstance(current_else(stmt), cst.Else) or not all(jumps)
    rest_works = falls_through and _calls_something_in(rest)
    for index, arm in enumerate(arms):
        others = arms[:index] + arms[index + 1 :]
        here = alternative or any(_calls_something(other) for other in others)
        here = here or (jumps[index] and rest_works)
        # every arm past the first runs where the ``if``'s own test is false
        yield from _calls(suite_body(arm), here, (*tests, (stmt.test, index == 0)))


def _store_off(call: cst.Call, tests: Tests) -> cst.BaseExpression | None:
    """The test among ``tests`` that reads the receiving store's own on switch
    (``store.enabled``, ``store.delay_wgrad_compute()``, negated or not) and says it is off
    where ``call`` runs."""
    receiver = call.func.value
    for test, holds in tests:
        inner, positive = test, holds
        while isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Not):
            inner, positive = inner.expression, not positive
        if isinstance(inner, cst.Call):
            inner = inner.func
        if not isinstance(inner, cst.Attribute) or positive:
            continue
        if names_store_on_switch(inner.attr.value) and inner.value.deep_equals(receiver):
            return test
    return None


def current_else(stmt: cst.If) -> cst.CSTNode | None:
    """The last ``else`` of an ``if``/``elif`` chain (None when it has none)."""
    current: cst.CSTNode | None = stmt.orelse
    while isinstance(current, cst.If):
        current = current.orelse
    return current


def _ends_in_jump(body: Sequence[cst.CSTNode]) -> bool:
    return bool(body) and _raises_or_returns(body[-1])


def _raises_or_returns(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, (cst.Return, cst.Raise, cst.Continue, cst.Break)) for s in stmt.body
    )


def _is_method_call(node: cst.CSTNode | None) -> bool:
    """A call of an object's method (``functools.partial(...)`` builds the work, it hands
    nothing on)."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value not in PARTIALS
    )


def _calls_something(suite: cst.BaseSuite) -> bool:
    """The branch does some work: it calls something (a branch that only assigns, raises
    or passes computes no weight gradient)."""
    return _calls_something_in(suite_body(suite))


def _calls_something_in(statements: Sequence[cst.CSTNode]) -> bool:
    return any(
        isinstance(n, cst.Call)
        for stmt in statements
        if not _raises(stmt)
        for n in patterns.walk(stmt)
    )


def _raises(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, (cst.Raise, cst.Assert)) for s in stmt.body
    )


def _does_work_and_returns(suite: cst.BaseSuite) -> bool:
    """The branch calls something before it returns (``return dx, None`` alone computes no
    weight gradient)."""
    body = suite_body(suite)
    if not body or not isinstance(body[-1], cst.SimpleStatementLine):
        return False
    returns = any(isinstance(s, cst.Return) for s in body[-1].body)
    return returns and any(
        isinstance(n, cst.Call)
        for stmt in body[:-1]
        if not _raises(stmt)
        for n in patterns.walk(stmt)
    )
