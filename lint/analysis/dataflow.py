"""Reaching definitions and control dependence over a ``cfg.Graph``, and the two value
analyses the rules ask about:

* ``Taint``: does a local's value at a point depend on a source (``overwrite_main_grad``,
  ``zero_out_wgrad``)? Either some reaching definition computes it from the source, or
  several definitions reach and one of them only runs under a test on the source (the
  ``if overwrite: flag = False`` shape).
* ``Aliases``: does a local hold a parameter's main_grad storage (directly, through views,
  lists of views, or wrappers built around it)?

Definitions are numbered; sets of them are Python ints used as bitsets.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import libcst as cst

from . import patterns
from .cfg import Def, Graph, Node
from .paths import dominator_sets


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class ReachingDefinitions:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.by_name: dict[str, int] = {}
        for d in graph.defs:
            self.by_name[d.name] = self.by_name.get(d.name, 0) | (1 << d.index)
        self.reach_in = self._solve()

    def _solve(self) -> list[int]:
        nodes = self.graph.nodes
        gen = [0] * len(nodes)
        kill = [0] * len(nodes)
        preds: list[list[int]] = [[] for _ in nodes]
        for node in nodes:
            for d in node.defs:
                # A later definition of the same name in one node replaces an earlier one.
                gen[node.index] = (gen[node.index] & ~self.by_name[d.name]) | (1 << d.index)
                kill[node.index] |= self.by_name[d.name]
            for succ, _ in node.succ:
                preds[succ.index].append(node.index)
        reach_in = [0] * len(nodes)
        reach_out = [0] * len(nodes)
        pending = deque(range(len(nodes)))
        queued = set(pending)
        while pending:
            i = pending.popleft()
            queued.discard(i)
            incoming = 0
            for p in preds[i]:
                incoming |= reach_out[p]
            reach_in[i] = incoming
            out = gen[i] | (incoming & ~kill[i])
            if out != reach_out[i]:
                reach_out[i] = out
                for succ, _ in nodes[i].succ:
                    if succ.index not in queued:
                        queued.add(succ.index)
                        pending.append(succ.index)
        return reach_in

    def defines(self, name: str) -> bool:
        return name in self.by_name

    def reaching(self, name: str, node: Node) -> list[Def]:
        mask = self.reach_in[node.index] & self.by_name.get(name, 0)
        return [self.graph.defs[i] for i in _bits(mask)]


class ControlDependence:
    """Which branches decide whether a node runs. Paths that end in ``raise`` do not count:
    a guard that raises does not make the code after it conditional."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.parents: list[list[tuple[Node, str | None]]] = [[] for _ in graph.nodes]
        self._closure: dict[int, list[Node]] = {}
        self._solve()

    def _solve(self) -> None:
        nodes = self.graph.nodes
        n = len(nodes)
        preds: list[list[int]] = [[] for _ in nodes]
        for node in nodes:
            for succ, _ in node.succ:
                preds[succ.index].append(node.index)
        exit_index = self.graph.exit.index
        live = {exit_index}
        stack = [exit_index]
        while stack:
            for p in preds[stack.pop()]:
                if p not in live:
                    live.add(p)
                    stack.append(p)
        live_succ = [[s.index for s, _ in node.succ if s.index in live] for node in nodes]
        pdom = dominator_sets(n, exit_index, sorted(live, reverse=True), live_succ)
        ipdom: dict[int, int] = {}
        for i in live:
            strict = pdom[i] & ~(1 << i)
            for c in _bits(strict):
                if pdom[c] == strict:
                    ipdom[i] = c
                    break
        for a in live:
            for succ, label in nodes[a].succ:
                b = succ.index
                if b not in live or (pdom[a] >> b) & 1:
                    continue
                runner: int | None = b
                stop = ipdom.get(a)
                while runner is not None and runner != stop:
                    self.parents[runner].append((nodes[a], label))
                    runner = ipdom.get(runner)

    def ancestors(self, node: Node) -> list[Node]:
        """Every branch node ``node`` is (transitively) control dependent on."""
        cached = self._closure.get(node.index)
        if cached is not None:
            return cached
        seen: dict[int, Node] = {}
        stack = [node]
        while stack:
            for parent, _ in self.parents[stack.pop().index]:
                if parent.index not in seen:
                    seen[parent.index] = parent
                    stack.append(parent)
        result = list(seen.values())
        self._closure[node.index] = result
        return result


class _DefFacts:
    """Per-definition inputs of a fixpoint, computed once: which names it reads (plainly
    and by key) and whether it names the source itself."""

    def __init__(self, expr: cst.CSTNode | None, is_source: Callable[[cst.CSTNode], bool]):
        self.entries: dict[str, _DefFacts] | None = None
        if expr is None:
            self.direct = False
            self.names: list[str] = []
            self.keyed: list[tuple[str, str]] = []
            return
        self.direct = any(is_source(sub) for sub in patterns.walk(expr))
        plain, keyed = patterns.keyed_reads(expr)
        self.names = [n.value for n in plain]
        self.keyed = [(n.value, key) for n, key in keyed]
        entries = patterns.dict_entries(expr)
        if entries is not None:
            self.entries = {key: _DefFacts(value, is_source) for key, value in entries.items()}


class Taint:
    def __init__(
        self,
        graph: Graph,
        reaching: ReachingDefinitions,
        control: ControlDependence,
        is_source: Callable[[cst.CSTNode], bool],
        outer: Taint | None = None,
        tainted_params: frozenset[str] = frozenset(),
    ) -> None:
        self.graph = graph
        self.reaching = reaching
        self.control = control
        self.is_source = is_source
        self.outer = outer
        # The definition computes from the source; parameters that callers pass a value
        # computed from the source start tainted.
        self.value = [d.kind == "param" and d.name in tainted_params for d in graph.defs]
        self.guarded = [False] * len(graph.defs)  # it runs only under a test on the source
        self._def_facts = [_DefFacts(d.value, is_source) for d in graph.defs]
        self._test_facts = {
            node.index: _DefFacts(node.test, is_source)
            for node in graph.nodes
            if node.test is not None and node.kind in ("if", "while", "match")
        }
        self._solve()

    def _solve(self) -> None:
        changed = True
        while changed:
            changed = False
            for d in self.graph.defs:
                if not self.value[d.index] and self._def_tainted(d):
                    self.value[d.index] = True
                    changed = True
                if not self.guarded[d.index] and any(
                    self.branch(b) for b in self.control.ancestors(d.node)
                ):
                    self.guarded[d.index] = True
                    changed = True

    def _def_tainted(self, d: Def) -> bool:
        facts = self._def_facts[d.index]
        if self._facts_tainted(facts, d.node):
            return True
        return d.kind == "aug" and self.name(d.name, d.node)

    def _facts_tainted(self, facts: _DefFacts, node: Node) -> bool:
        return (
            facts.direct
            or any(self.name(n, node) for n in facts.names)
            or any(self.key(n, k, node) for n, k in facts.keyed)
        )

    def branch(self, branch: Node) -> bool:
        """Whether the test evaluated at ``branch`` depends on the source."""
        facts = self._test_facts.get(branch.index)
        if facts is None:
            return False
        return self._facts_tainted(facts, branch)

    def key(self, name: str, key: str, node: Node) -> bool:
        """Whether ``name[key]`` where ``node`` runs depends on the source: for a dict
        literal, only its ``key`` entry counts."""
        defs = self.reaching.reaching(name, node)
        if not defs:
            return self._outer(name)
        for d in defs:
            entries = self._def_facts[d.index].entries
            if entries is None:
                if self.value[d.index]:
                    return True
            elif key in entries and self._facts_tainted(entries[key], d.node):
                return True
        return len(defs) >= 2 and any(self.guarded[d.index] for d in defs)

    def name(self, name: str, node: Node) -> bool:
        """Whether ``name``'s value where ``node`` runs depends on the source."""
        defs = self.reaching.reaching(name, node)
        if not defs:
            return self._outer(name)
        if any(self.value[d.index] for d in defs):
            return True
        return len(defs) >= 2 and any(self.guarded[d.index] for d in defs)

    def _outer(self, name: str) -> bool:
        if self.reaching.defines(name) or self.outer is None:
            return False
        outer = self.outer
        return any(
            outer.value[d.index] or outer.guarded[d.index]
            for d in outer.graph.defs
            if d.name == name
        )

    def expr(self, expr: cst.CSTNode, node: Node) -> bool:
        if any(self.is_source(sub) for sub in patterns.walk(expr)):
            return True
        return bool(self.tainted_names(expr, node))

    def tainted_names(self, expr: cst.CSTNode, node: Node) -> list[cst.Name]:
        plain, keyed = patterns.keyed_reads(expr)
        found = [n for n in plain if self.name(n.value, node)]
        found += [n for n, key in keyed if self.key(n.value, key, node)]
        return found

    def direct(self, expr: cst.CSTNode) -> bool:
        return any(self.is_source(sub) for sub in patterns.walk(expr))

    def origin(self, name: str, node: Node) -> Def | None:
        """A reaching definition that makes ``name`` depend on the source (for messages)."""
        defs = self.reaching.reaching(name, node)
        for d in defs:
            if self.value[d.index]:
                return d
        for d in defs:
            if self.guarded[d.index]:
                return d
        return None


class Aliases:
    """Which locals hold main_grad storage."""

    def __init__(self, graph: Graph, reaching: ReachingDefinitions, outer: Aliases | None):
        self.graph = graph
        self.reaching = reaching
        self.outer = outer
        self.alias = [False] * len(graph.defs)
        changed = True
        while changed:
            changed = False
            for d in graph.defs:
                if not self.alias[d.index] and d.value is not None and self.expr(d.value, d.node):
                    self.alias[d.index] = True
                    changed = True

    def name(self, name: str, node: Node) -> bool:
        defs = self.reaching.reaching(name, node)
        if defs:
            return any(self.alias[d.index] for d in defs)
        if self.reaching.defines(name) or self.outer is None:
            return False
        return any(self.outer.alias[d.index] for d in self.outer.graph.defs if d.name == name)

    def surely(self, name: str, node: Node) -> bool:
        """Every definition of ``name`` reaching ``node`` holds main_grad storage."""
        defs = self.reaching.reaching(name, node)
        return bool(defs) and all(self.alias[d.index] for d in defs)

    def surely_when_used(self, name: str, node: Node) -> bool:
        """Every definition of ``name`` reaching ``node`` holds main_grad storage or is None
        (``main_grad = None`` / ``if fuse: main_grad = w.main_grad``): a method called on it
        there runs only on main_grad, since on None it raises."""
        defs = self.reaching.reaching(name, node)
        holding = [d for d in defs if self.alias[d.index]]
        return bool(holding) and all(
            self.alias[d.index] or (d.value is not None and patterns.is_none_like(d.value))
            for d in defs
        )

    def expr(self, expr: cst.CSTNode, node: Node) -> bool:
        """The expression's value is, contains or wraps main_grad storage."""
        if patterns.is_main_grad_direct(expr):
            return True
        if isinstance(expr, cst.Name):
            return self.name(expr.value, node)
        if isinstance(expr, cst.Subscript):
            return self.expr(expr.value, node)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in patterns.VIEW_ATTRS and self.expr(expr.value, node)
        if isinstance(expr, cst.Call):
            return self._call(expr, node)
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return any(self.expr(e.value, node) for e in expr.elements)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.expr(expr.elt, node)
        if isinstance(expr, cst.IfExp):
            return self.expr(expr.body, node) or self.expr(expr.orelse, node)
        if isinstance(expr, cst.BooleanOperation):
            return self.expr(expr.left, node) or self.expr(expr.right, node)
        if isinstance(expr, (cst.NamedExpr, cst.StarredElement)):
            return self.expr(expr.value, node)
        return False

    def _call(self, call: cst.Call, node: Node) -> bool:
        name = patterns.callee_name(call)
        func = call.func
        if isinstance(func, cst.Attribute) and self.expr(func.value, node):
            # A method of main_grad itself: views and in-place ops (which return self) alias.
            return name in patterns.VIEW_METHODS or (name or "").endswith("_")
        if name in patterns.NON_ALIASING_CALLS or name in patterns.ALLOCATORS:
            return False
        # A wrapper built around the buffer (a grouped tensor made from it, a list of it).
        if any(self.expr(arg.value, node) for arg in call.args if arg.star != "**"):
            return True
        # ``gemm(x, dy, **kwargs)`` with ``kwargs = {"out": w.main_grad, ...}`` bound once:
        # the GEMM returns its ``out``.
        for arg in call.args:
            if arg.star == "**" and isinstance(arg.value, cst.Name):
                defs = self.reaching.reaching(arg.value.value, node)
                entries = patterns.dict_entries(defs[0].value) if len(defs) == 1 else None
                if entries and "out" in entries and self.expr(entries["out"], defs[0].node):
                    return True
        return False
