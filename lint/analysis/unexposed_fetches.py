"""Fetches of Megatron-FSDP's main_grad that leave ``param.main_grad`` unfetched (issue
#19, class 8; Megatron-LM #5209's shape).

Megatron-FSDP sets ``param.main_grad = None`` on its parameters and hands out the buffer
only through ``param.get_main_grad()``. Code that builds Transformer Engine ops with
``accumulate_into_main_grad`` on such parameters must bind the fetched buffer to
``param.main_grad`` before the op runs: the op reads that attribute. Two ways a fetch the
code does write never gets there:

* the fetch sits under an existence test (``if not hasattr(p, "main_grad")``, ``"main_grad"
  not in vars(p)``, the ``else`` of ``if hasattr(p, "main_grad")``, an ``except
  AttributeError`` around reading it): once the attribute exists, holding None (Megatron-FSDP
  resets it so after each step), the fetch never runs. Megatron-LM's fix asks
  ``getattr(param, "main_grad", None) is None``. The other polarity (``if hasattr(p,
  "main_grad")``, the ``else`` of ``not hasattr``) fails the other way: Megatron-FSDP patches
  in ``get_main_grad`` alone, and the attribute first appears when a gradient is reduced, so
  before that (the first step) the fetch never runs;
* the fetched buffer is stored where nobody reads it - a ``self`` attribute of the class
  (a dict by name, a list) that no other method of the class mentions - and the function
  binds no ``.main_grad``;
* the fetch's result is dropped (``p.get_main_grad()`` as a statement of its own), and the
  function binds main_grad nowhere else;
* the fetch sits in a lazy iterator that the statement drops (``map(lambda p: setattr(p,
  "main_grad", p.get_main_grad()), params)``, a generator expression): nothing iterates
  it, so the fetch never runs, and the function binds main_grad nowhere else.

A test that also lets the fetch run some other way (``not hasattr(p, "main_grad") or
p.main_grad is None``) is left alone; so is a fetched buffer returned, used in the function
(as a GEMM's output), or kept where another method reads it (``ctx``, locals handed on).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from . import patterns
from .module import compound_suites, suite_body

MAIN_GRAD = "main_grad"
FETCH = "get_main_grad"
# Methods that put a value into a container attribute.
STORING = frozenset({"append", "extend", "insert", "update", "setdefault", "__setitem__"})
FILLING = STORING | {"clear"}


@dataclass(frozen=True)
class Unexposed:
    node: cst.CSTNode  # where to point: the guard's test, or the store
    kind: str  # "guard", "stored" or "lazy"
    receiver: str  # the attribute the buffer was stored in, for "stored"
    fetches: int = 0  # for "guard": the fetches the test keeps from running


def unexposed_fetches(module: cst.Module) -> list[Unexposed]:
    found: list[Unexposed] = []
    # ``walk`` enters the function it starts at, so a nested one may come up twice.
    scopes = list({id(s): s for s in _scopes(module)}.values())
    for scope in scopes:
        if type(scope) is cst.ClassDef:
            found.extend(_stored_away(scope, scopes))
            continue
        guards = list(_guarded(suite_body(scope.body)))
        if _attribute_exists(module, scope):
            guards = [g for g in guards if g.kind != "guard-present"]
        # Another fetch of the function, outside every such test (``elif p.main_grad is
        # None: fetch``), may be the one that runs: the function is not judged then.
        if guards and _count_fetches(scope) <= sum(g.fetches for g in guards):
            found.extend(guards)
        if not _count_fetches(scope):
            found.extend(_never_iterated(scope))
            found.extend(_dropped(scope))
    return found


def _dropped(function: cst.FunctionDef) -> Iterator[Unexposed]:
    """Expression statements that call the fetch and drop what it returns
    (``self.weight.get_main_grad()``): the buffer is fetched and bound nowhere."""
    for stmt in patterns.walk(function.body):
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is cst.Expr and _is_plain_fetch(small.value):
                yield Unexposed(small, "dropped", "")
            elif (
                type(small) is cst.Assign
                and _is_plain_fetch(small.value)
                and all(type(t.target) is cst.Name and t.target.value == "_" for t in small.targets)
            ):
                yield Unexposed(small, "dropped", "")  # ``_ = p.get_main_grad()``


# Functions named for putting buffers back after an offload refresh the views of the
# parameters that have one: there a positive existence test is the point.
REFRESHING = ("reload", "onload", "restore", "refresh", "rebind")


def _attribute_exists(module: cst.Module, function: cst.FunctionDef) -> bool:
    """The positive existence test asks nothing: the file binds ``X.main_grad = None``
    itself (the attribute exists from then on), or the function refreshes views after a
    reload."""
    if any(word in function.name.value.lower() for word in REFRESHING):
        return True
    return any(
        type(node) is cst.Assign
        and patterns.is_none_like(node.value)
        and any(patterns.is_attr(t.target, MAIN_GRAD) for t in node.targets)
        for node in patterns.walk(module)
    )


# -- a fetch in a lazy iterator nobody iterates ------------------------------------------------
LAZY_CALLS = frozenset({"map", "filter", "starmap", "filterfalse"})


def _never_iterated(function: cst.FunctionDef) -> Iterator[Unexposed]:
    """Expression statements whose value is a lazy iterator (``map(lambda p: ..., ps)``,
    ``filter(...)``, a generator expression) holding a fetch that only iterating it would
    run: the statement drops the iterator, so the fetch never runs."""
    for stmt in patterns.walk(function.body):
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is not cst.Expr:
                continue
            deferred = _deferred_parts(small.value)
            if any(_is_fetch(node) for part in deferred for node in patterns.walk(part)):
                yield Unexposed(small, "lazy", "")


def _deferred_parts(value: cst.BaseExpression) -> list[cst.CSTNode]:
    """The parts of a lazy iterator that run only when it is iterated: a generator
    expression's element and conditions (its first iterable runs at once), the function a
    ``map`` / ``filter`` is handed when it is written in place (a lambda)."""
    if type(value) is cst.GeneratorExp:
        parts: list[cst.CSTNode] = [value.elt]
        comp = value.for_in
        parts += list(comp.ifs)
        inner = comp.inner_for_in
        while inner is not None:
            parts += [inner.iter, *inner.ifs]
            inner = inner.inner_for_in
        return parts
    if type(value) is cst.Call and patterns.callee_name(value) in LAZY_CALLS:
        args = patterns.positional_args(value)
        if args and type(args[0].value) is cst.Lambda:
            return [args[0].value.body]
    return []


def _scopes(node: cst.CSTNode) -> Iterator[cst.FunctionDef | cst.ClassDef]:
    """Every function and class of the module, nested ones too (``walk`` stops at them)."""
    body = node.body if type(node) is cst.Module else suite_body(node.body)
    for stmt in body:
        for sub in patterns.walk(stmt):
            if type(sub) in (cst.FunctionDef, cst.ClassDef):
                yield sub
                yield from _scopes(sub)


# -- a fetch under an existence test ---------------------------------------------------------
# Both ways of asking whether the attribute exists keep the fetch from some of the
# parameters it is for: (kind, the presence the fetch's side of the test requires).
POLARITIES = (("guard", False), ("guard-present", True))


def _guarded(suite: Sequence[cst.CSTNode]) -> Iterator[Unexposed]:
    for i, stmt in enumerate(suite):
        if type(stmt) is cst.If:
            yield from _if_guard(stmt)
            # ``if hasattr(p, "main_grad"): continue`` - what follows is the other side.
            if (
                stmt.orelse is None
                and _ends_in_jump(suite_body(stmt.body))
                and _fetches(suite[i + 1 :])
            ):
                for kind, present in POLARITIES:
                    if _requires_not(stmt.test, present=present):
                        yield Unexposed(stmt.test, kind, "", _fetch_count(suite[i + 1 :]))
        elif type(stmt) is cst.Try:
            caught = [
                h
                for h in stmt.handlers
                if _catches_attribute_error(h) and _fetches(suite_body(h.body))
            ]
            if _reads_main_grad(stmt.body) and caught:
                count = sum(_fetch_count(suite_body(h.body)) for h in caught)
                yield Unexposed(stmt, "guard", "", count)
            for sub in (stmt.body, *(h.body for h in stmt.handlers)):
                yield from _guarded(suite_body(sub))
        elif isinstance(stmt, cst.BaseCompoundStatement) and type(stmt) not in (
            cst.FunctionDef,
            cst.ClassDef,
        ):
            for sub in compound_suites(stmt):  # ``match`` cases too
                yield from _guarded(suite_body(sub))


def _if_guard(stmt: cst.If) -> Iterator[Unexposed]:
    orelse = stmt.orelse
    for kind, present in POLARITIES:
        if _fetches(suite_body(stmt.body)) and _requires(stmt.test, present=present):
            yield Unexposed(stmt.test, kind, "", _fetch_count(suite_body(stmt.body)))
        if (
            type(orelse) is cst.Else
            and _requires_not(stmt.test, present=present)
            and _fetches(suite_body(orelse.body))
        ):
            yield Unexposed(stmt.test, kind, "", _fetch_count(suite_body(orelse.body)))
    yield from _guarded(suite_body(stmt.body))
    if type(orelse) is cst.If:
        yield from _if_guard(orelse)
    elif orelse is not None:
        yield from _guarded(suite_body(orelse.body))


def _requires(test: cst.BaseExpression, *, present: bool) -> bool:
    """The test being true requires main_grad to be present (absent, ``present=False``):
    one operand of an ``and`` does, or every operand of an ``or``."""
    kind = type(test)
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _requires_not(test.expression, present=present)
    if kind is cst.BooleanOperation:
        left = _requires(test.left, present=present)
        right = _requires(test.right, present=present)
        return (left or right) if type(test.operator) is cst.And else (left and right)
    asked = _asks_presence(test)
    return asked is not None and asked == present


def _requires_not(test: cst.BaseExpression, *, present: bool) -> bool:
    """The test being false requires main_grad to be present (absent)."""
    kind = type(test)
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _requires(test.expression, present=present)
    if kind is cst.BooleanOperation:
        left = _requires_not(test.left, present=present)
        right = _requires_not(test.right, present=present)
        return (left or right) if type(test.operator) is cst.Or else (left and right)
    asked = _asks_presence(test)
    return asked is not None and asked != present


def _asks_presence(test: cst.BaseExpression) -> bool | None:
    """True for a test that is true when the attribute exists (``hasattr(p, "main_grad")``,
    ``"main_grad" in vars(p)`` / ``p.__dict__``), False for its negation by ``not in``,
    None for anything else (a None test asks about the value, not the attribute)."""
    if patterns.callee_name(test) == "hasattr":
        args = patterns.positional_args(test)
        return True if len(args) == 2 and patterns.string_is(args[1].value, MAIN_GRAD) else None
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if patterns.string_is(test.left, MAIN_GRAD) and _is_namespace(target.comparator):
            if type(target.operator) is cst.In:
                return True
            if type(target.operator) is cst.NotIn:
                return False
    return None


def _is_namespace(expr: cst.BaseExpression) -> bool:
    """``vars(p)``, ``p.__dict__``, ``dir(p)``."""
    return patterns.callee_name(expr) in ("vars", "dir") or patterns.is_attr(expr, "__dict__")


def _fetches(statements: Sequence[cst.CSTNode]) -> bool:
    """The statements bind ``X.main_grad`` to a fetch (not in a nested block or scope)."""
    return _fetch_count(statements) > 0


def _fetch_count(statements: Sequence[cst.CSTNode]) -> int:
    """How many of the statements bind ``X.main_grad`` to a fetch (not counting nested
    blocks or scopes)."""
    return sum(
        _is_fetching_bind(small)
        for stmt in statements
        if type(stmt) is cst.SimpleStatementLine
        for small in stmt.body
    )


def _count_fetches(function: cst.FunctionDef) -> int:
    """How many statements of the function, in any block (not nested scopes), bind
    ``X.main_grad`` to a fetch."""
    return sum(
        _is_fetching_bind(small)
        for stmt in patterns.walk(function.body)
        if type(stmt) is cst.SimpleStatementLine
        for small in stmt.body
    )


def _is_fetching_bind(small: cst.BaseSmallStatement) -> bool:
    value = _bound_to_main_grad(small)
    return value is not None and any(_is_fetch(n) for n in patterns.walk(value))


def _bound_to_main_grad(small: cst.BaseSmallStatement) -> cst.BaseExpression | None:
    """V for ``X.main_grad = V`` or ``setattr(X, "main_grad", V)``."""
    if type(small) is cst.Assign:
        if any(patterns.is_attr(t.target, MAIN_GRAD) for t in small.targets):
            return small.value
    elif type(small) is cst.Expr and patterns.callee_name(small.value) == "setattr":
        args = patterns.positional_args(small.value)
        if len(args) == 3 and patterns.string_is(args[1].value, MAIN_GRAD):
            return args[2].value
    return None


def _is_fetch(node: cst.CSTNode) -> bool:
    """A call of the fetch or of a helper named for it (``get_main_grad_from_param``)."""
    name = patterns.callee_name(node)
    return name is not None and FETCH in name


def _is_plain_fetch(node: cst.CSTNode) -> bool:
    """``p.get_main_grad()`` itself: the helpers named for it may bind main_grad too."""
    return patterns.callee_name(node) == FETCH


def _ends_in_jump(statements: Sequence[cst.CSTNode]) -> bool:
    last = statements[-1] if statements else None
    if type(last) is cst.SimpleStatementLine:
        last = last.body[-1]
    return type(last) in (cst.Continue, cst.Return, cst.Break)


def _reads_main_grad(suite: cst.BaseSuite) -> bool:
    """``X.main_grad`` or ``getattr(X, "main_grad")`` (no default: it raises) is read."""
    return any(
        patterns.is_attr(n, MAIN_GRAD)
        or (
            patterns.callee_name(n) == "getattr"
            and len(args := patterns.positional_args(n)) == 2
            and patterns.string_is(args[1].value, MAIN_GRAD)
        )
        for n in patterns.walk(suite)
    )


def _catches_attribute_error(handler: cst.ExceptHandler) -> bool:
    return handler.type is not None and any(
        type(n) is cst.Name and n.value == "AttributeError" for n in patterns.walk(handler.type)
    )


# -- a fetched buffer stored where nobody reads it ------------------------------------------
def _stored_away(cls: cst.ClassDef, scopes: list) -> Iterator[Unexposed]:
    methods = [m for m in suite_body(cls.body) if type(m) is cst.FunctionDef]
    for method in methods:
        if any(
            type(n) is cst.SimpleStatementLine
            and any(_bound_to_main_grad(small) is not None for small in n.body)
            for n in patterns.walk(method.body)
        ):
            continue  # it exposes a buffer itself
        for node, attr in _stores(method):
            # Any read of ``self.<attr>`` in the file but the store itself and ``__init__``
            # (which sets it up): the method itself after the store, a closure it defines,
            # another method, a subclass.
            stored = {id(n) for n in patterns.walk(node)}
            functions = [
                scope
                for scope in scopes
                if type(scope) is cst.FunctionDef and scope.name.value != "__init__"
            ]
            # Filling or emptying the container (``self.bufs.clear()``) reads nothing.
            stored |= {
                id(n.func.value)
                for f in functions
                for n in patterns.walk(f.body)
                if type(n) is cst.Call
                and type(n.func) is cst.Attribute
                and n.func.attr.value in FILLING
            }
            if not any(
                patterns.attribute_of(n, "self") == attr and id(n) not in stored
                for f in functions
                for n in patterns.walk(f.body)
            ):
                yield Unexposed(node, "stored", attr)


def _stores(method: cst.FunctionDef) -> Iterator[tuple[cst.CSTNode, str]]:
    """Statements that put a fetched buffer into ``self.<attr>``: assigned to it or an
    item of it, or handed to one of its storing methods."""
    for stmt in patterns.walk(method.body):
        if type(stmt) is cst.Assign and any(_is_plain_fetch(n) for n in patterns.walk(stmt.value)):
            for target in stmt.targets:
                attr = _self_attribute(target.target)
                if attr is not None:
                    yield stmt, attr
        elif type(stmt) is cst.Call and patterns.callee_name(stmt) in STORING:
            func = stmt.func
            attr = _self_attribute(func.value) if type(func) is cst.Attribute else None
            if attr is not None and any(
                _is_plain_fetch(n) for a in stmt.args for n in patterns.walk(a)
            ):
                yield stmt, attr


def _self_attribute(target: cst.BaseExpression) -> str | None:
    """A for ``self.A`` or ``self.A[...]``."""
    if type(target) is cst.Subscript:
        target = target.value
    return patterns.attribute_of(target, "self")
