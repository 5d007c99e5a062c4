"""A parameter's ``.grad`` added into a buffer and kept on some way out (issue #19, class 3).

A gradient hook moves each parameter's gradient into the buffer the reduction and the
optimizer read: ``param.main_grad.add_(param.grad.data)`` (Megatron's DDP), a slice of a
contiguous buffer (nnscaler), then ``param.grad = None``. Freeing ``.grad`` is what makes
the move a move: a ``.grad`` kept is accumulated into by the next microbatch's backward and
added into the buffer again, so early microbatches count several times. The free moved
under a condition (``if self.require_backward_grad_sync: param.grad = None``) or behind an
early ``return`` keeps it on the other paths.

Per function: an in-place add (``X.add_(...)``) an argument of which reads ``P.grad`` (``P``
a name or attribute chain; ``.data``, ``.view(...)`` and the like on it) into another tensor,
where the same function also frees ``P.grad`` (``P.grad = None``: the function owns the
free, so a path that skips it is a slip, not a design that frees elsewhere), a free that
the add reaches in the same pass (not through the head of a loop around it: a loop over
parameters frees another one's ``.grad`` on its next turn). Reported at the first such free
when some normal way out of the function from the add passes no free.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import decided_tests, paths, patterns
from .cfg import Node
from .module import Unit

LOOP_KINDS = frozenset({"for", "while"})
ADDING_METHODS = frozenset({"add_"})
# ``torch.Tensor.add_(buffer, g)``: the method called unbound, its first argument the target.
UNBOUND_RECEIVERS = frozenset({"torch.Tensor", "Tensor"})


@dataclass(frozen=True)
class KeptGrad:
    free: cst.CSTNode  # the ``P.grad = None`` some path skips
    owner: str  # P, as written
    add_line_node: cst.CSTNode  # the statement that adds ``P.grad`` into the buffer


def kept_grads(unit: Unit) -> list[KeptGrad]:
    frees: dict[str, list[Node]] = {}
    adds: list[tuple[str, Node]] = []
    code = unit.context.code
    for root, node in unit.expression_roots():
        if type(root) is cst.Assign and patterns.is_none_like(root.value):
            for target in root.targets:
                owner = _grad_owner(target.target)
                if owner is not None:
                    frees.setdefault(code(owner).strip(), []).append(node)
            continue
        for sub in patterns.walk(root):
            if type(sub) is not cst.Call or type(sub.func) is not cst.Attribute:
                continue
            if sub.func.attr.value not in ADDING_METHODS:
                continue
            target, sources = sub.func.value, list(sub.args)
            if code(target).strip() in UNBOUND_RECEIVERS and sources:
                target, sources = sources[0].value, sources[1:]  # ``Tensor.add_(buf, g)``
            if _grad_owner(target):
                continue  # ``p.grad.add_(...)`` adds into the gradient itself
            for arg in sources:
                owner = read_grad_owner(arg.value)
                if owner is not None:
                    adds.append((code(owner).strip(), node))
    found = []
    for owner, add in adds:
        nodes = frees.get(owner)
        # ``if moved: buf.add_(p.grad)`` ... ``if moved: p.grad = None``: a path takes a test
        # it already passed the same way
        known = decided_tests.known_under(add.enclosing_ifs)
        if not nodes or not decided_tests.exits_avoiding(unit.graph, add, nodes, known):
            continue
        # a free in the same pass: not through the head of a loop around the add (``for p
        # in params:`` frees another parameter's ``.grad`` on its next turn)
        heads = _loop_heads(unit, add)
        reachable = [n for n in nodes if paths.reaches(add, [n.index], heads)]
        if reachable and add.owner is not None:
            first = min(reachable, key=lambda n: n.index)
            found.append(KeptGrad(first.owner, owner, add.owner))
    return found


def _loop_heads(unit: Unit, node: Node) -> list[int]:
    """The graph nodes of the ``for`` / ``while`` statements around ``node``'s statement."""
    return [
        candidate.index
        for candidate in unit.graph.nodes
        if candidate.kind in LOOP_KINDS
        and candidate.owner is not None
        and any(sub is node.owner for sub in patterns.walk(candidate.owner))
    ]


def _grad_owner(expr) -> cst.BaseExpression | None:
    """P for ``P.grad`` (P a name or an attribute chain of names)."""
    if type(expr) is cst.Attribute and expr.attr.value == patterns.GRAD and plain(expr.value):
        return expr.value
    return None


def read_grad_owner(expr) -> cst.BaseExpression | None:
    """P when ``expr`` reads ``P.grad`` as it is or reshaped (``P.grad.data``,
    ``P.grad.view(-1)``, ``P.grad.data.to(dtype)``)."""
    while True:
        owner = _grad_owner(expr)
        if owner is not None:
            return owner
        if type(expr) is cst.Attribute:
            expr = expr.value
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute:
            expr = expr.func.value
        else:
            return None


def plain(expr) -> bool:
    while type(expr) is cst.Attribute:
        expr = expr.value
    return type(expr) is cst.Name
