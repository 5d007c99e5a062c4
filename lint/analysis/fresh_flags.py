"""``grad_added_to_main_grad`` set on a fresh copy of a weight (issue #19, class 2).

Megatron's hooks read the flag from the Parameter they registered. A backward that rebinds a
weight to a fresh object (``w = Parameter(w, ...)``, a clone) and then marks the flag on that
object marks nothing Megatron will read (Transformer Engine #2265's offloading branch put
the rebound copy into the weight list, ``weights[i] = w``, and marked ``weights[i]``). The
facts are per function: the fresh bindings (GMLP015's), and container items assigned from
one (``c[k] = w``), reaching the statement that sets the flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from . import paths, patterns
from .cfg import Def, Node
from .module import Unit

FLAG = "grad_added_to_main_grad"


@dataclass(frozen=True)
class FlagOnCopy:
    # ``w.grad_added_to_main_grad`` / ``c[k].grad_added_to_main_grad`` / the setattr call
    target: cst.CSTNode
    fresh: Def  # the binding that made the copy


def _flag_targets(root: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, cst.BaseExpression]]:
    """(where, owner) for ``owner.grad_added_to_main_grad = ...`` (where: the target) and
    ``setattr(owner, "grad_added_to_main_grad", ...)`` (where: the call)."""
    if isinstance(root, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        for target in patterns.assignment_targets(root):
            if patterns.is_attr(target, FLAG):
                yield target, target.value
    elif isinstance(root, cst.Expr) and patterns.attribute_set(root, FLAG) is not None:
        yield root.value, patterns.attribute_set(root, FLAG)[0]


def _subscript_stores(root: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(container, value) for ``container[k] = value``."""
    if isinstance(root, cst.Assign):
        for target in root.targets:
            sub = target.target
            if isinstance(sub, cst.Subscript) and isinstance(sub.value, cst.Name):
                yield sub.value.value, root.value


def flags_on_copies(unit: Unit, is_fresh: Callable[[Def], bool]) -> list[FlagOnCopy]:
    fresh = {d for d in unit.graph.defs if d.kind == "assign" and is_fresh(d)}
    if not fresh:
        return []
    # Containers holding a copy: ``c[k] = w`` with a fresh ``w`` reaching that store.
    stored: dict[str, list[tuple[Node, Def]]] = {}
    for root, node in unit.expression_roots():
        for container, value in _subscript_stores(root):
            if isinstance(value, cst.Name):
                for d in unit.reaching.reaching(value.value, node):
                    if d in fresh:
                        stored.setdefault(container, []).append((node, d))
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
                for store_node, d in stored.get(owner.value.value, ()):
                    if paths.reaches(store_node, [node.index]):
                        found.append(FlagOnCopy(target, d))
                        break
    return found
