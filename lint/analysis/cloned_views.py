"""main_grad bound to a copy of a slice of a gradient buffer (GMLP053, issue #19, class 2).

Data-parallel code makes each parameter's main_grad a view into the bucket that the
reduction reads: ``param.main_grad = grad_data[start:end].view(param.shape)`` (Megatron's
DDP, picotron's ``BucketManager``). A ``.clone()`` on the way (blind corpus 18: picotron's
``_get_view_from_tensor`` returning ``tensor[start:end].view(shape).clone()``) makes
main_grad a tensor of its own: gradients accumulate there, the bucket stays zero, and the
reduction and the optimizer never see them.

Seen: ``X.main_grad = <value>`` (or ``setattr``, as ``main_grad_copies.bindings`` finds them)
where the value is ``<view>.clone()`` / ``torch.clone(<view>)``, ``<view>`` a subscript of
a tensor or a layout change of one (``view``, ``reshape``, ``view_as``, ``flatten``), or a
call of a function or method of the file every ``return`` of which is such a clone.
"""

from __future__ import annotations

import libcst as cst

from . import file_functions, main_grad_copies, patterns
from .module import ModuleContext, Unit

COPYING = frozenset({"clone"})
# Layout changes that keep a slice a view of its buffer.
VIEWING = frozenset({"view", "reshape", "view_as", "flatten", "unflatten", "narrow"})


def cloned_views(unit: Unit) -> list[cst.Call]:
    """The clones (as written: in the binding, or in the helper's ``return``) that a
    binding of a main_grad in ``unit`` takes."""
    found = []
    for stmt, _ in unit.statements():
        for _, value in main_grad_copies.bindings(unit, stmt, unit.node_for(stmt)):
            clone = _clone_of_slice(value) or _helper_clone(unit.context, value)
            if clone is not None:
                found.append(clone)
    return found


def _clone_of_slice(value) -> cst.Call | None:
    if type(value) is not cst.Call or patterns.callee_name(value) not in COPYING:
        return None
    func = value.func
    if type(func) is cst.Attribute and patterns.last_word(func.value) != "torch":
        source = func.value  # ``t.clone()``
    elif value.args:
        source = value.args[0].value  # ``torch.clone(t)``
    else:
        return None
    return value if _slice_view(source) else None


def _slice_view(expr) -> bool:
    """A subscript of a tensor, through layout changes (``t[a:b].view(shape)``)."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        if expr.func.attr.value not in VIEWING:
            return False
        expr = expr.func.value
    return type(expr) is cst.Subscript


def _helper_clone(context: ModuleContext, value) -> cst.Call | None:
    """The clone every ``return`` of the called function of the file hands back."""
    if type(value) is not cst.Call:
        return None
    functions = context.shared(file_functions.by_name)
    helper = file_functions.callee(value, functions, context.shared(file_functions.class_names))
    if helper is None:
        return None
    returns = [sub for sub in patterns.walk(helper.body) if type(sub) is cst.Return and sub.value]
    clones = [_clone_of_slice(ret.value) for ret in returns]
    if clones and all(clone is not None for clone in clones):
        return clones[0]
    return None
