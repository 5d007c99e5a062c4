"""A function's nodes in text order, its scopes, and every binding and attribute store in it:
what ``pasted_names`` reads to tell whether text written somewhere new means the same there.

Names are placed as Python resolves them: the innermost function, lambda, comprehension or
class body that binds a name owns it (a class body only for code directly in it), and the
parts of a ``def``, lambda, class or comprehension that run outside it (defaults,
annotations, decorators, bases, the first iterable) belong to the enclosing scope. A
binding takes effect where its statement finishes (an assignment after its value, a
``with ... as`` after entering, a loop variable at the top of each pass); ``del`` and the
end of an ``except ... as`` clause unbind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import patterns
from .walking import children

if TYPE_CHECKING:
    from .module import ModuleContext

SCOPES = (
    cst.FunctionDef,
    cst.Lambda,
    cst.ClassDef,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)
# code there runs when called or iterated, not where it stands
DEFERRED = (cst.FunctionDef, cst.Lambda, cst.GeneratorExp)
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# a comprehension runs its element once per pass, like a loop's body
LOOPS = (cst.For, cst.While, *COMPREHENSIONS)
CHAINS = (cst.Attribute, cst.Subscript)
# methods that change a container in place: ``self.basic_ops.insert(0, op)`` changes what
# ``self.basic_ops[0]`` is
MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort", "update",
     "setdefault", "popitem", "__setitem__", "__delitem__"}
)  # fmt: skip


@dataclass(frozen=True)
class Binding:
    node: cst.CSTNode  # the node whose execution binds (or unbinds) the name
    at: int  # where in the text order it takes effect
    unbinds: bool = False  # ``del``, the end of an ``except ... as`` clause


@dataclass(frozen=True)
class Store:
    """An attribute or item written (``op.flag = False``, ``setattr(op, "flag", v)``,
    ``ops.insert(0, x)``): ``target`` its code without spaces, ``attr`` the attribute's
    name when one is assigned (an alias of the object assigns it too)."""

    target: str
    attr: str | None
    binding: Binding


class BindingIndex:
    def __init__(self, context: ModuleContext, function: cst.FunctionDef) -> None:
        self.context = context
        self.function = function
        self.span: dict[cst.CSTNode, tuple[int, int]] = {}
        self.parent: dict[cst.CSTNode, cst.CSTNode] = {}
        self.outside: dict[cst.CSTNode, cst.CSTNode] = {}  # a part evaluated outside its scope
        self.bindings: dict[tuple[int, str], list[Binding]] = {}
        self.declared: set[str] = set()  # ``global`` / ``nonlocal`` anywhere in the function
        self.stores: list[Store] = []
        self._number(function)
        for node in self.span:
            self._mark_outside(node)
        for node in self.span:
            self._bind(node)

    # -- order and nesting ----------------------------------------------------------------
    def _number(self, root: cst.CSTNode) -> None:
        counter = 0
        stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                self.span[node] = (self.span[node][0], counter - 1)
                continue
            self.span[node] = (counter, counter)
            counter += 1
            stack.append((node, True))
            for child in reversed(_in_execution_order(node, children(node))):
                self.parent[child] = node
                stack.append((child, False))

    def _mark_outside(self, node: cst.CSTNode) -> None:
        kind = type(node)
        parts: list[cst.CSTNode] = []
        if kind is cst.FunctionDef or kind is cst.Lambda:
            params = node.params
            every = (*params.posonly_params, *params.params, *params.kwonly_params)
            every += tuple(
                p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)
            )
            parts += [p.default for p in every if p.default is not None]
            parts += [p.annotation for p in every if p.annotation is not None]
            if kind is cst.FunctionDef:
                parts += list(node.decorators) + ([node.returns] if node.returns else [])
        elif kind is cst.ClassDef:
            parts += list(node.decorators) + list(node.bases) + list(node.keywords)
        elif kind in COMPREHENSIONS:
            parts.append(node.for_in.iter)
        for part in parts:
            self.outside[part] = node

    def scopes_of(self, node: cst.CSTNode):
        """The scopes whose names ``node`` sees, innermost first (class bodies only when
        innermost, as Python resolves names)."""
        skip: set[int] = set()
        first = True
        current = node
        while current is not self.function:
            owner = self.outside.get(current)
            if owner is not None:
                skip.add(id(owner))
            current = self.parent[current]
            if isinstance(current, SCOPES) and id(current) not in skip:
                if first or type(current) is not cst.ClassDef:
                    yield current
                first = False
        yield self.function

    def resolve(self, name: str, node: cst.CSTNode):
        """The scope that owns ``name`` where ``node`` reads it; None: not the function's."""
        for scope in self.scopes_of(node):
            if (id(scope), name) in self.bindings:
                return scope
        return None

    def frame_in(self, node: cst.CSTNode, scope: cst.CSTNode):
        """The outermost function, lambda or generator expression inside ``scope`` that
        holds ``node`` (code that runs later than where it stands); ``scope`` if none."""
        found = scope
        for outer in self.scopes_of(node):
            if outer is scope:
                return found
            if isinstance(outer, DEFERRED):
                found = outer
        return found

    def frame(self, node: cst.CSTNode):
        return self.frame_in(node, self.function)

    def holds(self, outer: cst.CSTNode, node: cst.CSTNode) -> bool:
        start, end = self.span[outer]
        return start <= self.span[node][0] <= end

    def loops_holding(self, node: cst.CSTNode, scope: cst.CSTNode) -> list[cst.CSTNode]:
        """The loops around ``node`` inside ``scope`` (through comprehensions, which run
        where they stand)."""
        found = []
        current = node
        while current is not scope and current in self.parent:
            current = self.parent[current]
            if isinstance(current, LOOPS):
                found.append(current)
        return found

    def common_loop(self, node: cst.CSTNode, other: cst.CSTNode, scope: cst.CSTNode) -> bool:
        return any(self.holds(loop, other) for loop in self.loops_holding(node, scope))

    def ancestors(self, node: cst.CSTNode) -> set[cst.CSTNode]:
        found = set()
        while node in self.parent:
            node = self.parent[node]
            found.add(node)
        return found

    def runs_first(self, read: cst.CSTNode, site: cst.CSTNode) -> bool:
        """Whenever ``site`` runs, ``read`` ran just before on the way there: it comes first
        in the text, and in the innermost block holding both its statement is a simple one
        (or the header of a compound one) ahead of the site's, or both sit in one simple
        statement with the read not in an arm that may be skipped."""
        if self.span[read][0] >= self.span[site][0]:
            return False
        above_site = self.ancestors(site)
        child, common = read, self.parent[read]
        while common not in above_site:
            child, common = common, self.parent[common]
        if isinstance(common, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            return _unconditional(child, read, self)
        if isinstance(common, (cst.If, cst.While, cst.With)):
            return _in_header(common, read, self)
        if type(common) is cst.IfExp:
            return self.holds(common.test, read)
        if type(common) is cst.BooleanOperation:
            return self.holds(common.left, read)
        return not isinstance(common, (cst.BaseCompoundStatement, cst.BaseSuite))

    def guards(self, read: cst.CSTNode, site: cst.CSTNode):
        """The tests that decide whether ``read`` runs, from it up to the innermost node
        that also holds ``site``: an ``if``'s, ``while``'s or conditional expression's test,
        a ``for``'s iterable, the left of an ``and`` / ``or``; None for a ``try`` body (the
        read may raise and be handled)."""
        above_site = self.ancestors(site)
        child, current = read, self.parent[read]
        while current not in above_site:
            kind = type(current)
            if kind in (cst.If, cst.While, cst.IfExp) and child is not current.test:
                yield current.test
            elif kind is cst.For and child is not current.iter:
                yield current.iter
            elif kind is cst.BooleanOperation and child is current.right:
                yield current.left
            elif kind in (cst.Try, cst.TryStar) and child is current.body:
                yield None
            elif kind is cst.With and child is current.body and _suppresses(current):
                yield None  # ``with contextlib.suppress(AttributeError):`` is a ``try``
            elif kind is cst.MatchCase and child is current.body and current.guard is not None:
                yield current.guard
            elif kind is cst.Match and child is not current.subject:
                yield current.subject  # a case's pattern tests the subject
            child, current = current, self.parent[current]

    def suspends(self, frame: cst.CSTNode) -> bool:
        """A generator or coroutine: its caller runs while it waits."""
        return any(
            type(n) in (cst.Yield, cst.Await)
            for n in self.span
            if self.holds(frame, n) and self.frame(n) is frame
        )

    # -- bindings -------------------------------------------------------------------------
    def _scope_of_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        return next(iter(self.scopes_of(node)))

    def _add(self, target: cst.CSTNode, node: cst.CSTNode, at: int, unbinds=False) -> None:
        scope = self._scope_of_statement(node)
        for name in _target_names(target):
            binding = Binding(node, at, unbinds)
            self.bindings.setdefault((id(scope), name), []).append(binding)
        for chain in target_chains(target):
            attr = chain.attr.value if type(chain) is cst.Attribute else None
            self.stores.append(Store(flat(self.context.code(chain)), attr, Binding(node, at)))
            if type(chain) is cst.Subscript:
                # ``ops[i] = x``, ``ops[:] = new``: any item of the container may change
                container = flat(self.context.code(chain.value))
                self.stores.append(Store(container, None, Binding(node, at)))

    def _bind(self, node: cst.CSTNode) -> None:
        kind = type(node)
        start, end = self.span[node]
        if kind is cst.Assign:
            for target in node.targets:
                self._add(target.target, node, end)
        elif kind in (cst.AnnAssign, cst.AugAssign):
            self._add(node.target, node, end)
        elif kind is cst.For or kind is cst.CompFor:
            self._add(node.target, node.target, self.span[node.target][0])
        elif kind is cst.NamedExpr:
            scope = next(s for s in self.scopes_of(node) if type(s) not in COMPREHENSIONS)
            for name in _target_names(node.target):
                self.bindings.setdefault((id(scope), name), []).append(Binding(node, end))
        elif kind is cst.Del:
            self._add(node.target, node, end, unbinds=True)
        elif kind is cst.WithItem and node.asname is not None:
            self._add(node.asname.name, node, end)
        elif kind in (cst.ExceptHandler, cst.ExceptStarHandler) and node.name is not None:
            # bound on entry, deleted when the clause ends (Python unbinds it there)
            self._add(node.name.name, node.name, self.span[node.name][0])
            self._add(node.name.name, node, end, unbinds=True)
        elif kind in (cst.Import, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname is not None else _leftmost(alias.name)
                self._add(bound, node, end)
        elif kind in (cst.FunctionDef, cst.ClassDef) and node is not self.function:
            self._add(node.name, node, end)
        elif kind is cst.Param:
            owner = self._param_owner(node)
            binding = Binding(node, start)
            self.bindings.setdefault((id(owner), node.name.value), []).append(binding)
        elif kind in (cst.MatchAs, cst.MatchStar) and node.name is not None:
            self._add(node.name, node, start)
        elif kind is cst.MatchMapping and node.rest is not None:
            self._add(node.rest, node, start)
        elif kind in (cst.Global, cst.Nonlocal):
            self.declared.update(item.name.value for item in node.names)
        elif kind is cst.Call and node.args:
            self._add_call_store(node, end)

    def _add_call_store(self, call: cst.Call, end: int) -> None:
        """``setattr(x, "a", v)`` / ``delattr``; ``x.insert(...)`` and other in-place
        container methods."""
        func = call.func
        if type(func) is cst.Name and func.value in ("setattr", "delattr"):
            owner = flat(self.context.code(call.args[0].value))
            name = call.args[1].value if len(call.args) > 1 else None
            attr = name.evaluated_value if type(name) is cst.SimpleString else None
            target = f"{owner}.{attr}" if isinstance(attr, str) else owner
            self.stores.append(
                Store(target, attr if isinstance(attr, str) else "*", Binding(call, end))
            )
        elif type(func) is cst.Attribute and func.attr.value in MUTATING_METHODS:
            target = flat(self.context.code(func.value))
            self.stores.append(Store(target, None, Binding(call, end)))

    def _param_owner(self, param: cst.Param) -> cst.CSTNode:
        current = param
        while not isinstance(current, (cst.FunctionDef, cst.Lambda)):
            current = self.parent[current]
        return current


def _target_names(target: cst.CSTNode) -> list[str]:
    kind = type(target)
    if kind is cst.Name:
        return [target.value]
    if kind in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in _target_names(e.value)]
    if kind is cst.StarredElement:
        return _target_names(target.value)
    return []  # an attribute or a subscript binds no name (see stores)


def target_chains(target: cst.CSTNode) -> list[cst.CSTNode]:
    """The attributes and subscripts a target assigns (``op.flag = False``, ``a, w.x = ...``)."""
    kind = type(target)
    if kind in CHAINS:
        return [target]
    if kind in (cst.Tuple, cst.List):
        return [c for e in target.elements for c in target_chains(e.value)]
    if kind is cst.StarredElement:
        return target_chains(target.value)
    return []


# Fields in the order they run, where libcst lists them otherwise: an ``except`` clause's
# name is bound before its body, a case's guard runs before its body, a comprehension's
# ``for`` before its element, decorators and bases before the body they wrap.
_EXECUTION_ORDER = {
    cst.ExceptHandler: ("type", "name", "body"),
    cst.ExceptStarHandler: ("type", "name", "body"),
    cst.MatchCase: ("pattern", "guard", "body"),
    cst.ListComp: ("for_in", "elt"),
    cst.SetComp: ("for_in", "elt"),
    cst.GeneratorExp: ("for_in", "elt"),
    cst.DictComp: ("for_in", "key", "value"),
    cst.FunctionDef: ("decorators", "name", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "bases", "keywords", "body"),
}


def _in_execution_order(node: cst.CSTNode, found: tuple) -> tuple:
    fields = _EXECUTION_ORDER.get(type(node))
    if fields is None:
        return found
    rank: dict[int, int] = {}
    for i, field in enumerate(fields):
        value = getattr(node, field)
        for item in value if isinstance(value, (list, tuple)) else (value,):
            rank[id(item)] = i
    return tuple(sorted(found, key=lambda child: rank.get(id(child), len(fields))))


def _unconditional(statement: cst.CSTNode, node: cst.CSTNode, index: BindingIndex) -> bool:
    """``node`` runs whenever ``statement`` is reached: a simple statement, a compound
    statement's header, or, through a ``with`` that suppresses nothing, a statement of its
    body that runs whenever the body does."""
    if type(statement) is cst.SimpleStatementLine or _in_header(statement, node, index):
        return True
    if type(statement) is not cst.With or _suppresses(statement):
        return False
    for inner in statement.body.body:
        if index.holds(inner, node):
            return _unconditional(inner, node, index)
    return False


def _suppresses(statement: cst.With) -> bool:
    return any("suppress" in (patterns.callee_name(item.item) or "") for item in statement.items)


def _in_header(statement: cst.CSTNode, node: cst.CSTNode, index: BindingIndex) -> bool:
    """``node`` is in the part of ``statement`` that runs each time it is reached: an
    ``if``'s or ``while``'s test, a ``with``'s items."""
    kind = type(statement)
    if kind is cst.If or kind is cst.While:
        return index.holds(statement.test, node)
    if kind is cst.With:
        return any(index.holds(item, node) for item in statement.items)
    return False


def _leftmost(name: cst.CSTNode) -> cst.Name:
    """``import a.b.c`` binds ``a``."""
    while type(name) is cst.Attribute:
        name = name.value
    return name


def flat(code: str) -> str:
    return "".join(code.split())
