"""What was done to a parameter before its grad-accumulation hook is fired by hand
(``hooks.firings``): the *bookkeeping* for ``p`` is a statement that assigns ``p.grad`` or
``p.grad_added_to_main_grad`` (directly or by ``setattr``), a test
``hasattr(p, "grad_added_to_main_grad")``, a call that is handed ``p`` itself (a helper
may do it; a helper of the file whose body keeps no books of it, such as one that only
adds into ``p.main_grad``, does not), or a ``backward_dw`` call; for a hook fired for each
element of a sequence, an earlier loop over the same sequence that keeps each element's
books. GMLP017 asks whether a path reaches a firing around all of them
(``hooks.unbooked``)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import (
    file_functions,
    helper_effects,
    hook_owners,
    hook_spellings,
    iteration,
    paths,
    patterns,
)
from .cfg import Node
from .hooks import Firing, code_of
from .module import Unit

# Calls that are handed a parameter only to look at it, or to look up what a container
# keeps under it (``self._store.pop(w)``: the store's entry, nothing done to ``w``).
INSPECTING_CALLS = frozenset(
    {"getattr", "hasattr", "isinstance", "id", "len", "print", "type", "str", "repr", "iter"}
    | {"get", "pop", "index", "count"}
)
BOOKKEEPING_ATTRS = ("grad", patterns.GRAD_ADDED)
PROTOCOL_CALLS = frozenset({"backward_dw"})


def bookkeeping_nodes(unit: Unit, subject: str, firing: Firing, lists: bool = True) -> list[Node]:
    """The graph nodes that do (or may do, through a helper) the bookkeeping for
    ``subject`` before its hook is fired. A firing for each element of a booked list
    (``hook_spellings.booked_list``; not asked again while checking what a list was
    given: ``lists``) has its own node among them: its books were kept for every element."""
    loops = unit.context.shared(_loops_of_units)[id(unit)]
    over = firing.over  # fired for every element: books kept for the whole sequence
    iterables = {over} if over else set(_iterables_of(loops, subject, firing.call))
    found = [
        node
        for root, node in unit.expression_roots()
        if node is not firing.node
        and (
            hook_spellings.keeps_sequence_books(root, over, PROTOCOL_CALLS)
            if over
            else _keeps_books(root, subject, unit.context.shared(BookkeepingHelpers))
        )
    ]
    if lists and any(
        hook_spellings.booked_list(unit, code, firing.node, _books_kept(unit)) for code in iterables
    ):
        found.append(firing.node)
    return found + _bookkeeping_loops(unit, loops, firing, iterables)


def _books_kept(unit: Unit):
    """Whether the books of a name are kept on every path to a node (an ``append`` of it)."""

    def kept(name: str, node: Node) -> bool:
        pseudo = Firing(name, getattr(node.owner, "value", None), node)
        blocked = bookkeeping_nodes(unit, name, pseudo, lists=False)
        return not paths.reachable_avoiding(unit.graph, node, (n.index for n in blocked))

    return kept


def _bookkeeping_loops(
    unit: Unit, loops: list[_Loop], firing: Firing, iterables: set[str]
) -> list[Node]:
    """The heads of earlier loops ``for p in X:`` whose body keeps the books of each ``p``
    unconditionally, when the hook is fired for each ``p`` of the same ``X`` (in a loop, a
    comprehension or a ``map``): the two walk the same parameters, so an empty first loop
    means an empty second one."""
    if not iterables:
        return []
    found = []
    helpers = unit.context.shared(BookkeepingHelpers)
    for loop in loops:
        stmt = loop.node
        if type(stmt) is not cst.For or id(firing.call) in loop.calls:
            continue
        for name, code in loop.walks:
            if code in iterables and any(
                _keeps_books(small, name, helpers) for small in _small_statements(stmt.body)
            ):
                node = unit.node_for(stmt)
                if node is not None:
                    found.append(node)
    return found


@dataclass(frozen=True)
class _Loop:
    node: cst.CSTNode  # a ``for`` statement or a comprehension
    calls: frozenset[int]  # the ids of the calls made in its body (a comprehension: in it)
    walks: tuple[tuple[str, str], ...]  # (name, code of the sequence its elements come from)


def _loops_of_units(context) -> dict[int, list[_Loop]]:
    """Each unit's loops and comprehensions (by the unit's id), found and read once per
    file: a hook fired in each arm of a long ``elif`` chain asked for them per firing."""
    found: dict[int, list[_Loop]] = {}
    for unit in context.units:
        loops = []
        for stmt in unit.body:  # each top-level statement walked whole: every node once
            for sub in patterns.walk(stmt):
                if type(sub) is not cst.For and not isinstance(sub, cst.BaseComp):
                    continue
                loop = sub if type(sub) is cst.For else sub.for_in
                inner = sub.body if type(sub) is cst.For else sub
                calls = frozenset(id(n) for n in patterns.walk(inner) if type(n) is cst.Call)
                walks = tuple(
                    (name.value, code_of(sequence))
                    for name, sequence in iteration.element_sequences(loop)
                )
                loops.append(_Loop(sub, calls, walks))
        found[id(unit)] = loops
    return found


def _iterables_of(loops: list[_Loop], subject: str, call: cst.Call) -> list[str]:
    """What ``subject`` runs over where ``call`` is made, as code: ``X`` of an enclosing
    ``for subject in X`` loop or comprehension (also ``enumerate(X)``, ``zip(..., X)``)."""
    return [code for loop in loops if id(call) in loop.calls for code in _walks(loop, subject)]


def _walks(loop: _Loop, subject: str) -> set[str]:
    """The code of the sequences whose elements ``loop`` binds to ``subject``."""
    return {code for name, code in loop.walks if name == subject}


def _small_statements(suite: cst.BaseSuite) -> list[cst.CSTNode]:
    """The statements a suite runs on every pass (not those under a nested ``if``)."""
    return [
        small for line in suite.body if type(line) is cst.SimpleStatementLine for small in line.body
    ]


class BookkeepingHelpers(helper_effects.HelperEffects):
    """Functions of the file that keep the books of a parameter they are handed (as
    ``_keeps_books`` reads a statement; a call in them handed it on counts, as anywhere)."""

    def _own(self, function: cst.FunctionDef, params: list[str]) -> set[str]:
        statements = [
            stmt
            for stmt in file_functions.own_nodes(function.body.body)
            if isinstance(stmt, cst.BaseSmallStatement)
        ]
        return {p for p in params if any(_keeps_books(stmt, p) for stmt in statements)}

    def keeps_none(self, call: cst.Call, subject: str) -> bool:
        """``call`` runs a function of the file, handed ``subject``, whose body keeps no
        books of it (``_accumulate(p)`` that only adds into ``p.main_grad``)."""
        function = file_functions.callee(call, self.functions, self.classes)
        if function is None:
            return False
        kept = self.affected_parameters(function)
        handed = [
            name
            for name, arg in file_functions.bound_arguments(call, function)
            if _is_name(arg, subject)
        ]
        return bool(handed) and not kept.intersection(handed)


def _keeps_books(
    root: cst.CSTNode, subject: str, helpers: BookkeepingHelpers | None = None
) -> bool:
    if isinstance(root, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        for target in patterns.assignment_targets(root):
            if _is_attr_of(target, subject, BOOKKEEPING_ATTRS):
                return True
    for sub in patterns.walk(root):
        if type(sub) is not cst.Call:
            continue
        name = patterns.callee_name(sub)
        if name in PROTOCOL_CALLS:
            return True
        if name in ("setattr", "hasattr"):
            # setattr(p, "grad", ...); and the test of ``if hasattr(p, "grad_added_..."):``,
            # whose other way out is a parameter without Megatron's bookkeeping at all.
            args = patterns.positional_args(sub)
            if len(args) >= 2 and _is_name(args[0].value, subject):
                word = patterns.string_value(args[1].value)
                wanted = BOOKKEEPING_ATTRS if name == "setattr" else (patterns.GRAD_ADDED,)
                if word in wanted:
                    return True
            continue
        if name in INSPECTING_CALLS:  # ``hooks.get(p)`` looks up the hook, keeps no books
            continue
        if name and hook_owners.is_param_hook(name):  # another hook fired: no books kept
            continue
        if any(_is_name(arg.value, subject) for arg in sub.args):
            if helpers is not None and helpers.keeps_none(sub, subject):
                continue  # a helper of the file, read: it keeps no books of ``subject``
            return True
    return False


def _is_name(expr: cst.CSTNode, word: str) -> bool:
    return type(expr) is cst.Name and expr.value == word


def _is_attr_of(expr: cst.CSTNode, subject: str, attrs: tuple[str, ...]) -> bool:
    return (
        type(expr) is cst.Attribute and expr.attr.value in attrs and _is_name(expr.value, subject)
    )


def grad_set_after(unit: Unit, firing: Firing) -> bool:
    """A node reached from the firing assigns ``<subject>.grad`` (or the ``_grad`` field
    behind a ``grad`` property): the function sets, after firing a tensor's own hooks, the
    gradient they read."""
    targets = {
        node.index
        for node in unit.graph.nodes
        if type(node.owner) in (cst.Assign, cst.AnnAssign, cst.AugAssign)
        and any(
            _is_attr_of(t, firing.subject, ("grad", "_grad"))
            for t in patterns.assignment_targets(node.owner)
        )
    }
    return bool(targets) and paths.reaches(firing.node, targets)
