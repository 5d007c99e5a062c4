"""main_grad storage under other names (issue #19, class 2: main_grad handed on as the
gradient): the flat buffer a bucket's main_grads are views of, and the views and pieces taken
of it. Megatron's grad buffer keeps every parameter's main_grad as a view of one flat fp32
tensor (``bucket.grad_data``); a fused grouped kernel writing all experts' wgrads at once
writes into that buffer, and a piece of it handed back to autograd is main_grad itself."""

from __future__ import annotations

import libcst as cst

from . import patterns

# The flat buffer the main_grads of a bucket are views of (Megatron's ``bucket.grad_data``,
# a grad buffer's ``flat_main_grad`` / ``main_grad_buffer``): handing back a piece of it
# hands back main_grad. The flags (``overwrite_main_grad``, ``grad_added_to_main_grad``)
# name main_grad too but hold no storage: only a buffer word makes it one.
GRAD_STORAGE = frozenset({"grad_data"})
STORAGE_WORDS = ("flat", "buffer", "buf", "storage")


def names_storage(attribute: str) -> bool:
    return attribute in GRAD_STORAGE or (
        patterns.MAIN_GRAD in attribute and any(w in attribute for w in STORAGE_WORDS)
    )


def view_of(expr, names: set[str]) -> bool:
    """``expr`` is one of ``names`` or a view of one (``c.view_as(w)``, ``c[0]``, ``c.T``)."""
    root = storage_root(expr, torch_functions=False)
    return isinstance(root, cst.Name) and root.value in names


def storage_root(expr, torch_functions: bool = True):
    """The tensor whose storage ``expr`` is or views: ``w.main_grad`` for
    ``w.main_grad.data``, ``w.main_grad[e]``, ``w.main_grad.view(-1)[a:b]``,
    ``w.main_grad.chunk(n)[e]``, and with ``torch_functions`` ``torch.narrow(w.main_grad,
    0, s, n)`` (without, such a call's root is ``torch``)."""
    while True:
        if isinstance(expr, cst.Subscript) or (
            isinstance(expr, cst.Attribute) and expr.attr.value in patterns.VIEW_ATTRS
        ):
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in patterns.VIEW_METHODS
        ):
            through = torch_functions and torch_view(expr)
            expr = patterns.positional_args(expr)[0].value if through else expr.func.value
        else:
            return expr


def writes(call) -> bool:
    """A call that writes a tensor: given ``out=``, or an in-place method."""
    if any(a.keyword is not None and a.keyword.value == "out" for a in call.args):
        return True
    return isinstance(call.func, cst.Attribute) and in_place(call.func.attr.value)


def in_place(name: str) -> bool:
    """``main_grad.add_(g)`` returns main_grad itself."""
    return name.endswith("_") and not name.startswith("_")


def torch_view(call: cst.Call) -> bool:
    """``torch.split(t, n)`` / ``torch.chunk`` / ``torch.narrow`` ...: a view of the first
    argument."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "torch"
        and func.attr.value in patterns.VIEW_METHODS
        and bool(patterns.positional_args(call))
    )
