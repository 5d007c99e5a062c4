"""A fresh ``Parameter`` stored over an item of a list of weights (issue #19, class 2).

Transformer Engine's grouped backward keeps the original weights in a list
(``origin_weights = saved_tensors[2 * N : 3 * N]``) and, under CPU offloading, puts the
weight objects back into it. Storing a new Parameter there instead (``origin_weights[i] =
torch.nn.Parameter(origin_weights[i], ...)``, TE's offloading path before #1573 did it by
name) replaces the object Megatron gave main_grad and its flags: every later read of
``overwrite_main_grad`` or ``zero_out_wgrad`` on the list's items, and every
``grad_added_to_main_grad`` set on them, goes to an object Megatron's hooks never see. (The
same store of a copy made under a name first, ``w = Parameter(...)`` then ``weights[i] =
w``, is fresh_flags'.)

Seen: in one function, ``X[k] = Parameter(...)`` (``nn.`` / ``torch.nn.`` too; not over newly
allocated storage, ``Parameter(torch.empty(...))``) from which a path reaches a read or a
set of main_grad's flags on an item of ``X`` (any key: ``X[0].overwrite_main_grad``,
``getattr(X[i], "zero_out_wgrad", False)``, ``X[i].grad_added_to_main_grad = True``).
main_grad itself put back on the item (``X[i].main_grad = main_grads[i]``) is no such read.
Not seen: the list walked by a loop, or handed to a helper, after the store.

The same for an op that accumulates into main_grad (``op = te.ops.Linear(...,
accumulate_into_main_grad=...)``) given a fresh Parameter as its weight (``op.weight =
nn.Parameter(w.detach().clone())``, blind corpus 23's fused LoRA branch, where the op must
share the adapter's Parameter): the op writes the main_grad of an object Megatron never gave
one, and the adapter's weight gets no gradient. Any attribute of such an op, bound by the
call that reaches the assignment, counts.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from . import paths, patterns
from .module import Unit

PARAMETER = "Parameter"
# What Megatron puts on the Parameter besides main_grad (main_grad is put back by the
# offloading path itself; its flags are not).
FLAGS = frozenset({"grad_added_to_main_grad", "overwrite_main_grad", "zero_out_wgrad"})
ACCUMULATE = "accumulate_into_main_grad"
# Methods and attributes that hand back the same values (a copy or a view of them).
SAME_VALUES = frozenset(
    {
        "detach", "clone", "data", "contiguous", "to", "t", "T", "view", "reshape", "float",
        "half", "bfloat16", "cuda", "cpu", "requires_grad_",
    }
)  # fmt: skip


def stored_fresh_parameters(unit: Unit) -> Iterator[tuple[cst.Assign, str, cst.CSTNode]]:
    """(the store, the flag, where it is read or set) for each fresh Parameter stored into
    an item of a list whose items' flags are used after it."""
    stores = []
    for root, node in unit.expression_roots():
        container = _fresh_store(root)
        if container is not None:
            stores.append((root, node, container))
    if not stores:
        return
    uses = [
        (node, container, flag, where)
        for root, node in unit.expression_roots()
        for container, flag, where in _flag_uses(root)
    ]
    for store, store_node, container in stores:
        for node, used, flag, where in uses:
            if used == container and paths.reaches(store_node, [node.index]):
                yield store, flag, where
                break


def fresh_op_weights(unit: Unit) -> Iterator[cst.Assign]:
    """``op.X = Parameter(...)`` where ``op`` holds an op built with
    ``accumulate_into_main_grad`` (not a literal False)."""
    for root, node in unit.expression_roots():
        if type(root) is not cst.Assign or len(root.targets) != 1:
            continue
        target = root.targets[0].target
        if type(target) is not cst.Attribute or type(target.value) is not cst.Name:
            continue
        if not _fresh_parameter(root.value):
            continue
        if any(
            d.value is not None and _accumulates_into_main_grad(d.value)
            for d in unit.reaching.reaching(target.value.value, node)
        ):
            yield root


def _accumulates_into_main_grad(value: cst.CSTNode) -> bool:
    if type(value) is not cst.Call:
        return False
    arg = patterns.keyword_arg(value, ACCUMULATE)
    return arg is not None and not patterns.is_false_literal(arg.value)


def _fresh_parameter(value: cst.CSTNode) -> bool:
    """``Parameter(<an existing tensor>)``: its first argument a weight's values (a name,
    attribute or item, through copies and views: ``w.detach().clone()``, ``w.data``), not
    new storage (``torch.empty(...).normal_()``, ``init_method(...)``, ``randn(...) * s``)
    nor a checkpoint's entry (``state_dict["fc1.weight"]``)."""
    if type(value) is not cst.Call or patterns.callee_name(value) != PARAMETER:
        return False
    args = patterns.positional_args(value)
    return bool(args) and _existing_tensor(args[0].value)


def _existing_tensor(expr: cst.CSTNode) -> bool:
    while True:
        kind = type(expr)
        if kind is cst.Call and type(expr.func) is cst.Attribute:
            if expr.func.attr.value not in SAME_VALUES:
                return False
            expr = expr.func.value
        elif kind is cst.Attribute and expr.attr.value in SAME_VALUES:
            expr = expr.value
        else:
            break
    if type(expr) is cst.Subscript:
        keys = [e.slice for e in expr.slice]
        if any(type(k) is cst.Index and type(k.value) is cst.SimpleString for k in keys):
            return False  # a checkpoint's entry: loading, not copying a live weight
        expr = expr.value
    return type(expr) in (cst.Name, cst.Attribute)


def _fresh_store(root: cst.CSTNode) -> str | None:
    """X for ``X[k] = Parameter(<not new storage>)``."""
    if type(root) is not cst.Assign or len(root.targets) != 1:
        return None
    target = root.targets[0].target
    if type(target) is not cst.Subscript or type(target.value) is not cst.Name:
        return None
    return target.value.value if _fresh_parameter(root.value) else None


def _flag_uses(root: cst.CSTNode) -> Iterator[tuple[str, str, cst.CSTNode]]:
    """(X, flag, node) for ``X[k].flag`` (read or set) and ``getattr`` / ``hasattr`` /
    ``setattr`` of a flag on ``X[k]``."""
    for sub in patterns.walk(root):
        if type(sub) is cst.Attribute and sub.attr.value in FLAGS:
            container = _item_of(sub.value)
            if container is not None:
                yield container, sub.attr.value, sub
        elif type(sub) is cst.Call and patterns.callee_name(sub) in (
            "getattr",
            "hasattr",
            "setattr",
        ):
            args = sub.args
            if len(args) < 2:
                continue
            flag = patterns.string_value(args[1].value)
            container = _item_of(args[0].value)
            if flag in FLAGS and container is not None:
                yield container, flag, sub


def _item_of(expr: cst.CSTNode) -> str | None:
    if type(expr) is cst.Subscript and type(expr.value) is cst.Name:
        return expr.value.value
    return None
