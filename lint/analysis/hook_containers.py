"""Containers of hooks known by what the file stores in them, not by their names (issue #19,
class 5).

``hook_owners`` knows a container of parameters' grad hooks by its name, the plural of a
stored hook's (``self._grad_accum_hooks[p]()``). Code that keeps them under any other name
says what they are where it fills them:

    self._hooks[p] = p._grad_accum_hook                      # keyed by the parameter
    self._acc = {p: getattr(p, "_grad_accum_hook") for p in params}
    self._finalizers.append(hook)    # hook = getattr(w, "_grad_accum_hook", None)

and a module that takes the delayed-wgrad hooks through the protocol keeps what
``register_wgrad_accumulation_and_reduce_hooks(self, hook)`` is handed (``self._pending[i] =
hook``, ``self._callbacks.append(hook)``). A container is named by its last word (``_hooks``
of ``self._hooks``, or a local's name), for the whole file: a firing through it
(``self._hooks[p]()``, ``for fire in self._pending.values(): fire()``) is a firing of those
hooks, whoever reads it.

A store is a subscript assignment (``C[k] = V``), ``C.append(V)`` / ``add`` / ``insert`` /
``setdefault`` / ``update({k: V})``, or ``C =`` a list, set or dict display or comprehension
with ``V`` among its values. ``V`` is a stored hook as ``hook_owners.hook_owner`` reads one
(``p.<hook>``, ``getattr(p, "<hook>")``, ``partial(...)`` of one), or a local every
assignment of which in its function is one, or, for the registered kind, a parameter of a
``register*hook*`` function. (Taken from another container, it counts when that container's
name says so: the stores being read here are what would say it otherwise.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from . import hook_words, patterns

if TYPE_CHECKING:
    from .module import ModuleContext, Unit

# Methods that put their last argument into the container they are called on.
PUTTING = frozenset({"append", "add", "insert", "setdefault"})
# Methods that take one element of the container (``C.get(k)``).
TAKING = frozenset({"get", "pop"})


@dataclass(frozen=True)
class Containers:
    stored: frozenset[str]  # hold parameters' own stored grad hooks
    registered: frozenset[str]  # hold the hooks a ``register*hook*`` function was handed

    @property
    def any(self) -> frozenset[str]:
        return self.stored | self.registered


NONE = Containers(frozenset(), frozenset())


def file_containers(context: ModuleContext) -> Containers:
    """For ``context.shared``: the file's containers of hooks, by what it stores in them."""
    source = context.source
    if "hook" not in source:
        return NONE
    stored: set[str] = set()
    registered: set[str] = set()
    for unit in context.units:
        registrar = _registrar_params(unit)
        for stmt, _ in unit.statements():
            for word, value in _stores(stmt):
                if _is_stored_hook(value, unit, 2):
                    stored.add(word)
                elif type(value) is cst.Name and value.value in registrar:
                    registered.add(word)
    return Containers(frozenset(stored), frozenset(registered - stored))


def last_word(expr: cst.CSTNode) -> str:
    """The word a container is known by (``_hooks`` of ``self._hooks``)."""
    return hook_words.last_word(expr, lower=False)


def element_container(expr: cst.CSTNode) -> str:
    """The word of the container ``expr`` takes one hook from: ``C[k]``, ``C.get(k)``,
    ``C.pop(k)``; "" for anything else."""
    if type(expr) is cst.Subscript:
        return last_word(expr.value)
    func = getattr(expr, "func", None)
    if type(expr) is cst.Call and type(func) is cst.Attribute and func.attr.value in TAKING:
        return last_word(func.value)
    return ""


def walked_container(expr: cst.CSTNode) -> str:
    """The word of the container a ``for`` over ``expr`` walks the hooks of: ``C``,
    ``C.values()``, ``list(C)`` / ``tuple(C)``; "" for anything else."""
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value == "values" and not expr.args:
            return last_word(func.value)
        if patterns.callee_name(expr) in ("list", "tuple") and len(expr.args) == 1:
            return walked_container(expr.args[0].value)
        return ""
    return last_word(expr)


def _stores(stmt: cst.CSTNode):
    """(container word, stored value) for each store ``stmt`` makes."""
    kind = type(stmt)
    if kind is cst.Assign:
        for target in stmt.targets:
            container = target.target
            if type(container) is cst.Subscript:
                yield last_word(container.value), stmt.value
            elif type(container) in (cst.Name, cst.Attribute):
                word = last_word(container)
                for value in _display_values(stmt.value):
                    yield word, value
    elif kind is cst.Expr and type(stmt.value) is cst.Call:
        call = stmt.value
        func = call.func
        if type(func) is not cst.Attribute or not call.args:
            return
        word = last_word(func.value)
        method = func.attr.value
        if method in PUTTING:
            yield word, call.args[-1].value
        elif method == "update" and len(call.args) == 1:
            for value in _display_values(call.args[0].value):
                yield word, value


def _display_values(expr: cst.CSTNode):
    """The values a list, set or dict display or comprehension holds."""
    kind = type(expr)
    if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
        yield expr.elt
    elif kind is cst.DictComp:
        yield expr.value
    elif kind in (cst.List, cst.Set, cst.Tuple):
        for element in expr.elements:
            yield element.value
    elif kind is cst.Dict:
        for element in expr.elements:
            if type(element) is cst.DictElement:
                yield element.value


def _is_stored_hook(value: cst.CSTNode, unit: Unit, depth: int) -> bool:
    """``value`` is a parameter's stored grad hook; a local name is when every assignment
    to it in the unit is one (``depth`` names deep; read syntactically: this runs on every
    file that says hook, and a control-flow graph for each function would cost more than
    the rest of the analysis)."""
    if type(value) is cst.Name:
        bound = [
            stmt.value
            for stmt, _ in unit.statements()
            if type(stmt) is cst.Assign
            and any(
                type(t.target) is cst.Name and t.target.value == value.value for t in stmt.targets
            )
        ]
        return depth > 0 and bool(bound) and all(_is_stored_hook(v, unit, depth - 1) for v in bound)
    while True:  # ``partial(p.<hook>)``, ``p.<hook> if hasattr(p, ...) else None``
        if patterns.callee_name(value) == "partial" and value.args:
            value = value.args[0].value
        elif type(value) is cst.IfExp and patterns.is_none_like(value.orelse):
            value = value.body
        else:
            break
    container = element_container(value)
    if container:  # from another container: known by its name here (the file's stores are
        return hook_words.is_hook_container(container)  # what is being read)
    # ``p.<hook>`` / ``getattr(p, "<hook>", ...)``, read as ``hook_owners.hook_owner`` does
    # without its containers (which would ask this analysis again).
    if type(value) is cst.Attribute and type(value.value) is cst.Name:
        return hook_words.is_stored_hook(value.attr.value)
    args = patterns.positional_args(value) if type(value) is cst.Call else []
    if patterns.callee_name(value) != "getattr" or len(args) < 2:
        return False
    word = patterns.string_value(args[1].value)
    return word is not None and type(args[0].value) is cst.Name and hook_words.is_stored_hook(word)


def _registrar_params(unit: Unit) -> frozenset[str]:
    """The parameters of a function named to register hooks (``register_wgrad_accumulation_
    and_reduce_hooks(self, hook)``), ``self`` aside."""
    function = unit.owner
    if type(function) is not cst.FunctionDef:
        return frozenset()
    name = function.name.value.lower()
    if "register" not in name or "hook" not in name:
        return frozenset()
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return frozenset(p.name.value for p in every if p.name.value not in ("self", "cls"))
