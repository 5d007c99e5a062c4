"""Ways out of a function from a node inside an ``if`` arm, taking later ``if`` statements
on the same test the way that arm decided them (GMLP042).

An arm of ``if fused:`` runs with ``fused`` known; code that fires the hook for the other
mode after the ``if`` (``if not fused: for p in params: p._grad_accum_hook()``) fires it on
every way out of that arm, though the graph alone has a way around it. Only tests that read
the same value twice are carried: names, attributes, subscripts, constants and operators
over them (no call, which may answer differently the second time), dropped once a statement
rebinds a name of the test or assigns to one of its attributes or subscripts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

from . import patterns
from .cfg import FALSE, TRUE, Graph, Node

# Expressions whose value may change between two evaluations with nothing rebound.
_UNSTABLE = (cst.Call, cst.Await, cst.NamedExpr, cst.Yield, cst.Lambda, cst.BaseComp)
_ASSIGNS = (cst.Assign, cst.AugAssign, cst.AnnAssign)

Known = frozenset  # of (test's code without ``not``, its value)


def known_from(decided: Iterable[tuple[cst.BaseExpression, bool]]) -> Known:
    """What an arm knows from the tests it passed: (test, the value that led into it)."""
    found = set()
    for test, value in decided:
        code, negated = plain_test(test)
        if code is not None:
            found.add((code, value != negated))
    return frozenset(found)


def rules_out(enclosing_ifs, test: cst.BaseExpression, value: bool) -> bool:
    """The ``if``s around a node (``Node.enclosing_ifs``) decide ``test`` against ``value``:
    code under ``if fuse:`` never sees ``fuse`` false, so it never takes the arm of ``dummy
    if fuse else g`` that hands on ``g``."""
    code, negated = plain_test(test)
    return code is not None and (code, value == negated) in known_under(enclosing_ifs)


def known_under(enclosing_ifs) -> Known:
    """What code under the ``if``s around a node (``Node.enclosing_ifs``) knows."""
    return known_from((stmt.test, side == "body") for stmt, side in enclosing_ifs)


def exits_avoiding(graph: Graph, start: Node, blocked: Sequence[Node], known: Known) -> bool:
    """Some way out of the function is reached from ``start`` passing no node of
    ``blocked``, following only the edge an ``if`` on a known test takes."""
    stop = {node.index for node in blocked}
    if start.index in stop:
        return False
    exit_index = graph.exit.index
    seen = {(start.index, known)}
    stack = [(start, known)]
    while stack:
        node, facts = stack.pop()
        decided = _decide(node, facts)
        for succ, label in node.succ:
            if decided is not None and label in (TRUE, FALSE) and label != decided:
                continue  # the arm already decided this test the other way
            if succ.index == exit_index:
                return True
            if succ.index in stop:
                continue
            after = still_known(succ, facts)
            if (succ.index, after) not in seen:
                seen.add((succ.index, after))
                stack.append((succ, after))
    return False


def _decide(node: Node, facts: Known) -> str | None:
    if not facts or node.kind != "if" or node.test is None:
        return None
    code, negated = plain_test(node.test)
    for known_code, value in facts:
        if known_code == code:
            return TRUE if value != negated else FALSE
    return None


def still_known(node: Node, facts: Known) -> Known:
    """``facts`` less those a binding or an assignment at ``node`` may change."""
    if not facts:
        return facts
    bound = {d.name for d in node.defs}
    targets = set()
    if type(node.owner) in _ASSIGNS:
        targets = {text_of(t) for t in patterns.assignment_targets(node.owner)}
    if not bound and not targets:
        return facts
    return frozenset(
        (code, value)
        for code, value in facts
        if not any(_mentions(code, name) for name in bound | targets)
    )


def _mentions(code: str, part: str) -> bool:
    """``part`` (a name or an attribute chain) occurs in ``code`` as a whole word."""
    start = code.find(part)
    while start >= 0:
        end = start + len(part)
        before = code[start - 1] if start else " "
        after = code[end] if end < len(code) else " "
        if not (before.isalnum() or before in "_.") and not (after.isalnum() or after == "_"):
            return True
        start = code.find(part, start + 1)
    return False


# id(test) -> (test, plain_test's answer): path searches ask of the same tests at every
# state (thousands of times in one Megatron backward), and rendering a test's code is the
# cost. The node is kept beside its answer so that a reused id is told apart; the table is
# emptied when it grows past a bound (the nodes of earlier files are not asked again).
_PLAIN: dict[int, tuple[cst.CSTNode, tuple[str | None, bool]]] = {}
_PLAIN_BOUND = 50_000


def plain_test(test: cst.BaseExpression) -> tuple[str | None, bool]:
    """The test's code with its ``not`` taken off, and whether there was an odd number of
    them; None for a test that may not read the same twice."""
    kept = _PLAIN.get(id(test))
    if kept is not None and kept[0] is test:
        return kept[1]
    answer = _plain_test(test)
    if len(_PLAIN) >= _PLAIN_BOUND:
        _PLAIN.clear()
    _PLAIN[id(test)] = (test, answer)
    return answer


def _plain_test(test: cst.BaseExpression) -> tuple[str | None, bool]:
    negated = False
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        negated = not negated
        test = test.expression
    if any(isinstance(sub, _UNSTABLE) for sub in patterns.walk(test)):
        return None, negated
    return text_of(test), negated


def text_of(expr: cst.CSTNode) -> str:
    """An expression's source text without its outer parentheses."""
    if hasattr(expr, "lpar"):
        expr = expr.with_changes(lpar=(), rpar=())
    return cst.Module(body=[]).code_for_node(expr)
