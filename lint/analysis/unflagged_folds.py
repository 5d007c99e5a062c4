"""A parameter's ``.grad`` folded into its own main_grad by code that never asks the
parameter's ``grad_added_to_main_grad`` (issue #19, class 5: a hook that mishandles the flag).

Megatron's DDP hook moves autograd's gradient into main_grad only when the layer did not
write main_grad itself: ``if param.grad is not None and not param.grad_added_to_main_grad:
param.main_grad.add_(param.grad.data)``. A layer with the fused wgrad (Transformer Engine's
``fuse_wgrad_accumulation``, Megatron's ``gradient_accumulation_fusion``) has already added
the real gradient into main_grad and hands autograd a dummy (``torch.empty`` unless
``zero_out_wgrad``); a fold that does not ask the flag adds the dummy's memory on top.

Per function: ``P.main_grad.add_(<P.grad ...>)`` or ``P.main_grad += <P.grad ...>`` (``P``
spelled the same on both sides: a name or an attribute chain; ``.data``, ``.view(...)``,
``.to(...)`` on the gradient; main_grad also as ``getattr(P, "main_grad")`` or a local whose
one binding is it), where neither the function nor any function it is nested in
spells ``grad_added_to_main_grad`` (a read, a ``getattr`` string, or a set), in a file that
sets the flag elsewhere (a reset to False, a mark, a ``setattr``): the file keeps the
protocol, so its parameters can arrive with a dummy (a file that only reads the flag, in a
config dump or a log line, is not judged). A function the file calls by name is a helper
whose callers decide when it folds, and is not judged either. A file that never names the
flag predates it (Megatron's legacy DDP, whose layers hand back ``None`` when they fuse) or
copied Megatron's DDP into a framework whose layers never fuse (veScale's, with
Megatron-core's ``register_grad_ready`` bucket API: taking that API as a sign of the flag's
era reported veScale's hook, blind corpus 10) and is not judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from . import asking, kept_grads, patterns
from .module import Unit


@dataclass(frozen=True)
class Fold:
    site: cst.CSTNode  # the statement that adds ``P.grad`` into ``P.main_grad``
    owner: str  # P, as written


# The file sets the flag somewhere (``p.grad_added_to_main_grad = False`` in a reset, ``=
# True`` in a layer, ``setattr(p, "grad_added_to_main_grad", ...)``): it keeps the protocol.
# A file that only reads it (a config dump, a log line) says nothing about its hooks.
_SETS_FLAG = re.compile(
    r"\.grad_added_to_main_grad\s*=(?!=)|setattr\([^()]*[\"']grad_added_to_main_grad[\"']"
)


def unflagged_folds(unit: Unit) -> list[Fold]:
    if type(unit.owner) is not cst.FunctionDef or not unit.survey.spells_main_grad:
        return []
    context = unit.context
    if patterns.GRAD_ADDED not in context.source or not context.shared(_sets_flag):
        return []
    if unit.name in context.shared(_called_names):
        return []  # a helper of the file: its callers decide when it folds
    # the hook itself, or a function that makes it, asks (the module's survey holds its
    # top-level functions' code too: it is no enclosing function)
    scope: Unit | None = unit
    while scope is not None and type(scope.owner) is cst.FunctionDef:
        if scope.survey.spells_grad_added:
            return []
        scope = scope.parent
    code = unit.context.code
    found = []
    for root, node in unit.expression_roots():
        for target, source in _adds(root):
            if type(target) is cst.Name:  # ``mg = p.main_grad`` then ``mg.add_(p.grad)``
                target = asking.bound_value(target.value, unit) or target
            owner = _main_grad_owner(target)
            read = kept_grads.read_grad_owner(source)
            if owner is None or read is None:
                continue
            if code(owner).strip() == code(read).strip():
                found.append(Fold(node.owner if node.owner is not None else root, code(owner)))
    return found


def _sets_flag(context) -> bool:
    """For ``context.shared``: the file sets ``grad_added_to_main_grad`` somewhere."""
    return _SETS_FLAG.search(context.source) is not None


def _called_names(context) -> frozenset[str]:
    """For ``context.shared``: the names the file's code calls (``f(...)``, ``self.f(...)``)."""
    return frozenset(name for unit in context.units for name in unit.own_survey.calls)


def _adds(root) -> Iterator[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(destination, added value) of each in-place add in ``root``."""
    for sub in patterns.walk(root):
        kind = type(sub)
        if kind is cst.AugAssign and type(sub.operator) is cst.AddAssign:
            yield sub.target, sub.value
        elif (
            kind is cst.Call
            and type(sub.func) is cst.Attribute
            and sub.func.attr.value == "add_"
            and sub.args
            and sub.args[0].keyword is None
        ):
            yield sub.func.value, sub.args[0].value


def _main_grad_owner(expr) -> cst.BaseExpression | None:
    """P for ``P.main_grad`` or ``getattr(P, "main_grad")`` (P a name or an attribute chain
    of names)."""
    if type(expr) is cst.Attribute and expr.attr.value == patterns.MAIN_GRAD:
        owner = expr.value
    elif patterns.callee_name(expr) == "getattr" and len(args := expr.args) >= 2:
        if patterns.string_value(args[1].value) != patterns.MAIN_GRAD:
            return None
        owner = args[0].value
    else:
        return None
    return owner if kept_grads.plain(owner) else None
