"""Which ``with`` statements bind an exit stack, whose callbacks run where the block ends
(the graph gives such a block a node of its own there: cfg.py; what runs there:
exit_callbacks.py). Syntax only, so that the graph builder can ask."""

from __future__ import annotations

import libcst as cst

STACKS = frozenset({"ExitStack", "AsyncExitStack"})
# ``stack.callback(f, *args)``: ``f(*args)`` runs when the stack closes.
REGISTER = "callback"


def stack_names(stmt: cst.With) -> tuple[str, ...]:
    """The names a ``with`` binds to a new exit stack (``with ExitStack() as stack:``,
    ``contextlib.ExitStack()``, ``AsyncExitStack()``)."""
    found = []
    for item in stmt.items:
        value, bound = item.item, item.asname
        if type(value) is not cst.Call or bound is None or type(bound.name) is not cst.Name:
            continue
        func = value.func
        name = func.attr.value if type(func) is cst.Attribute else getattr(func, "value", None)
        if name in STACKS:
            found.append(bound.name.value)
    return tuple(found)
