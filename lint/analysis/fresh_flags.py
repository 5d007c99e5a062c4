"""``grad_added_to_main_grad`` set on a fresh copy of a weight (issue #19, class 2).

Megatron's hooks read the flag from the Parameter they registered. A backward that rebinds a
weight to a fresh object (``w = Parameter(w, ...)``, a clone) and then marks the flag on that
object marks nothing Megatron will read (Transformer Engine #2265's offloading branch put
the rebound copy into the weight list, ``weights[i] = w``, and marked ``weights[i]``). The
facts are per function: the fresh bindings (GMLP015's), and container items assigned from
one (``c[k] = w``), reaching the statement that sets the flag.

The flag may also be set by a helper of the file the weight is handed to (blind corpus 14: a
grouped backward re-wrapping ``origin_weights[i]`` under CPU offload, then handing each of
``origin_weights`` to its nested ``handle_custom_ddp_from_mcore(weight, wgrad)``, which marks
it): the argument is the fresh name itself, an item of a container holding a copy, or a loop
or comprehension variable walking such a container (``for w, g in zip(origin_weights, ...)``).
Reported at the store that put the copy in the container (the item the bookkeeping walks
was replaced there), or at the argument when the copy is handed over by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from . import iteration, marking_helpers, paths, patterns
from .cfg import Def, Node
from .module import Unit

FLAG = "grad_added_to_main_grad"


@dataclass(frozen=True)
class FlagOnCopy:
    # ``w.grad_added_to_main_grad`` / ``c[k].grad_added_to_main_grad`` / the setattr call
    target: cst.CSTNode
    fresh: Def  # the binding that made the copy
    # The helper of the file that sets the flag on what it is handed, and that call; None
    # when the flag is set in place.
    helper: cst.Call | None = None


def _flag_targets(root: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, cst.BaseExpression]]:
    """(where, owner) for ``owner.grad_added_to_main_grad = ...`` (where: the target) and
    ``setattr(owner, "grad_added_to_main_grad", ...)`` (where: the call)."""
    if isinstance(root, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        for target in patterns.assignment_targets(root):
            if patterns.is_attr(target, FLAG):
                yield target, target.value
    elif isinstance(root, cst.Expr) and patterns.attribute_set(root, FLAG) is not None:
        yield root.value, patterns.attribute_set(root, FLAG)[0]


def _subscript_stores(
    root: cst.CSTNode,
) -> Iterator[tuple[str, cst.BaseExpression, cst.Subscript]]:
    """(container, value, target) for ``container[k] = value``."""
    if isinstance(root, cst.Assign):
        for target in root.targets:
            sub = target.target
            if isinstance(sub, cst.Subscript) and isinstance(sub.value, cst.Name):
                yield sub.value.value, root.value, sub


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def _calls_in(node: cst.CSTNode, walked: dict[str, cst.BaseExpression]):
    """(call, walked) for each call under ``node``, not entering nested functions, classes
    or lambdas; ``walked`` maps the names the enclosing comprehensions bind to the elements
    of a sequence (``iteration.element_sequences``) to that sequence."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return
    if isinstance(node, _COMPREHENSIONS):
        walked = dict(walked)
        loop = node.for_in
        while loop is not None:
            walked.update((n.value, seq) for n, seq in iteration.element_sequences(loop))
            loop = loop.inner_for_in
    if isinstance(node, cst.Call):
        yield node, walked
    for child in node.children:
        yield from _calls_in(child, walked)


def flags_on_copies(unit: Unit, is_fresh: Callable[[Def], bool]) -> list[FlagOnCopy]:
    fresh = {d for d in unit.graph.defs if d.kind == "assign" and is_fresh(d)}
    if not fresh:
        return []
    # Containers holding a copy: ``c[k] = w`` with a fresh ``w`` reaching that store.
    stored: dict[str, list[tuple[Node, Def, cst.Subscript]]] = {}
    for root, node in unit.expression_roots():
        for container, value, target in _subscript_stores(root):
            if isinstance(value, cst.Name):
                for d in unit.reaching.reaching(value.value, node):
                    if d in fresh:
                        stored.setdefault(container, []).append((node, d, target))
    found = []
    for root, node in unit.expression_roots():
        for target, owner in _flag_targets(root):
            if isinstance(owner, cst.Name):
                found.extend(
                    FlagOnCopy(target, d)
                    for d in unit.reaching.reaching(owner.value, node)
                    if d in fresh
                )
            elif isinstance(owner, cst.Subscript) and isinstance(owner.value, cst.Name):
                for store_node, d, _ in stored.get(owner.value.value, ()):
                    if paths.reaches(store_node, [node.index]):
                        found.append(FlagOnCopy(target, d))
                        break
    return found + _handed_to_markers(unit, fresh, stored)


def _handed_to_markers(unit: Unit, fresh: set[Def], stored: dict) -> list[FlagOnCopy]:
    """Copies handed to a helper of the file that marks what it is handed. A new Parameter
    made of a fresh allocation (``Parameter(torch.randn(4, 4))``, a test's own weight) is
    the Parameter, not a copy of one: not counted here."""
    fresh = {d for d in fresh if not _of_new_storage(d.value)}
    stored = {
        container: kept
        for container, items in stored.items()
        if (kept := [item for item in items if item[1] in fresh])
    }
    if not fresh:
        return []
    helpers = unit.context.shared(marking_helpers.MarkingHelpers)
    found: list[FlagOnCopy] = []
    seen: set[int] = set()
    for root, node in unit.expression_roots():
        for call, walked in _calls_in(root, {}):
            for arg in helpers.marked_arguments(call):
                for target, d in _copies_handed(unit, arg, node, walked, fresh, stored):
                    if id(target) not in seen:
                        seen.add(id(target))
                        found.append(FlagOnCopy(target, d, call))
    return found


# Calls that allocate new storage: a Parameter made of one wraps no existing weight.
ALLOCATIONS = frozenset(
    {"randn", "rand", "empty", "zeros", "ones", "full", "tensor", "arange", "randint", "eye"}
)


def _of_new_storage(value) -> bool:
    """``Parameter(torch.randn(...))``: a new Parameter over newly allocated storage."""
    if patterns.callee_name(value) != "Parameter":
        return False
    args = patterns.positional_args(value)
    return bool(args) and patterns.callee_name(args[0].value) in ALLOCATIONS


def _copies_handed(unit: Unit, arg, node: Node, walked, fresh: set[Def], stored: dict):
    """(where to report, fresh binding) for an argument that is a copy: the fresh name
    itself (reported at the argument), or an item of a container a copy was stored into, by
    subscript (the same key, when both are constants) or by a loop or comprehension variable
    walking it (reported at the store)."""
    if isinstance(arg, cst.Subscript) and isinstance(arg.value, cst.Name):
        yield from _stores_reaching(unit, stored, arg.value.value, node, arg)
    elif isinstance(arg, cst.Name) and arg.value in walked:
        sequence = walked[arg.value]
        if isinstance(sequence, cst.Name):
            yield from _stores_reaching(unit, stored, sequence.value, node)
    elif isinstance(arg, cst.Name):
        for d in unit.reaching.reaching(arg.value, node):
            if d in fresh:
                yield arg, d
            elif d.kind == "for":
                sequence = iteration.element_source(d.node.owner, d.target)
                if isinstance(sequence, cst.Name):
                    yield from _stores_reaching(unit, stored, sequence.value, node)


def _stores_reaching(unit: Unit, stored: dict, container: str, node: Node, item=None):
    """The stores of a copy into ``container`` that reach ``node`` with the container name
    still bound as it was at the store (``weights = list(ctx.origin_weights)`` between them
    is another list), and, for an ``item`` read by a constant key, stored under that key."""
    bound_here = set(unit.reaching.reaching(container, node))
    for store_node, d, target in stored.get(container, ()):
        if not paths.reaches(store_node, [node.index]):
            continue
        if set(unit.reaching.reaching(container, store_node)) != bound_here:
            continue
        if item is not None and not _same_key(unit, target, item):
            continue
        yield target, d


def _same_key(unit: Unit, stored: cst.Subscript, read: cst.Subscript) -> bool:
    """The keys may be the same: equal when both are constants (``pair[1]`` is not
    ``pair[0]``; ``weights[i]`` may be any item)."""
    keys = [_constant_key(unit, s) for s in (stored, read)]
    return None in keys or keys[0] == keys[1]


def _constant_key(unit: Unit, sub: cst.Subscript) -> str | None:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    key = sub.slice[0].slice.value
    if isinstance(key, (cst.Integer, cst.SimpleString)):
        return unit.context.code(key).strip()
    return None
