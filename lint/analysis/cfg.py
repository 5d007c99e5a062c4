"""A statement-level control-flow graph of one function (or module / class) body.

libcst's ScopeProvider orders assignments by source position and ignores loops, so a flag
reassigned at the bottom of a loop would look dead at the top. This graph gives the
reaching-definitions pass real edges: branches, loop back edges, ``break``/``continue``,
early ``return``, ``raise`` and exception handlers; a ``return`` / ``break`` / ``continue``
inside a ``try`` runs its ``finally`` body on the way (a copy of that body per kind of jump).

Each small statement (``x = 1``, ``return x``) is one node; compound statements contribute a
node for the expression they evaluate (an ``if``/``while`` test, a ``for`` header that binds
the target, a ``with`` item, an ``except`` clause binding its name, a ``match`` subject).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from . import exit_stacks, match_arms, patterns

TRUE = "true"
FALSE = "false"


@dataclass(eq=False)
class Def:
    """One binding of a local name. ``value`` is the expression whose value the name takes
    (None when unknown: a parameter, an import, an ``except ... as``); ``kind`` says how it
    was bound ("assign", "aug", "for", "with", "walrus", "param", "import", "del", "def",
    "except", "match")."""

    index: int
    name: str
    node: Node
    value: cst.BaseExpression | None
    kind: str
    target: cst.CSTNode | None = None


@dataclass(eq=False)
class Node:
    index: int
    kind: str  # entry, exit, stmt, if, while, for, with, close, except, match, case, def
    owner: cst.CSTNode | None = None  # small statement or compound statement
    test: cst.BaseExpression | None = None  # expression evaluated here (if/while test)
    defs: list[Def] = field(default_factory=list)
    succ: list[tuple[Node, str | None]] = field(default_factory=list)
    raises: bool = False  # ends in ``raise``: leaves without reaching the normal exit
    # Innermost first: (If statement, "body" | "orelse") pairs this node is nested in.
    enclosing_ifs: tuple[tuple[cst.If, str], ...] = ()


@dataclass
class Graph:
    nodes: list[Node]
    entry: Node
    exit: Node
    defs: list[Def]
    node_of: dict[int, Node]  # id(small statement or compound statement) -> node
    # id(statement of a ``finally``) -> its further nodes: the copies of the finally body
    # that ``return`` / ``break`` / ``continue`` in the ``try`` run through on their way out
    # (``node_of`` has the first, the normal way out).
    copies: dict[int, list[Node]] = field(default_factory=dict)
    # id(``with ExitStack() as stack:`` statement) -> the node where its block ends on the
    # normal way out, where the callbacks handed to the stack run (exit_stacks.py).
    closes: dict[int, Node] = field(default_factory=dict)

    def node_for(self, owner: cst.CSTNode) -> Node | None:
        return self.node_of.get(id(owner))

    def nodes_for(self, owner: cst.CSTNode) -> list[Node]:
        """Every node of ``owner``: its node and the copies a ``finally`` made of it."""
        first = self.node_of.get(id(owner))
        return [] if first is None else [first, *self.copies.get(id(owner), ())]


@dataclass
class _Final:
    """A ``try`` with a ``finally`` being built: the jumps out of it met so far, which run
    the finally body on their way (``depth``: how many loops enclose the ``try``)."""

    depth: int
    returns: list[tuple[Node, str | None]] = field(default_factory=list)
    breaks: list[tuple[Node, str | None]] = field(default_factory=list)
    continues: list[tuple[Node, str | None]] = field(default_factory=list)


@dataclass
class _Loop:
    head: Node
    breaks: list[tuple[Node, str | None]] = field(default_factory=list)


Frontier = list[tuple["Node", "str | None"]]


def _assigned_names(target: cst.BaseExpression) -> Iterator[tuple[cst.Name, int | None]]:
    """Names bound by an assignment target, with their position in a flat tuple target."""
    if isinstance(target, cst.Name):
        yield target, None
    elif isinstance(target, (cst.Tuple, cst.List)):
        for i, element in enumerate(target.elements):
            value = element.value
            if isinstance(value, cst.Name) and not isinstance(element, cst.StarredElement):
                yield value, i
            else:
                for name, _ in _assigned_names(value):
                    yield name, None
    elif isinstance(target, cst.StarredElement):
        yield from _assigned_names(target.value)


def _element_value(value: cst.BaseExpression, position: int | None) -> cst.BaseExpression:
    """For ``a, b = x, y`` the expression bound to the name at ``position``; otherwise the
    whole right-hand side (an over-approximation that keeps its dependencies)."""
    if position is not None and isinstance(value, (cst.Tuple, cst.List)):
        elements = value.elements
        if position < len(elements) and not any(
            isinstance(e, cst.StarredElement) for e in elements
        ):
            return elements[position].value
    return value


def walrus_targets(expr: cst.CSTNode) -> Iterator[cst.NamedExpr]:
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: isinstance on libcst's ABC node classes is slow
        if kind is cst.NamedExpr:
            yield node
        if kind is cst.Lambda or kind is cst.FunctionDef or kind is cst.ClassDef:
            continue
        stack.extend(patterns.children(node))


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.defs: list[Def] = []
        self.node_of: dict[int, Node] = {}
        self.loops: list[_Loop] = []
        self.ifs: list[tuple[cst.If, str]] = []
        self.exit = Node(-1, "exit")
        self.handlers: list[list[Node]] = []  # stack of nodes created inside try bodies
        # Stack of the ``return`` nodes met inside a ``try`` that has a ``finally``: they
        # leave through a copy of the finally body, not straight to the exit.
        self.finals: list[_Final] = []
        self.copies: dict[int, list[Node]] = {}
        self.closes: dict[int, Node] = {}

    # -- nodes and edges -----------------------------------------------------------------
    def new(self, kind: str, owner: cst.CSTNode | None = None, test=None) -> Node:
        node = Node(len(self.nodes), kind, owner, test, enclosing_ifs=tuple(reversed(self.ifs)))
        self.nodes.append(node)
        if owner is not None:
            if id(owner) in self.node_of:
                self.copies.setdefault(id(owner), []).append(node)
            else:
                self.node_of[id(owner)] = node
        for region in self.handlers:
            region.append(node)
        return node

    @staticmethod
    def link(frontier: Frontier, node: Node) -> None:
        for pred, label in frontier:
            pred.succ.append((node, label))

    def define(self, node: Node, name: str, value, kind: str, target=None) -> None:
        d = Def(len(self.defs), name, node, value, kind, target)
        self.defs.append(d)
        node.defs.append(d)

    def define_walruses(self, node: Node, expr: cst.CSTNode | None) -> None:
        if expr is None:
            return
        for named in walrus_targets(expr):
            if isinstance(named.target, cst.Name):
                self.define(node, named.target.value, named.value, "walrus", named.target)

    # -- statements ----------------------------------------------------------------------
    def block(self, statements: Sequence[cst.CSTNode], frontier: Frontier) -> Frontier:
        for statement in statements:
            frontier = self.statement(statement, frontier)
        return frontier

    def suite(self, suite: cst.BaseSuite, frontier: Frontier) -> Frontier:
        return self.block(suite.body, frontier)

    def statement(self, stmt: cst.CSTNode, frontier: Frontier) -> Frontier:
        if isinstance(stmt, cst.SimpleStatementLine):
            return self.block(stmt.body, frontier)
        handler = getattr(self, "_" + type(stmt).__name__, None)
        if handler is not None:
            return handler(stmt, frontier)
        return self.small(stmt, frontier)

    def small(self, stmt: cst.CSTNode, frontier: Frontier) -> Frontier:
        node = self.new("stmt", stmt)
        self.link(frontier, node)
        self.define_walruses(node, stmt)
        if isinstance(stmt, cst.Assign):
            for assign_target in stmt.targets:
                for name, position in _assigned_names(assign_target.target):
                    value = _element_value(stmt.value, position)
                    self.define(node, name.value, value, "assign", name)
        elif isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
            for name, _ in _assigned_names(stmt.target):
                self.define(node, name.value, stmt.value, "assign", name)
        elif isinstance(stmt, cst.AugAssign) and isinstance(stmt.target, cst.Name):
            self.define(node, stmt.target.value, stmt.value, "aug", stmt.target)
        elif isinstance(stmt, (cst.Import, cst.ImportFrom)) and not isinstance(
            stmt.names, cst.ImportStar
        ):
            for alias in stmt.names:
                bound = alias.asname.name if alias.asname else alias.name
                while isinstance(bound, cst.Attribute):
                    bound = bound.value
                if isinstance(bound, cst.Name):
                    self.define(node, bound.value, None, "import", bound)
        elif isinstance(stmt, cst.Del):
            for name, _ in _assigned_names(stmt.target):
                self.define(node, name.value, None, "del", name)
        elif isinstance(stmt, cst.Return):
            self.leave([(node, None)])
            return []
        elif isinstance(stmt, cst.Raise):
            node.raises = True
            return []
        elif isinstance(stmt, cst.Continue):
            self.jump([(node, None)], "continues")
            return []
        elif isinstance(stmt, cst.Break):
            self.jump([(node, None)], "breaks")
            return []
        return [(node, None)]

    def leave(self, frontier: Frontier) -> None:
        """Return: through the innermost pending ``finally``, or to the exit."""
        if self.finals:
            self.finals[-1].returns.extend(frontier)
        else:
            self.link(frontier, self.exit)

    def jump(self, frontier: Frontier, kind: str) -> None:
        """``break`` / ``continue`` (``kind``): through a ``finally`` between it and its
        loop, or to the loop."""
        if not self.loops:
            return
        if self.finals and self.finals[-1].depth == len(self.loops):
            getattr(self.finals[-1], kind).extend(frontier)
        elif kind == "continues":
            self.link(frontier, self.loops[-1].head)
        else:
            self.loops[-1].breaks.extend(frontier)

    def _If(self, stmt: cst.If, frontier: Frontier) -> Frontier:
        test = self.new("if", stmt, stmt.test)
        self.link(frontier, test)
        self.define_walruses(test, stmt.test)
        self.ifs.append((stmt, "body"))
        out = self.suite(stmt.body, [(test, TRUE)])
        self.ifs.pop()
        self.ifs.append((stmt, "orelse"))
        if isinstance(stmt.orelse, cst.If):
            out += self._If(stmt.orelse, [(test, FALSE)])
        elif isinstance(stmt.orelse, cst.Else):
            out += self.suite(stmt.orelse.body, [(test, FALSE)])
        else:
            out.append((test, FALSE))
        self.ifs.pop()
        return out

    def _loop_body(self, head: Node, body: cst.BaseSuite, orelse) -> Frontier:
        loop = _Loop(head)
        self.loops.append(loop)
        end = self.suite(body, [(head, TRUE)])
        self.link(end, head)  # back edge: the bottom of the body reaches the top
        self.loops.pop()
        out: Frontier = [(head, FALSE)]
        if orelse is not None:
            out = self.suite(orelse.body, out)
        return out + loop.breaks

    def _While(self, stmt: cst.While, frontier: Frontier) -> Frontier:
        head = self.new("while", stmt, stmt.test)
        self.link(frontier, head)
        self.define_walruses(head, stmt.test)
        return self._loop_body(head, stmt.body, stmt.orelse)

    def _For(self, stmt: cst.For, frontier: Frontier) -> Frontier:
        head = self.new("for", stmt)
        self.link(frontier, head)
        self.define_walruses(head, stmt.iter)
        for name, _ in _assigned_names(stmt.target):
            self.define(head, name.value, stmt.iter, "for", name)
        return self._loop_body(head, stmt.body, stmt.orelse)

    def _With(self, stmt: cst.With, frontier: Frontier) -> Frontier:
        node = self.new("with", stmt)
        self.link(frontier, node)
        for item in stmt.items:
            self.define_walruses(node, item.item)
            if item.asname is not None:
                for name, _ in _assigned_names(item.asname.name):
                    self.define(node, name.value, item.item, "with", name)
        out = self.suite(stmt.body, [(node, None)])
        if out and exit_stacks.stack_names(stmt):
            # A node of its own where the block ends, for the stack's callbacks to run at.
            self.closes[id(stmt)] = close = self.new("close")
            self.link(out, close)
            out = [(close, None)]
        return out

    def _Try(self, stmt, frontier: Frontier) -> Frontier:
        start = self.new("stmt", None)  # the state on entering the try, seen by handlers
        self.link(frontier, start)
        if stmt.finalbody is not None:
            self.finals.append(_Final(len(self.loops)))
        region: list[Node] = [start]
        self.handlers.append(region)
        out = self.suite(stmt.body, [(start, None)])
        self.handlers.pop()
        if stmt.orelse is not None:
            out = self.suite(stmt.orelse.body, out)
        for handler in stmt.handlers:
            entry = self.new("except", handler)
            for node in region:  # any statement of the body may be the one that raised
                node.succ.append((entry, "exc"))
            if handler.name is not None:
                for name, _ in _assigned_names(handler.name.name):
                    self.define(entry, name.value, None, "except", name)
            out += self.suite(handler.body, [(entry, None)])
        if stmt.finalbody is not None:
            final = self.finals.pop()
            out = self.suite(stmt.finalbody.body, out)
            # A ``return`` / ``break`` / ``continue`` in the try, its else or a handler runs
            # the finally body before it jumps: a copy of it for each kind of jump, so that
            # the paths stay apart (a return does not go on after the try, the normal way
            # out does not return).
            if final.returns:
                self.leave(self.suite(stmt.finalbody.body, final.returns))
            for kind in ("breaks", "continues"):
                jumps = getattr(final, kind)
                if jumps:
                    self.jump(self.suite(stmt.finalbody.body, jumps), kind)
        return out

    _TryStar = _Try

    def _Match(self, stmt, frontier: Frontier) -> Frontier:
        subject = self.new("match", stmt, stmt.subject)
        self.link(frontier, subject)
        # No arm matching is a way on, unless some arm surely runs (``case _:``).
        out: Frontier = [] if match_arms.exhaustive(stmt) else [(subject, FALSE)]
        for case in stmt.cases:
            node = self.new("case", case)
            self.link([(subject, TRUE)], node)
            for captured in match_arms.pattern_names(case.pattern):
                self.define(node, captured.value, None, "match", captured)
            out += self.suite(case.body, [(node, None)])
        return out

    def _nested(self, stmt, frontier: Frontier) -> Frontier:
        node = self.new("def", stmt)
        self.link(frontier, node)
        self.define(node, stmt.name.value, None, "def", stmt.name)
        return [(node, None)]

    _FunctionDef = _nested
    _ClassDef = _nested


def _parameters(params: cst.Parameters) -> Iterator[cst.Name]:
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        yield param.name
    for param in (params.star_arg, params.star_kwarg):
        if isinstance(param, cst.Param):
            yield param.name


def build_graph(body: Sequence[cst.CSTNode], params: cst.Parameters | None = None) -> Graph:
    """The graph of ``body``; parameters are bound at the entry node."""
    builder = _Builder()
    entry = builder.new("entry")
    if params is not None:
        for name in _parameters(params):
            builder.define(entry, name.value, None, "param", name)
    out = builder.block(body, [(entry, None)])
    exit_node = builder.exit
    exit_node.index = len(builder.nodes)
    builder.nodes.append(exit_node)
    builder.link(out, exit_node)
    graph = Graph(builder.nodes, entry, exit_node, builder.defs, builder.node_of, builder.copies)
    graph.closes = builder.closes
    return graph
