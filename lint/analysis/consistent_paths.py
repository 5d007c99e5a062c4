"""Paths through a function's graph that take every ``if`` on a test already decided the way
it was decided (``decided_tests``' rule: tests that read the same value twice, until a name
of them is rebound).

Code that writes main_grad under ``if fuse:`` and computes a real weight gradient under a
later ``if wgrad and not fuse:`` never does both on one run, though the graph has a path
through both; a question about what runs *together* has to follow only paths a run can take.

Only tests that some other ``if`` of the function asks again (whole, or as an operand of an
``and`` / ``or``) are remembered: the others cannot decide anything later, and remembering
them would multiply the states by two per test (a Megatron backward asks a dozen). The
search gives up after ``STATE_LIMIT`` states and answers no run: the rules that ask report
only where a run is found.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from .cfg import FALSE, TRUE, Graph, Node
from .decided_tests import Known, plain_test, still_known

STATE_LIMIT = 20_000


def passes_in_order(
    graph: Graph,
    waypoints: Sequence[Node],
    blocked: Sequence[frozenset[int]],
    on_limit: bool = False,
) -> bool:
    """Some run from the entry passes ``waypoints`` in order; after passing waypoint ``i``
    (and before the next) it enters no node of ``blocked[i]``. ``on_limit`` is the answer
    when the search gives up: False for a rule that reports where a run is found, True for
    one that reports where none is."""
    goal = len(waypoints)
    start = (graph.entry.index, frozenset(), _passed(graph.entry, waypoints, 0))
    if start[2] == goal:
        return True
    aliases, repeated = _graph_facts(graph)
    by_index = graph.nodes
    seen = {start}
    stack = [start]
    while stack:
        index, facts, stage = stack.pop()
        node = by_index[index]
        decided = _decide(node, facts, aliases)
        for succ, label in node.succ:
            if decided is not None and label in (TRUE, FALSE) and label != decided:
                continue  # a test decided earlier on this run goes the same way
            if stage > 0 and succ.index in blocked[stage - 1]:
                continue
            learned = _learn(node, label, facts, repeated, aliases)
            after = still_known(succ, learned)
            reached = _passed(succ, waypoints, stage)
            if reached == goal:
                return True
            state = (succ.index, after, reached)
            if state not in seen:
                if len(seen) >= STATE_LIMIT:
                    return on_limit
                seen.add(state)
                stack.append(state)
    return False


def _passed(node: Node, waypoints: Sequence[Node], stage: int) -> int:
    while stage < len(waypoints) and waypoints[stage] is node:
        stage += 1
    return stage


# id(graph) -> (graph, its aliases, its repeated tests): computed once per graph, however
# many questions a rule asks of it (the graph is kept to tell a reused id apart).
_FACTS: dict[int, tuple[Graph, dict[str, cst.BaseExpression], frozenset[str]]] = {}


def _graph_facts(graph: Graph) -> tuple[dict[str, cst.BaseExpression], frozenset[str]]:
    cached = _FACTS.get(id(graph))
    if cached is None or cached[0] is not graph:
        aliases = _aliases(graph)
        cached = (graph, aliases, _repeated_tests(graph, aliases))
        if len(_FACTS) > 256:
            _FACTS.clear()
        _FACTS[id(graph)] = cached
    return cached[1], cached[2]


def _aliases(graph: Graph) -> dict[str, cst.BaseExpression]:
    """Locals bound once in the function, to a test that reads the same twice
    (``fuse = ctx.fuse_wgrad_accumulation``, ``need_wgrad = not ctx.fuse``): a test of the
    local is a test of that expression."""
    counts: dict[str, int] = {}
    for d in graph.defs:
        counts[d.name] = counts.get(d.name, 0) + 1
    return {
        d.name: d.value
        for d in graph.defs
        if counts[d.name] == 1
        and d.kind == "assign"
        and d.value is not None
        and plain_test(d.value)[0] is not None
        and type(d.value) is not cst.Name
    }


def _repeated_tests(graph: Graph, aliases) -> frozenset[str]:
    """The plain codes (``not`` taken off) that two or more ``if`` tests of the graph ask,
    whole or as an operand of an ``and`` / ``or``."""
    counts: dict[str, int] = {}
    for node in graph.nodes:
        if node.kind == "if" and node.test is not None:
            for code in {plain_test(t)[0] for t in _all_operands(node.test, aliases)} - {None}:
                counts[code] = counts.get(code, 0) + 1
    return frozenset(code for code, count in counts.items() if count > 1)


def _normal(test, value: bool = True, aliases=None) -> tuple[cst.BaseExpression, bool]:
    """The test without ``not``, a comparison with a literal ``True`` / ``False`` (``is``,
    ``==``, ``is not``, ``!=``) and a walrus (``fuse := ctx.flag`` tests ``fuse``), with the
    value it has when ``test`` has ``value``."""
    aliases = dict(aliases or {})  # each alias is followed once: a chain ends
    while True:
        kind = type(test)
        if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, value = test.expression, not value
        elif kind is cst.NamedExpr:
            test = test.target
        elif kind is cst.Name and aliases and test.value in aliases:
            test = aliases.pop(test.value)  # popped: an alias chain ends
        elif kind is cst.Comparison and len(test.comparisons) == 1:
            target = test.comparisons[0]
            literal = target.comparator
            if type(literal) is not cst.Name or literal.value not in ("True", "False"):
                return test, value
            same = type(target.operator) in (cst.Is, cst.Equal)
            if not same and type(target.operator) not in (cst.IsNot, cst.NotEqual):
                return test, value
            value = value == ((literal.value == "True") == same)
            test = test.left
        else:
            return test, value


def _all_operands(test, aliases) -> Iterator[cst.BaseExpression]:
    inner, _ = _normal(test, True, aliases)
    yield inner
    if type(inner) is cst.BooleanOperation:
        yield from _all_operands(inner.left, aliases)
        yield from _all_operands(inner.right, aliases)


def _decide(node: Node, facts: Known, aliases) -> str | None:
    """The edge a known test takes: the test itself known, or an ``and`` with an operand
    known false, an ``or`` with one known true."""
    if not facts or node.kind != "if" or node.test is None:
        return None
    value = _value(node.test, dict(facts), aliases)
    if value is None:
        return None
    return TRUE if value else FALSE


def _value(test, known: dict[str, bool], aliases) -> bool | None:
    inner, held = _normal(test, True, aliases)
    flip = not held
    code, negated = plain_test(inner)
    if code is not None and code in known:
        return (known[code] != negated) != flip
    if type(inner) is not cst.BooleanOperation:
        return None
    left, right = _value(inner.left, known, aliases), _value(inner.right, known, aliases)
    if type(inner.operator) is cst.And:
        result = False if False in (left, right) else (True if left and right else None)
    else:
        result = (
            True if True in (left, right) else (False if left is False and right is False else None)
        )
    return None if result is None else result != flip


def _learn(node: Node, label: str | None, facts: Known, repeated: frozenset[str], aliases) -> Known:
    """``facts`` and what leaving an ``if`` by ``label`` says of its test (only of tests
    another ``if`` asks again)."""
    if node.kind != "if" or node.test is None or label not in (TRUE, FALSE):
        return facts
    learned = set()
    for test, value in _decided_operands(node.test, label == TRUE, aliases):
        code, negated = plain_test(test)
        if code is not None and code in repeated:
            learned.add((code, value != negated))
    return facts | learned if learned else facts


def _decided_operands(test, value: bool, aliases):
    """(expression, its value) for the test and the operands its outcome decides: each of
    an ``and`` that held, each of an ``or`` that did not (through ``not``)."""
    inner, value = _normal(test, value, aliases)
    yield inner, value
    operator = cst.And if value else cst.Or
    if type(inner) is cst.BooleanOperation and type(inner.operator) is operator:
        yield from _decided_operands(inner.left, value, aliases)
        yield from _decided_operands(inner.right, value, aliases)
