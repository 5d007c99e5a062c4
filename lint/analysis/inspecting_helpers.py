"""Functions of a file that only look at what they are handed: its shape, dtype or device, or
those of its main_grad (``assert w.main_grad.dtype == torch.float32``), and nothing else
(issue #19, class 3: a call handed the weight, or named for main_grad like
``_check_main_grad(weight)``, counts as a possible main_grad write unless the function it runs
is known not to write one).

A parameter counts as only inspected when every use of its name in the function's body
(nested functions included) is ``p.<metadata>`` or ``p.main_grad.<metadata>`` (``.shape``,
``.dtype``, ``.size()``...), or there is none: handed to any call, subscripted, rebound or
touched through another attribute, it may be written. A function only looks when, besides,
it takes no ``*args`` / ``**kwargs``, returns and yields nothing, declares no ``global`` /
``nonlocal``, and spells main_grad only in such looks. Only functions a call resolves to
(``file_functions.resolved``) are read, and only calls with no starred argument."""

from __future__ import annotations

import libcst as cst

from . import file_functions, handed_main_grads, patterns
from .module import ModuleContext

# What a look at a tensor may read without changing it (attributes, or methods called bare):
# what a wrapper may ask of a buffer without reading its contents, and its strides.
METADATA = handed_main_grads.METADATA | {"stride"}


def inspected_arguments(context: ModuleContext, call: cst.Call) -> list[cst.BaseExpression]:
    """The arguments of ``call`` that the function of the file it runs only inspects."""
    function = file_functions.resolved(context, call)
    if function is None:
        return []
    looked_at = context.shared(_Looks).of(function)[0]
    bound = file_functions.bound_arguments(call, function)
    return [arg for name, arg in bound if name in looked_at]


def only_looks(context: ModuleContext, call: cst.Call) -> bool:
    """``call`` runs a function of the file that only looks at everything it is handed and
    touches no other main_grad: it writes none and hands none back."""
    function = file_functions.resolved(context, call)
    if function is None or any(arg.star for arg in call.args):
        return False
    looked_at, pure = context.shared(_Looks).of(function)
    return pure and all(
        name in looked_at for name, _ in file_functions.bound_arguments(call, function)
    )


class _Looks:
    """Per file, for ``context.shared``: each function's only-inspected parameters, and
    whether the function does nothing but look."""

    def __init__(self, context: ModuleContext) -> None:
        self._found: dict[int, tuple[frozenset[str], bool]] = {}

    def of(self, function: cst.FunctionDef) -> tuple[frozenset[str], bool]:
        if id(function) not in self._found:
            self._found[id(function)] = _looks(function)
        return self._found[id(function)]


def _looks(function: cst.FunctionDef) -> tuple[frozenset[str], bool]:
    params = file_functions.parameters(function)
    uses = dict.fromkeys(params, 0)
    looks = dict.fromkeys(params, 0)
    main_grads = 0  # main_grad spellings: each must be one of the looks
    looked_main_grads = 0
    # ``*args`` / ``**kwargs`` take arguments no parameter name follows
    star = function.params.star_arg
    pure = not isinstance(star, cst.Param) and function.params.star_kwarg is None
    stack: list[cst.CSTNode] = [function.body]
    while stack:  # nested functions too: a closure may write
        node = stack.pop()
        stack.extend(patterns.children(node))
        kind = type(node)
        if kind is cst.Name and node.value in uses:
            uses[node.value] += 1
        elif kind in (cst.Return, cst.Yield, cst.Global, cst.Nonlocal):
            pure = pure and kind is cst.Return and node.value is None
        elif kind is cst.Attribute:
            if node.attr.value == patterns.MAIN_GRAD:
                main_grads += 1
            if node.attr.value in METADATA:
                owner = node.value
                if patterns.is_attr(owner, patterns.MAIN_GRAD):
                    owner = owner.value
                    looked_main_grads += type(owner) is cst.Name and owner.value in looks
                if type(owner) is cst.Name and owner.value in looks:
                    looks[owner.value] += 1
        elif kind is cst.SimpleString and patterns.string_is(node, patterns.MAIN_GRAD):
            main_grads += 1  # ``getattr(w, "main_grad")``: not a look
    looked_at = frozenset(name for name in params if looks[name] == uses[name])
    return looked_at, pure and main_grads == looked_main_grads
