"""What one way through an ``if`` does with the gradients it holds (GMLP042's branch shape):
whether it completes one (hands it back, gives ``.grad`` a value, touches main_grad or the
flag) and whether it tells a reducer by another way than the stored hook. An arm that only
asserts, queues its wgrads for later or drops them completes nothing, and is no sibling
that skips the hook."""

from __future__ import annotations

import libcst as cst

from . import patterns
from .module import Unit

# Words of a callee that tells a reducer a gradient is ready by another way than the hook.
NOTIFIER_WORDS = ("ready", "notify")


def notifies(line: cst.CSTNode) -> bool:
    """``line`` calls something named for telling a reducer the gradient is ready
    (``register_grad_ready(p)``, ``reduce_ready_partitions_and_remove_grads``): another
    notification than the stored hook."""
    return any(
        type(sub) is cst.Call
        and any(word in (patterns.callee_name(sub) or "").lower() for word in NOTIFIER_WORDS)
        for sub in patterns.walk(line)
    )


def returned_names(unit: Unit) -> frozenset[str]:
    """The locals the function's returns hand back (``return result``, ``return result if
    batched else result[0]``)."""
    return frozenset(
        sub.value
        for stmt, _ in unit.statements()
        if type(stmt) is cst.Return and stmt.value is not None
        for sub in patterns.walk(stmt.value)
        if type(sub) is cst.Name
    )


def completes(line: cst.CSTNode, returned: frozenset[str]) -> bool:
    """``line`` completes a gradient: returns a value (the wgrads handed back) or binds or
    fills a local the function returns, gives a ``.grad`` something other than None, touches a
    main_grad or sets the flag. An arm doing none of these (an assertion, a queue for
    later, dropped wgrads) completes nothing."""
    for sub in patterns.walk(line):
        kind = type(sub)
        if kind is cst.Return and sub.value is not None and not _is_none(sub.value):
            return True
        if kind is cst.Assign and not _is_none(sub.value):
            for t in sub.targets:
                if patterns.is_attr(t.target, "grad"):
                    return True
                if type(t.target) is cst.Name and t.target.value in returned:
                    return True
        if kind is cst.Call and _fills(sub, returned):
            return True
        if kind is cst.Attribute and sub.attr.value in (patterns.MAIN_GRAD, patterns.GRAD_ADDED):
            return True
    return False


def _fills(call: cst.Call, returned: frozenset[str]) -> bool:
    """``out.append(g)`` (``extend``, ``insert``) on a local the function returns."""
    func = call.func
    return (
        type(func) is cst.Attribute
        and func.attr.value in ("append", "extend", "insert")
        and type(func.value) is cst.Name
        and func.value.value in returned
        and not any(_is_none(arg.value) for arg in call.args)
    )


def _is_none(expr: cst.CSTNode) -> bool:
    return type(expr) is cst.Name and expr.value == "None"
