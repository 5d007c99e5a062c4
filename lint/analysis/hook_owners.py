"""Whose hook a hand-fired grad-accumulation hook is (issue #19, class 5): the parameter
``p`` of ``p.<hook>()``, ``getattr(p, "<hook>")()``, ``hooks[p]()`` / ``hooks.get(p)()``,
``hooks[i]()`` with ``i`` the position of ``p`` in ``for i, p in enumerate(params)``, and
the ``h()`` of ``for p, h in zip(params, hooks)`` or of pairs kept in a container that names
hooks. ``analysis.hooks`` finds the firings and the bookkeeping on the way to them."""

from __future__ import annotations

import libcst as cst

from . import hook_containers, patterns
from .cfg import Node
from .hook_words import NOT_A_STORED_HOOK, is_hook_container, is_stored_hook, last_word
from .module import Unit


def holds_hooks(word: str, unit: Unit) -> bool:
    """A container of parameters' stored hooks: by its name, or by what the file stores in
    it (``hook_containers``)."""
    return (
        is_hook_container(word)
        or word in unit.context.shared(hook_containers.file_containers).stored
    )


def container_key(expr: cst.CSTNode, unit: Unit, node: Node) -> str | None:
    """``p`` for ``hooks[p]`` or ``hooks.get(p)`` with ``hooks`` a container of stored
    hooks; for ``hooks[i]`` with ``i`` the position of ``p`` in ``for i, p in
    enumerate(params)``, ``p`` (the hook is the parameter's, not the index's)."""
    if type(expr) is cst.Subscript and len(expr.slice) == 1:
        container, key = expr.value, getattr(expr.slice[0].slice, "value", None)
    elif (
        type(expr) is cst.Call
        and type(expr.func) is cst.Attribute
        and expr.func.attr.value == "get"
    ):
        args = patterns.positional_args(expr)
        container, key = expr.func.value, args[0].value if args else None
    else:
        return None
    if type(key) is not cst.Name or not holds_hooks(last_word(container, lower=False), unit):
        return None
    owners = {_enumerated_owner(d) for d in unit.reaching.reaching(key.value, node)}
    if len(owners) == 1 and None not in owners:
        return owners.pop()
    return key.value


def _enumerated_owner(definition) -> str | None:
    """``p`` for the ``i`` of ``for i, p in enumerate(params)``."""
    loop, target = definition.node.owner, definition.target
    if definition.kind != "for" or type(loop) is not cst.For:
        return None
    if type(loop.target) is not cst.Tuple or patterns.callee_name(loop.iter) != "enumerate":
        return None
    names = [e.value for e in loop.target.elements]
    if len(names) == 2 and names[0] is target and type(names[1]) is cst.Name:
        return names[1].value
    return None


def paired_owner(definition, unit: Unit) -> str | None:
    """``p`` for the ``h`` of ``for p, h in zip(params, hooks)`` (the name paired with a
    container of stored hooks: two names, two containers), or of ``for p, grad_hook in
    pairs`` over pairs kept in a container that names hooks (``self.param_hook_pairs``),
    the called name saying grad hook: ``p`` is the one it belongs to."""
    loop, target = definition.node.owner, definition.target
    if type(loop) is not cst.For or type(loop.target) is not cst.Tuple:
        return None
    names = [e.value for e in loop.target.elements]
    if len(names) != 2 or not all(type(n) is cst.Name for n in names):
        return None
    mine = next((i for i, n in enumerate(names) if n is target), None)
    if mine is None:
        return None
    if patterns.callee_name(loop.iter) != "zip":
        # Pairs of any container: the called one must be named as a stored grad hook
        # (``grad_hook``); a plain ``hook`` of pairs is a module's forward or manual hook.
        paired = "hook" in last_word(loop.iter) and is_stored_hook(target.value)
        return names[1 - mine].value if paired else None
    args = loop.iter.args
    if len(args) != 2 or not holds_hooks(last_word(args[mine].value, lower=False), unit):
        return None
    return names[1 - mine].value


def hook_owner(value: cst.CSTNode | None, unit: Unit, node: Node) -> str | None:
    """``p`` for ``getattr(p, "<stored hook>", ...)``, ``p.<stored hook>``,
    ``<hooks>[p]`` or ``<hooks>.get(p)``, or ``functools.partial`` of one of them."""
    if type(value) is cst.Subscript or (
        type(value) is cst.Call and patterns.callee_name(value) == "get"
    ):
        return container_key(value, unit, node)
    if patterns.callee_name(value) == "partial" and value.args and not value.args[0].keyword:
        return hook_owner(value.args[0].value, unit, node)  # ``functools.partial(p.<hook>)``
    if type(value) is cst.IfExp and patterns.is_none_like(value.orelse):
        return hook_owner(value.body, unit, node)  # ``p.<hook> if hasattr(p, ...) else None``
    if type(value) is cst.Attribute and type(value.value) is cst.Name:
        return value.value.value if is_stored_hook(value.attr.value) else None
    if patterns.callee_name(value) == "getattr" and type(value.func) is cst.Name:
        args = patterns.positional_args(value)
        word = patterns.string_value(args[1].value) if len(args) >= 2 else None
        if word is not None and type(args[0].value) is cst.Name and is_stored_hook(word):
            return args[0].value.value
    return None


# What a hook handed one parameter does for it: the gradient's readiness, its reduction
# (``_expert_reduce_hook(p)``, ``ddp_hooks[name](p)``), its accumulation.
PARAM_HOOK_WORDS = ("grad", "accum", "reduce", "ddp")
# Hooks of a module's forward (``call_ddp_preforward_hook(module)``: DDP's forward pre-hook
# fetches parameters, it reduces no gradient).
NOT_A_PARAM_HOOK = ("forward",)
# Receivers whose methods are hooks of the object, not of a parameter.
OWNER_RECEIVERS = frozenset({"self", "cls", "ctx"})


def is_param_hook(word: str) -> bool:
    """A hook (or list of hooks, or callback) named after what it does to a parameter's
    gradient, not a maker, registrar or trigger of hooks."""
    lowered = word.lower().rstrip("s")
    return (
        lowered.endswith(("hook", "callback"))
        and any(w in lowered for w in PARAM_HOOK_WORDS)
        and not any(w in lowered for w in NOT_A_STORED_HOOK + NOT_A_PARAM_HOOK)
    )


def handed_parameter(call: cst.Call, unit: Unit, node: Node) -> str | None:
    """``p`` for a grad hook handed one plain name: ``self._expert_reduce_hook(p)``,
    ``self.ddp_hooks[name](p)``, ``reduce_hook(p)`` (a parameter that says so, or a local
    bound to such an attribute or element): the hook is fired for the parameter it is handed,
    whatever object or container it was kept in. A hook read off another name
    (``w._grad_hook(g)``) is ``w``'s and not decided here."""
    if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
        return None
    arg = call.args[0].value
    if type(arg) is not cst.Name:
        return None
    return arg.value if _names_param_hook(call.func, unit, node) else None


def _names_param_hook(func: cst.CSTNode, unit: Unit, node: Node) -> bool:
    if type(func) is cst.Subscript:  # ``hooks[key](p)``: an element of a list of hooks
        return is_param_hook(last_word(func.value, lower=False))
    if type(func) is cst.Attribute:
        receiver = func.value
        if type(receiver) is cst.Name and receiver.value not in OWNER_RECEIVERS:
            return False
        return is_param_hook(func.attr.value)
    if type(func) is not cst.Name:
        return False
    if is_param_hook(func.value) and _handed_in(unit, func.value):
        return True  # ``reduce_hook(w)``: a hook the caller handed in (not a function
        # of the module named after hooks, ``names_grad_hook(name)``)
    defs = unit.reaching.reaching(func.value, node)
    return bool(defs) and all(
        d.kind == "assign"
        and type(d.value) in (cst.Subscript, cst.Attribute)
        and _names_param_hook(d.value, unit, d.node)
        for d in defs
    )


def _handed_in(unit: Unit, name: str) -> bool:
    """``name`` is a parameter of the unit's function."""
    function = unit.owner
    if type(function) is not cst.FunctionDef:
        return False
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return any(p.name.value == name for p in every)
